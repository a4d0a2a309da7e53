// Attention kernels: the scalar reference and the AVX-512 level (see attention.h).
#include "backend/cpu/simd/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/simd/internal.h"
#include "core/f16.h"

#ifdef GLIA_SIMD_X86
#include <immintrin.h>
#endif

namespace glia::cpu::simd {
namespace {

// ---------------------------------------------------------------- scalar

void scores_scalar(int hd, int nq, const float* q, const uint16_t* const* k, size_t off, int n, float* s,
                   size_t s_stride) {
    for (int c = 0; c < n; ++c) {
        const uint16_t* kr = k[c] + off;
        for (int j = 0; j < nq; ++j) {
            const float* qj = q + static_cast<size_t>(j) * hd;
            float d = 0.0f;
            for (int i = 0; i < hd; ++i) d += qj[i] * f16_to_f32(kr[i]);
            s[j * s_stride + c] = d;
        }
    }
}

void softmax_scalar(float* s, int n, float scale, float cap) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int c = 0; c < n; ++c) {
        float d = s[c] * scale;
        if (cap > 0.0f) d = std::tanh(d * (1.0f / cap)) * cap;
        s[c] = d;
        mx = std::max(mx, d);
    }
    double sum = 0.0;
    for (int c = 0; c < n; ++c) {
        const float e = std::exp(s[c] - mx);
        s[c] = e;
        sum += e;
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int c = 0; c < n; ++c) s[c] = round_f16(s[c] * inv);
}

void weighted_sum_scalar(int hd, int nq, const float* p, size_t p_stride, const uint16_t* const* v, size_t off,
                         int n, float* acc) {
    std::fill(acc, acc + static_cast<size_t>(nq) * hd, 0.0f);
    for (int c = 0; c < n; ++c) {
        const uint16_t* vr = v[c] + off;
        for (int j = 0; j < nq; ++j) {
            const float pc = p[j * p_stride + c];
            if (pc == 0.0f) continue;
            float* a = acc + static_cast<size_t>(j) * hd;
            for (int i = 0; i < hd; ++i) a[i] += pc * f16_to_f32(vr[i]);
        }
    }
}

// ---------------------------------------------------------------- AVX-512

#ifdef GLIA_SIMD_X86
GLIA_TARGET_AVX512 inline __m512 load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

GLIA_TARGET_AVX512 inline __m512 round16(__m512 x) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// exp(x) for x <= 0 (arguments below -87 give 0): 2^n * e^r with |r| <= ln2/2 and a
// degree-6 Taylor polynomial for e^r (relative error ~1e-7).
GLIA_TARGET_AVX512 inline __m512 exp_neg(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

// Head sizes are multiples of 16 up to 256 here (others take the scalar path).
GLIA_TARGET_AVX512 void scores_avx512(int hd, int nq, const float* q, const uint16_t* const* k, size_t off, int n,
                                      float* s, size_t s_stride) {
    const int nv = hd / 16;
    for (int c = 0; c < n; ++c) {
        const uint16_t* kr = k[c] + off;
        __m512 kv[16];
        for (int v = 0; v < nv; ++v) kv[v] = load_f16(kr + 16 * v);
        for (int j = 0; j < nq; ++j) {
            const float* qj = q + static_cast<size_t>(j) * hd;
            __m512 a0 = _mm512_mul_ps(kv[0], _mm512_loadu_ps(qj));
            __m512 a1 = _mm512_setzero_ps();
            int v = 1;
            for (; v + 1 < nv; v += 2) {
                a1 = _mm512_fmadd_ps(kv[v], _mm512_loadu_ps(qj + 16 * v), a1);
                a0 = _mm512_fmadd_ps(kv[v + 1], _mm512_loadu_ps(qj + 16 * (v + 1)), a0);
            }
            if (v < nv) a1 = _mm512_fmadd_ps(kv[v], _mm512_loadu_ps(qj + 16 * v), a1);
            s[j * s_stride + c] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
        }
    }
}

GLIA_TARGET_AVX512 void softmax_avx512(float* s, int n, float scale, float cap) {
    if (cap > 0.0f) {
        for (int c = 0; c < n; ++c) s[c] = std::tanh(s[c] * scale * (1.0f / cap)) * cap;
        scale = 1.0f;
    }
    const __m512 vs = _mm512_set1_ps(scale);
    __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    int c = 0;
    for (; c + 16 <= n; c += 16) mx = _mm512_max_ps(mx, _mm512_mul_ps(_mm512_loadu_ps(s + c), vs));
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - c)) - 1);
    if (tail) mx = _mm512_mask_max_ps(mx, tail, mx, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, s + c), vs));
    const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (c = 0; c + 16 <= n; c += 16) {
        const __m512 e = exp_neg(_mm512_fmsub_ps(_mm512_loadu_ps(s + c), vs, m));
        _mm512_storeu_ps(s + c, e);
        sum = _mm512_add_ps(sum, e);
    }
    if (tail) {
        const __m512 e = exp_neg(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(tail, s + c), vs, m));
        _mm512_mask_storeu_ps(s + c, tail, e);
        sum = _mm512_mask_add_ps(sum, tail, sum, e);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (c = 0; c + 16 <= n; c += 16) _mm512_storeu_ps(s + c, round16(_mm512_mul_ps(_mm512_loadu_ps(s + c), inv)));
    if (tail) _mm512_mask_storeu_ps(s + c, tail, round16(_mm512_mul_ps(_mm512_maskz_loadu_ps(tail, s + c), inv)));
}

GLIA_TARGET_AVX512 void weighted_sum_avx512(int hd, int nq, const float* p, size_t p_stride,
                                            const uint16_t* const* v, size_t off, int n, float* acc) {
    // Eight vectors (128 values) of one query's output in registers at a time.
    for (int j = 0; j < nq; ++j) {
        const float* pj = p + j * p_stride;
        for (int i0 = 0; i0 < hd; i0 += 128) {
            const int nv = std::min(8, (hd - i0) / 16);
            __m512 a[8];
            for (int x = 0; x < 8; ++x) a[x] = _mm512_setzero_ps();
            for (int c = 0; c < n; ++c) {
                if (pj[c] == 0.0f) continue;
                const __m512 pc = _mm512_set1_ps(pj[c]);
                const uint16_t* vr = v[c] + off + i0;
                for (int x = 0; x < nv; ++x) a[x] = _mm512_fmadd_ps(pc, load_f16(vr + 16 * x), a[x]);
            }
            for (int x = 0; x < nv; ++x) _mm512_storeu_ps(acc + static_cast<size_t>(j) * hd + i0 + 16 * x, a[x]);
        }
    }
}

// Head sizes the AVX-512 kernels do not cover go to the scalar ones.
GLIA_TARGET_AVX512 void scores_dispatch(int hd, int nq, const float* q, const uint16_t* const* k, size_t off, int n,
                                        float* s, size_t s_stride) {
    if (hd % 16 || hd > 256) return scores_scalar(hd, nq, q, k, off, n, s, s_stride);
    scores_avx512(hd, nq, q, k, off, n, s, s_stride);
}
GLIA_TARGET_AVX512 void weighted_sum_dispatch(int hd, int nq, const float* p, size_t p_stride,
                                              const uint16_t* const* v, size_t off, int n, float* acc) {
    if (hd % 16) return weighted_sum_scalar(hd, nq, p, p_stride, v, off, n, acc);
    weighted_sum_avx512(hd, nq, p, p_stride, v, off, n, acc);
}
#endif

}  // namespace

const AttnKernels& attn_kernels(Isa isa) {
    static const AttnKernels scalar{scores_scalar, softmax_scalar, weighted_sum_scalar};
#ifdef GLIA_SIMD_X86
    static const AttnKernels avx512{scores_dispatch, softmax_avx512, weighted_sum_dispatch};
    if (isa == Isa::Avx512 && isa_supported(Isa::Avx512)) return avx512;
#endif
    (void)isa;
    return scalar;
}

}  // namespace glia::cpu::simd
