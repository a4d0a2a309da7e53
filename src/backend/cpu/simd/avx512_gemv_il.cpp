// The K-quant decode layout (Q4_K, Q6_K): weights rearranged once (at first use) so that
// the few-token products serve 16 rows per instruction, with the packed GEMM's bits (see
// simd.h, Gemm::il_*).
//
// The file layout makes a one-token product compute-bound on AVX-512: each row's block is
// summed on its own (nibbles unpacked, sub-block scales applied per row), then 16 rows'
// sums transposed into lanes. Here a group of 16 rows is stored block by block with each
// 4-byte piece of every row side by side, so one 64-byte load is one 4-byte piece of 16
// rows, one lane a row, and one VPDPBUSD with a broadcast of 4 activation bytes advances
// all 16 rows; sub-block scales are applied once per sub-block for all 16 (VPMULLD). Per
// Q4_K super-block of a group (2304 bytes, exactly 16 x sizeof(BlockQ4_K)):
//   bytes    0..  63  each row's d and dmin (the block's first 4 bytes), lane r = row r
//   bytes   64.. 255  the 12 packed scale bytes, as three vectors of 4 bytes a row
//   bytes  256..2303  the 128 quant bytes, as 32 vectors: vector 8j + g holds quant bytes
//                     32j + 4g .. 32j + 4g + 3 of each row (low nibbles: values of
//                     sub-block 2j, high nibbles: sub-block 2j + 1)
// (Q6_K's below, before its kernel.)
// A last group of fewer than 16 rows is padded with zero rows.
//
// Per super-block and token the integer sums are the file-layout kernel's exact integers:
// isum = sum_s sc_s * dot_s (dot_s by VPDPBUSD on the nibbles; the high nibbles are used
// as 16 x value, their products' sum shifted back down exactly), msum = sum_s m_s *
// (bsums[2s] + bsums[2s+1]) by VPDPWSSD; then the same float steps (gemv_steps::kstep),
// block after block, slice after slice. Q6_K likewise with RowQ6K's integers.
#include "backend/cpu/simd/internal.h"

#ifdef GLIA_SIMD_X86
#include <immintrin.h>

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/simd/avx512_gemv_steps.h"
#include "quant/blocks.h"

namespace glia::cpu::simd::avx512 {

using quant::BlockQ4_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;
using quant::kQK_K;

namespace {

using gemv_steps::kLanes;
using gemv_steps::kstep;
using gemv_steps::SliceSum;
using gemv_steps::store_rows;

constexpr size_t kGroupBlock = kLanes * sizeof(BlockQ4_K);  // 2304
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block: d, dmin, 12 scale bytes, 128 quant bytes");
constexpr size_t kScaleOff = 64, kQuantOff = 256;
static_assert(kGroupBlock == il_layout::kQ4Block && kScaleOff == il_layout::kQ4Scales &&
              kQuantOff == il_layout::kQ4Quants, "the layout as the GEMM's packers read it");

// Per-dword byte shuffles (the same in every 128-bit lane): byte s of each dword to the
// dword's low byte (bytes s = 0..3), and bytes (0, 1) / (2, 3) to its two int16 halves.
// Q6_K (signed scales): byte s of each dword to its top byte (then an arithmetic shift
// sign-extends it), and bytes (0, 1) / (2, 3) to the top bytes of its int16 halves.
struct IlConsts {
    __m512i byte[4], w01, w23, top[4], sw01, sw23;
    GLIA_TARGET_AVX512 IlConsts() {
        alignas(64) int8_t c[12][64];
        const int8_t z = int8_t(0x80);
        for (int e = 0; e < 64; ++e) {
            const int d = (e % 16) / 4 * 4, b = e % 4;
            for (int s = 0; s < 4; ++s) c[s][e] = b == 0 ? int8_t(d + s) : z;
            c[4][e] = b == 0 ? int8_t(d) : b == 2 ? int8_t(d + 1) : z;
            c[5][e] = b == 0 ? int8_t(d + 2) : b == 2 ? int8_t(d + 3) : z;
            for (int s = 0; s < 4; ++s) c[6 + s][e] = b == 3 ? int8_t(d + s) : z;
            c[10][e] = b == 1 ? int8_t(d) : b == 3 ? int8_t(d + 1) : z;
            c[11][e] = b == 1 ? int8_t(d + 2) : b == 3 ? int8_t(d + 3) : z;
        }
        for (int s = 0; s < 4; ++s) byte[s] = _mm512_load_si512(c[s]);
        w01 = _mm512_load_si512(c[4]);
        w23 = _mm512_load_si512(c[5]);
        for (int s = 0; s < 4; ++s) top[s] = _mm512_load_si512(c[6 + s]);
        sw01 = _mm512_load_si512(c[10]);
        sw23 = _mm512_load_si512(c[11]);
    }
};

GLIA_TARGET_AVX512 inline __m512i bcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

// Software prefetch of the super-block two ahead (every line of it): a group is one
// contiguous stream, but left to the hardware prefetcher it read DRAM-cold at 20 GB/s on
// the 2-core EPYC (llama3-1b's Q4_K shapes, 2 threads); one block ahead 28, two 33-35,
// three 33-34, eight 29; every second line only 22-24 (bench/LOG.md, 2026-12-07).
constexpr size_t kPrefetchAhead = 2 * kGroupBlock;

// NT tokens (1..4) over every super-block of one group.
template <int NT>
GLIA_TARGET_AVX512 void il_tokens(const uint8_t* grp, int nr, int64_t nb, int64_t per_slice,
                                  const BlockQ8_K* const* y, float* out, size_t out_stride, const IlConsts& k) {
    const __m512i m0f = _mm512_set1_epi8(0x0F), m3f = _mm512_set1_epi8(0x3F), m30 = _mm512_set1_epi8(0x30);
    SliceSum s[NT];
    for (int64_t u = 0; u < nb; ++u) {
        const uint8_t* b = grp + size_t(u) * kGroupBlock;
        {
            const uintptr_t pf = reinterpret_cast<uintptr_t>(b) + kPrefetchAhead;  // may lie past the groups
            for (size_t o = 0; o < kGroupBlock; o += 64) __builtin_prefetch(reinterpret_cast<const void*>(pf + o), 0, 3);
        }
        const __m512i sc = _mm512_loadu_si512(b);
        const __m512i A = _mm512_loadu_si512(b + kScaleOff);
        const __m512i B = _mm512_loadu_si512(b + kScaleOff + 64);
        const __m512i C = _mm512_loadu_si512(b + kScaleOff + 128);
        // quant::unpack_k4_scales per lane: scales 0-3 and mins 0-3 are the low six bits
        // of bytes 0-3 / 4-7; scales 4-7 (mins 4-7) the low (high) nibbles of bytes 8-11
        // with the top two bits of bytes 0-3 (4-7) above them.
        const __m512i sc_lo = _mm512_and_si512(A, m3f);
        const __m512i sc_hi = _mm512_ternarylogic_epi32(_mm512_and_si512(C, m0f), _mm512_srli_epi32(A, 2), m30, 0xF8);
        const __m512i m_lo = _mm512_and_si512(B, m3f);
        const __m512i m_hi = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(C, 4), m0f),
                                                       _mm512_srli_epi32(B, 2), m30, 0xF8);
        const __m512i mw[4] = {_mm512_shuffle_epi8(m_lo, k.w01), _mm512_shuffle_epi8(m_lo, k.w23),
                               _mm512_shuffle_epi8(m_hi, k.w01), _mm512_shuffle_epi8(m_hi, k.w23)};
        __m512i lo_sum[NT], hi_sum[NT];  // isum over the low-nibble sub-blocks; 16 x the high ones'
        for (int c = 0; c < NT; ++c) lo_sum[c] = hi_sum[c] = _mm512_setzero_si512();
        for (int j = 0; j < 4; ++j) {
            const __m512i scv = j < 2 ? sc_lo : sc_hi;
            const __m512i s_lo = _mm512_shuffle_epi8(scv, k.byte[(2 * j) % 4]);
            const __m512i s_hi = _mm512_shuffle_epi8(scv, k.byte[(2 * j + 1) % 4]);
            __m512i lo[8], hi[8];
            for (int g = 0; g < 8; ++g) {
                const __m512i q = _mm512_loadu_si512(b + kQuantOff + 64 * (8 * j + g));
                lo[g] = _mm512_and_si512(q, m0f);
                hi[g] = _mm512_andnot_si512(m0f, q);  // 16 x the high nibble
            }
            for (int c = 0; c < NT; ++c) {
                const int8_t* a = y[c][u].qs + 64 * j;
                __m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();
                __m512i e0 = _mm512_setzero_si512(), e1 = _mm512_setzero_si512();
                for (int g = 0; g < 8; g += 2) {
                    d0 = _mm512_dpbusd_epi32(d0, lo[g], bcast4(a + 4 * g));
                    d1 = _mm512_dpbusd_epi32(d1, lo[g + 1], bcast4(a + 4 * g + 4));
                    e0 = _mm512_dpbusd_epi32(e0, hi[g], bcast4(a + 32 + 4 * g));
                    e1 = _mm512_dpbusd_epi32(e1, hi[g + 1], bcast4(a + 32 + 4 * g + 4));
                }
                lo_sum[c] = _mm512_add_epi32(lo_sum[c], _mm512_mullo_epi32(_mm512_add_epi32(d0, d1), s_lo));
                hi_sum[c] = _mm512_add_epi32(hi_sum[c], _mm512_mullo_epi32(_mm512_add_epi32(e0, e1), s_hi));
            }
        }
        for (int c = 0; c < NT; ++c) {
            const BlockQ8_K* yc = y[c] + u;
            const __m128i bs = _mm256_cvtepi32_epi16(
                _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(yc->bsums)), _mm256_set1_epi16(1)));
            __m512i msum = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mw[0], _mm512_broadcastd_epi32(bs));
            msum = _mm512_dpwssd_epi32(msum, mw[1], _mm512_broadcastd_epi32(_mm_shuffle_epi32(bs, 0x55)));
            msum = _mm512_dpwssd_epi32(msum, mw[2], _mm512_broadcastd_epi32(_mm_shuffle_epi32(bs, 0xAA)));
            msum = _mm512_dpwssd_epi32(msum, mw[3], _mm512_broadcastd_epi32(_mm_shuffle_epi32(bs, 0xFF)));
            const __m512i isum = _mm512_add_epi32(lo_sum[c], _mm512_srai_epi32(hi_sum[c], 4));
            if (u > 0 && u % per_slice == 0) s[c].close();
            kstep(isum, msum, sc, yc, s[c].acc);
        }
    }
    for (int c = 0; c < NT; ++c) {
        s[c].close();
        store_rows(out + size_t(c) * out_stride, nr, s[c].total);
    }
}


// ---------------------------------------------------------------- Q6_K
// Per super-block of a group (3360 bytes, 16 x sizeof(BlockQ6_K)):
//   bytes    0.. 255  the 16 int8 scales, as four vectors of 4 bytes a row
//   bytes  256..2303  ql, as 32 vectors: vector p holds ql bytes 4p .. 4p + 3 of each row
//   bytes 2304..3327  qh, as 16 vectors: vector p holds qh bytes 4p .. 4p + 3
//   bytes 3328..3359  each row's d (f16)
// Weights unsigned (0..63) as in RowQ6K: isum = sum_s sc_s * dot_s over the 16 sub-blocks
// of 16, msum = 32 * sum_s sc_s * bsums[s], dmin = d.
constexpr size_t kGroupBlock6 = kLanes * sizeof(BlockQ6_K);  // 3360
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block: ql, qh, 16 scales, d");
constexpr size_t kQl6 = 256, kQh6 = 2304, kD6 = 3328;
static_assert(kGroupBlock6 == il_layout::kQ6Block && kQl6 == il_layout::kQ6Ql && kQh6 == il_layout::kQ6Qh &&
              kD6 == il_layout::kQ6D, "the layout as the GEMM's packers read it");

template <int NT>
GLIA_TARGET_AVX512 void il6_tokens(const uint8_t* grp, int nr, int64_t nb, int64_t per_slice,
                                   const BlockQ8_K* const* y, float* out, size_t out_stride, const IlConsts& k) {
    const __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    SliceSum s[NT];
    for (int64_t u = 0; u < nb; ++u) {
        const uint8_t* b = grp + size_t(u) * kGroupBlock6;
        {
            const uintptr_t pf = reinterpret_cast<uintptr_t>(b) + 2 * kGroupBlock6;  // as kPrefetchAhead
            for (size_t o = 0; o < kGroupBlock6; o += 64)
                __builtin_prefetch(reinterpret_cast<const void*>(pf + o), 0, 3);
        }
        const __m512i d16 = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kD6)));
        const __m512i sc = _mm512_or_si512(d16, _mm512_slli_epi32(d16, 16));  // d and dmin = d
        __m512i scv[4];
        for (int v = 0; v < 4; ++v) scv[v] = _mm512_loadu_si512(b + 64 * v);
        __m512i isum[NT];
        for (int c = 0; c < NT; ++c) isum[c] = _mm512_setzero_si512();
        for (int h = 0; h < 2; ++h)
            for (int half4 = 0; half4 < 2; ++half4) {
                // Sub-blocks 8h + 2i + half4 (i = 0..3: values 128h + 32i + 16 half4 ..),
                // four 4-byte groups each: p = 4 half4 .. 4 half4 + 3.
                __m512i w[4][4];
                for (int pp = 0; pp < 4; ++pp) {
                    const int p = 4 * half4 + pp;
                    const __m512i qa = _mm512_loadu_si512(b + kQl6 + 64 * (16 * h + p));
                    const __m512i qb = _mm512_loadu_si512(b + kQl6 + 64 * (16 * h + 8 + p));
                    const __m512i qh = _mm512_loadu_si512(b + kQh6 + 64 * (8 * h + p));
                    w[0][pp] = _mm512_ternarylogic_epi32(_mm512_and_si512(qa, m0f), _mm512_slli_epi32(qh, 4), m30, 0xF8);
                    w[1][pp] = _mm512_ternarylogic_epi32(_mm512_and_si512(qb, m0f), _mm512_slli_epi32(qh, 2), m30, 0xF8);
                    w[2][pp] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(qa, 4), m0f), qh, m30, 0xF8);
                    w[3][pp] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(qb, 4), m0f),
                                                         _mm512_srli_epi32(qh, 2), m30, 0xF8);
                }
                __m512i scs[4];
                for (int i = 0; i < 4; ++i) {
                    const int sb = 8 * h + 2 * i + half4;
                    scs[i] = _mm512_srai_epi32(_mm512_shuffle_epi8(scv[sb / 4], k.top[sb % 4]), 24);
                }
                for (int c = 0; c < NT; ++c) {
                    const int8_t* a = y[c][u].qs + 128 * h + 16 * half4;
                    for (int i = 0; i < 4; ++i) {
                        __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[i][0], bcast4(a + 32 * i));
                        __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[i][1], bcast4(a + 32 * i + 4));
                        d0 = _mm512_dpbusd_epi32(d0, w[i][2], bcast4(a + 32 * i + 8));
                        d1 = _mm512_dpbusd_epi32(d1, w[i][3], bcast4(a + 32 * i + 12));
                        isum[c] = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(_mm512_add_epi32(d0, d1), scs[i]));
                    }
                }
            }
        __m512i sw[8];  // sign-extended scale pairs (sc_2q, sc_2q+1) as int16 halves
        for (int v = 0; v < 4; ++v) {
            sw[2 * v] = _mm512_srai_epi16(_mm512_shuffle_epi8(scv[v], k.sw01), 8);
            sw[2 * v + 1] = _mm512_srai_epi16(_mm512_shuffle_epi8(scv[v], k.sw23), 8);
        }
        for (int c = 0; c < NT; ++c) {
            const BlockQ8_K* yc = y[c] + u;
            __m512i msum = _mm512_setzero_si512();
            for (int q = 0; q < 8; ++q)
                msum = _mm512_dpwssd_epi32(msum, sw[q], bcast4(reinterpret_cast<const int8_t*>(yc->bsums + 2 * q)));
            if (u > 0 && u % per_slice == 0) s[c].close();
            kstep(isum[c], _mm512_slli_epi32(msum, 5), sc, yc, s[c].acc);
        }
    }
    for (int c = 0; c < NT; ++c) {
        s[c].close();
        store_rows(out + size_t(c) * out_stride, nr, s[c].total);
    }
}

// Token passes of up to 4: Tokens<NT>(...) for each.
template <template <int> class Tokens>
GLIA_TARGET_AVX512 void il_passes(const void* group, int nr, int64_t K, int64_t slice_k, const uint8_t* act,
                                  size_t act_stride, int nt, float* out, size_t out_stride) {
    static const IlConsts k;
    const uint8_t* grp = static_cast<const uint8_t*>(group);
    const int64_t nb = K / kQK_K, per_slice = std::max<int64_t>(1, slice_k / kQK_K);
    for (int c0 = 0; c0 < nt; c0 += 4) {
        const int ntc = std::min(4, nt - c0);
        const BlockQ8_K* y[4];
        for (int c = 0; c < ntc; ++c) y[c] = reinterpret_cast<const BlockQ8_K*>(act + size_t(c0 + c) * act_stride);
        float* o = out + size_t(c0) * out_stride;
        switch (ntc) {
            case 1: Tokens<1>::run(grp, nr, nb, per_slice, y, o, out_stride, k); break;
            case 2: Tokens<2>::run(grp, nr, nb, per_slice, y, o, out_stride, k); break;
            case 3: Tokens<3>::run(grp, nr, nb, per_slice, y, o, out_stride, k); break;
            default: Tokens<4>::run(grp, nr, nb, per_slice, y, o, out_stride, k); break;
        }
    }
}
template <int NT>
struct Q4Tokens {
    GLIA_TARGET_AVX512 static void run(const uint8_t* g, int nr, int64_t nb, int64_t ps, const BlockQ8_K* const* y,
                                       float* o, size_t os, const IlConsts& k) {
        il_tokens<NT>(g, nr, nb, ps, y, o, os, k);
    }
};
template <int NT>
struct Q6Tokens {
    GLIA_TARGET_AVX512 static void run(const uint8_t* g, int nr, int64_t nb, int64_t ps, const BlockQ8_K* const* y,
                                       float* o, size_t os, const IlConsts& k) {
        il6_tokens<NT>(g, nr, nb, ps, y, o, os, k);
    }
};

}  // namespace

size_t il_bytes_q4_k(int64_t K) { return size_t(K / kQK_K) * kGroupBlock; }

void il_pack_q4_k(const uint8_t* w, size_t row_stride, int nr, int64_t K, void* dst) {
    uint8_t* o = static_cast<uint8_t*>(dst);
    std::memset(o, 0, il_bytes_q4_k(K));
    const int64_t nb = K / kQK_K;
    for (int r = 0; r < nr; ++r)
        for (int64_t u = 0; u < nb; ++u) {
            const uint8_t* x = w + size_t(r) * row_stride + size_t(u) * sizeof(BlockQ4_K);
            uint8_t* b = o + size_t(u) * kGroupBlock;
            std::memcpy(b + 4 * r, x, 4);                                  // d, dmin
            for (int v = 0; v < 3; ++v) std::memcpy(b + kScaleOff + 64 * v + 4 * r, x + 4 + 4 * v, 4);  // scales
            for (int p = 0; p < 32; ++p) std::memcpy(b + kQuantOff + 64 * p + 4 * r, x + 16 + 4 * p, 4);  // quants
        }
}

void il_gemv_q4_k(const void* group, int nr, int64_t K, int64_t slice_k, const uint8_t* act, size_t act_stride,
                  int nt, float* out, size_t out_stride) {
    il_passes<Q4Tokens>(group, nr, K, slice_k, act, act_stride, nt, out, out_stride);
}

size_t il_bytes_q6_k(int64_t K) { return size_t(K / kQK_K) * kGroupBlock6; }

void il_pack_q6_k(const uint8_t* w, size_t row_stride, int nr, int64_t K, void* dst) {
    uint8_t* o = static_cast<uint8_t*>(dst);
    std::memset(o, 0, il_bytes_q6_k(K));
    const int64_t nb = K / kQK_K;
    for (int r = 0; r < nr; ++r)
        for (int64_t u = 0; u < nb; ++u) {
            const BlockQ6_K* x =
                reinterpret_cast<const BlockQ6_K*>(w + size_t(r) * row_stride + size_t(u) * sizeof(BlockQ6_K));
            uint8_t* b = o + size_t(u) * kGroupBlock6;
            for (int v = 0; v < 4; ++v) std::memcpy(b + 64 * v + 4 * r, x->scales + 4 * v, 4);
            for (int p = 0; p < 32; ++p) std::memcpy(b + kQl6 + 64 * p + 4 * r, x->ql + 4 * p, 4);
            for (int p = 0; p < 16; ++p) std::memcpy(b + kQh6 + 64 * p + 4 * r, x->qh + 4 * p, 4);
            std::memcpy(b + kD6 + 2 * r, &x->d, 2);
        }
}

void il_gemv_q6_k(const void* group, int nr, int64_t K, int64_t slice_k, const uint8_t* act, size_t act_stride,
                  int nt, float* out, size_t out_stride) {
    il_passes<Q6Tokens>(group, nr, K, slice_k, act, act_stride, nt, out, out_stride);
}

}  // namespace glia::cpu::simd::avx512

#endif  // GLIA_SIMD_X86
