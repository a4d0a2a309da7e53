// Typed access to GGUF metadata values, with range-checked conversions.
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <type_traits>

#include "gguf/gguf.h"

namespace glia::gguf {

bool Value::is_integer() const {
    switch (type) {
        case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
        case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
            return true;
        default: return false;
    }
}

bool Value::is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }

ValueArray::ValueArray(std::vector<Value> v) : boxed_(std::move(v)) {}

ValueArray& ValueArray::operator=(std::vector<Value> v) {
    form_ = Form::BOXED;
    raw_ = nullptr;
    n_raw_ = 0;
    strings_.clear();
    boxed_ = std::move(v);
    return *this;
}

size_t ValueArray::size() const {
    switch (form_) {
        case Form::SCALARS: return n_raw_;
        case Form::STRINGS: return strings_.size();
        case Form::BOXED: break;
    }
    return boxed_.size();
}

// An element of a compact array, as the reader used to store it: unsigned integers and
// bools in u, signed in i, floats in f.
Value ValueArray::operator[](size_t k) const {
    if (form_ == Form::BOXED) return boxed_[k];
    Value v;
    v.type = form_ == Form::STRINGS ? ValueType::STRING : type_;
    if (form_ == Form::STRINGS) {
        v.s = strings_[k];
        return v;
    }
    auto get = [&](auto x) {
        std::memcpy(&x, raw_ + k * sizeof(x), sizeof(x));
        return x;
    };
    switch (type_) {
        case ValueType::UINT8: case ValueType::BOOL: v.u = raw_[k]; break;
        case ValueType::INT8: v.i = static_cast<int8_t>(raw_[k]); break;
        case ValueType::UINT16: v.u = get(uint16_t{}); break;
        case ValueType::INT16: v.i = get(int16_t{}); break;
        case ValueType::UINT32: v.u = get(uint32_t{}); break;
        case ValueType::INT32: v.i = get(int32_t{}); break;
        case ValueType::UINT64: v.u = get(uint64_t{}); break;
        case ValueType::INT64: v.i = get(int64_t{}); break;
        case ValueType::FLOAT32: v.f = get(float{}); break;
        case ValueType::FLOAT64: v.f = get(double{}); break;
        default: break;
    }
    return v;
}

Value ValueArray::iterator::operator*() const { return (*a_)[k_]; }

void ValueArray::box() {
    if (form_ == Form::BOXED) return;
    std::vector<Value> items;
    items.reserve(size());
    for (size_t k = 0; k < size(); ++k) items.push_back((*this)[k]);
    *this = std::move(items);
}

void ValueArray::push_back(Value v) {
    box();
    boxed_.push_back(std::move(v));
}

void ValueArray::reserve(size_t n) {
    box();
    boxed_.reserve(n);
}

void ValueArray::resize(size_t n) {
    box();
    boxed_.resize(n);
}

void ValueArray::view_scalars(ValueType type, const uint8_t* data, size_t n) {
    *this = std::vector<Value>{};
    form_ = Form::SCALARS;
    type_ = type;
    raw_ = data;
    n_raw_ = n;
}

void ValueArray::set_strings(std::vector<std::string_view> s) {
    *this = std::vector<Value>{};
    form_ = Form::STRINGS;
    strings_ = std::move(s);
}

static bool is_unsigned(ValueType t) {
    return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 || t == ValueType::UINT64;
}

std::string Value::to_string(size_t max_items) const {
    std::ostringstream os;
    switch (type) {
        case ValueType::STRING: {
            os << '"';
            size_t n = 0;
            for (char ch : s) {
                if (++n > 200) { os << "..."; break; }
                if (ch == '\n') os << "\\n";
                else if (ch == '"') os << "\\\"";
                else if (static_cast<unsigned char>(ch) < 0x20) os << "\\x" << std::hex << int(ch) << std::dec;
                else os << ch;
            }
            os << '"';
            break;
        }
        case ValueType::BOOL: os << (u ? "true" : "false"); break;
        case ValueType::FLOAT32: case ValueType::FLOAT64: os << f; break;
        case ValueType::ARRAY: {
            os << '[';
            for (size_t k = 0; k < arr.size() && k < max_items; ++k) os << (k ? ", " : "") << arr[k].to_string(max_items);
            if (arr.size() > max_items) os << ", ... (" << arr.size() << " items)";
            os << ']';
            break;
        }
        default:
            if (is_unsigned(type)) os << u; else os << i;
    }
    return os.str();
}

namespace {

// `where_fn()` renders the location for an error message; it runs only on error, so that
// converting a 150k-entry array costs no string formatting.
template <typename T, typename Where>
T convert(const Value& v, const Where& where_fn) {
    auto where = [&] { return where_fn(); };
    if constexpr (std::is_same_v<T, std::string>) {
        if (v.type != ValueType::STRING) fail(where(), ": expected a string, found ", value_type_name(v.type));
        return std::string(v.s);
    } else if constexpr (std::is_same_v<T, bool>) {
        if (v.type == ValueType::BOOL) return v.u != 0;
        fail(where(), ": expected a bool, found ", value_type_name(v.type));
    } else if constexpr (std::is_floating_point_v<T>) {
        if (v.is_float()) {
            if (std::isfinite(v.f) && std::fabs(v.f) > static_cast<double>(std::numeric_limits<T>::max()))
                fail(where(), ": value ", v.f, " is out of range for a ", sizeof(T) == 4 ? "f32" : "f64");
            return static_cast<T>(v.f);
        }
        if (v.is_integer()) return is_unsigned(v.type) ? static_cast<T>(v.u) : static_cast<T>(v.i);
        fail(where(), ": expected a number, found ", value_type_name(v.type));
    } else {
        static_assert(std::is_integral_v<T>);
        if (!v.is_integer()) fail(where(), ": expected an integer, found ", value_type_name(v.type));
        if (is_unsigned(v.type)) {
            if (v.u > static_cast<uint64_t>(std::numeric_limits<T>::max()))
                fail(where(), ": value ", v.u, " is out of range (", +std::numeric_limits<T>::min(), "..",
                     +std::numeric_limits<T>::max(), ")");
            return static_cast<T>(v.u);
        }
        if (v.i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
            (v.i > 0 && static_cast<uint64_t>(v.i) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
            fail(where(), ": value ", v.i, " is out of range (", +std::numeric_limits<T>::min(), "..",
                 +std::numeric_limits<T>::max(), ")");
        return static_cast<T>(v.i);
    }
}

}  // namespace

std::string File::where(std::string_view key) const {
    auto it = kv_index_.find(key);
    if (it == kv_index_.end()) return cat(path_, ": key '", key, "'");
    return cat(path_, ": offset ", kvs_[it->second].offset, ": key '", key, "'");
}

template <typename T>
T File::get(std::string_view key) const {
    const Value* v = find(key);
    if (!v) fail(path_, ": key '", key, "' is missing");
    return convert<T>(*v, [&] { return where(key); });
}

template <typename T>
T File::get_or(std::string_view key, T fallback) const {
    const Value* v = find(key);
    if (!v) return fallback;
    return convert<T>(*v, [&] { return where(key); });
}

template <typename T>
std::vector<T> File::get_array(std::string_view key) const {
    const Value* v = find(key);
    if (!v) fail(path_, ": key '", key, "' is missing");
    if (!v->is_array()) fail(where(key), ": expected an array, found ", value_type_name(v->type));
    std::vector<T> out;
    out.reserve(v->arr.size());
    for (size_t k = 0; k < v->arr.size(); ++k) out.push_back(convert<T>(v->arr[k], [&] { return cat(where(key), "[", k, "]"); }));
    return out;
}

template <typename T>
std::optional<PerLayer<T>> File::per_layer_opt(std::string_view key, int n_layer) const {
    if (n_layer < 0) fail(path_, ": key '", key, "': invalid layer count ", n_layer);
    const Value* v = find(key);
    if (!v) return std::nullopt;
    PerLayer<T> r;
    if (v->is_array()) {
        if (v->arr.size() != static_cast<size_t>(n_layer))
            fail(where(key), ": per-layer array has ", v->arr.size(), " entries, expected ", n_layer,
                 " (one per layer)");
        r.values = get_array<T>(key);
        r.from_array = true;
    } else {
        r.values.assign(n_layer, convert<T>(*v, [&] { return where(key); }));
    }
    return r;
}

template <typename T>
PerLayer<T> File::per_layer(std::string_view key, int n_layer) const {
    auto r = per_layer_opt<T>(key, n_layer);
    if (!r) fail(path_, ": key '", key, "' is missing");
    return *r;
}

#define GLIA_GGUF_INSTANTIATE(T)                                                         \
    template T File::get<T>(std::string_view) const;                                    \
    template T File::get_or<T>(std::string_view, T) const;                              \
    template std::vector<T> File::get_array<T>(std::string_view) const;                 \
    template PerLayer<T> File::per_layer<T>(std::string_view, int) const;               \
    template std::optional<PerLayer<T>> File::per_layer_opt<T>(std::string_view, int) const;

GLIA_GGUF_INSTANTIATE(bool)
GLIA_GGUF_INSTANTIATE(int8_t)
GLIA_GGUF_INSTANTIATE(uint8_t)
GLIA_GGUF_INSTANTIATE(int16_t)
GLIA_GGUF_INSTANTIATE(uint16_t)
GLIA_GGUF_INSTANTIATE(int32_t)
GLIA_GGUF_INSTANTIATE(uint32_t)
GLIA_GGUF_INSTANTIATE(int64_t)
GLIA_GGUF_INSTANTIATE(uint64_t)
GLIA_GGUF_INSTANTIATE(float)
GLIA_GGUF_INSTANTIATE(double)
GLIA_GGUF_INSTANTIATE(std::string)

}  // namespace glia::gguf
