// Tensor element types. Values are the GGUF on-disk type ids.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace glia {

enum class DType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21,
    IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29,
    BF16 = 30, TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

// Layout facts every layer needs (block size in elements, bytes per block).
struct DTypeInfo {
    DType type;
    const char* name;
    int64_t block_size;
    size_t type_size;
};

// nullptr when the id is not a known GGUF type.
const DTypeInfo* dtype_info(uint32_t id);
const DTypeInfo& dtype_info(DType t);
inline const char* dtype_name(DType t) { return dtype_info(t).name; }
// Bytes of a row of n elements (n must be a multiple of the block size).
size_t row_bytes(DType t, int64_t n);
// Parses "q4_k", "Q4_K", "f16" ...; returns false when unknown.
bool dtype_from_name(std::string_view name, DType& out);

}  // namespace glia
