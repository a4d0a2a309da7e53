// AVX-512 (F/BW/VL/VNNI) row dot products and activation quantizers.
//
// Decode (one token) is memory-bound: a Q4_K row of 2048 weights is 1152 bytes and the
// core must consume ~20 GB/s of it, about 25 cycles per 256-weight super-block. Each
// kernel therefore loads every weight byte once, widens nibbles in registers, and lets
// VPDPBUSD (u8 x s8 -> s32, 64 products per instruction) do the multiply-adds; the
// per-sub-block integer scales are applied with one VPMULLD per 64 weights, and float
// work happens once per block. Weights are the unsigned operand: K-quant values are
// stored unsigned (offsets and mins are folded in through the activation block sums).
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

namespace glia::cpu::simd::avx512 {

using quant::BlockQ4_0;
using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;
using quant::BlockQ8_K;
using quant::kQK;
using quant::kQK_K;

namespace {

GLIA_TARGET_AVX512 inline float h2f(uint16_t h) { return _cvtsh_ss(h); }


// Software prefetch of the weight stream, kPrefetch bytes ahead of the block being read
// (the rows of a thread's range are contiguous, so this runs into the next rows).
constexpr int kPrefetch = 2048;
inline void prefetch_ahead(const void* p, size_t bytes) {
    const char* c = static_cast<const char*>(p) + kPrefetch;
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o, 0, 3);
}

inline int64_t load_u64(const void* p) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// Byte-shuffle control that turns the 8 scale bytes (repeated in every 128-bit lane) into
// int16 lanes: sc[2j] in the low 256 bits, sc[2j+1] in the high 256 bits.
GLIA_TARGET_AVX512 inline __m512i k4_scale_shuffle(int j) {
    const __m256i lo = _mm256_set1_epi16(int16_t(0x8000 | (2 * j)));
    const __m256i hi = _mm256_set1_epi16(int16_t(0x8000 | (2 * j + 1)));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// The min term of a Q4_K/Q5_K block: sum_j m[j] * (bsums[2j] + bsums[2j+1]), as 8 lanes.
GLIA_TARGET_AVX512 inline __m256i k4_min_term(const uint8_t m[8], const int16_t* bsums) {
    const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m)));
    const __m256i mm = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
    return _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums)), mm);
}

GLIA_TARGET_AVX512 inline __m512 ld_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Two 32-byte rows as one vector.
GLIA_TARGET_AVX512 inline __m512i ld2(const void* p0, const void* p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(p0))),
                              _mm256_loadu_si256(static_cast<const __m256i*>(p1)), 1);
}

// [lo nibbles | hi nibbles] of 16 bytes, as 32 bytes (not yet masked).
GLIA_TARGET_AVX512 inline __m256i nib(const uint8_t* q) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    return _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
}

GLIA_TARGET_AVX512 inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

}  // namespace

// ---------------------------------------------------------------- float types

GLIA_TARGET_AVX512 void vec_dot_f32(int64_t n, float* s, const void* w, const void* a) {
    const float* x = static_cast<const float*>(w);
    const float* y = static_cast<const float*>(a);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; ++k)
            acc[k] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16 * k), _mm512_loadu_ps(y + i + 16 * k), acc[k]);
    for (; i + 16 <= n; i += 16) acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), acc[0]);
    if (i < n) {
        const __mmask16 k = static_cast<__mmask16>((1u << (n - i)) - 1);
        acc[1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, y + i), acc[1]);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

GLIA_TARGET_AVX512 void vec_dot_f16(int64_t n, float* s, const void* w, const void* a) {
    const uint16_t* x = static_cast<const uint16_t*>(w);
    const uint16_t* y = static_cast<const uint16_t*>(a);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; ++k) acc[k] = _mm512_fmadd_ps(ld_f16(x + i + 16 * k), ld_f16(y + i + 16 * k), acc[k]);
    for (; i + 16 <= n; i += 16) acc[0] = _mm512_fmadd_ps(ld_f16(x + i), ld_f16(y + i), acc[0]);
    float tail = 0;
    for (; i < n; ++i) tail += f16_to_f32(x[i]) * f16_to_f32(y[i]);
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]))) + tail;
}

// ---------------------------------------------------------------- Q8_0 / Q4_0

// Two 32-weight blocks per 512-bit vector. Q8_0 weights are signed: their magnitudes
// become the unsigned operand and their signs move onto the activations.
GLIA_TARGET_AVX512 void vec_dot_q8_0(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ8_0* x = static_cast<const BlockQ8_0*>(w);
    const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
    const int64_t nb = n / kQK;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i wq = ld2(x[i].qs, x[i + 1].qs);
        const __m512i aq = ld2(y[i].qs, y[i + 1].qs);
        const __m512i sa = _mm512_mask_sub_epi8(aq, _mm512_movepi8_mask(wq), _mm512_setzero_si512(), aq);
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(wq), sa);
        const float d0 = h2f(x[i].d) * h2f(y[i].d), d1 = h2f(x[i + 1].d) * h2f(y[i + 1].d);
        const __m512 dv = _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
        if (i & 2) acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), dv, acc1);
        else acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), dv, acc0);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    for (; i < nb; ++i) {
        int si = 0;
        for (int j = 0; j < kQK; ++j) si += x[i].qs[j] * y[i].qs[j];
        sum += float(si) * (h2f(x[i].d) * h2f(y[i].d));
    }
    *s = sum;
}

// Q4_0: nibbles 0..15 are the unsigned operand; the -8 offset is 8 * sum(a), which one
// more VPDPBUSD with a vector of 8s computes.
GLIA_TARGET_AVX512 void vec_dot_q4_0(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ4_0* x = static_cast<const BlockQ4_0*>(w);
    const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
    const int64_t nb = n / kQK;
    const __m512i m4 = _mm512_set1_epi8(0x0F), eights = _mm512_set1_epi8(8);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        const __m512i wq = _mm512_and_si512(
            _mm512_inserti64x4(_mm512_castsi256_si512(nib(x[i].qs)), nib(x[i + 1].qs), 1), m4);
        const __m512i aq = ld2(y[i].qs, y[i + 1].qs);
        const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wq, aq),
                                           _mm512_dpbusd_epi32(_mm512_setzero_si512(), eights, aq));
        const float d0 = h2f(x[i].d) * h2f(y[i].d), d1 = h2f(x[i + 1].d) * h2f(y[i + 1].d);
        const __m512 dv = _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
        if (i & 2) acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), dv, acc1);
        else acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), dv, acc0);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    for (; i < nb; ++i) {
        int s0 = 0, s1 = 0;
        for (int j = 0; j < 16; ++j) {
            s0 += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j];
            s1 += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        }
        sum += float(s0 + s1) * h2f(x[i].d) * h2f(y[i].d);
    }
    *s = sum;
}

// ---------------------------------------------------------------- Q4_K / Q5_K

// One 32-byte chunk of a Q4_K block holds two sub-blocks (low and high nibbles) of 32
// weights; as [lo | hi] in one vector they line up with 64 consecutive activations.
// VPMADDUBSW (pairs to int16, at most 2 * 15 * 127) then VPMADDWD with the int16 scales
// of the two sub-blocks applies the scales for free; the scale vectors come from one
// byte shuffle of the 8 scales per chunk.
GLIA_TARGET_AVX512 void vec_dot_q4_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ4_K* x = static_cast<const BlockQ4_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    const int64_t nb = n / kQK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512i shuf[4];
    for (int j = 0; j < 4; ++j) shuf[j] = k4_scale_shuffle(j);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        prefetch_ahead(x + i, sizeof(BlockQ4_K));
        uint8_t sc[8], m[8];
        quant::unpack_k4_scales(x[i].scales, sc, m);
        const __m512i sc8 = _mm512_set1_epi64(load_u64(sc));
        __m512i isum = _mm512_setzero_si512();
        for (int j = 0; j < 4; ++j) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * j));
            const __m512i wq = _mm512_and_si512(
                _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1), m4);
            const __m512i p = _mm512_maddubs_epi16(wq, _mm512_loadu_si512(y[i].qs + 64 * j));
            isum = _mm512_add_epi32(isum, _mm512_madd_epi16(p, _mm512_shuffle_epi8(sc8, shuf[j])));
        }
        const float d = h2f(x[i].d) * y[i].d, dmin = h2f(x[i].dmin) * y[i].d;
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(k4_min_term(m, y[i].bsums)), _mm256_set1_ps(dmin), accm);
    }
    *s = _mm512_reduce_add_ps(acc) - hsum256(accm);
}

// Q5_K: as Q4_K plus a fifth bit per weight from qh (bit 2j of byte l for the low
// sub-block of chunk j, bit 2j+1 for the high one), added with a masked byte add.
GLIA_TARGET_AVX512 void vec_dot_q5_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ5_K* x = static_cast<const BlockQ5_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    const int64_t nb = n / kQK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), b16 = _mm512_set1_epi8(16);
    __m512i shuf[4];
    for (int j = 0; j < 4; ++j) shuf[j] = k4_scale_shuffle(j);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        uint8_t sc[8], m[8];
        quant::unpack_k4_scales(x[i].scales, sc, m);
        const __m512i sc8 = _mm512_set1_epi64(load_u64(sc));
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh)));
        __m512i isum = _mm512_setzero_si512();
        for (int j = 0; j < 4; ++j) {
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs + 32 * j));
            __m512i wq = _mm512_and_si512(
                _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1), m4);
            const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(char(1 << (2 * j))),
                                                   _mm256_set1_epi8(char(1 << (2 * j + 1))), 1);
            wq = _mm512_mask_add_epi8(wq, _mm512_test_epi8_mask(qh, bit), wq, b16);
            const __m512i p = _mm512_maddubs_epi16(wq, _mm512_loadu_si512(y[i].qs + 64 * j));
            isum = _mm512_add_epi32(isum, _mm512_madd_epi16(p, _mm512_shuffle_epi8(sc8, shuf[j])));
        }
        const float d = h2f(x[i].d) * y[i].d, dmin = h2f(x[i].dmin) * y[i].d;
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(k4_min_term(m, y[i].bsums)), _mm256_set1_ps(dmin), accm);
    }
    *s = _mm512_reduce_add_ps(acc) - hsum256(accm);
}

// ---------------------------------------------------------------- Q6_K

// Per 128-weight half: ql (64 bytes) low nibbles are weights 0..63, high nibbles 64..127;
// qh (32 bytes) holds their top two bits at shifts 0,2 (first 64) and 4,6 (last 64).
// Weights are used unsigned (0..63); the -32 offset is 32 * sum(scale * bsum).
GLIA_TARGET_AVX512 void vec_dot_q6_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ6_K* x = static_cast<const BlockQ6_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    const int64_t nb = n / kQK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(0x30);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales));
        const __m512i sc32 = _mm512_cvtepi8_epi32(sc8);
        __m512i isum = _mm512_setzero_si512();
        for (int c = 0; c < 2; ++c) {
            const __m512i ql = _mm512_loadu_si512(x[i].ql + 64 * c);
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh + 32 * c));
            // bits 4,5 of each byte: top bits of weights 0..31 | 32..63, then 64..95 | 96..127
            const __m512i h01 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_slli_epi16(qh, 4)),
                                                   _mm256_slli_epi16(qh, 2), 1);
            const __m512i h23 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            const __m512i w0 = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4), h01, m3, 0xF8);
            const __m512i w1 =
                _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), h23, m3, 0xF8);
            const __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w0, _mm512_loadu_si512(y[i].qs + 128 * c));
            const __m512i p1 =
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), w1, _mm512_loadu_si512(y[i].qs + 128 * c + 64));
            // lanes 4g..4g+3 of p belong to sub-block (16 weights) 8c + 4h + g
            const __m512i i0 = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
            const __m512i s0 = _mm512_permutexvar_epi32(_mm512_add_epi32(i0, _mm512_set1_epi32(8 * c)), sc32);
            const __m512i s1 = _mm512_permutexvar_epi32(_mm512_add_epi32(i0, _mm512_set1_epi32(8 * c + 4)), sc32);
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p0, s0));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p1, s1));
        }
        // offset: 32 * sum_j sc[j] * bsums[j]
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        const __m256i off = _mm256_madd_epi16(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].bsums)), sc16);
        isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(_mm256_slli_epi32(off, 5)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(h2f(x[i].d) * y[i].d), acc);
    }
    *s = _mm512_reduce_add_ps(acc);
}

// ---------------------------------------------------------------- activation quantizers

namespace {
constexpr int kNonFinite = 0x01 | 0x08 | 0x10 | 0x80;  // VFPCLASSPS: QNaN, +inf, -inf, SNaN
}  // namespace

// Bit-identical to quant::quantize_act for Q8_0: d = amax/127, q = rint(x * (127/amax)).
GLIA_TARGET_AVX512 void quantize_act_q8_0(const float* x, void* dst, int64_t n) {
    BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
        const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        if (_mm512_fpclass_ps_mask(v0, kNonFinite) | _mm512_fpclass_ps_mask(v1, kNonFinite)) {
            y[i].d = quant::kF16QuietNaN;  // the invalid block (quant/blocks.h)
            std::memset(y[i].qs, 0, sizeof y[i].qs);
            continue;
        }
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1)));
        const float d = amax / 127.f;
        const float id = amax != 0 ? 127.f / amax : 0.0f;
        y[i].d = f32_to_f16(d);
        const __m512 idv = _mm512_set1_ps(id);
        // Truncating narrowing: a non-finite product (amax below ~3.7e-37) converts to
        // INT_MIN, whose low byte is the scalar code's 0.
        const __m128i q0 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, idv)));
        const __m128i q1 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, idv)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs), q0);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + 16), q1);
    }
}

// Bit-identical to quant::quantize_act for Q8_K: the scale comes from the first element
// of largest magnitude (with its sign), q = min(127, rint(x * (-127/max))).
GLIA_TARGET_AVX512 void quantize_act_q8_k(const float* x, void* dst, int64_t n) {
    BlockQ8_K* y = static_cast<BlockQ8_K*>(dst);
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        __m512 mx = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (int j = 0; j < kQK_K; j += 16) {
            const __m512 v = _mm512_loadu_ps(x + j);
            bad |= _mm512_fpclass_ps_mask(v, kNonFinite);
            mx = _mm512_max_ps(mx, _mm512_andnot_ps(sign, v));
        }
        if (bad) {  // the invalid block (quant/blocks.h)
            std::memset(&y[i], 0, sizeof(BlockQ8_K));
            y[i].d = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        const float amax = _mm512_reduce_max_ps(mx);
        if (amax == 0) {
            std::memset(&y[i], 0, sizeof(BlockQ8_K));
            continue;
        }
        float max = 0;
        const __m512 av = _mm512_set1_ps(amax);
        for (int j = 0; j < kQK_K; j += 16) {
            const __mmask16 k = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + j)), av, _CMP_EQ_OQ);
            if (k) { max = x[j + __builtin_ctz(k)]; break; }
        }
        const float iscale = -127.f / max;
        const __m512 isv = _mm512_set1_ps(iscale);
        const __m512i hi = _mm512_set1_epi32(127);
        for (int j = 0; j < kQK_K; j += 16) {
            __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(isv, _mm512_loadu_ps(x + j))), hi);
            q = _mm512_srai_epi32(_mm512_slli_epi32(q, 24), 24);  // the int8_t cast of the scalar code
            _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + j), _mm512_cvtepi32_epi8(q));
            y[i].bsums[j / 16] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
        }
        y[i].d = 1 / iscale;
    }
}

}  // namespace glia::cpu::simd::avx512

#endif  // GLIA_SIMD_X86
