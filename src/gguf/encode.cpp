#include "gguf/encode.h"

#include <limits>

#include "core/error.h"

namespace glia::gguf::encode {
namespace {

bool valid_type(ValueType t) { return static_cast<uint32_t>(t) <= static_cast<uint32_t>(ValueType::FLOAT64); }

bool is_signed(ValueType t) {
    return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}

}  // namespace

void check_value(const Value& v, const std::string& key, const char* who, int depth) {
    if (!valid_type(v.type)) fail(who, ": key '", key, "': invalid value type ", static_cast<uint32_t>(v.type));
    auto bad = [&] { fail(who, ": key '", key, "': value does not fit type ", value_type_name(v.type)); };
    switch (v.type) {
        case ValueType::UINT8: if (v.u > 0xff) bad(); break;
        case ValueType::UINT16: if (v.u > 0xffff) bad(); break;
        case ValueType::UINT32: if (v.u > 0xffffffffu) bad(); break;
        case ValueType::BOOL: if (v.u > 1) bad(); break;
        case ValueType::INT8: if (v.i < -128 || v.i > 127) bad(); break;
        case ValueType::INT16: if (v.i < -32768 || v.i > 32767) bad(); break;
        case ValueType::INT32:
            if (v.i < std::numeric_limits<int32_t>::min() || v.i > std::numeric_limits<int32_t>::max()) bad();
            break;
        case ValueType::ARRAY:
            if (depth >= kMaxDepth) fail(who, ": key '", key, "': arrays nested more than ", kMaxDepth, " deep");
            if (!valid_type(v.elem_type))
                fail(who, ": key '", key, "': invalid array element type ", static_cast<uint32_t>(v.elem_type));
            for (size_t k = 0; k < v.arr.size(); ++k) {
                if (v.arr[k].type != v.elem_type)
                    fail(who, ": key '", key, "'[", k, "]: element of type ", value_type_name(v.arr[k].type),
                         " in an array of ", value_type_name(v.elem_type));
                check_value(v.arr[k], key, who, depth + 1);
            }
            break;
        default: break;
    }
}

void check_alignment(uint64_t a, const char* who, const char* what) {
    if (a == 0 || (a & (a - 1)) != 0 || a > kMaxAlignment)
        fail(who, ": ", what, ": alignment ", a, " must be a power of two between 1 and ", kMaxAlignment);
}

uint64_t alignment_from_value(const Value& v, const char* who) {
    if (!v.is_integer())
        fail(who, ": key 'general.alignment' must be an integer, got ", value_type_name(v.type));
    const uint64_t a = is_signed(v.type) ? (v.i > 0 ? uint64_t(v.i) : 0) : v.u;
    check_alignment(a, who, "key 'general.alignment'");
    return a;
}

uint64_t tensor_nbytes(const std::string& where, DType type, const std::vector<int64_t>& ne) {
    const DTypeInfo* info = dtype_info(static_cast<uint32_t>(type));
    if (!info) fail(where, ": unknown tensor type id ", static_cast<uint32_t>(type));
    if (ne.empty() || ne.size() > 4) fail(where, ": ", ne.size(), " dimensions (must be 1..4)");
    uint64_t n_elem = 1;
    for (size_t d = 0; d < ne.size(); ++d) {
        if (ne[d] <= 0) fail(where, ": ne[", d, "] = ", ne[d], " (must be positive)");
        if (n_elem > uint64_t(std::numeric_limits<int64_t>::max()) / uint64_t(ne[d]))
            fail(where, ": element count overflows 64 bits");
        n_elem *= uint64_t(ne[d]);
    }
    if (ne[0] % info->block_size != 0)
        fail(where, ": row length ", ne[0], " is not a multiple of the ", info->name, " block size ", info->block_size);
    const uint64_t n_blocks = n_elem / uint64_t(info->block_size);
    if (n_blocks > std::numeric_limits<uint64_t>::max() / info->type_size) fail(where, ": byte size overflows 64 bits");
    return n_blocks * info->type_size;
}

}  // namespace glia::gguf::encode
