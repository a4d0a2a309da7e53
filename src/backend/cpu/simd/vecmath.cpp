// Element-wise math kernels: the scalar reference and the AVX-512 level (vecmath.h).
#include "backend/cpu/simd/vecmath.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/simd/avx512_math.h"
#include "backend/cpu/simd/internal.h"
#include "core/f16.h"

#ifdef GLIA_SIMD_X86
#include <immintrin.h>
#endif

namespace glia::cpu::simd {
namespace {

double sum_sq_scalar(const float* x, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
    return s;
}

void scale_mul_scalar(const float* x, float s, const float* w, float* y, int64_t n) {
    if (w)
        for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * s) * w[i];
    else
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

void silu_mul_scalar(const float* g, const float* u, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void to_f16_scalar(const float* x, uint16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = f32_to_f16(x[i]);
}

void round_f16_scalar(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = round_f16(x[i]);
}

#ifdef GLIA_SIMD_X86
using avx512::exp_ps;
using avx512::round_f16_ps;

GLIA_TARGET_AVX512 double sum_sq_avx512(const float* x, int64_t n) {
    // Four f32 accumulators per 64 values, summed in double per 1024 values: the error
    // stays far below what the norm's consumers can see.
    double total = 0.0;
    int64_t i = 0;
    while (i + 16 <= n) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const int64_t end = std::min(n, i + 1024);
        for (; i + 64 <= end; i += 64) {
            const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
            const __m512 v2 = _mm512_loadu_ps(x + i + 32), v3 = _mm512_loadu_ps(x + i + 48);
            a0 = _mm512_fmadd_ps(v0, v0, a0);
            a1 = _mm512_fmadd_ps(v1, v1, a1);
            a2 = _mm512_fmadd_ps(v2, v2, a2);
            a3 = _mm512_fmadd_ps(v3, v3, a3);
        }
        for (; i + 16 <= end; i += 16) {
            const __m512 v = _mm512_loadu_ps(x + i);
            a0 = _mm512_fmadd_ps(v, v, a0);
        }
        const __m512 s = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
        const __m256 lo = _mm512_castps512_ps256(s);
        const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1));
        const __m512d d = _mm512_add_pd(_mm512_cvtps_pd(lo), _mm512_cvtps_pd(hi));
        total += _mm512_reduce_add_pd(d);
    }
    for (; i < n; ++i) total += double(x[i]) * double(x[i]);
    return total;
}

GLIA_TARGET_AVX512 void scale_mul_avx512(const float* x, float s, const float* w, float* y, int64_t n) {
    const __m512 vs = _mm512_set1_ps(s);
    int64_t i = 0;
    if (w)
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs), _mm512_loadu_ps(w + i)));
    else
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
    scale_mul_scalar(x + i, s, w ? w + i : nullptr, y + i, n - i);
}

GLIA_TARGET_AVX512 void silu_mul_avx512(const float* g, const float* u, float* y, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 gv = _mm512_loadu_ps(g + i);
        const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), gv));
        _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, e)), _mm512_loadu_ps(u + i)));
    }
    silu_mul_scalar(g + i, u + i, y + i, n - i);
}

GLIA_TARGET_AVX512 void to_f16_avx512(const float* x, uint16_t* y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    to_f16_scalar(x + i, y + i, n - i);
}

GLIA_TARGET_AVX512 void round_f16_avx512(const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, round_f16_ps(_mm512_loadu_ps(x + i)));
    round_f16_scalar(x + i, y + i, n - i);
}
#endif

}  // namespace

const VecMath& vec_math(Isa isa) {
    static const VecMath scalar{sum_sq_scalar, scale_mul_scalar, silu_mul_scalar, to_f16_scalar, round_f16_scalar};
#ifdef GLIA_SIMD_X86
    static const VecMath avx512{sum_sq_avx512, scale_mul_avx512, silu_mul_avx512, to_f16_avx512, round_f16_avx512};
    if (isa == Isa::Avx512 && isa_supported(Isa::Avx512)) return avx512;
#endif
    (void)isa;
    return scalar;
}

}  // namespace glia::cpu::simd
