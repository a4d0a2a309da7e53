// AVX-512 VNNI products of a few tokens that give the packed GEMM's bits (see simd.h,
// Gemm::gemv, and avx512_gemm.cpp).
//
// A batch must not change any sequence's logits, so the one-token path (decode) and the
// packed GEMM (prefill, batched decode) compute every output the same way: per block the
// same exact integer sums, then the same float steps in the same order, one vector lane a
// weight row. These kernels read the weights in their file layout (no packing: decode is
// memory-bound and a packed Q4_K panel is twice the bytes) and get each row's integer sums
// with the row kernels' instructions (VPMADDUBSW/VPMADDWD or VPDPBUSD, whose order does not
// matter: integer sums are exact). A 16-row transposing reduction then puts row r's sums in
// lane r, where the float steps are the GEMM micro-kernel's:
//  - K-quants: t = d * isum - dmin * msum (one rounding for the product, one fused
//    negative multiply-add), acc = fma(t, d_act, acc) per super-block;
//  - Q8_0 / Q4_0: acc = fma(dot, d_w * d_act, acc) per 32-block;
// and the K columns are cut into the same slices, each slice summed from zero and then
// added onto the previous slices (acc + out).
#include "backend/cpu/simd/internal.h"

#ifdef GLIA_SIMD_X86
#include <immintrin.h>

// GCC 12 warns about its own _mm512_undefined_* in casts and conversions, and about the
// vector ABI of target-attributed helpers; both are harmless here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "backend/cpu/simd/avx512_gemv_steps.h"
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

using gemv_steps::high_f16;
using gemv_steps::kLanes;
using gemv_steps::kstep;
using gemv_steps::low_f16;
using gemv_steps::SliceSum;
using gemv_steps::store_rows;

GLIA_TARGET_AVX512 inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// Byte-shuffle control: the 8 scale bytes (repeated in every 128-bit lane) to int16 lanes,
// sc[2j] in the low 256 bits and sc[2j+1] in the high 256 bits.
GLIA_TARGET_AVX512 inline __m512i k4_scale_shuffle(int j) {
    const __m256i lo = _mm256_set1_epi16(int16_t(0x8000 | (2 * j)));
    const __m256i hi = _mm256_set1_epi16(int16_t(0x8000 | (2 * j + 1)));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

GLIA_TARGET_AVX512 inline __m512i ld2(const void* p0, const void* p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(static_cast<const __m256i*>(p0))),
                              _mm256_loadu_si256(static_cast<const __m256i*>(p1)), 1);
}

GLIA_TARGET_AVX512 inline __m256i nib(const uint8_t* q) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    return _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
}

// Two int32 sums per row packed in one vector: lanes 0..7 are the parts of the first,
// lanes 8..15 the parts of the second.
GLIA_TARGET_AVX512 inline __m512i halves(__m256i first, __m256i second) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1);
}
GLIA_TARGET_AVX512 inline __m256i fold(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// The transposing reduction, in two stages. v[i] (i < 4) holds row i's two sums in parts
// (see halves); the result holds, per 128-bit lane L, rows 0..3's sums of their parts in
// lane L (lanes 0-1 belong to the first sum, lanes 2-3 to the second).
GLIA_TARGET_AVX512 inline __m512i reduce_quad(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
    // per 128-bit lane: [r0, r1, r0, r1] and [r2, r3, r2, r3], two parts summed
    const __m512i a0 = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
    const __m512i a1 = _mm512_add_epi32(_mm512_unpacklo_epi32(v2, v3), _mm512_unpackhi_epi32(v2, v3));
    // per 128-bit lane: [r0, r1, r2, r3], four parts summed
    return _mm512_add_epi32(_mm512_unpacklo_epi64(a0, a1), _mm512_unpackhi_epi64(a0, a1));
}
// Four quads (rows 0-3, 4-7, 8-11, 12-15) to lane r = row r's first / second sum.
GLIA_TARGET_AVX512 inline void reduce_quads(const __m512i (&b)[4], __m512i& first, __m512i& second) {
    // [rows 0-3 first, rows 0-3 second, rows 4-7 first, rows 4-7 second], then rows 8-15
    const __m512i c0 = _mm512_add_epi32(_mm512_shuffle_i32x4(b[0], b[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                        _mm512_shuffle_i32x4(b[0], b[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i c1 = _mm512_add_epi32(_mm512_shuffle_i32x4(b[2], b[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                        _mm512_shuffle_i32x4(b[2], b[3], _MM_SHUFFLE(3, 1, 3, 1)));
    first = _mm512_shuffle_i32x4(c0, c1, _MM_SHUFFLE(2, 0, 2, 0));
    second = _mm512_shuffle_i32x4(c0, c1, _MM_SHUFFLE(3, 1, 3, 1));
}

// Software prefetch: the same unit kPrefetchRows rows further on, which the quad after
// next reads. (A fixed distance along each row is worse here: four rows are read side by
// side, and the next rows' data is what is needed soonest. Measured on the 2-core EPYC,
// DRAM-cold, qwen3-0.6b shapes: 4 rows ahead 1.3-1.6x the time of 8, 2048 bytes along
// the row 1.5-2x.) Addresses past the matrix are only prefetched, never read.
constexpr int kPrefetchRows = 8;
inline void prefetch_rows_ahead(const uint8_t* blk, size_t row_stride, size_t bytes) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(blk) + kPrefetchRows * row_stride;
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(reinterpret_cast<const void*>(p + o), 0, 3);
}

// The driver shared by both families. Per group of 16 rows and chunk of K: first the
// integer sums (each weight block read once, for every token; short rows row by row in
// memory order, long ones four rows side by side), reduced to one vector per quad of rows,
// and each row's f16 scales copied out;
// then, per unit in K order, the four quads' sums transposed into lanes and the float
// steps. (Gathering the scales in the second pass instead cost Q8_0 decode ~35 % on
// DRAM-cold weights: a chunk of 16 rows no longer sits in L1 by then.)
// A unit is what one Row::sums() call covers (a super-block, or two 32-blocks: kValues
// columns, kBytes of a row, kAct activation blocks); Row::step applies the float steps of
// one unit to the 16 lanes.
constexpr int kTok = 4;     // tokens per pass
constexpr int kChunk = 32;          // units per chunk: 4 x 32 x 4 vectors of 64 bytes = 32 KiB
constexpr int kRowOrderUnits = 16;  // rows of at most this many units are read in memory order
template <class Row>
GLIA_TARGET_AVX512 void gemv_driver(const uint8_t* w, size_t row_stride, int nr, int64_t K, int64_t slice_k,
                                    const uint8_t* act, size_t act_stride, int nt, float* out, size_t out_stride) {
    using Act = typename Row::Act;
    const int64_t nu = K / Row::kValues, per_slice = std::max<int64_t>(1, slice_k / Row::kValues);
    const typename Row::Consts k;
    // Measured DRAM-cold on the 2-core EPYC (bench/LOG.md, 2026-12-03): rows of up to 16
    // units read 1.5-3x faster in memory order than side by side; longer rows (Q8_0 at
    // K >= 2048, any type at K = 14336) 1.2-2.5x slower.
    const bool row_order = nu <= kRowOrderUnits;
    alignas(64) __m512i buf[kTok][kChunk][4];
    alignas(64) __m512i part[kTok][kRowOrderUnits][4];  // a quad's row sums (short rows) before reduce_quad
    alignas(64) uint32_t scales[kChunk][kLanes];  // each row's Row::scales() per unit
    for (int r0 = 0; r0 < nr; r0 += kLanes) {
        const int rows = std::min(kLanes, nr - r0);
        const uint8_t* wg = w + size_t(r0) * row_stride;
        for (int c0 = 0; c0 < nt; c0 += kTok) {
            const int ntc = std::min(kTok, nt - c0);
            const Act* y[kTok];
            for (int c = 0; c < ntc; ++c) y[c] = reinterpret_cast<const Act*>(act + size_t(c0 + c) * act_stride);
            SliceSum s[kTok];
            for (int64_t u0 = 0; u0 < nu; u0 += kChunk) {
                const int nu_c = static_cast<int>(std::min<int64_t>(kChunk, nu - u0));
                for (int q = 0; q < 4; ++q) {
                    const int nq = std::clamp(rows - 4 * q, 0, 4);  // rows of this quad
                    const uint8_t* row = wg + size_t(4 * q) * row_stride + size_t(u0) * Row::kBytes;
                    if (!row_order) {
                        // Long rows: four rows side by side, one block of each in turn,
                        // with software prefetch; the sums reduced at once.
                        for (int u = 0; u < nu_c; ++u) {
                            const uint8_t* blk = row + size_t(u) * Row::kBytes;
                            for (int i = 0; i < 4; ++i) {
                                if (i < nq) prefetch_rows_ahead(blk + size_t(i) * row_stride, row_stride, Row::kBytes);
                                scales[u][4 * q + i] = i < nq ? Row::scales(blk + size_t(i) * row_stride) : 0;
                            }
                            for (int c = 0; c < ntc; ++c) {
                                const Act* yc = y[c] + (u0 + u) * Row::kAct;
                                __m512i v[4];
                                for (int i = 0; i < 4; ++i)
                                    v[i] = i < nq ? Row::sums(blk + size_t(i) * row_stride, yc, k)
                                                  : _mm512_setzero_si512();
                                buf[c][u][q] = reduce_quad(v[0], v[1], v[2], v[3]);
                            }
                        }
                        continue;
                    }
                    // Short rows: row by row, in memory order (a matrix's rows are
                    // contiguous), left to the hardware prefetcher.
                    for (int i = 0; i < 4; ++i) {
                        const uint8_t* ri = row + size_t(i) * row_stride;
                        for (int u = 0; u < nu_c; ++u) {
                            const uint8_t* blk = ri + size_t(u) * Row::kBytes;
                            if (i >= nq) {
                                scales[u][4 * q + i] = 0;
                                for (int c = 0; c < ntc; ++c) part[c][u][i] = _mm512_setzero_si512();
                                continue;
                            }
                            scales[u][4 * q + i] = Row::scales(blk);
                            for (int c = 0; c < ntc; ++c)
                                part[c][u][i] = Row::sums(blk, y[c] + (u0 + u) * Row::kAct, k);
                        }
                    }
                    for (int u = 0; u < nu_c; ++u)
                        for (int c = 0; c < ntc; ++c)
                            buf[c][u][q] = reduce_quad(part[c][u][0], part[c][u][1], part[c][u][2], part[c][u][3]);
                }
                for (int u = 0; u < nu_c; ++u) {
                    const int64_t ui = u0 + u;
                    const __m512i sc = _mm512_load_si512(scales[u]);
                    for (int c = 0; c < ntc; ++c) {
                        if (ui > 0 && ui % per_slice == 0) s[c].close();
                        __m512i first, second;
                        reduce_quads(buf[c][u], first, second);
                        Row::step(first, second, sc, y[c] + ui * Row::kAct, s[c].acc);
                    }
                }
            }
            for (int c = 0; c < ntc; ++c) {
                s[c].close();
                store_rows(out + size_t(c0 + c) * out_stride + r0, rows, s[c].total);
            }
        }
    }
}

// ---------------------------------------------------------------- K-quants

struct KConsts {
    __m512i shuf[4];   // scale shuffles: sc[2j] for the low 256 bits, sc[2j+1] for the high
    __m512i nib;       // per 64-bit lane, the shift that brings a nibble down: 0 low, 4 high
    __m256i mdup;      // the 8 mins (bytes 8..15) as int16 pairs [m0, m0, m1, m1, ...]
    __m512i q6idx[4];  // Q6_K: scale 4v + L of 16 int16 scales to every int16 of 128-bit lane L
    GLIA_TARGET_AVX512 KConsts() {
        for (int j = 0; j < 4; ++j) shuf[j] = k4_scale_shuffle(j);
        for (int v = 0; v < 4; ++v) {
            alignas(64) int16_t ix[32];
            for (int e = 0; e < 32; ++e) ix[e] = int16_t(4 * v + e / 8);
            q6idx[v] = _mm512_load_si512(ix);
        }
        nib = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
        alignas(32) int8_t c[32];
        for (int i = 0; i < 16; ++i) {
            c[i] = (i & 1) ? int8_t(0x80) : int8_t(8 + i / 4);
            c[16 + i] = (i & 1) ? int8_t(0x80) : int8_t(12 + i / 4);
        }
        mdup = _mm256_load_si256(reinterpret_cast<const __m256i*>(c));
    }
};

// The 12 packed scale bytes of a Q4_K/Q5_K block (quant::unpack_k4_scales, in vector
// registers): bytes 0..7 the six-bit scales, bytes 8..15 the six-bit mins, in every 128-bit
// lane. Reads 16 bytes from `packed` (the block's first quants follow its scales).
GLIA_TARGET_AVX512 inline __m512i k4_scales_vec(const uint8_t* packed) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));  // u0 u1 u2 .
    const __m128i low = _mm_and_si128(v, _mm_set1_epi8(0x3f));                    // sc0-3, m0-3
    const __m128i u2 = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 2, 2)), _mm_set_epi32(0, 0, 4, 0));
    const __m128i top = _mm_and_si128(_mm_srli_epi32(v, 2), _mm_set1_epi8(0x30));  // ((u >> 6) & 3) << 4
    const __m128i high = _mm_ternarylogic_epi32(u2, _mm_set1_epi8(0x0f), top, 0xEA);  // (u2 & 0x0f) | top
    return _mm512_broadcast_i32x4(_mm_unpacklo_epi32(low, high));
}

// The K-quant min term of a Q4_K/Q5_K block: sum_j m[j] * (bsums[2j] + bsums[2j+1]), spread
// over 8 lanes. `s`: k4_scales_vec.
GLIA_TARGET_AVX512 inline __m256i k4_min_sum(__m512i s, const int16_t* bsums, const KConsts& k) {
    return _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bsums)),
                             _mm256_shuffle_epi8(_mm512_castsi512_si256(s), k.mdup));
}

// The 32 quant bytes of chunk j (sub-blocks 2j, 2j+1 as low / high nibbles) as 64 values:
// the low nibbles in the low 256 bits, the high ones in the high 256 bits.
GLIA_TARGET_AVX512 inline __m512i k4_nibbles(const uint8_t* q, const KConsts& k) {
    const __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
    return _mm512_and_si512(_mm512_srlv_epi64(v, k.nib), _mm512_set1_epi8(0x0F));
}

template <size_t kBlockBytes>
struct KRow {
    using Act = BlockQ8_K;
    using Consts = KConsts;
    static constexpr int64_t kValues = kQK_K;
    static constexpr size_t kBytes = kBlockBytes;
    static constexpr int64_t kAct = 1;
    GLIA_TARGET_AVX512 static void step(__m512i isum, __m512i msum, __m512i sc, const BlockQ8_K* y, __m512& acc) {
        kstep(isum, msum, sc, y, acc);
    }
    // d (low half) and dmin (high half) as stored at the start of a Q4_K/Q5_K block.
    static uint32_t scales(const uint8_t* blk) {
        uint32_t v;
        std::memcpy(&v, blk, 4);
        return v;
    }
};

// Row sums of one super-block for one token: [isum parts | msum parts] (see halves). The
// per-sub-block products (VPMADDUBSW) are scaled and summed by VPDPWSSD: exact integers,
// so the same sums as the GEMM's in any order.
struct RowQ4K : KRow<sizeof(BlockQ4_K)> {
    GLIA_TARGET_AVX512 static __m512i sums(const uint8_t* blk, const BlockQ8_K* y, const KConsts& k) {
        const BlockQ4_K* x = reinterpret_cast<const BlockQ4_K*>(blk);
        const __m512i s = k4_scales_vec(x->scales);
        __m512i isum = _mm512_setzero_si512();
        for (int j = 0; j < 4; ++j) {
            const __m512i p = _mm512_maddubs_epi16(k4_nibbles(x->qs + 32 * j, k), _mm512_loadu_si512(y->qs + 64 * j));
            isum = _mm512_dpwssd_epi32(isum, p, _mm512_shuffle_epi8(s, k.shuf[j]));
        }
        return halves(fold(isum), k4_min_sum(s, y->bsums, k));
    }
};

struct RowQ5K : KRow<sizeof(BlockQ5_K)> {
    GLIA_TARGET_AVX512 static __m512i sums(const uint8_t* blk, const BlockQ8_K* y, const KConsts& k) {
        const BlockQ5_K* x = reinterpret_cast<const BlockQ5_K*>(blk);
        const __m512i b16 = _mm512_set1_epi8(16);
        const __m512i s = k4_scales_vec(x->scales);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qh)));
        __m512i isum = _mm512_setzero_si512();
        for (int j = 0; j < 4; ++j) {
            __m512i wq = k4_nibbles(x->qs + 32 * j, k);
            const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(char(1 << (2 * j))),
                                                   _mm256_set1_epi8(char(1 << (2 * j + 1))), 1);
            wq = _mm512_mask_add_epi8(wq, _mm512_test_epi8_mask(qh, bit), wq, b16);
            const __m512i p = _mm512_maddubs_epi16(wq, _mm512_loadu_si512(y->qs + 64 * j));
            isum = _mm512_dpwssd_epi32(isum, p, _mm512_shuffle_epi8(s, k.shuf[j]));
        }
        return halves(fold(isum), k4_min_sum(s, y->bsums, k));
    }
};

// Q6_K: weights unsigned (0..63); msum = sum_j 32 * sc[j] * bsums[j]; dmin = d. Each
// 64-value vector spans four 16-value sub-blocks, one a 128-bit lane: VPMADDUBSW, then
// VPDPWSSD with that lane's signed scale.
struct RowQ6K : KRow<sizeof(BlockQ6_K)> {
    static uint32_t scales(const uint8_t* blk) {  // dmin = d
        const uint16_t d = reinterpret_cast<const BlockQ6_K*>(blk)->d;
        return uint32_t(d) | (uint32_t(d) << 16);
    }
    GLIA_TARGET_AVX512 static __m512i sums(const uint8_t* blk, const BlockQ8_K* y, const KConsts& k) {
        const BlockQ6_K* x = reinterpret_cast<const BlockQ6_K*>(blk);
        const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(0x30);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x->scales)));
        const __m512i sc = _mm512_castsi256_si512(sc16);
        __m512i isum = _mm512_setzero_si512();
        for (int c = 0; c < 2; ++c) {
            const __m512i ql = _mm512_loadu_si512(x->ql + 64 * c);
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qh + 32 * c));
            const __m512i h01 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_slli_epi16(qh, 4)),
                                                   _mm256_slli_epi16(qh, 2), 1);
            const __m512i h23 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            const __m512i w0 = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4), h01, m3, 0xF8);
            const __m512i w1 =
                _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), h23, m3, 0xF8);
            const __m512i p0 = _mm512_maddubs_epi16(w0, _mm512_loadu_si512(y->qs + 128 * c));
            const __m512i p1 = _mm512_maddubs_epi16(w1, _mm512_loadu_si512(y->qs + 128 * c + 64));
            isum = _mm512_dpwssd_epi32(isum, p0, _mm512_permutexvar_epi16(k.q6idx[2 * c], sc));
            isum = _mm512_dpwssd_epi32(isum, p1, _mm512_permutexvar_epi16(k.q6idx[2 * c + 1], sc));
        }
        const __m256i off = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y->bsums)), sc16);
        return halves(fold(isum), _mm256_slli_epi32(off, 5));
    }
};

// ---------------------------------------------------------------- 32-blocks

// The float steps of two 32-blocks, as btile's: acc = fma(dot, d_w * d_act, acc), one
// block after the other. `sc`: each row's d of the first (low half) and second block.
GLIA_TARGET_AVX512 inline void bstep(__m512i dot0, __m512i dot1, __m512i sc, const BlockQ8_0* y, __m512& acc) {
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot0), _mm512_mul_ps(low_f16(sc), _mm512_set1_ps(h2f(y[0].d))), acc);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot1), _mm512_mul_ps(high_f16(sc), _mm512_set1_ps(h2f(y[1].d))), acc);
}

struct NoConsts {};

template <size_t kBlockBytes>
struct BRow {
    using Act = BlockQ8_0;
    using Consts = NoConsts;
    static constexpr int64_t kValues = 2 * kQK;
    static constexpr size_t kBytes = 2 * kBlockBytes;
    static constexpr int64_t kAct = 2;
    GLIA_TARGET_AVX512 static void step(__m512i dot0, __m512i dot1, __m512i sc, const BlockQ8_0* y, __m512& acc) {
        bstep(dot0, dot1, sc, y, acc);
    }
    // Both blocks' d (each block starts with it).
    static uint32_t scales(const uint8_t* blk) {
        uint16_t d0, d1;
        std::memcpy(&d0, blk, 2);
        std::memcpy(&d1, blk + kBlockBytes, 2);
        return uint32_t(d0) | (uint32_t(d1) << 16);
    }
};

// Row sums of two consecutive 32-blocks for one token: [block i parts | block i+1 parts].
// Q8_0 weights are signed: their magnitudes are the unsigned operand, their signs go
// onto the activations.
struct RowQ8_0 : BRow<sizeof(BlockQ8_0)> {
    GLIA_TARGET_AVX512 static __m512i sums(const uint8_t* blk, const BlockQ8_0* y, const NoConsts&) {
        const BlockQ8_0* x = reinterpret_cast<const BlockQ8_0*>(blk);
        const __m512i wq = ld2(x[0].qs, x[1].qs);
        const __m512i aq = ld2(y[0].qs, y[1].qs);
        const __m512i sa = _mm512_mask_sub_epi8(aq, _mm512_movepi8_mask(wq), _mm512_setzero_si512(), aq);
        return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(wq), sa);
    }
};

// Q4_0: nibbles 0..15 unsigned, the -8 offset as 8 * sum(a).
struct RowQ4_0 : BRow<sizeof(BlockQ4_0)> {
    GLIA_TARGET_AVX512 static __m512i sums(const uint8_t* blk, const BlockQ8_0* y, const NoConsts&) {
        const BlockQ4_0* x = reinterpret_cast<const BlockQ4_0*>(blk);
        const __m512i m4 = _mm512_set1_epi8(0x0F), eights = _mm512_set1_epi8(8);
        const __m512i wq =
            _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(nib(x[0].qs)), nib(x[1].qs), 1), m4);
        const __m512i aq = ld2(y[0].qs, y[1].qs);
        return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wq, aq),
                                _mm512_dpbusd_epi32(_mm512_setzero_si512(), eights, aq));
    }
};

}  // namespace

void gemv_q4_k(const uint8_t* w, size_t row_stride, int nr, int64_t K, int64_t slice_k, const uint8_t* act,
               size_t act_stride, int nt, float* out, size_t out_stride) {
    gemv_driver<RowQ4K>(w, row_stride, nr, K, slice_k, act, act_stride, nt, out, out_stride);
}
void gemv_q5_k(const uint8_t* w, size_t row_stride, int nr, int64_t K, int64_t slice_k, const uint8_t* act,
               size_t act_stride, int nt, float* out, size_t out_stride) {
    gemv_driver<RowQ5K>(w, row_stride, nr, K, slice_k, act, act_stride, nt, out, out_stride);
}
void gemv_q6_k(const uint8_t* w, size_t row_stride, int nr, int64_t K, int64_t slice_k, const uint8_t* act,
               size_t act_stride, int nt, float* out, size_t out_stride) {
    gemv_driver<RowQ6K>(w, row_stride, nr, K, slice_k, act, act_stride, nt, out, out_stride);
}
void gemv_q8_0(const uint8_t* w, size_t row_stride, int nr, int64_t K, int64_t slice_k, const uint8_t* act,
               size_t act_stride, int nt, float* out, size_t out_stride) {
    gemv_driver<RowQ8_0>(w, row_stride, nr, K, slice_k, act, act_stride, nt, out, out_stride);
}
void gemv_q4_0(const uint8_t* w, size_t row_stride, int nr, int64_t K, int64_t slice_k, const uint8_t* act,
               size_t act_stride, int nt, float* out, size_t out_stride) {
    gemv_driver<RowQ4_0>(w, row_stride, nr, K, slice_k, act, act_stride, nt, out, out_stride);
}

}  // namespace glia::cpu::simd::avx512

#endif  // GLIA_SIMD_X86
