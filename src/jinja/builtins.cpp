// Python and Jinja2 semantics: operators, attribute/item access, str/dict/list methods.
// Filters, tests and globals are in filters.cpp.
#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_set>

#include "jinja/strings.h"

namespace glia::jinja {

[[noreturn]] void raise_undefined(const Value& u) {
    const std::string& hint = u.undefined_hint();
    throw Error(u.is_unsafe() ? ErrorKind::Security : ErrorKind::Undefined, hint.empty() ? "value is undefined" : hint);
}

[[noreturn]] void type_error(const std::string& msg) { throw Error(ErrorKind::Type, msg); }

std::string html_escape(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&#34;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

// Jinja2's object_type_repr: "None", "dict object", "str object" ...
static std::string object_type_repr(const Value& v) {
    if (v.is_none()) return "None";
    return std::string(v.type_name()) + " object";
}

static Value missing_attribute(const Value& obj, const std::string& name) {
    return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
}

static Value missing_element(const Value& obj, const Value& key) {
    return Value::undefined(object_type_repr(obj) + " has no element " + key.repr());
}

// ---- method tables ----------------------------------------------------------------------

static const std::unordered_set<std::string>& str_methods() {
    static const std::unordered_set<std::string> s = {
        "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "replace",
        "upper", "lower", "title", "capitalize", "swapcase", "casefold", "find", "rfind", "index", "rindex",
        "count", "join", "format", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric",
        "isdecimal", "istitle", "zfill", "center", "ljust", "rjust", "partition", "rpartition", "removeprefix",
        "removesuffix"};
    return s;
}
static const std::unordered_set<std::string>& dict_methods() {
    static const std::unordered_set<std::string> s = {"items", "keys", "values", "get", "copy"};
    return s;
}
static const std::unordered_set<std::string>& dict_unsafe() {
    static const std::unordered_set<std::string> s = {"pop", "popitem", "setdefault", "update", "clear"};
    return s;
}
static const std::unordered_set<std::string>& list_methods() {
    static const std::unordered_set<std::string> s = {"count", "index", "copy"};
    return s;
}
static const std::unordered_set<std::string>& list_unsafe() {
    static const std::unordered_set<std::string> s = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
    return s;
}

static Value unsafe_attr(const Value& obj, const std::string& name) {
    return Value::unsafe("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
}

static Value bound_method(const Value& obj, const std::string& name) {
    return Value::function(name, [obj, name](const CallArgs& a) { return *call_method(obj, name, a); });
}

Value get_attr(const Value& obj, const std::string& name) {
    switch (obj.type()) {
        case Type::Undefined: raise_undefined(obj);
        case Type::String:
            if (str_methods().count(name)) return bound_method(obj, name);
            return missing_attribute(obj, name);
        case Type::Array:
            if (obj.array_kind() != ArrayKind::Generator) {
                if (list_methods().count(name)) return bound_method(obj, name);
                if (list_unsafe().count(name)) return unsafe_attr(obj, name);
            }
            return missing_attribute(obj, name);
        case Type::Object: {
            if (obj.object_kind() == ObjectKind::Dict) {
                if (dict_methods().count(name)) return bound_method(obj, name);
                if (dict_unsafe().count(name)) return unsafe_attr(obj, name);
            }
            if (const Value* v = obj.object_data().find(name)) return *v;
            return missing_attribute(obj, name);
        }
        default: return missing_attribute(obj, name);
    }
}

static bool index_of(const Value& key, int64_t n, int64_t& out) {
    if (!key.is_int() && !key.is_bool()) return false;
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return false;
    out = i;
    return true;
}

Value get_item(const Value& obj, const Value& key) {
    switch (obj.type()) {
        case Type::Undefined: raise_undefined(obj);
        case Type::Array: {
            if (obj.array_kind() == ArrayKind::Generator) break;
            int64_t i;
            if (index_of(key, static_cast<int64_t>(obj.items().size()), i)) return obj.items()[static_cast<size_t>(i)];
            break;
        }
        case Type::String: {
            if (key.is_int() || key.is_bool()) {
                const auto cps = utf8_decode(obj.as_string());
                int64_t i;
                if (index_of(key, static_cast<int64_t>(cps.size()), i)) {
                    std::string s;
                    utf8_append(s, cps[static_cast<size_t>(i)]);
                    return Value(std::move(s));
                }
            }
            break;
        }
        case Type::Object:
            if (obj.object_kind() == ObjectKind::Dict || key.is_string())
                if (const Value* v = obj.object_data().find_key(key)) return *v;
            break;
        default: break;
    }
    if (key.is_string()) {
        Value v = get_attr(obj, key.as_string());
        if (!v.is_undefined() || v.is_unsafe()) return v;
        return missing_attribute(obj, key.as_string());
    }
    return missing_element(obj, key);
}

// Python slice.indices(n) and the picked indices.
static std::vector<int64_t> slice_indices(int64_t n, const Value* start, const Value* stop, const Value* step) {
    auto as_int = [](const Value* v, const char* what) -> std::optional<int64_t> {
        if (!v || v->is_none() || v->is_undefined()) return std::nullopt;
        if (!v->is_int() && !v->is_bool()) type_error(std::string("slice ") + what + " must be an integer or None");
        return v->as_int();
    };
    const int64_t st = as_int(step, "step").value_or(1);
    if (st == 0) type_error("slice step cannot be zero");
    auto clamp = [&](std::optional<int64_t> v, int64_t def) {
        if (!v) return def;
        int64_t x = *v;
        if (x < 0) {
            x += n;
            if (x < 0) x = st < 0 ? -1 : 0;
        } else if (x >= n) {
            x = st < 0 ? n - 1 : n;
        }
        return x;
    };
    const int64_t b = clamp(as_int(start, "start"), st < 0 ? n - 1 : 0);
    const int64_t e = clamp(as_int(stop, "stop"), st < 0 ? -1 : n);
    std::vector<int64_t> idx;
    if (st > 0)
        for (int64_t i = b; i < e; i += st) idx.push_back(i);
    else
        for (int64_t i = b; i > e; i += st) idx.push_back(i);
    return idx;
}

Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
    if (obj.is_undefined()) raise_undefined(obj);
    if (obj.is_string()) {
        const auto cps = utf8_decode(obj.as_string());
        std::string out;
        for (int64_t i : slice_indices(static_cast<int64_t>(cps.size()), start, stop, step))
            utf8_append(out, cps[static_cast<size_t>(i)]);
        return Value(std::move(out));
    }
    if (obj.is_array() && obj.array_kind() != ArrayKind::Generator) {
        std::vector<Value> out;
        for (int64_t i : slice_indices(static_cast<int64_t>(obj.items().size()), start, stop, step))
            out.push_back(obj.items()[static_cast<size_t>(i)]);
        return Value::array(std::move(out), obj.array_kind());
    }
    type_error(std::string("'") + obj.type_name() + "' object is not subscriptable");
}

std::vector<Value> iterate(const Value& v) {
    switch (v.type()) {
        case Type::Undefined:
            if (v.is_unsafe()) raise_undefined(v);
            return {};
        case Type::Array: return v.items();
        case Type::String: {
            std::vector<Value> out;
            for (uint32_t cp : utf8_decode(v.as_string())) {
                std::string s;
                utf8_append(s, cp);
                out.emplace_back(std::move(s));
            }
            return out;
        }
        case Type::Object:
            if (v.object_kind() == ObjectKind::Dict) {
                std::vector<Value> out;
                const ObjectData& d = v.object_data();
                for (size_t i = 0; i < d.items.size(); ++i) out.push_back(d.key(i));
                return out;
            }
            break;
        default: break;
    }
    type_error(std::string("'") + v.type_name() + "' object is not iterable");
}

// ---- methods ----------------------------------------------------------------------------

static std::string arg_str(const CallArgs& a, size_t i, const char* name, const char* method) {
    const Value* v = a.get(i, name);
    if (!v) type_error(std::string(method) + "() missing required argument '" + name + "'");
    if (!v->is_string())
        type_error(std::string(method) + "() argument must be str, not " + v->type_name());
    return v->as_string();
}

static int64_t arg_int(const CallArgs& a, size_t i, const char* name, int64_t def) {
    const Value* v = a.get(i, name);
    if (!v || v->is_none()) return def;
    if (!v->is_int() && !v->is_bool()) type_error(std::string("'") + v->type_name() + "' object cannot be interpreted as an integer");
    return v->as_int();
}

static std::optional<Value> string_method(const std::string& s, const std::string& m, const CallArgs& a) {
    auto strip_chars = [&](size_t i) -> std::optional<std::string> {
        const Value* v = a.get(i, "chars");
        if (!v || v->is_none()) return std::nullopt;
        if (!v->is_string()) type_error(m + " arg must be None or str");
        return v->as_string();
    };
    if (m == "strip") return Value(str::strip(s, strip_chars(0), true, true));
    if (m == "lstrip") return Value(str::strip(s, strip_chars(0), true, false));
    if (m == "rstrip") return Value(str::strip(s, strip_chars(0), false, true));
    if (m == "split" || m == "rsplit") {
        const Value* sep = a.get(0, "sep");
        std::optional<std::string> sp;
        if (sep && !sep->is_none()) {
            if (!sep->is_string()) type_error("must be str or None, not " + std::string(sep->type_name()));
            sp = sep->as_string();
        }
        const int64_t maxsplit = arg_int(a, 1, "maxsplit", -1);
        std::vector<std::string> parts = m == "split" ? str::split(s, sp, maxsplit) : str::rsplit(s, sp, maxsplit);
        std::vector<Value> out;
        for (auto& p : parts) out.emplace_back(std::move(p));
        return Value::array(std::move(out));
    }
    if (m == "splitlines") {
        const Value* k = a.get(0, "keepends");
        std::vector<Value> out;
        for (auto& p : str::splitlines(s, k && k->truthy())) out.emplace_back(std::move(p));
        return Value::array(std::move(out));
    }
    if (m == "startswith" || m == "endswith") {
        const Value* p = a.get(0, "prefix");
        if (!p) type_error(m + "() takes at least 1 argument (0 given)");
        std::string subject = s;
        if (a.get(1, "start") || a.get(2, "end")) {
            const Value* st = a.get(1, "start");
            const Value* en = a.get(2, "end");
            subject = slice(Value(s), st, en, nullptr).as_string();
        }
        auto test = [&](const std::string& x) {
            return m == "startswith" ? subject.compare(0, x.size(), x) == 0 && subject.size() >= x.size()
                                     : subject.size() >= x.size() && subject.compare(subject.size() - x.size(), x.size(), x) == 0;
        };
        if (p->is_string()) return Value(test(p->as_string()));
        if (p->is_array() && p->array_kind() == ArrayKind::Tuple) {
            for (const Value& x : p->items()) {
                if (!x.is_string()) type_error("tuple for " + m + " must only contain str, not " + x.type_name());
                if (test(x.as_string())) return Value(true);
            }
            return Value(false);
        }
        type_error(m + " first arg must be str or a tuple of str, not " + p->type_name());
    }
    if (m == "replace") {
        return Value(str::replace(s, arg_str(a, 0, "old", "replace"), arg_str(a, 1, "new", "replace"),
                                  arg_int(a, 2, "count", -1)));
    }
    if (m == "upper") return Value(str::upper(s));
    if (m == "lower" || m == "casefold") return Value(str::lower(s));
    if (m == "title") return Value(str::title(s));
    if (m == "capitalize") return Value(str::capitalize(s));
    if (m == "swapcase") return Value(str::swapcase(s));
    if (m == "find" || m == "rfind" || m == "index" || m == "rindex") {
        const std::string sub = arg_str(a, 0, "sub", m.c_str());
        const int64_t r = (m == "find" || m == "index") ? str::find(s, sub) : str::rfind(s, sub);
        if (r < 0 && (m == "index" || m == "rindex")) throw Error(ErrorKind::Type, "substring not found");
        return Value(r);
    }
    if (m == "count") return Value(str::count(s, arg_str(a, 0, "sub", "count")));
    if (m == "join") {
        const Value* it = a.get(0, "iterable");
        if (!it) type_error("join() takes exactly one argument (0 given)");
        std::string out;
        bool first = true;
        for (const Value& x : iterate(*it)) {
            if (!x.is_string()) type_error(std::string("sequence item: expected str instance, ") + x.type_name() + " found");
            if (!first) out += s;
            first = false;
            out += x.as_string();
            check_size(static_cast<int64_t>(out.size()), "join's result");
        }
        return Value(std::move(out));
    }
    if (m == "format") return Value(python_format(s, a));
    if (m == "isdigit" || m == "isnumeric" || m == "isdecimal") return Value(str::all_of(s, str::is_digit));
    if (m == "isalpha") return Value(str::all_of(s, str::is_alpha));
    if (m == "isalnum") return Value(str::all_of(s, [](uint32_t c) { return str::is_alpha(c) || str::is_digit(c); }));
    if (m == "isspace") return Value(str::all_of(s, str::is_space));
    if (m == "isupper") return Value(str::is_upper_str(s));
    if (m == "islower") return Value(str::is_lower_str(s));
    if (m == "istitle") return Value(!s.empty() && str::title(s) == s && str::lower(s) != s);
    if (m == "zfill") return Value(str::zfill(s, arg_int(a, 0, "width", 0)));
    if (m == "center" || m == "ljust" || m == "rjust") {
        const int64_t width = arg_int(a, 0, "width", 0);
        const Value* f = a.get(1, "fillchar");
        const std::string fill = f && f->is_string() ? f->as_string() : " ";
        return Value(str::pad(s, width, fill, m == "center" ? '^' : m == "ljust" ? '<' : '>'));
    }
    if (m == "partition" || m == "rpartition") {
        const std::string sep = arg_str(a, 0, "sep", m.c_str());
        if (sep.empty()) throw Error(ErrorKind::Type, "empty separator");
        const size_t p = m == "partition" ? s.find(sep) : s.rfind(sep);
        std::vector<Value> out;
        if (p == std::string::npos) {
            if (m == "partition") out = {Value(s), Value(""), Value("")};
            else out = {Value(""), Value(""), Value(s)};
        } else {
            out = {Value(s.substr(0, p)), Value(sep), Value(s.substr(p + sep.size()))};
        }
        return Value::array(std::move(out), ArrayKind::Tuple);
    }
    if (m == "removeprefix") {
        const std::string p = arg_str(a, 0, "prefix", "removeprefix");
        return Value(s.compare(0, p.size(), p) == 0 ? s.substr(p.size()) : s);
    }
    if (m == "removesuffix") {
        const std::string p = arg_str(a, 0, "suffix", "removesuffix");
        return Value(!p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0
                         ? s.substr(0, s.size() - p.size())
                         : s);
    }
    return std::nullopt;
}

std::optional<Value> call_method(const Value& obj, const std::string& name, const CallArgs& a) {
    switch (obj.type()) {
        case Type::String:
            if (str_methods().count(name)) {
                std::optional<Value> r = string_method(obj.as_string(), name, a);
                // Markup's methods return Markup (strip, upper, ...).
                if (r && obj.is_markup() && r->is_string() &&
                    (name == "strip" || name == "lstrip" || name == "rstrip" || name == "upper" || name == "lower" ||
                     name == "title" || name == "capitalize" || name == "center" || name == "ljust" || name == "rjust"))
                    return Value::markup(r->as_string());
                return r;
            }
            return std::nullopt;
        case Type::Object: {
            if (obj.object_kind() != ObjectKind::Dict) return std::nullopt;
            const ObjectData& d = obj.object_data();
            if (name == "items") {
                std::vector<Value> out;
                for (size_t i = 0; i < d.items.size(); ++i)
                    out.push_back(Value::array({d.key(i), d.items[i].second}, ArrayKind::Tuple));
                return Value::array(std::move(out));
            }
            if (name == "keys") {
                std::vector<Value> out;
                for (size_t i = 0; i < d.items.size(); ++i) out.push_back(d.key(i));
                return Value::array(std::move(out));
            }
            if (name == "values") {
                std::vector<Value> out;
                for (const auto& kv : d.items) out.push_back(kv.second);
                return Value::array(std::move(out));
            }
            if (name == "get") {
                const Value* k = a.get(0, "key");
                if (!k) type_error("get expected at least 1 argument, got 0");
                if (const Value* v = d.find_key(*k)) return *v;
                const Value* def = a.get(1, "default");
                return def ? *def : Value::none();
            }
            if (name == "copy") {
                Value c = Value::object();
                c.mutable_object() = d;
                return c;
            }
            return std::nullopt;
        }
        case Type::Array: {
            if (obj.array_kind() == ArrayKind::Generator) return std::nullopt;
            if (name == "count") {
                const Value* x = a.get(0, "value");
                int64_t n = 0;
                if (x)
                    for (const Value& v : obj.items()) n += equals(v, *x);
                return Value(n);
            }
            if (name == "index") {
                const Value* x = a.get(0, "value");
                for (size_t i = 0; x && i < obj.items().size(); ++i)
                    if (equals(obj.items()[i], *x)) return Value(static_cast<int64_t>(i));
                throw Error(ErrorKind::Type, "value is not in list");
            }
            if (name == "copy") return Value::array(obj.items(), obj.array_kind());
            return std::nullopt;
        }
        default: return std::nullopt;
    }
}

Value call_value(const Value& f, const CallArgs& args) {
    if (f.is_undefined()) raise_undefined(f);
    if (!f.is_function()) type_error(std::string("'") + f.type_name() + "' object is not callable");
    return f.callable().fn(args);
}

// ---- operators --------------------------------------------------------------------------

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
}

static std::string unsupported(const std::string& op, const Value& a, const Value& b) {
    return "unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'";
}

static Value repeat(const Value& seq, int64_t n) {
    const int64_t unit = seq.is_string() ? static_cast<int64_t>(seq.as_string().size()) : static_cast<int64_t>(seq.items().size());
    if (n > 0 && unit > 0) check_size(unit > kMaxValueSize / n ? kMaxValueSize + 1 : unit * n, seq.is_string() ? "the repeated string" : "the repeated list");
    if (seq.is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq.as_string();
        return Value(std::move(out));
    }
    std::vector<Value> out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
    return Value::array(std::move(out), seq.array_kind());
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
    if (op == "~") {
        if (a.is_unsafe()) raise_undefined(a);
        if (b.is_unsafe()) raise_undefined(b);
        return Value(a.str() + b.str());
    }
    if (a.is_undefined()) raise_undefined(a);
    if (b.is_undefined()) raise_undefined(b);
    const bool nums = a.is_number() && b.is_number();
    const bool fl = a.is_float() || b.is_float();
    if (op == "+") {
        if (nums) return fl ? Value(a.as_double() + b.as_double()) : Value(a.as_int() + b.as_int());
        if (a.is_string() && b.is_string()) {
            if (a.is_markup() == b.is_markup()) {
                std::string s = a.as_string() + b.as_string();
                return a.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
            }
            // Markup + str escapes the plain side (markupsafe's __add__/__radd__).
            return Value::markup((a.is_markup() ? a.as_string() : html_escape(a.as_string())) +
                                 (b.is_markup() ? b.as_string() : html_escape(b.as_string())));
        }
        if (a.is_markup() || b.is_markup()) type_error(unsupported("+", a, b));
        if (a.is_array() && b.is_array() && a.array_kind() == b.array_kind() && a.array_kind() != ArrayKind::Generator) {
            std::vector<Value> out = a.items();
            out.insert(out.end(), b.items().begin(), b.items().end());
            return Value::array(std::move(out), a.array_kind());
        }
        if (a.is_string()) type_error(std::string("can only concatenate str (not \"") + b.type_name() + "\") to str");
        if (a.is_array() && a.array_kind() != ArrayKind::Generator)
            type_error(std::string("can only concatenate ") + a.type_name() + " (not \"" + b.type_name() + "\") to " + a.type_name());
        type_error(unsupported("+", a, b));
    }
    if (op == "-") {
        if (nums) return fl ? Value(a.as_double() - b.as_double()) : Value(a.as_int() - b.as_int());
        type_error(unsupported("-", a, b));
    }
    if (op == "*") {
        if (nums) return fl ? Value(a.as_double() * b.as_double()) : Value(a.as_int() * b.as_int());
        const bool a_seq = a.is_string() || (a.is_array() && a.array_kind() != ArrayKind::Generator);
        const bool b_seq = b.is_string() || (b.is_array() && b.array_kind() != ArrayKind::Generator);
        if (a_seq && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
        if (b_seq && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
        type_error(unsupported("*", a, b));
    }
    if (op == "/") {
        if (!nums) type_error(unsupported("/", a, b));
        if (b.as_double() == 0) throw Error(ErrorKind::Type, "division by zero");
        return Value(a.as_double() / b.as_double());
    }
    if (op == "//") {
        if (!nums) type_error(unsupported("//", a, b));
        if (b.as_double() == 0) throw Error(ErrorKind::Type, "integer division or modulo by zero");
        if (fl) return Value(std::floor(a.as_double() / b.as_double()));
        return Value(floor_div(a.as_int(), b.as_int()));
    }
    if (op == "%") {
        if (a.is_string()) {
            if (a.is_markup()) return Value::markup(percent_format(a.as_string(), b, true));
            return Value(percent_format(a.as_string(), b));
        }
        if (!nums) type_error(unsupported("%", a, b));
        if (b.as_double() == 0) throw Error(ErrorKind::Type, "integer division or modulo by zero");
        if (fl) {
            const double x = a.as_double(), y = b.as_double();
            double r = std::fmod(x, y);
            if (r != 0 && ((r < 0) != (y < 0))) r += y;
            return Value(r);
        }
        const int64_t x = a.as_int(), y = b.as_int();
        return Value(x - floor_div(x, y) * y);
    }
    if (op == "**") {
        if (!nums) type_error(unsupported("**", a, b));
        if (!fl && b.as_int() >= 0) {
            int64_t r = 1;
            for (int64_t i = 0; i < b.as_int(); ++i) r *= a.as_int();
            return Value(r);
        }
        return Value(std::pow(a.as_double(), b.as_double()));
    }
    type_error("unknown operator " + op);
}

Value unary_minus(const Value& v) {
    if (v.is_undefined()) raise_undefined(v);
    if (v.is_float()) return Value(-v.as_double());
    if (v.is_int() || v.is_bool()) return Value(-v.as_int());
    type_error(std::string("bad operand type for unary -: '") + v.type_name() + "'");
}

static bool contains(const Value& container, const Value& item) {
    switch (container.type()) {
        case Type::Undefined:
            if (container.is_unsafe()) raise_undefined(container);
            return false;
        case Type::String:
            if (!item.is_string())
                type_error(std::string("'in <string>' requires string as left operand, not ") + item.type_name());
            return container.as_string().find(item.as_string()) != std::string::npos;
        case Type::Array:
            for (const Value& v : container.items())
                if (equals(v, item)) return true;
            return false;
        case Type::Object:
            if (container.object_kind() == ObjectKind::Dict)
                return container.object_data().find_key(item) != nullptr;
            break;
        default: break;
    }
    type_error(std::string("argument of type '") + container.type_name() + "' is not iterable");
}

// Python ordering; throws TypeError for unorderable types. Returns <0, 0, >0.
static int order(const std::string& op, const Value& a, const Value& b) {
    if (a.is_undefined()) raise_undefined(a);
    if (b.is_undefined()) raise_undefined(b);
    if (a.is_number() && b.is_number()) {
        if (!a.is_float() && !b.is_float()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
        const double x = a.as_double(), y = b.as_double();
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.is_string() && b.is_string()) {
        const int c = a.as_string().compare(b.as_string());
        return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    if (a.is_array() && b.is_array() && a.array_kind() == b.array_kind() && a.array_kind() != ArrayKind::Generator) {
        const auto& x = a.items();
        const auto& y = b.items();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (equals(x[i], y[i])) continue;
            return order(op, x[i], y[i]);
        }
        return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
    type_error("'" + op + "' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equals(a, b);
    if (op == "!=") return !equals(a, b);
    if (op == "in") return contains(b, a);
    if (op == "notin") return !contains(b, a);
    const int c = order(op, a, b);
    if (op == "<") return c < 0;
    if (op == ">") return c > 0;
    if (op == "<=") return c <= 0;
    if (op == ">=") return c >= 0;
    type_error("unknown comparison " + op);
}

int python_order(const Value& a, const Value& b) { return order("<", a, b); }

}  // namespace glia::jinja
