// The values a Jinja template computes with: a small JSON-like dynamic type that
// behaves like the Python objects Jinja2 templates see (None, bool, int, float, str,
// list, tuple, dict, callables, and Jinja's Undefined).
//
// Containers are shared and immutable once built (the reference renderer runs in an
// immutable sandbox), except namespace() objects, which `{% set ns.x = ... %}` changes
// through every copy — exactly like a Python object reference.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace glia::jinja {

class Value;

enum class Type : uint8_t { Undefined, None, Bool, Int, Float, String, Array, Object, Function };

// Python flavours of a sequence: list, tuple, or a one-shot generator (map/select/...:
// iterable and printable through |list or |join, but not JSON-serialisable).
enum class ArrayKind : uint8_t { List, Tuple, Generator };
// Dict: a Python dict. Namespace: namespace(). Loop: the `loop` variable of a for.
enum class ObjectKind : uint8_t { Dict, Namespace, Loop };

struct ArrayData {
    std::vector<Value> items;
    ArrayKind kind = ArrayKind::List;
};

// Insertion-ordered string-keyed map (Python dicts keep insertion order).
struct ObjectData {
    std::vector<std::pair<std::string, Value>> items;
    ObjectKind kind = ObjectKind::Dict;
    const Value* find(std::string_view key) const;
    Value* find(std::string_view key);
    void set(std::string key, Value v);  // replaces in place or appends

    // Python dicts may have non-string keys ({4096: 512}). Such a key is stored under an
    // internal name ("\x01" + repr) and its value kept in key_values, which is empty
    // while every key is a string and otherwise parallel to items.
    std::vector<Value> key_values;
    Value key(size_t i) const;  // the key as templates see it
    void set_key(const Value& k, Value v);
    const Value* find_key(const Value& k) const;
};

// Positional and keyword arguments of a call.
struct CallArgs {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
    // The argument at position i or named `name`, else nullptr.
    const Value* get(size_t i, std::string_view name) const;
    const Value* kwarg(std::string_view name) const;
};

struct Callable {
    std::string name;
    std::function<Value(const CallArgs&)> fn;
    bool is_macro = false;
};

class Value {
public:
    Value() = default;  // Undefined
    static Value undefined(std::string hint = {});
    // An Undefined that stands for a forbidden attribute (a mutating method in the
    // immutable sandbox): using it raises a security error.
    static Value unsafe(std::string hint);
    static Value none();
    Value(bool b);
    Value(int v) : Value(static_cast<int64_t>(v)) {}
    Value(int64_t v);
    Value(double v);
    Value(std::string s);
    Value(std::string_view s) : Value(std::string(s)) {}
    Value(const char* s) : Value(std::string(s)) {}
    // A "safe" string (markupsafe.Markup, made by |safe and |escape): adding a plain
    // string to it HTML-escapes the plain one, as in Jinja2.
    static Value markup(std::string s);
    static Value array(std::vector<Value> items = {}, ArrayKind kind = ArrayKind::List);
    static Value object(ObjectKind kind = ObjectKind::Dict);
    static Value object(std::vector<std::pair<std::string, Value>> items, ObjectKind kind = ObjectKind::Dict);
    static Value function(std::string name, std::function<Value(const CallArgs&)> fn, bool is_macro = false);

    Type type() const { return type_; }
    bool is_undefined() const { return type_ == Type::Undefined; }
    bool is_none() const { return type_ == Type::None; }
    bool is_bool() const { return type_ == Type::Bool; }
    bool is_int() const { return type_ == Type::Int; }
    bool is_float() const { return type_ == Type::Float; }
    bool is_number() const { return type_ == Type::Int || type_ == Type::Float || type_ == Type::Bool; }
    bool is_string() const { return type_ == Type::String; }
    bool is_markup() const { return type_ == Type::String && b_; }
    bool is_array() const { return type_ == Type::Array; }
    bool is_object() const { return type_ == Type::Object; }
    bool is_dict() const { return type_ == Type::Object && obj_->kind == ObjectKind::Dict; }
    bool is_function() const { return type_ == Type::Function; }

    bool as_bool() const { return b_; }
    int64_t as_int() const { return i_; }    // Int (Bool: 0/1)
    double as_double() const;                // Int, Float or Bool
    const std::string& as_string() const { return s_; }
    // For Undefined: the message an operation on it raises ("'x' is undefined").
    const std::string& undefined_hint() const { return s_; }
    bool is_unsafe() const { return type_ == Type::Undefined && b_; }
    const ArrayData& array_data() const { return *arr_; }
    ArrayKind array_kind() const { return arr_->kind; }
    const std::vector<Value>& items() const { return arr_->items; }
    const ObjectData& object_data() const { return *obj_; }
    ObjectData& mutable_object() const { return *obj_; }  // namespaces only
    ObjectKind object_kind() const { return obj_->kind; }
    const Callable& callable() const { return *fn_; }

    // Python truthiness.
    bool truthy() const;
    // Python str(): what {{ x }} prints. Undefined prints as "".
    std::string str() const;
    // Python repr().
    std::string repr() const;
    // Python type name for messages: "str", "int", "NoneType", "dict", ...
    const char* type_name() const;
    // Number of items of a list/tuple/dict, code points of a string.
    size_t length() const;

    // Parses JSON (RFC 8259) keeping object key order; integers stay integers. Throws
    // jinja::Error with the offset on malformed input.
    static Value parse_json(std::string_view text);

private:
    Type type_ = Type::Undefined;
    bool b_ = false;
    int64_t i_ = 0;
    double d_ = 0;
    std::string s_;
    std::shared_ptr<ArrayData> arr_;
    std::shared_ptr<ObjectData> obj_;
    std::shared_ptr<Callable> fn_;
};

// Python equality (1 == 1.0 == True; containers element-wise; different types unequal).
bool equals(const Value& a, const Value& b);

// json.dumps(v, ensure_ascii, indent, separators, sort_keys) as Python writes it.
struct JsonOptions {
    bool ensure_ascii = false;
    int indent = -1;                 // < 0: None (one line)
    std::string indent_str;          // used when indent_is_string
    bool indent_is_string = false;
    bool has_separators = false;
    std::string item_sep = ", ", key_sep = ": ";
    bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& opt = {});

// Python float repr: shortest round-trip digits, "1.0", "1e-05", "1e+16", "inf", "nan".
std::string python_float_repr(double d);

// UTF-8 helpers (code-point based, as Python strings are).
std::vector<uint32_t> utf8_decode(std::string_view s);
void utf8_append(std::string& out, uint32_t cp);
std::string utf8_encode(const std::vector<uint32_t>& cps);

}  // namespace glia::jinja
