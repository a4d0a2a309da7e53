// Jinja2's filters and tests, the global functions, and Python's string formatting
// (str.format and the % operator), as templates see them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <unordered_map>

#include "jinja/builtins.h"
#include "jinja/strings.h"

namespace glia::jinja {
namespace {

using FilterFn = Value (*)(const Value&, const CallArgs&);
using TestFn = bool (*)(const Value&, const CallArgs&);

const Value* arg(const CallArgs& a, size_t i, const char* name) { return a.get(i, name); }

bool arg_bool(const CallArgs& a, size_t i, const char* name, bool def) {
    const Value* v = a.get(i, name);
    return v ? v->truthy() : def;
}

// Jinja2's attribute getter for filters: "a.b.0" looks up a, then b, then item 0.
Value get_path(const Value& v, const std::string& path) {
    Value cur = v;
    size_t p = 0;
    for (;;) {
        const size_t dot = path.find('.', p);
        const std::string part = path.substr(p, dot == std::string::npos ? std::string::npos : dot - p);
        const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        cur = get_item(cur, digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
        if (dot == std::string::npos) return cur;
        p = dot + 1;
    }
}

// Value used as a sort/compare key: lower-cased strings unless case-sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
    if (!case_sensitive && v.is_string()) return Value(str::lower(v.as_string()));
    return v;
}

std::vector<Value> as_list(const Value& v) { return iterate(v); }

// ---- filters ----

Value f_default(const Value& v, const CallArgs& a) {
    const Value* d = arg(a, 0, "default_value");
    const bool boolean = arg_bool(a, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.truthy())) return d ? *d : Value("");
    return v;
}

Value f_tojson(const Value& v, const CallArgs& a) {
    JsonOptions o;
    o.ensure_ascii = arg_bool(a, 0, "ensure_ascii", false);
    if (const Value* ind = arg(a, 1, "indent"); ind && !ind->is_none()) {
        if (ind->is_string()) {
            o.indent_is_string = true;
            o.indent_str = ind->as_string();
            o.indent = 0;
        } else if (ind->is_int()) {
            o.indent = static_cast<int>(std::max<int64_t>(ind->as_int(), 0));
        } else {
            type_error("tojson: indent must be an integer or a string");
        }
        o.item_sep = ",";
    }
    if (const Value* sep = arg(a, 2, "separators"); sep && !sep->is_none()) {
        if (!sep->is_array() || sep->items().size() != 2 || !sep->items()[0].is_string() || !sep->items()[1].is_string())
            type_error("tojson: separators must be a pair of strings");
        o.item_sep = sep->items()[0].as_string();
        o.key_sep = sep->items()[1].as_string();
    }
    o.sort_keys = arg_bool(a, 3, "sort_keys", false);
    return Value(to_json(v, o));
}

Value f_length(const Value& v, const CallArgs&) {
    if (v.is_undefined()) {
        if (v.is_unsafe()) raise_undefined(v);
        return Value(int64_t{0});
    }
    if (v.is_string() || (v.is_array() && v.array_kind() != ArrayKind::Generator) || v.is_dict() ||
        (v.is_object() && v.object_kind() != ObjectKind::Loop))
        return Value(static_cast<int64_t>(v.length()));
    type_error(std::string("object of type '") + v.type_name() + "' has no len()");
}

Value f_string(const Value& v, const CallArgs&) { return v.is_string() ? v : Value(v.str()); }

Value f_trim(const Value& v, const CallArgs& a) {
    const Value* c = arg(a, 0, "chars");
    std::optional<std::string> chars;
    if (c && !c->is_none()) chars = c->str();
    std::string s = str::strip(v.str(), chars, true, true);
    return v.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
}

Value f_join(const Value& v, const CallArgs& a) {
    const Value* d = arg(a, 0, "d");
    const Value* attr = arg(a, 1, "attribute");
    const std::string sep = d ? d->str() : "";
    std::string out;
    bool first = true;
    for (const Value& x : iterate(v)) {
        if (!first) out += sep;
        first = false;
        out += (attr && !attr->is_none() ? get_path(x, attr->str()) : x).str();
        check_size(static_cast<int64_t>(out.size()), "join's result");
    }
    return Value(std::move(out));
}

Value f_items(const Value& v, const CallArgs&) {
    if (v.is_undefined()) return Value::array({}, ArrayKind::Generator);
    if (!v.is_dict()) type_error("Can only get item pairs from a mapping.");
    std::vector<Value> out;
    const ObjectData& d = v.object_data();
    for (size_t i = 0; i < d.items.size(); ++i) out.push_back(Value::array({d.key(i), d.items[i].second}, ArrayKind::Tuple));
    return Value::array(std::move(out), ArrayKind::Generator);
}

Value f_safe(const Value& v, const CallArgs&) { return v.is_markup() ? v : Value::markup(v.str()); }

Value f_list(const Value& v, const CallArgs&) { return Value::array(as_list(v)); }

Value same_kind(const Value& in, std::string s) { return in.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s)); }
Value f_lower(const Value& v, const CallArgs&) { return same_kind(v, str::lower(v.str())); }
Value f_upper(const Value& v, const CallArgs&) { return same_kind(v, str::upper(v.str())); }
Value f_capitalize(const Value& v, const CallArgs&) { return same_kind(v, str::capitalize(v.str())); }

Value f_title(const Value& v, const CallArgs&) {
    // Jinja2: words begin after whitespace or one of -({[<, first letter upper, rest lower.
    std::string out;
    bool begin = true;
    for (uint32_t c : utf8_decode(v.str())) {
        const bool sep = str::is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
        if (sep) {
            utf8_append(out, c);
            begin = true;
        } else {
            utf8_append(out, begin ? str::to_upper(c) : str::to_lower(c));
            begin = false;
        }
    }
    return Value(std::move(out));
}

Value f_replace(const Value& v, const CallArgs& a) {
    const Value* old = arg(a, 0, "old");
    const Value* repl = arg(a, 1, "new");
    const Value* count = arg(a, 2, "count");
    if (!old || !repl) type_error("replace() needs the old and new strings");
    return Value(str::replace(v.str(), old->str(), repl->str(), count && !count->is_none() ? count->as_int() : -1));
}

// select/reject/selectattr/rejectattr: test name at `test_pos`, its args after.
bool run_test(const Value& x, const CallArgs& a, size_t test_pos) {
    if (a.pos.size() <= test_pos) return x.truthy();
    const Value& t = a.pos[test_pos];
    if (!t.is_string()) type_error("the test name must be a string");
    CallArgs rest;
    rest.pos.assign(a.pos.begin() + static_cast<long>(test_pos) + 1, a.pos.end());
    rest.kw = a.kw;
    return apply_test(t.as_string(), x, rest);
}

Value select_impl(const Value& v, const CallArgs& a, bool want, bool by_attr) {
    std::vector<Value> out;
    std::string attr;
    if (by_attr) {
        if (a.pos.empty() || !a.pos[0].is_string()) type_error("selectattr/rejectattr need an attribute name");
        attr = a.pos[0].as_string();
    }
    if (!v.truthy()) return Value::array({}, ArrayKind::Generator);  // Jinja2: `if seq:` first
    for (const Value& x : iterate(v)) {
        const Value subject = by_attr ? get_path(x, attr) : x;
        if (run_test(subject, a, by_attr ? 1 : 0) == want) out.push_back(x);
    }
    return Value::array(std::move(out), ArrayKind::Generator);
}

Value f_select(const Value& v, const CallArgs& a) { return select_impl(v, a, true, false); }
Value f_reject(const Value& v, const CallArgs& a) { return select_impl(v, a, false, false); }
Value f_selectattr(const Value& v, const CallArgs& a) { return select_impl(v, a, true, true); }
Value f_rejectattr(const Value& v, const CallArgs& a) { return select_impl(v, a, false, true); }

Value f_map(const Value& v, const CallArgs& a) {
    std::vector<Value> out;
    if (!v.truthy()) return Value::array({}, ArrayKind::Generator);  // Jinja2: `if value:` first
    if (const Value* attr = a.kwarg("attribute")) {
        const Value* def = a.kwarg("default");
        for (const Value& x : iterate(v)) {
            Value r = get_path(x, attr->str());
            if (r.is_undefined() && def) r = *def;
            out.push_back(std::move(r));
        }
    } else {
        if (a.pos.empty() || !a.pos[0].is_string()) type_error("map() needs a filter name or attribute=");
        CallArgs rest;
        rest.pos.assign(a.pos.begin() + 1, a.pos.end());
        rest.kw = a.kw;
        for (const Value& x : iterate(v)) out.push_back(apply_filter(a.pos[0].as_string(), x, rest));
    }
    return Value::array(std::move(out), ArrayKind::Generator);
}

void stable_sort_values(std::vector<Value>& items, const std::function<Value(const Value&)>& key, bool reverse) {
    std::vector<std::pair<Value, size_t>> keyed;
    for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(key(items[i]), i);
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
        return reverse ? python_order(y.first, x.first) < 0 : python_order(x.first, y.first) < 0;
    });
    std::vector<Value> out;
    for (auto& k : keyed) out.push_back(items[k.second]);
    items = std::move(out);
}

Value f_dictsort(const Value& v, const CallArgs& a) {
    if (!v.is_dict()) type_error("dictsort: expected a mapping");
    const bool cs = arg_bool(a, 0, "case_sensitive", false);
    const Value* by = arg(a, 1, "by");
    const bool by_value = by && by->str() == "value";
    const bool reverse = arg_bool(a, 2, "reverse", false);
    std::vector<Value> items;
    const ObjectData& d = v.object_data();
    for (size_t i = 0; i < d.items.size(); ++i) items.push_back(Value::array({d.key(i), d.items[i].second}, ArrayKind::Tuple));
    stable_sort_values(items, [&](const Value& p) { return sort_key(p.items()[by_value ? 1 : 0], cs); }, reverse);
    return Value::array(std::move(items));
}

Value f_sort(const Value& v, const CallArgs& a) {
    const bool reverse = arg_bool(a, 0, "reverse", false);
    const bool cs = arg_bool(a, 1, "case_sensitive", false);
    const Value* attr = arg(a, 2, "attribute");
    std::vector<Value> items = as_list(v);
    stable_sort_values(items, [&](const Value& x) {
        return sort_key(attr && !attr->is_none() ? get_path(x, attr->str()) : x, cs);
    }, reverse);
    return Value::array(std::move(items));
}

Value min_max(const Value& v, const CallArgs& a, bool want_max) {
    const bool cs = arg_bool(a, 0, "case_sensitive", false);
    const Value* attr = arg(a, 1, "attribute");
    std::vector<Value> items = as_list(v);
    if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
    auto key = [&](const Value& x) { return sort_key(attr && !attr->is_none() ? get_path(x, attr->str()) : x, cs); };
    size_t best = 0;
    for (size_t i = 1; i < items.size(); ++i) {
        const int c = python_order(key(items[i]), key(items[best]));
        if (want_max ? c > 0 : c < 0) best = i;
    }
    return items[best];
}

Value f_min(const Value& v, const CallArgs& a) { return min_max(v, a, false); }
Value f_max(const Value& v, const CallArgs& a) { return min_max(v, a, true); }

Value f_unique(const Value& v, const CallArgs& a) {
    const bool cs = arg_bool(a, 0, "case_sensitive", false);
    const Value* attr = arg(a, 1, "attribute");
    std::vector<Value> out, seen;
    for (const Value& x : iterate(v)) {
        const Value k = sort_key(attr && !attr->is_none() ? get_path(x, attr->str()) : x, cs);
        if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
        seen.push_back(k);
        out.push_back(x);
    }
    return Value::array(std::move(out), ArrayKind::Generator);
}

Value f_first(const Value& v, const CallArgs&) {
    std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
}

Value f_last(const Value& v, const CallArgs&) {
    if (v.is_array() && v.array_kind() == ArrayKind::Generator) type_error("'generator' object is not reversible");
    std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

Value f_reverse(const Value& v, const CallArgs&) {
    if (v.is_string()) {
        auto cps = utf8_decode(v.as_string());
        std::reverse(cps.begin(), cps.end());
        return Value(utf8_encode(cps));
    }
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::array(std::move(items), ArrayKind::Generator);
}

Value f_int(const Value& v, const CallArgs& a) {
    const Value* def = arg(a, 0, "default");
    const int64_t base = a.get(1, "base") ? a.get(1, "base")->as_int() : 10;
    const Value d = def ? *def : Value(int64_t{0});
    if (v.is_int() || v.is_bool()) return Value(v.as_int());
    if (v.is_float()) return std::isfinite(v.as_double()) ? Value(static_cast<int64_t>(v.as_double())) : d;
    if (v.is_string()) {
        const std::string s = str::strip(v.as_string(), std::nullopt, true, true);
        if (s.empty()) return d;
        char* end = nullptr;
        errno = 0;
        const long long r = std::strtoll(s.c_str(), &end, static_cast<int>(base));
        if (end && *end == '\0' && errno == 0) return Value(static_cast<int64_t>(r));
        const double f = std::strtod(s.c_str(), &end);
        if (end && *end == '\0' && std::isfinite(f)) return Value(static_cast<int64_t>(f));
    }
    return d;
}

Value f_float(const Value& v, const CallArgs& a) {
    const Value* def = arg(a, 0, "default");
    const Value d = def ? *def : Value(0.0);
    if (v.is_number()) return Value(v.as_double());
    if (v.is_string()) {
        const std::string s = str::strip(v.as_string(), std::nullopt, true, true);
        char* end = nullptr;
        const double f = std::strtod(s.c_str(), &end);
        if (!s.empty() && end && *end == '\0') return Value(f);
    }
    return d;
}

Value f_abs(const Value& v, const CallArgs&) {
    if (v.is_float()) return Value(std::fabs(v.as_double()));
    if (v.is_int() || v.is_bool()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    type_error(std::string("bad operand type for abs(): '") + v.type_name() + "'");
}

Value f_round(const Value& v, const CallArgs& a) {
    const int64_t precision = a.get(0, "precision") ? a.get(0, "precision")->as_int() : 0;
    const std::string method = a.get(1, "method") ? a.get(1, "method")->str() : "common";
    if (!v.is_number()) type_error(std::string("type ") + v.type_name() + " doesn't define __round__ method");
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = v.as_double() * scale;
    double r;
    if (method == "common") r = std::nearbyint(x);  // Python's round(): half to even
    else if (method == "ceil") r = std::ceil(x);
    else if (method == "floor") r = std::floor(x);
    else type_error("method must be 'common', 'ceil' or 'floor'");
    if (method == "common" && v.is_int() && !v.is_float()) return Value(v.as_int());
    return Value(r / scale);
}

Value f_sum(const Value& v, const CallArgs& a) {
    const Value* attr = arg(a, 0, "attribute");
    Value total = a.get(1, "start") ? *a.get(1, "start") : Value(int64_t{0});
    for (const Value& x : iterate(v)) total = binary_op("+", total, attr && !attr->is_none() ? get_path(x, attr->str()) : x);
    return total;
}

Value f_indent(const Value& v, const CallArgs& a) {
    const Value* w = arg(a, 0, "width");
    const bool first = arg_bool(a, 1, "first", false);
    const bool blank = arg_bool(a, 2, "blank", false);
    if (w && !w->is_string()) check_size(w->as_int(), "indent's width");
    std::string ind = w ? (w->is_string() ? w->as_string() : std::string(static_cast<size_t>(std::max<int64_t>(w->as_int(), 0)), ' '))
                        : std::string(4, ' ');
    std::string s = v.str() + "\n";
    std::vector<std::string> lines = str::splitlines(s, false);
    const int64_t nl = static_cast<int64_t>(lines.size()) + 1, iw = static_cast<int64_t>(ind.size());
    check_size(iw > 0 && nl > kMaxValueSize / iw ? kMaxValueSize + 1 : nl * iw + static_cast<int64_t>(s.size()),
               "the indented string");
    std::string rv;
    if (blank) {
        for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
    } else {
        rv = lines.empty() ? "" : lines[0];
        for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind + lines[i]);
    }
    if (first) rv = ind + rv;
    return same_kind(v, rv);
}

Value f_center(const Value& v, const CallArgs& a) {
    const int64_t width = a.get(0, "width") ? a.get(0, "width")->as_int() : 80;
    return Value(str::pad(v.str(), width, " ", '^'));
}

Value f_escape(const Value& v, const CallArgs&) {
    if (v.is_markup()) return v;
    return Value::markup(html_escape(v.str()));
}

Value f_forceescape(const Value& v, const CallArgs&) { return Value::markup(html_escape(v.str())); }

Value f_wordcount(const Value& v, const CallArgs&) {
    int64_t n = 0;
    bool in_word = false;
    for (uint32_t c : utf8_decode(v.str())) {
        const bool w = str::is_alpha(c) || str::is_digit(c) || c == '_';
        if (w && !in_word) ++n;
        in_word = w;
    }
    return Value(n);
}

Value f_format(const Value& v, const CallArgs& a) {
    if (!a.kw.empty()) {
        Value d = Value::object();
        for (const auto& [k, x] : a.kw) d.mutable_object().set(k, x);
        return Value(percent_format(v.str(), d));
    }
    return Value(percent_format(v.str(), Value::array(a.pos, ArrayKind::Tuple)));
}

Value f_batch(const Value& v, const CallArgs& a) {
    const Value* n = arg(a, 0, "linecount");
    const Value* fill = arg(a, 1, "fill_with");
    if (!n || n->as_int() <= 0) type_error("batch: linecount must be positive");
    std::vector<Value> out, cur;
    for (const Value& x : iterate(v)) {
        cur.push_back(x);
        if (static_cast<int64_t>(cur.size()) == n->as_int()) {
            out.push_back(Value::array(std::move(cur)));
            cur.clear();
        }
    }
    if (!cur.empty()) {
        if (fill && !fill->is_none())
            while (static_cast<int64_t>(cur.size()) < n->as_int()) cur.push_back(*fill);
        out.push_back(Value::array(std::move(cur)));
    }
    return Value::array(std::move(out), ArrayKind::Generator);
}

Value f_attr(const Value& v, const CallArgs& a) {
    const Value* n = arg(a, 0, "name");
    if (!n) type_error("attr() needs a name");
    return get_attr(v, n->str());
}

Value f_pprint(const Value& v, const CallArgs&) { return Value(v.repr()); }

Value f_count(const Value& v, const CallArgs& a) { return f_length(v, a); }

const std::unordered_map<std::string, FilterFn>& filters() {
    static const std::unordered_map<std::string, FilterFn> m = {
        {"default", f_default}, {"d", f_default}, {"tojson", f_tojson}, {"length", f_length}, {"count", f_count},
        {"string", f_string}, {"trim", f_trim}, {"join", f_join}, {"items", f_items}, {"safe", f_safe},
        {"list", f_list}, {"lower", f_lower}, {"upper", f_upper}, {"capitalize", f_capitalize}, {"title", f_title},
        {"replace", f_replace}, {"select", f_select}, {"reject", f_reject}, {"selectattr", f_selectattr},
        {"rejectattr", f_rejectattr}, {"map", f_map}, {"dictsort", f_dictsort}, {"sort", f_sort}, {"min", f_min},
        {"max", f_max}, {"unique", f_unique}, {"first", f_first}, {"last", f_last}, {"reverse", f_reverse},
        {"int", f_int}, {"float", f_float}, {"abs", f_abs}, {"round", f_round}, {"sum", f_sum},
        {"indent", f_indent}, {"center", f_center}, {"escape", f_escape}, {"e", f_escape},
        {"forceescape", f_forceescape}, {"wordcount", f_wordcount}, {"format", f_format}, {"batch", f_batch},
        {"attr", f_attr}, {"pprint", f_pprint},
    };
    return m;
}

// ---- tests ----

bool t_defined(const Value& v, const CallArgs&) { return !v.is_undefined(); }
bool t_undefined(const Value& v, const CallArgs&) { return v.is_undefined(); }
bool t_none(const Value& v, const CallArgs&) { return v.is_none(); }
bool t_boolean(const Value& v, const CallArgs&) { return v.is_bool(); }
bool t_true(const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_integer(const Value& v, const CallArgs&) { return v.is_int(); }
bool t_float(const Value& v, const CallArgs&) { return v.is_float(); }
bool t_number(const Value& v, const CallArgs&) { return v.is_number(); }
bool t_string(const Value& v, const CallArgs&) { return v.is_string(); }
bool t_mapping(const Value& v, const CallArgs&) { return v.is_dict(); }
bool t_iterable(const Value& v, const CallArgs&) {
    return v.is_undefined() || v.is_string() || v.is_array() || v.is_dict();
}
bool t_sequence(const Value& v, const CallArgs&) {
    return v.is_undefined() || v.is_string() || (v.is_array() && v.array_kind() != ArrayKind::Generator) || v.is_dict();
}
bool t_callable(const Value& v, const CallArgs&) { return v.is_function() || v.is_undefined(); }
bool t_escaped(const Value&, const CallArgs&) { return false; }

const Value& other(const CallArgs& a, const char* test) {
    const Value* o = a.get(0, "other");
    if (!o) type_error(std::string("test '") + test + "' needs an argument");
    return *o;
}

bool t_eq(const Value& v, const CallArgs& a) { return equals(v, other(a, "eq")); }
bool t_ne(const Value& v, const CallArgs& a) { return !equals(v, other(a, "ne")); }
bool t_lt(const Value& v, const CallArgs& a) { return compare("<", v, other(a, "lt")); }
bool t_le(const Value& v, const CallArgs& a) { return compare("<=", v, other(a, "le")); }
bool t_gt(const Value& v, const CallArgs& a) { return compare(">", v, other(a, "gt")); }
bool t_ge(const Value& v, const CallArgs& a) { return compare(">=", v, other(a, "ge")); }
bool t_in(const Value& v, const CallArgs& a) { return compare("in", v, other(a, "in")); }
bool t_sameas(const Value& v, const CallArgs& a) {
    const Value& o = other(a, "sameas");
    if (v.type() != o.type()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.as_bool() == o.as_bool();
    if (v.is_array() || v.is_object()) return equals(v, o) && v.length() == o.length() && v.repr() == o.repr();
    return equals(v, o);
}
bool t_even(const Value& v, const CallArgs&) {
    if (!v.is_int() && !v.is_bool()) type_error("even: expected an integer");
    return v.as_int() % 2 == 0;
}
bool t_odd(const Value& v, const CallArgs&) {
    if (!v.is_int() && !v.is_bool()) type_error("odd: expected an integer");
    return v.as_int() % 2 != 0;
}
bool t_divisibleby(const Value& v, const CallArgs& a) {
    const Value& n = other(a, "divisibleby");
    if (!n.is_number() || !v.is_number() || n.as_double() == 0) type_error("divisibleby: expected numbers");
    return std::fmod(v.as_double(), n.as_double()) == 0;
}
bool t_lower(const Value& v, const CallArgs&) { return str::is_lower_str(v.str()); }
bool t_upper(const Value& v, const CallArgs&) { return str::is_upper_str(v.str()); }
bool t_filter(const Value& v, const CallArgs&) { return v.is_string() && has_filter(v.as_string()); }
bool t_test(const Value& v, const CallArgs&) { return v.is_string() && has_test(v.as_string()); }

const std::unordered_map<std::string, TestFn>& tests() {
    static const std::unordered_map<std::string, TestFn> m = {
        {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"boolean", t_boolean},
        {"true", t_true}, {"false", t_false}, {"integer", t_integer}, {"float", t_float}, {"number", t_number},
        {"string", t_string}, {"mapping", t_mapping}, {"iterable", t_iterable}, {"sequence", t_sequence},
        {"callable", t_callable}, {"escaped", t_escaped}, {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq},
        {"ne", t_ne}, {"!=", t_ne}, {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"le", t_le}, {"<=", t_le},
        {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt}, {"ge", t_ge}, {">=", t_ge}, {"in", t_in},
        {"sameas", t_sameas}, {"even", t_even}, {"odd", t_odd}, {"divisibleby", t_divisibleby},
        {"lower", t_lower}, {"upper", t_upper}, {"filter", t_filter}, {"test", t_test},
    };
    return m;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) != 0; }
bool has_test(const std::string& name) { return tests().count(name) != 0; }

Value apply_filter(const std::string& name, const Value& v, const CallArgs& args) {
    auto it = filters().find(name);
    if (it == filters().end()) throw Error(ErrorKind::Type, "no filter named '" + name + "'");
    return it->second(v, args);
}

bool apply_test(const std::string& name, const Value& v, const CallArgs& args) {
    auto it = tests().find(name);
    if (it == tests().end()) throw Error(ErrorKind::Type, "no test named '" + name + "'");
    return it->second(v, args);
}

// ---- globals ----

std::optional<Value> global_function(const std::string& name, const std::tm& now) {
    if (name == "range") {
        return Value::function("range", [](const CallArgs& a) {
            std::vector<int64_t> n;
            for (const Value& v : a.pos) {
                if (!v.is_int() && !v.is_bool()) type_error(std::string("'") + v.type_name() + "' object cannot be interpreted as an integer");
                n.push_back(v.as_int());
            }
            if (n.empty() || n.size() > 3) type_error("range expected 1 to 3 arguments");
            const int64_t start = n.size() == 1 ? 0 : n[0];
            const int64_t stop = n.size() == 1 ? n[0] : n[1];
            const int64_t step = n.size() == 3 ? n[2] : 1;
            if (step == 0) type_error("range() arg 3 must not be zero");
            std::vector<Value> out;
            for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                if (out.size() >= 100000) type_error("range too big, maximum size for range is 100000");
                out.emplace_back(i);
            }
            return Value::array(std::move(out));
        });
    }
    if (name == "namespace") {
        return Value::function("namespace", [](const CallArgs& a) {
            Value ns = Value::object(ObjectKind::Namespace);
            for (const Value& p : a.pos) {
                if (!p.is_dict()) type_error("namespace() positional arguments must be mappings");
                for (const auto& [k, v] : p.object_data().items) ns.mutable_object().set(k, v);
            }
            for (const auto& [k, v] : a.kw) ns.mutable_object().set(k, v);
            return ns;
        });
    }
    if (name == "dict") {
        return Value::function("dict", [](const CallArgs& a) {
            Value d = Value::object();
            for (const Value& p : a.pos) {
                if (p.is_dict()) {
                    const ObjectData& src = p.object_data();
                    for (size_t i = 0; i < src.items.size(); ++i) d.mutable_object().set_key(src.key(i), src.items[i].second);
                } else {
                    for (const Value& kv : iterate(p)) {
                        if (!kv.is_array() || kv.items().size() != 2) type_error("dict(): sequence elements must be pairs");
                        d.mutable_object().set(kv.items()[0].str(), kv.items()[1]);
                    }
                }
            }
            for (const auto& [k, v] : a.kw) d.mutable_object().set(k, v);
            return d;
        });
    }
    if (name == "raise_exception") {
        return Value::function("raise_exception", [](const CallArgs& a) -> Value {
            const Value* m = a.get(0, "message");
            throw Error(ErrorKind::Raised, m ? m->str() : std::string());
        });
    }
    if (name == "strftime_now") {
        return Value::function("strftime_now", [now](const CallArgs& a) {
            const Value* f = a.get(0, "format");
            if (!f || !f->is_string()) type_error("strftime_now() needs a format string");
            // %Z and %z are empty for a naive datetime in Python.
            std::string fmt;
            const std::string& src = f->as_string();
            for (size_t i = 0; i < src.size(); ++i) {
                if (src[i] == '%' && i + 1 < src.size() && (src[i + 1] == 'Z' || src[i + 1] == 'z')) { ++i; continue; }
                if (src[i] == '%' && i + 1 < src.size()) { fmt += src.substr(i, 2); ++i; continue; }
                fmt += src[i];
            }
            if (fmt.empty()) return Value("");
            std::vector<char> buf(fmt.size() * 8 + 64);
            std::tm t = now;
            const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &t);
            return Value(std::string(buf.data(), n));
        });
    }
    if (name == "joiner") {
        return Value::function("joiner", [](const CallArgs& a) {
            const std::string sep = a.get(0, "sep") ? a.get(0, "sep")->str() : ", ";
            auto used = std::make_shared<bool>(false);
            return Value::function("joiner", [sep, used](const CallArgs&) {
                if (!*used) {
                    *used = true;
                    return Value("");
                }
                return Value(sep);
            });
        });
    }
    return std::nullopt;
}

// ---- formatting ----

namespace {

struct Spec {
    char fill = ' ', align = 0, sign = '-';
    bool alt = false, zero = false, comma = false;
    int width = -1, precision = -1;
    char type = 0;
};

std::string apply_spec(const Value& v, const Spec& s) {
    std::string body;
    const char t = s.type;
    if (t == 'd' || ((t == 0) && (v.is_int() || v.is_bool()) && !v.is_bool())) {
        if (!v.is_number() || v.is_float()) {
            if (t == 'd') type_error(std::string("Unknown format code 'd' for object of type '") + v.type_name() + "'");
        }
        int64_t x = v.as_int();
        body = std::to_string(x < 0 ? -x : x);
        if (s.comma)
            for (int i = static_cast<int>(body.size()) - 3; i > 0; i -= 3) body.insert(static_cast<size_t>(i), ",");
        if (x < 0) body = "-" + body;
        else if (s.sign == '+') body = "+" + body;
        else if (s.sign == ' ') body = " " + body;
    } else if (t == 'f' || t == 'F' || t == 'e' || t == 'E' || t == 'g' || t == 'G' || t == '%' || (t == 0 && v.is_float())) {
        if (!v.is_number()) type_error(std::string("Unknown format code '") + t + "' for object of type '" + v.type_name() + "'");
        double x = v.as_double();
        if (t == 0 && s.precision < 0) body = python_float_repr(x);
        else {
            char fmt[16];
            const char c = t == 0 ? 'g' : t == '%' ? 'f' : t;
            if (t == '%') x *= 100;
            std::snprintf(fmt, sizeof fmt, "%%%s.%d%c", s.sign == '+' ? "+" : s.sign == ' ' ? " " : "",
                          s.precision < 0 ? 6 : s.precision, c);
            char buf[512];
            std::snprintf(buf, sizeof buf, fmt, x);
            body = buf;
            if (t == '%') body += "%";
        }
    } else if (t == 'x' || t == 'X' || t == 'o' || t == 'b') {
        int64_t x = v.as_int();
        std::string digits;
        uint64_t u = static_cast<uint64_t>(x < 0 ? -x : x);
        const int base = t == 'o' ? 8 : t == 'b' ? 2 : 16;
        do {
            const int d = static_cast<int>(u % static_cast<uint64_t>(base));
            digits += static_cast<char>(d < 10 ? '0' + d : (t == 'X' ? 'A' : 'a') + d - 10);
            u /= static_cast<uint64_t>(base);
        } while (u);
        std::reverse(digits.begin(), digits.end());
        if (s.alt) digits = std::string("0") + (t == 'o' ? "o" : t == 'b' ? "b" : t == 'X' ? "X" : "x") + digits;
        body = (x < 0 ? "-" : "") + digits;
    } else if (t == 'c') {
        utf8_append(body, static_cast<uint32_t>(v.as_int()));
    } else {
        body = v.str();
        if (s.precision >= 0) {
            auto cps = utf8_decode(body);
            if (static_cast<int>(cps.size()) > s.precision) cps.resize(static_cast<size_t>(s.precision));
            body = utf8_encode(cps);
        }
    }
    if (s.width >= 0) {
        const bool numeric = v.is_number() && !v.is_bool() ? true : v.is_bool();
        char align = s.align ? s.align : (numeric ? '>' : '<');
        if (s.zero && !s.align) {
            std::string sign;
            if (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) {
                sign = body.substr(0, 1);
                body = body.substr(1);
            }
            return sign + str::zfill(body, s.width - static_cast<int>(sign.size()));
        }
        return str::pad(body, s.width, std::string(1, s.fill), align == '=' ? '>' : align);
    }
    return body;
}

Spec parse_spec(const std::string& spec) {
    Spec s;
    size_t i = 0;
    auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
    if (spec.size() >= 2 && is_align(spec[1])) {
        s.fill = spec[0];
        s.align = spec[1];
        i = 2;
    } else if (!spec.empty() && is_align(spec[0])) {
        s.align = spec[0];
        i = 1;
    }
    if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) s.sign = spec[i++];
    if (i < spec.size() && spec[i] == '#') { s.alt = true; ++i; }
    if (i < spec.size() && spec[i] == '0') { s.zero = true; ++i; }
    int w = -1;
    while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) w = (w < 0 ? 0 : w * 10) + (spec[i++] - '0');
    s.width = w;
    if (i < spec.size() && spec[i] == ',') { s.comma = true; ++i; }
    if (i < spec.size() && spec[i] == '.') {
        ++i;
        int p = 0;
        while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) p = p * 10 + (spec[i++] - '0');
        s.precision = p;
    }
    if (i < spec.size()) s.type = spec[i++];
    if (i != spec.size()) type_error("Invalid format specifier '" + spec + "'");
    return s;
}

}  // namespace

std::string python_format(const std::string& fmt, const CallArgs& args) {
    std::string out;
    size_t auto_idx = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        const char c = fmt[i];
        if (c == '}') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}') { out += '}'; ++i; continue; }
            type_error("Single '}' encountered in format string");
        }
        if (c != '{') { out += c; continue; }
        if (i + 1 < fmt.size() && fmt[i + 1] == '{') { out += '{'; ++i; continue; }
        const size_t close = fmt.find('}', i);
        if (close == std::string::npos) type_error("Single '{' encountered in format string");
        std::string field = fmt.substr(i + 1, close - i - 1);
        i = close;
        std::string spec, conv;
        if (size_t colon = field.find(':'); colon != std::string::npos) {
            spec = field.substr(colon + 1);
            field = field.substr(0, colon);
        }
        if (size_t bang = field.find('!'); bang != std::string::npos) {
            conv = field.substr(bang + 1);
            field = field.substr(0, bang);
        }
        // field: [name|index] then .attr / [key] accessors
        size_t p = 0;
        while (p < field.size() && field[p] != '.' && field[p] != '[') ++p;
        const std::string head = field.substr(0, p);
        Value v;
        if (head.empty()) {
            if (auto_idx >= args.pos.size()) type_error("Replacement index " + std::to_string(auto_idx) + " out of range for positional args tuple");
            v = args.pos[auto_idx++];
        } else if (std::all_of(head.begin(), head.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
            const size_t k = static_cast<size_t>(std::stoul(head));
            if (k >= args.pos.size()) type_error("Replacement index " + head + " out of range for positional args tuple");
            v = args.pos[k];
        } else {
            const Value* kv = args.kwarg(head);
            if (!kv) throw Error(ErrorKind::Type, "KeyError: '" + head + "'");
            v = *kv;
        }
        while (p < field.size()) {
            if (field[p] == '.') {
                size_t q = p + 1;
                while (q < field.size() && field[q] != '.' && field[q] != '[') ++q;
                v = get_attr(v, field.substr(p + 1, q - p - 1));
                p = q;
            } else {
                const size_t q = field.find(']', p);
                if (q == std::string::npos) type_error("Missing ']' in format string");
                const std::string key = field.substr(p + 1, q - p - 1);
                const bool digits = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
                v = get_item(v, digits ? Value(static_cast<int64_t>(std::stoll(key))) : Value(key));
                p = q + 1;
            }
        }
        if (conv == "r") v = Value(v.repr());
        else if (conv == "s") v = Value(v.str());
        out += apply_spec(v, parse_spec(spec));
    }
    return out;
}

std::string percent_format(const std::string& fmt, const Value& args, bool escape_args) {
    std::vector<Value> items;
    const bool mapping = args.is_dict();
    if (args.is_array() && args.array_kind() == ArrayKind::Tuple) items = args.items();
    else items.push_back(args);
    size_t next = 0;
    std::string out;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') { out += fmt[i]; continue; }
        if (++i >= fmt.size()) type_error("incomplete format");
        if (fmt[i] == '%') { out += '%'; continue; }
        Value v;
        bool have = false;
        if (fmt[i] == '(') {
            const size_t close = fmt.find(')', i);
            if (close == std::string::npos || !mapping) type_error("format requires a mapping");
            const Value* x = args.object_data().find(fmt.substr(i + 1, close - i - 1));
            if (!x) throw Error(ErrorKind::Type, "KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
            v = *x;
            have = true;
            i = close + 1;
        }
        Spec s;
        for (; i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos; ++i) {
            if (fmt[i] == '-') s.align = '<';
            else if (fmt[i] == '+') s.sign = '+';
            else if (fmt[i] == ' ') s.sign = ' ';
            else if (fmt[i] == '#') s.alt = true;
            else s.zero = true;
        }
        int w = -1;
        while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) w = (w < 0 ? 0 : w * 10) + (fmt[i++] - '0');
        s.width = w;
        if (i < fmt.size() && fmt[i] == '.') {
            ++i;
            int p = 0;
            while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) p = p * 10 + (fmt[i++] - '0');
            s.precision = p;
        }
        if (i >= fmt.size()) type_error("incomplete format");
        char t = fmt[i];
        if (!have) {
            if (next >= items.size()) type_error("not enough arguments for format string");
            v = items[next++];
        }
        if (t == 'i' || t == 'u') t = 'd';
        if (t == 'r') { v = Value(v.repr()); t = 's'; }
        if (t == 'd' && v.is_float()) v = Value(static_cast<int64_t>(v.as_double()));
        if ((t == 'd' || t == 'f' || t == 'e' || t == 'g' || t == 'x' || t == 'X' || t == 'o') && !v.is_number())
            type_error(std::string("%") + t + " format: a real number is required, not " + v.type_name());
        s.type = t == 's' ? 0 : t;
        if (t == 's') v = Value(escape_args && !v.is_markup() ? html_escape(v.str()) : v.str());
        if (s.zero && s.align == '<') s.zero = false;
        out += apply_spec(v, s);
    }
    if (!mapping && next < items.size() && !(items.size() == 1 && next == 0 && false))
        if (next < items.size()) type_error("not all arguments converted during string formatting");
    return out;
}

}  // namespace glia::jinja
