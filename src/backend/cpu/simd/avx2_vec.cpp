// AVX2 (+FMA, F16C) row dot products and activation quantizers: the portable x86 level
// for CPUs without AVX-512. Products of unsigned weights and signed activations go
// through VPMADDUBSW (pairs to int16; K-quant values are small enough never to
// saturate) and VPMADDWD, which also applies the per-sub-block integer scale.
#include "backend/cpu/simd/internal.h"

#ifdef GLIA_SIMD_X86
#include <immintrin.h>

// GCC 12 warns about its own _mm512_undefined_* in conversions, and about the vector ABI
// of target-attributed helpers; both are harmless here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"

#include <cstring>
#include <limits>

#include "core/f16.h"
#include "quant/blocks.h"

namespace glia::cpu::simd::avx2 {

using quant::BlockQ4_0;
using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;
using quant::BlockQ8_K;
using quant::kQK;
using quant::kQK_K;

namespace {

GLIA_TARGET_AVX2 inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

GLIA_TARGET_AVX2 inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

GLIA_TARGET_AVX2 inline int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

GLIA_TARGET_AVX2 inline float hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

GLIA_TARGET_AVX2 inline __m256 ld_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

GLIA_TARGET_AVX2 inline __m256i loadu(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }


GLIA_TARGET_AVX2 inline __m256i k4_min_term(const uint8_t m[8], const int16_t* bsums) {
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m)));
    const __m256i mm = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
    return _mm256_madd_epi16(loadu(bsums), mm);
}

// 8 float sums of a 32-value 8-bit product, for the ymm-per-block kernels.
GLIA_TARGET_AVX2 inline __m256i dot_u8s8(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

}  // namespace

// ---------------------------------------------------------------- float types

GLIA_TARGET_AVX2 void vec_dot_f32(int64_t n, float* s, const void* w, const void* a) {
    const float* x = static_cast<const float*>(w);
    const float* y = static_cast<const float*>(a);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; ++k)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * k), _mm256_loadu_ps(y + i + 8 * k), acc[k]);
    float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; ++i) sum += x[i] * y[i];
    *s = sum;
}

GLIA_TARGET_AVX2 void vec_dot_f16(int64_t n, float* s, const void* w, const void* a) {
    const uint16_t* x = static_cast<const uint16_t*>(w);
    const uint16_t* y = static_cast<const uint16_t*>(a);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; ++k) acc[k] = _mm256_fmadd_ps(ld_f16(x + i + 8 * k), ld_f16(y + i + 8 * k), acc[k]);
    float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; ++i) sum += f16_to_f32(x[i]) * f16_to_f32(y[i]);
    *s = sum;
}

// ---------------------------------------------------------------- Q8_0 / Q4_0

GLIA_TARGET_AVX2 void vec_dot_q8_0(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ8_0* x = static_cast<const BlockQ8_0*>(w);
    const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const int64_t nb = n / kQK;
    for (int64_t i = 0; i < nb; ++i) {
        const __m256i wq = loadu(x[i].qs), aq = loadu(y[i].qs);
        const __m256i p = dot_u8s8(_mm256_abs_epi8(wq), _mm256_sign_epi8(aq, wq));
        const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
        if (i & 1) acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), d, acc1);
        else acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), d, acc0);
    }
    *s = hsum(_mm256_add_ps(acc0, acc1));
}

GLIA_TARGET_AVX2 void vec_dot_q4_0(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ4_0* x = static_cast<const BlockQ4_0*>(w);
    const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
    const __m256i m4 = _mm256_set1_epi8(0x0F), eight = _mm256_set1_epi8(8);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const int64_t nb = n / kQK;
    for (int64_t i = 0; i < nb; ++i) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].qs));
        const __m256i q = _mm256_sub_epi8(_mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), m4), eight);
        const __m256i p = dot_u8s8(_mm256_abs_epi8(q), _mm256_sign_epi8(loadu(y[i].qs), q));
        const __m256 d = _mm256_set1_ps(h2f(x[i].d) * h2f(y[i].d));
        if (i & 1) acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), d, acc1);
        else acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), d, acc0);
    }
    *s = hsum(_mm256_add_ps(acc0, acc1));
}

// ---------------------------------------------------------------- Q4_K / Q5_K / Q6_K

GLIA_TARGET_AVX2 void vec_dot_q4_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ4_K* x = static_cast<const BlockQ4_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        uint8_t sc[8], m[8];
        quant::unpack_k4_scales(x[i].scales, sc, m);
        __m256i isum = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
            const __m256i q = loadu(x[i].qs + 32 * j);
            const __m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(q, m4), loadu(y[i].qs + 64 * j));
            const __m256i hi =
                _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), loadu(y[i].qs + 64 * j + 32));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(lo, _mm256_set1_epi16(sc[2 * j])));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(hi, _mm256_set1_epi16(sc[2 * j + 1])));
        }
        const float d = h2f(x[i].d) * y[i].d, dmin = h2f(x[i].dmin) * y[i].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d), acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(k4_min_term(m, y[i].bsums)), _mm256_set1_ps(dmin), accm);
    }
    *s = hsum(acc) - hsum(accm);
}

GLIA_TARGET_AVX2 void vec_dot_q5_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ5_K* x = static_cast<const BlockQ5_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        uint8_t sc[8], m[8];
        quant::unpack_k4_scales(x[i].scales, sc, m);
        const __m256i qh = loadu(x[i].qh);
        __m256i isum = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
            const __m256i q = loadu(x[i].qs + 32 * j);
            const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4);
            const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4);
            const __m256i lo = _mm256_maddubs_epi16(_mm256_or_si256(_mm256_and_si256(q, m4), h0),
                                                    loadu(y[i].qs + 64 * j));
            const __m256i hi = _mm256_maddubs_epi16(
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1), loadu(y[i].qs + 64 * j + 32));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(lo, _mm256_set1_epi16(sc[2 * j])));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(hi, _mm256_set1_epi16(sc[2 * j + 1])));
        }
        const float d = h2f(x[i].d) * y[i].d, dmin = h2f(x[i].dmin) * y[i].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d), acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(k4_min_term(m, y[i].bsums)), _mm256_set1_ps(dmin), accm);
    }
    *s = hsum(acc) - hsum(accm);
}

GLIA_TARGET_AVX2 void vec_dot_q6_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ6_K* x = static_cast<const BlockQ6_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const int8_t* sc = x[i].scales;
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 2; ++c) {
            const __m256i ql0 = loadu(x[i].ql + 64 * c), ql1 = loadu(x[i].ql + 64 * c + 32);
            const __m256i qh = loadu(x[i].qh + 32 * c);
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m3)),
                _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m3)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m3)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi16(qh, 2), m3)),
            };
            for (int k = 0; k < 4; ++k) {
                const __m256i p = _mm256_maddubs_epi16(q[k], loadu(y[i].qs + 128 * c + 32 * k));
                const int j = 8 * c + 2 * k;
                const __m256i s16 = _mm256_set_m128i(_mm_set1_epi16(sc[j + 1]), _mm_set1_epi16(sc[j]));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, s16));
            }
        }
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
        const __m256i off = _mm256_madd_epi16(loadu(y[i].bsums), sc16);
        isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(off, 5));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(x[i].d) * y[i].d), acc);
    }
    *s = hsum(acc);
}

// ---------------------------------------------------------------- activation quantizers

namespace {
// The int8_t cast of the scalar code: keeps the low byte (differs from saturation only
// for the INT_MIN that inf/NaN inputs convert to).
GLIA_TARGET_AVX2 inline __m256i low_byte(__m256i q) { return _mm256_srai_epi32(_mm256_slli_epi32(q, 24), 24); }

// 32 int32 in [-128, 127] (four vectors) -> 32 int8 in order.
// Lanes holding a NaN or an infinity, as a movemask.
GLIA_TARGET_AVX2 inline int non_finite(__m256 v) {
    const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
    return _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _CMP_NLT_UQ));
}

GLIA_TARGET_AVX2 inline __m256i pack_i32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i x = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
}  // namespace

GLIA_TARGET_AVX2 void quantize_act_q8_0(const float* x, void* dst, int64_t n) {
    BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        __m256 v[4], mx = _mm256_setzero_ps();
        int bad = 0;
        for (int k = 0; k < 4; ++k) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            bad |= non_finite(v[k]);
            mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v[k]));
        }
        if (bad) {  // the invalid block (quant/blocks.h)
            y[i].d = quant::kF16QuietNaN;
            std::memset(y[i].qs, 0, sizeof y[i].qs);
            continue;
        }
        const float amax = hmax(mx);
        const float d = amax / 127.f;
        const float id = amax != 0 ? 127.f / amax : 0.0f;
        y[i].d = f32_to_f16(d);
        const __m256 idv = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; ++k) q[k] = low_byte(_mm256_cvtps_epi32(_mm256_mul_ps(v[k], idv)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs), pack_i32_to_i8(q[0], q[1], q[2], q[3]));
    }
}

GLIA_TARGET_AVX2 void quantize_act_q8_k(const float* x, void* dst, int64_t n) {
    BlockQ8_K* y = static_cast<BlockQ8_K*>(dst);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        __m256 mx = _mm256_setzero_ps();
        int bad = 0;
        for (int j = 0; j < kQK_K; j += 8) {
            const __m256 v = _mm256_loadu_ps(x + j);
            bad |= non_finite(v);
            mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, v));
        }
        if (bad) {  // the invalid block (quant/blocks.h)
            std::memset(&y[i], 0, sizeof(BlockQ8_K));
            y[i].d = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        const float amax = hmax(mx);
        if (amax == 0) {
            std::memset(&y[i], 0, sizeof(BlockQ8_K));
            continue;
        }
        float max = 0;
        const __m256 av = _mm256_set1_ps(amax);
        for (int j = 0; j < kQK_K; j += 8) {
            const int k = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), av, _CMP_EQ_OQ));
            if (k) { max = x[j + __builtin_ctz(unsigned(k))]; break; }
        }
        const float iscale = -127.f / max;
        const __m256 isv = _mm256_set1_ps(iscale);
        const __m256i hi = _mm256_set1_epi32(127);
        for (int j = 0; j < kQK_K; j += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; ++k)
                q[k] = low_byte(_mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(isv, _mm256_loadu_ps(x + j + 8 * k))), hi));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[i].qs + j), pack_i32_to_i8(q[0], q[1], q[2], q[3]));
            y[i].bsums[j / 16] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
            y[i].bsums[j / 16 + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
        }
        y[i].d = 1 / iscale;
    }
}

}  // namespace glia::cpu::simd::avx2

#endif  // GLIA_SIMD_X86
