// The KV cache's cell types (--cache-type-k / --cache-type-v, named as the reference
// names them): f16 (the default), bf16, q8_0 (blocks of 32 values, an f16 scale and 32
// int8) and q4_0 (blocks of 32 values, an f16 scale and 32 four-bit values). A cache row
// holds one token's values of every KV head of a layer; the quantized types cut it into
// blocks of 32, so a head either spans whole blocks (head size a multiple of 32) or lies
// inside one block with its neighbours (head size 8 or 16, the block shared).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/dtype.h"

namespace glia {

struct ModelProfile;

struct CacheTypes {
    DType k = DType::F16;
    DType v = DType::F16;
    bool is_default() const { return k == DType::F16 && v == DType::F16; }
};

// "f16", "bf16", "q8_0", "q4_0".
const char* cache_type_name(DType t);
// Parses a type name (case-insensitive); throws Error naming `flag` and the choices.
DType cache_type_from_name(std::string_view name, const char* flag);
// "f16, bf16, q8_0, q4_0".
const char* cache_type_names();

// Bytes of one cache row of `n_values` values (a whole number of blocks).
size_t cache_row_bytes(DType t, int64_t n_values);

// Throws Error, naming the flag, the type and the head size, when a layer's heads do not
// fit the type's blocks (head size neither a multiple of 32 nor 8 or 16 dividing a row of
// whole blocks), or when the model caches a latent vector (V read from the K pages).
void check_cache_types(const ModelProfile& p, const CacheTypes& c);

// Why a cache of other types than f16 cannot go with layer `il` on `device`, whose attention
// kernels do not take the layer's heads with these types (the CUDA kernels read every type
// but need the staged rows in shared memory: backend/cuda/kv_rows.cuh), and the remedies.
std::string cache_types_device_refusal(const CacheTypes& c, int il, const std::string& device);

}  // namespace glia
