#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <cstring>

#include "jinja/error.h"

namespace glia::jinja {

// ---- errors ----------------------------------------------------------------------------

const char* error_kind_name(ErrorKind k) {
    switch (k) {
        case ErrorKind::Syntax: return "syntax error";
        case ErrorKind::Undefined: return "undefined value";
        case ErrorKind::Type: return "type error";
        case ErrorKind::Security: return "security error";
        case ErrorKind::Raised: return "raised by the template";
    }
    return "error";
}

static std::string error_what(ErrorKind kind, const std::string& msg, int line) {
    std::string s = "template";
    if (line > 0) s += " line " + std::to_string(line);
    s += kind == ErrorKind::Raised ? " raised: " : (kind == ErrorKind::Syntax ? ": syntax error: " : ": ");
    return s + msg;
}

Error::Error(ErrorKind kind, std::string message, int line)
    : glia::Error(error_what(kind, message, line)), kind_(kind), message_(std::move(message)), line_(line) {}

void check_size(int64_t n, const char* what) {
    if (n > kMaxValueSize)
        throw Error(ErrorKind::Type, std::string(what) + " would hold " + std::to_string(n) + ", more than the limit of " +
                                         std::to_string(kMaxValueSize) + " (bytes or items) a template may build");
}

// ---- containers -------------------------------------------------------------------------

const Value* ObjectData::find(std::string_view key) const {
    for (const auto& [k, v] : items)
        if (k == key) return &v;
    return nullptr;
}

Value* ObjectData::find(std::string_view key) {
    for (auto& [k, v] : items)
        if (k == key) return &v;
    return nullptr;
}

void ObjectData::set(std::string key, Value v) {
    if (Value* p = find(key)) {
        *p = std::move(v);
        return;
    }
    if (!key_values.empty()) key_values.emplace_back(key);
    items.emplace_back(std::move(key), std::move(v));
}

static std::string internal_key(const Value& k) { return "\x01" + k.repr(); }

Value ObjectData::key(size_t i) const {
    if (i < key_values.size()) return key_values[i];
    return Value(items[i].first);
}

void ObjectData::set_key(const Value& k, Value v) {
    if (k.is_string() && key_values.empty()) {
        set(k.as_string(), std::move(v));
        return;
    }
    const std::string name = k.is_string() ? k.as_string() : internal_key(k);
    if (Value* p = find(name)) {
        *p = std::move(v);
        return;
    }
    if (key_values.empty())
        for (const auto& kv : items) key_values.emplace_back(kv.first);
    items.emplace_back(name, std::move(v));
    key_values.push_back(k);
}

const Value* ObjectData::find_key(const Value& k) const {
    return find(k.is_string() ? k.as_string() : internal_key(k));
}

const Value* CallArgs::kwarg(std::string_view name) const {
    for (const auto& [k, v] : kw)
        if (k == name) return &v;
    return nullptr;
}

const Value* CallArgs::get(size_t i, std::string_view name) const {
    if (i < pos.size()) return &pos[i];
    return kwarg(name);
}

// ---- construction -----------------------------------------------------------------------

Value Value::undefined(std::string hint) {
    Value v;
    v.s_ = std::move(hint);
    return v;
}

Value Value::unsafe(std::string hint) {
    Value v;
    v.s_ = std::move(hint);
    v.b_ = true;
    return v;
}

Value Value::none() {
    Value v;
    v.type_ = Type::None;
    return v;
}

Value::Value(bool b) : type_(Type::Bool), b_(b), i_(b ? 1 : 0) {}
Value::Value(int64_t v) : type_(Type::Int), i_(v) {}
Value::Value(double v) : type_(Type::Float), d_(v) {}
Value::Value(std::string s) : type_(Type::String), s_(std::move(s)) {}

Value Value::markup(std::string s) {
    Value v(std::move(s));
    v.b_ = true;
    return v;
}

Value Value::array(std::vector<Value> items, ArrayKind kind) {
    Value v;
    v.type_ = Type::Array;
    v.arr_ = std::make_shared<ArrayData>();
    v.arr_->items = std::move(items);
    v.arr_->kind = kind;
    return v;
}

Value Value::object(ObjectKind kind) {
    Value v;
    v.type_ = Type::Object;
    v.obj_ = std::make_shared<ObjectData>();
    v.obj_->kind = kind;
    return v;
}

Value Value::object(std::vector<std::pair<std::string, Value>> items, ObjectKind kind) {
    Value v = object(kind);
    v.obj_->items = std::move(items);
    return v;
}

Value Value::function(std::string name, std::function<Value(const CallArgs&)> fn, bool is_macro) {
    Value v;
    v.type_ = Type::Function;
    v.fn_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn), is_macro});
    return v;
}

double Value::as_double() const {
    if (type_ == Type::Float) return d_;
    return static_cast<double>(i_);
}

// ---- Python semantics -------------------------------------------------------------------

bool Value::truthy() const {
    switch (type_) {
        case Type::Undefined: case Type::None: return false;
        case Type::Bool: return b_;
        case Type::Int: return i_ != 0;
        case Type::Float: return d_ != 0.0;
        case Type::String: return !s_.empty();
        case Type::Array: return arr_->kind == ArrayKind::Generator || !arr_->items.empty();
        case Type::Object: return obj_->kind != ObjectKind::Dict || !obj_->items.empty();
        case Type::Function: return true;
    }
    return false;
}

const char* Value::type_name() const {
    switch (type_) {
        case Type::Undefined: return "Undefined";
        case Type::None: return "NoneType";
        case Type::Bool: return "bool";
        case Type::Int: return "int";
        case Type::Float: return "float";
        case Type::String: return "str";
        case Type::Array:
            return arr_->kind == ArrayKind::List ? "list" : arr_->kind == ArrayKind::Tuple ? "tuple" : "generator";
        case Type::Object:
            return obj_->kind == ObjectKind::Dict ? "dict" : obj_->kind == ObjectKind::Namespace ? "Namespace" : "LoopContext";
        case Type::Function: return fn_->is_macro ? "Macro" : "function";
    }
    return "object";
}

size_t Value::length() const {
    switch (type_) {
        case Type::String: {
            size_t n = 0;
            for (unsigned char c : s_) n += (c & 0xC0) != 0x80;
            return n;
        }
        case Type::Array: return arr_->items.size();
        case Type::Object: return obj_->items.size();
        default: return 0;
    }
}

std::string python_float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
    if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
    // Shortest round-trip digits in scientific form, then laid out the way Python's
    // repr does: positional for 1e-4 <= |d| < 1e16, else d.ddde+XX.
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, r.ptr);
    const bool neg = sci[0] == '-';
    if (neg) sci.erase(0, 1);
    const size_t e = sci.find('e');
    std::string mant = sci.substr(0, e);
    const int exp = std::stoi(sci.substr(e + 1));
    std::string digits;
    for (char c : mant)
        if (c != '.') digits += c;
    std::string out = neg ? "-" : "";
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out += "0.";
            out.append(static_cast<size_t>(-exp - 1), '0');
            out += digits;
        } else if (static_cast<int>(digits.size()) <= exp + 1) {
            out += digits;
            out.append(static_cast<size_t>(exp + 1 - static_cast<int>(digits.size())), '0');
            out += ".0";
        } else {
            out += digits.substr(0, static_cast<size_t>(exp + 1));
            out += '.';
            out += digits.substr(static_cast<size_t>(exp + 1));
        }
        return out;
    }
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + eb;
}

static std::string repr_string(const std::string& s) {
    const bool has_single = s.find('\'') != std::string::npos;
    const bool has_double = s.find('"') != std::string::npos;
    const char q = (has_single && !has_double) ? '"' : '\'';
    std::string out(1, q);
    for (uint32_t cp : utf8_decode(s)) {
        if (cp == static_cast<uint32_t>(q) || cp == '\\') { out += '\\'; out += static_cast<char>(cp); }
        else if (cp == '\n') out += "\\n";
        else if (cp == '\r') out += "\\r";
        else if (cp == '\t') out += "\\t";
        else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0) || cp == 0xAD) {
            char b[8];
            std::snprintf(b, sizeof b, "\\x%02x", cp);
            out += b;
        } else if (cp == 0x2028 || cp == 0x2029 || (cp >= 0xD800 && cp < 0xE000)) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", cp);
            out += b;
        } else utf8_append(out, cp);
    }
    out += q;
    return out;
}

std::string Value::repr() const {
    switch (type_) {
        case Type::String: return repr_string(s_);
        case Type::Undefined: return "Undefined";
        case Type::Array: {
            if (arr_->kind == ArrayKind::Generator) return "<generator object>";
            const bool tuple = arr_->kind == ArrayKind::Tuple;
            std::string out = tuple ? "(" : "[";
            for (size_t i = 0; i < arr_->items.size(); ++i) {
                if (i) out += ", ";
                out += arr_->items[i].repr();
                check_size(static_cast<int64_t>(out.size()), "the list's text");
            }
            if (tuple && arr_->items.size() == 1) out += ",";
            return out + (tuple ? ")" : "]");
        }
        case Type::Object: {
            std::string out = obj_->kind == ObjectKind::Namespace ? "<Namespace {" : obj_->kind == ObjectKind::Loop ? "<LoopContext {" : "{";
            for (size_t i = 0; i < obj_->items.size(); ++i) {
                if (i) out += ", ";
                out += obj_->key(i).repr() + ": " + obj_->items[i].second.repr();
                check_size(static_cast<int64_t>(out.size()), "the dict's text");
            }
            return out + (obj_->kind == ObjectKind::Dict ? "}" : "}>");
        }
        default: return str();
    }
}

std::string Value::str() const {
    switch (type_) {
        case Type::Undefined: return "";
        case Type::None: return "None";
        case Type::Bool: return b_ ? "True" : "False";
        case Type::Int: return std::to_string(i_);
        case Type::Float: return python_float_repr(d_);
        case Type::String: return s_;
        case Type::Function: return fn_->is_macro ? "<Macro '" + fn_->name + "'>" : "<function " + fn_->name + ">";
        default: return repr();
    }
}

bool equals(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
        return a.as_int() == b.as_int();
    }
    if (a.type() != b.type()) return false;
    switch (a.type()) {
        case Type::Undefined: case Type::None: return true;
        case Type::String: return a.as_string() == b.as_string();
        case Type::Array: {
            if ((a.array_kind() == ArrayKind::Tuple) != (b.array_kind() == ArrayKind::Tuple)) return false;
            if (a.array_kind() == ArrayKind::Generator || b.array_kind() == ArrayKind::Generator)
                return &a.array_data() == &b.array_data();
            const auto& x = a.items();
            const auto& y = b.items();
            if (x.size() != y.size()) return false;
            for (size_t i = 0; i < x.size(); ++i)
                if (!equals(x[i], y[i])) return false;
            return true;
        }
        case Type::Object: {
            if (a.object_kind() != ObjectKind::Dict || b.object_kind() != ObjectKind::Dict)
                return &a.object_data() == &b.object_data();
            const auto& x = a.object_data().items;
            if (x.size() != b.object_data().items.size()) return false;
            for (const auto& [k, v] : x) {
                const Value* w = b.object_data().find(k);
                if (!w || !equals(v, *w)) return false;
            }
            return true;
        }
        case Type::Function: return &a.callable() == &b.callable();
        default: return false;
    }
}

// ---- UTF-8 ----------------------------------------------------------------------------

std::vector<uint32_t> utf8_decode(std::string_view s) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) { out.push_back(0xFFFD); ++i; continue; }
        uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
        bool ok = true;
        for (int k = 1; k < n; ++k) {
            const unsigned char d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xC0) != 0x80) { ok = false; break; }
            cp = (cp << 6) | (d & 0x3F);
        }
        if (!ok) { out.push_back(0xFFFD); ++i; continue; }
        out.push_back(cp);
        i += static_cast<size_t>(n);
    }
    return out;
}

void utf8_append(std::string& out, uint32_t cp) {
    if (cp < 0x80) out += static_cast<char>(cp);
    else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

std::string utf8_encode(const std::vector<uint32_t>& cps) {
    std::string out;
    out.reserve(cps.size());
    for (uint32_t cp : cps) utf8_append(out, cp);
    return out;
}

// ---- JSON -------------------------------------------------------------------------------

namespace {

class JsonParser {
public:
    explicit JsonParser(std::string_view t) : t_(t) {}
    Value parse() {
        skip_ws();
        Value v = value(0);
        skip_ws();
        if (p_ != t_.size()) fail("unexpected text after the JSON value");
        return v;
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw Error(ErrorKind::Type, "invalid JSON at offset " + std::to_string(p_) + ": " + what);
    }
    void skip_ws() {
        while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r')) ++p_;
    }
    bool lit(std::string_view w) {
        if (t_.substr(p_, w.size()) == w) { p_ += w.size(); return true; }
        return false;
    }
    Value value(int depth) {
        if (depth > 512) fail("nesting too deep");
        if (p_ >= t_.size()) fail("unexpected end of input");
        const char c = t_[p_];
        if (c == '{') return object(depth);
        if (c == '[') return array(depth);
        if (c == '"') return Value(string());
        if (lit("true")) return Value(true);
        if (lit("false")) return Value(false);
        if (lit("null")) return Value::none();
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        fail(std::string("unexpected character '") + c + "'");
    }
    Value object(int depth) {
        ++p_;
        Value o = Value::object();
        skip_ws();
        if (p_ < t_.size() && t_[p_] == '}') { ++p_; return o; }
        for (;;) {
            skip_ws();
            if (p_ >= t_.size() || t_[p_] != '"') fail("expected a string key");
            std::string k = string();
            skip_ws();
            if (p_ >= t_.size() || t_[p_] != ':') fail("expected ':'");
            ++p_;
            skip_ws();
            o.mutable_object().set(std::move(k), value(depth + 1));
            skip_ws();
            if (p_ < t_.size() && t_[p_] == ',') { ++p_; continue; }
            if (p_ < t_.size() && t_[p_] == '}') { ++p_; return o; }
            fail("expected ',' or '}'");
        }
    }
    Value array(int depth) {
        ++p_;
        std::vector<Value> items;
        skip_ws();
        if (p_ < t_.size() && t_[p_] == ']') { ++p_; return Value::array(std::move(items)); }
        for (;;) {
            skip_ws();
            items.push_back(value(depth + 1));
            skip_ws();
            if (p_ < t_.size() && t_[p_] == ',') { ++p_; continue; }
            if (p_ < t_.size() && t_[p_] == ']') { ++p_; return Value::array(std::move(items)); }
            fail("expected ',' or ']'");
        }
    }
    uint32_t hex4() {
        if (p_ + 4 > t_.size()) fail("truncated \\u escape");
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) {
            const char c = t_[p_++];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
            else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
            else fail("bad hex digit in \\u escape");
        }
        return v;
    }
    std::string string() {
        ++p_;
        std::string out;
        for (;;) {
            if (p_ >= t_.size()) fail("unterminated string");
            const char c = t_[p_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
            if (c != '\\') { out += c; continue; }
            if (p_ >= t_.size()) fail("unterminated escape");
            const char e = t_[p_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    uint32_t cp = hex4();
                    if (cp >= 0xD800 && cp < 0xDC00 && p_ + 6 <= t_.size() && t_[p_] == '\\' && t_[p_ + 1] == 'u') {
                        const size_t save = p_;
                        p_ += 2;
                        const uint32_t lo = hex4();
                        if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        else p_ = save;
                    }
                    utf8_append(out, cp);
                    break;
                }
                default: fail(std::string("bad escape '\\") + e + "'");
            }
        }
    }
    Value number() {
        const size_t start = p_;
        if (t_[p_] == '-') ++p_;
        bool is_float = false;
        while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) ++p_;
        if (p_ < t_.size() && t_[p_] == '.') {
            is_float = true;
            ++p_;
            while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) ++p_;
        }
        if (p_ < t_.size() && (t_[p_] == 'e' || t_[p_] == 'E')) {
            is_float = true;
            ++p_;
            if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
            while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) ++p_;
        }
        const std::string_view s = t_.substr(start, p_ - start);
        if (s == "-" ) fail("bad number");
        if (!is_float) {
            int64_t v = 0;
            auto r = std::from_chars(s.data(), s.data() + s.size(), v);
            if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return Value(v);
        }
        double d = 0;
        auto r = std::from_chars(s.data(), s.data() + s.size(), d);
        if (r.ptr != s.data() + s.size()) fail("bad number");
        return Value(d);
    }

    std::string_view t_;
    size_t p_ = 0;
};

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
    out += '"';
    for (uint32_t cp : utf8_decode(s)) {
        switch (cp) {
            case '"': out += "\\\""; continue;
            case '\\': out += "\\\\"; continue;
            case '\n': out += "\\n"; continue;
            case '\r': out += "\\r"; continue;
            case '\t': out += "\\t"; continue;
            case '\b': out += "\\b"; continue;
            case '\f': out += "\\f"; continue;
            default: break;
        }
        char b[16];
        if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
            if (cp >= 0x10000) {
                const uint32_t v = cp - 0x10000;
                std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else std::snprintf(b, sizeof b, "\\u%04x", cp);
            out += b;
        } else utf8_append(out, cp);
    }
    out += '"';
}

void json_dump(std::string& out, const Value& v, const JsonOptions& o, int level) {
    auto newline = [&](int lvl) {
        out += '\n';
        for (int i = 0; i < lvl; ++i) {
            if (o.indent_is_string) out += o.indent_str;
            else out.append(static_cast<size_t>(o.indent), ' ');
        }
    };
    const bool pretty = o.indent >= 0 || o.indent_is_string;
    switch (v.type()) {
        case Type::None: out += "null"; return;
        case Type::Bool: out += v.as_bool() ? "true" : "false"; return;
        case Type::Int: out += std::to_string(v.as_int()); return;
        case Type::Float: {
            const double d = v.as_double();
            if (std::isnan(d)) out += "NaN";
            else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
            else out += python_float_repr(d);
            return;
        }
        case Type::String: json_string(out, v.as_string(), o.ensure_ascii); return;
        case Type::Array: {
            if (v.array_kind() == ArrayKind::Generator)
                throw Error(ErrorKind::Type, "Object of type generator is not JSON serializable");
            const auto& items = v.items();
            if (items.empty()) { out += "[]"; return; }
            out += '[';
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) out += o.item_sep;
                if (pretty) newline(level + 1);
                json_dump(out, items[i], o, level + 1);
                check_size(static_cast<int64_t>(out.size()), "the JSON text");
            }
            if (pretty) newline(level);
            out += ']';
            return;
        }
        case Type::Object: {
            if (v.object_kind() != ObjectKind::Dict)
                throw Error(ErrorKind::Type, std::string("Object of type ") + v.type_name() + " is not JSON serializable");
            // Python converts non-string keys: 1 -> "1", True -> "true", None -> "null".
            const ObjectData& d = v.object_data();
            std::vector<std::pair<std::string, const Value*>> items;
            for (size_t i = 0; i < d.items.size(); ++i) {
                const Value k = d.key(i);
                std::string name = k.is_string() ? k.as_string()
                                   : k.is_bool()  ? (k.as_bool() ? "true" : "false")
                                   : k.is_none()  ? "null"
                                                  : k.str();
                items.emplace_back(std::move(name), &d.items[i].second);
            }
            if (o.sort_keys)
                std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
            if (items.empty()) { out += "{}"; return; }
            out += '{';
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) out += o.item_sep;
                if (pretty) newline(level + 1);
                json_string(out, items[i].first, o.ensure_ascii);
                out += o.key_sep;
                json_dump(out, *items[i].second, o, level + 1);
                check_size(static_cast<int64_t>(out.size()), "the JSON text");
            }
            if (pretty) newline(level);
            out += '}';
            return;
        }
        case Type::Undefined:
            throw Error(ErrorKind::Type, "Object of type Undefined is not JSON serializable");
        case Type::Function:
            throw Error(ErrorKind::Type, "Object of type function is not JSON serializable");
    }
}

}  // namespace

Value Value::parse_json(std::string_view text) { return JsonParser(text).parse(); }

std::string to_json(const Value& v, const JsonOptions& opt) {
    std::string out;
    json_dump(out, v, opt, 0);
    return out;
}

}  // namespace glia::jinja
