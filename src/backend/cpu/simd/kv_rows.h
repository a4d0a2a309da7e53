// Rows of the KV cache as the attention kernels read them. A row holds one token's values
// of every KV head of a layer, in one of four types (the reference's layouts):
//   F16, BF16  one 16-bit value each;
//   Q8_0       blocks of 32 values: f16 scale d, 32 int8 q (value = q * d), 34 bytes;
//   Q4_0       blocks of 32 values: f16 scale d, 16 bytes of 4-bit q (value j < 16 in the low
//              nibble of byte j, value j >= 16 in the high nibble of byte j - 16;
//              value = (q - 8) * d), 18 bytes.
// A head of a blocked row spans whole blocks, or 8 or 16 values inside one block.
// Widening is exact (an int times the f32 scale rounds once), so every kernel level gives
// the same f32 values.
#pragma once
#include <cstddef>
#include <cstdint>

namespace glia::cpu::simd {

enum class KvType : uint8_t { F16, BF16, Q8_0, Q4_0 };

inline constexpr int kKvBlock = 32;
inline constexpr size_t kQ8_0Bytes = 34, kQ4_0Bytes = 18;

// Bytes from the start of a row to the element (blocked types: to its block).
inline size_t kv_offset_bytes(KvType t, size_t value) {
    switch (t) {
        case KvType::Q8_0: return value / kKvBlock * kQ8_0Bytes;
        case KvType::Q4_0: return value / kKvBlock * kQ4_0Bytes;
        default: return value * 2;
    }
}

// Values [off, off + n) of a row as f32 (the scalar reference).
void kv_widen_scalar(KvType t, const uint8_t* row, size_t off, int n, float* dst);

// The same values; n and off multiples of 16 (AVX-512; defined on x86 builds only).
void kv_widen_avx512(KvType t, const uint8_t* row, size_t off, int n, float* dst);

}  // namespace glia::cpu::simd
