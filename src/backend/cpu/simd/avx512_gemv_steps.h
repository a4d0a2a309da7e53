// The float steps of the few-token AVX-512 products (avx512_gemv.cpp on the file layout,
// avx512_gemv_il.cpp on the interleaved decode layout), shared so that both give the packed
// GEMM's bits by construction: one vector lane a weight row, the integer sums of a block
// already in the lanes. Internal to src/backend/cpu/simd; include after <immintrin.h>.
#pragma once
#include "backend/cpu/simd/internal.h"

#ifdef GLIA_SIMD_X86
#include <immintrin.h>

#include "quant/blocks.h"

namespace glia::cpu::simd::avx512::gemv_steps {

constexpr int kLanes = 16;

// f16 halves of 32-bit lanes to float.
GLIA_TARGET_AVX512 inline __m512 low_f16(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)); }
GLIA_TARGET_AVX512 inline __m512 high_f16(__m512i v) {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
}

// The slice bookkeeping shared by every kernel: each slice's sum starts from zero and is
// added onto the earlier slices as the GEMM's store does (acc + out).
struct SliceSum {
    __m512 total, acc;
    bool first = true;
    GLIA_TARGET_AVX512 SliceSum() : total(_mm512_setzero_ps()), acc(_mm512_setzero_ps()) {}
    GLIA_TARGET_AVX512 void close() {
        total = first ? acc : _mm512_add_ps(acc, total);
        first = false;
        acc = _mm512_setzero_ps();
    }
};

GLIA_TARGET_AVX512 inline void store_rows(float* out, int rows, __m512 v) {
    _mm512_mask_storeu_ps(out, rows >= kLanes ? __mmask16(0xFFFF) : __mmask16((1u << rows) - 1), v);
}

// The float steps of one K-quant super-block, as ktile's: t = fnmadd(msum, dmin, isum * d),
// acc = fma(t, d_act, acc). `sc`: each row's d (low half) and dmin (high half), f16.
GLIA_TARGET_AVX512 inline void kstep(__m512i isum, __m512i msum, __m512i sc, const quant::BlockQ8_K* y,
                                     __m512& acc) {
    const __m512 t = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), high_f16(sc),
                                      _mm512_mul_ps(_mm512_cvtepi32_ps(isum), low_f16(sc)));
    acc = _mm512_fmadd_ps(t, _mm512_set1_ps(y->d), acc);
}

}  // namespace glia::cpu::simd::avx512::gemv_steps

#endif  // GLIA_SIMD_X86
