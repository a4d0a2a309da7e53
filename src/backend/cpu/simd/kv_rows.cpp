// Widening KV cache rows to f32 (see kv_rows.h): the scalar reference and AVX-512.
#include "backend/cpu/simd/kv_rows.h"

#include <cstring>

#include "backend/cpu/simd/internal.h"
#include "core/f16.h"

#ifdef GLIA_SIMD_X86
#include <immintrin.h>
#endif

namespace glia::cpu::simd {

namespace {

inline uint16_t load_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

}  // namespace

void kv_widen_scalar(KvType t, const uint8_t* row, size_t off, int n, float* dst) {
    switch (t) {
        case KvType::F16:
            for (int i = 0; i < n; ++i) dst[i] = f16_to_f32(load_u16(row + 2 * (off + i)));
            return;
        case KvType::BF16:
            for (int i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(row + 2 * (off + i)));
            return;
        case KvType::Q8_0:
            for (int i = 0; i < n; ++i) {
                const size_t x = off + i;
                const uint8_t* b = row + x / kKvBlock * kQ8_0Bytes;
                const int q = static_cast<int8_t>(b[2 + x % kKvBlock]);
                dst[i] = static_cast<float>(q) * f16_to_f32(load_u16(b));
            }
            return;
        case KvType::Q4_0:
            for (int i = 0; i < n; ++i) {
                const size_t x = off + i, j = x % kKvBlock;
                const uint8_t* b = row + x / kKvBlock * kQ4_0Bytes;
                const int q = j < 16 ? (b[2 + j] & 0x0F) : (b[2 + j - 16] >> 4);
                dst[i] = static_cast<float>(q - 8) * f16_to_f32(load_u16(b));
            }
            return;
    }
}

#ifdef GLIA_SIMD_X86
GLIA_TARGET_AVX512 void kv_widen_avx512(KvType t, const uint8_t* row, size_t off, int n, float* dst) {
    switch (t) {
        case KvType::F16:
            for (int i = 0; i < n; i += 16)
                _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(
                                              reinterpret_cast<const __m256i*>(row + 2 * (off + i)))));
            return;
        case KvType::BF16:
            for (int i = 0; i < n; i += 16) {
                const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * (off + i)));
                _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
            }
            return;
        case KvType::Q8_0:
            for (int i = 0; i < n; i += 16) {
                const size_t x = off + i;
                const uint8_t* b = row + x / kKvBlock * kQ8_0Bytes;
                const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + x % kKvBlock));
                const __m512 d = _mm512_set1_ps(f16_to_f32(load_u16(b)));
                _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d));
            }
            return;
        case KvType::Q4_0:
            for (int i = 0; i < n; i += 16) {
                const size_t x = off + i;
                const uint8_t* b = row + x / kKvBlock * kQ4_0Bytes;
                __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
                if (x % kKvBlock) q = _mm_srli_epi16(q, 4);  // the block's second half: high nibbles
                q = _mm_and_si128(q, _mm_set1_epi8(0x0F));
                const __m512i v = _mm512_sub_epi32(_mm512_cvtepu8_epi32(q), _mm512_set1_epi32(8));
                const __m512 d = _mm512_set1_ps(f16_to_f32(load_u16(b)));
                _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_cvtepi32_ps(v), d));
            }
            return;
    }
}
#endif

}  // namespace glia::cpu::simd
