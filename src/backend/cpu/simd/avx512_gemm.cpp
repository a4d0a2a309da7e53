// AVX-512 VNNI packed GEMM for prefill (see simd.h, struct Gemm).
//
// Compute-bound shape: out[32 rows x 4 tokens] per micro-tile. The weights of a panel of
// 32 rows are repacked (once per matmul, amortised over all tokens) so that a 512-bit
// vector holds 4 consecutive quantized values of each of 16 rows, unsigned. One
// VPDPBUSD then multiplies it with a broadcast of the token's 4 matching activation
// bytes: 16 rows x 4 products, no horizontal sums ever. Per k-group the tile loads 2
// weight vectors and 4 broadcasts and issues 8 VPDPBUSD, so the multiply unit, not the
// loads, is the limit. Integer sub-block scales are applied once per sub-block (one
// VPMULLD per 8 or 4 VPDPBUSD), block mins / offsets through the activation block sums
// (VPDPWSSD on int16 pairs), and float scales once per block.
//
// Two families share the layout:
//  - K-quants (Q4_K, Q5_K, Q6_K) with Q8_K activations: per super-block of 256,
//    isum = sum_j sc_j * dot_j, msum = sum_p mp_p . bsum_pair_p, and
//    out += d_a * (d * isum - dmin * msum).
//  - 32-blocks (Q8_0, Q4_0) with Q8_0 activations: per block,
//    out += (d_w * d_a) * (dot - off * sum(a)), the offset term precomputed per token.
// These float steps, in this order, are the canonical arithmetic of every product of these
// types at any token count: avx512_gemv.cpp repeats them for one to three tokens on the
// unpacked rows, so a change here must be made there too (test
// SimdMatmul.TokenOutputsDoNotDependOnTheBatch checks that both give the same bits).
#include "backend/cpu/simd/internal.h"

#ifdef GLIA_SIMD_X86
#include <immintrin.h>

// GCC 12 warns about its own _mm512_undefined_* in conversions, and about the vector ABI
// of target-attributed helpers; both are harmless here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cstring>

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

constexpr int kPanelRows = 32;  // two groups of 16 lanes
constexpr int kTileTokens = 4;

// ---------------------------------------------------------------- layouts

// One K-quant super-block of a panel. q[kg][g][4*lane + b] is value 4*kg + b of row
// 16*g + lane (0..63, unsigned).
// NMP int16 pairs of min multipliers per row: Q4_K/Q5_K pair the mins of sub-blocks
// (2p, 2p+1) with the activation sums over those 32-weight sub-blocks (side data);
// Q6_K pairs 32 * scale of 16-weight sub-blocks (2p, 2p+1) with the Q8_K bsums.
template <int NSUB, int NMP>
struct alignas(64) KPanel {
    uint8_t q[64][2][64];
    int32_t sc[NSUB][2][16];  // sub-block scales
    int32_t mp[NMP][2][16];   // int16 pairs multiplying the activation sum pairs
    float d[2][16];
    float dmin[2][16];
};
using PanelQ4K = KPanel<8, 4>;
using PanelQ6K = KPanel<16, 8>;

// One 32-block of a panel (Q8_0, Q4_0): values are unsigned (value + offset).
struct alignas(64) BPanel {
    uint8_t q[8][2][64];
    float d[2][16];
};

// Per-token side data for Q8_0 activations: float scale and -offset * sum(q) per block.
struct BSide {
    float d;
    int32_t corr;
};

inline int rows_in(int nr, int g) { return std::clamp(nr - 16 * g, 0, 16); }
inline __mmask16 lane_mask(int rows) { return rows >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << rows) - 1); }

GLIA_TARGET_AVX512 inline __m512i gather_rows(__mmask16 k, __m512i vindex, const uint8_t* base) {
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, vindex, base, 1);
}

GLIA_TARGET_AVX512 inline __m512i row_index(size_t stride) {
    return _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                              _mm512_set1_epi32(static_cast<int>(stride)));
}

inline int32_t load_i32(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}


// ---------------------------------------------------------------- packing

template <class Panel>
size_t kpanel_bytes(int64_t K) { return size_t(K / kQK_K) * sizeof(Panel); }
size_t bpanel_bytes(int64_t K) { return size_t(K / kQK) * sizeof(BPanel); }

GLIA_TARGET_AVX512 void pack_q4_k(const uint8_t* w, size_t stride, int nr, int64_t K, void* panel) {
    auto* P = static_cast<PanelQ4K*>(panel);
    const int64_t nsb = K / kQK_K;
    const __m512i vindex = row_index(stride), m4 = _mm512_set1_epi8(0x0F);
    for (int g = 0; g < 2; ++g) {
        const int rows = rows_in(nr, g);
        const __mmask16 km = lane_mask(rows);
        const uint8_t* base = w + size_t(16 * g) * stride;
        for (int64_t sb = 0; sb < nsb; ++sb) {
            PanelQ4K& p = P[sb];
            const uint8_t* blk = base + sb * sizeof(BlockQ4_K);
            for (int jj = 0; jj < 4; ++jj)
                for (int k = 0; k < 8; ++k) {
                    const __m512i v = gather_rows(km, vindex, blk + offsetof(BlockQ4_K, qs) + 32 * jj + 4 * k);
                    _mm512_store_si512(p.q[(2 * jj) * 8 + k][g], _mm512_and_si512(v, m4));
                    _mm512_store_si512(p.q[(2 * jj + 1) * 8 + k][g], _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
                }
            for (int l = 0; l < 16; ++l) {
                uint8_t sc[8] = {}, m[8] = {};
                float d = 0, dmin = 0;
                if (l < rows) {
                    const auto* b = reinterpret_cast<const BlockQ4_K*>(blk + size_t(l) * stride);
                    quant::unpack_k4_scales(b->scales, sc, m);
                    d = f16_to_f32(b->d);
                    dmin = f16_to_f32(b->dmin);
                }
                for (int j = 0; j < 8; ++j) p.sc[j][g][l] = sc[j];
                for (int q = 0; q < 4; ++q) p.mp[q][g][l] = int32_t(uint32_t(m[2 * q]) | (uint32_t(m[2 * q + 1]) << 16));
                p.d[g][l] = d;
                p.dmin[g][l] = dmin;
            }
        }
    }
}

GLIA_TARGET_AVX512 void pack_q5_k(const uint8_t* w, size_t stride, int nr, int64_t K, void* panel) {
    auto* P = static_cast<PanelQ4K*>(panel);
    const int64_t nsb = K / kQK_K;
    const __m512i vindex = row_index(stride), m4 = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1);
    for (int g = 0; g < 2; ++g) {
        const int rows = rows_in(nr, g);
        const __mmask16 km = lane_mask(rows);
        const uint8_t* base = w + size_t(16 * g) * stride;
        for (int64_t sb = 0; sb < nsb; ++sb) {
            PanelQ4K& p = P[sb];
            const uint8_t* blk = base + sb * sizeof(BlockQ5_K);
            for (int k = 0; k < 8; ++k) {
                const __m512i h = gather_rows(km, vindex, blk + offsetof(BlockQ5_K, qh) + 4 * k);
                for (int jj = 0; jj < 4; ++jj) {
                    const __m512i v = gather_rows(km, vindex, blk + offsetof(BlockQ5_K, qs) + 32 * jj + 4 * k);
                    const __m512i h0 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2 * jj), one), 4);
                    const __m512i h1 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2 * jj + 1), one), 4);
                    _mm512_store_si512(p.q[(2 * jj) * 8 + k][g], _mm512_or_si512(_mm512_and_si512(v, m4), h0));
                    _mm512_store_si512(p.q[(2 * jj + 1) * 8 + k][g],
                                       _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), h1));
                }
            }
            for (int l = 0; l < 16; ++l) {
                uint8_t sc[8] = {}, m[8] = {};
                float d = 0, dmin = 0;
                if (l < rows) {
                    const auto* b = reinterpret_cast<const BlockQ5_K*>(blk + size_t(l) * stride);
                    quant::unpack_k4_scales(b->scales, sc, m);
                    d = f16_to_f32(b->d);
                    dmin = f16_to_f32(b->dmin);
                }
                for (int j = 0; j < 8; ++j) p.sc[j][g][l] = sc[j];
                for (int q = 0; q < 4; ++q) p.mp[q][g][l] = int32_t(uint32_t(m[2 * q]) | (uint32_t(m[2 * q + 1]) << 16));
                p.d[g][l] = d;
                p.dmin[g][l] = dmin;
            }
        }
    }
}

// Q6_K weight e = 128c + 32k + l comes from ql[64c + 32(k&1) + l] (nibble k>>1) and
// bits 2k..2k+1 of qh[32c + l].
GLIA_TARGET_AVX512 void pack_q6_k(const uint8_t* w, size_t stride, int nr, int64_t K, void* panel) {
    auto* P = static_cast<PanelQ6K*>(panel);
    const int64_t nsb = K / kQK_K;
    const __m512i vindex = row_index(stride), m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3);
    for (int g = 0; g < 2; ++g) {
        const int rows = rows_in(nr, g);
        const __mmask16 km = lane_mask(rows);
        const uint8_t* base = w + size_t(16 * g) * stride;
        for (int64_t sb = 0; sb < nsb; ++sb) {
            PanelQ6K& p = P[sb];
            const uint8_t* blk = base + sb * sizeof(BlockQ6_K);
            for (int kg = 0; kg < 64; ++kg) {
                const int e = 4 * kg, c = e / 128, k = (e % 128) / 32, l = e % 32;
                const __m512i v = gather_rows(km, vindex, blk + offsetof(BlockQ6_K, ql) + 64 * c + 32 * (k & 1) + l);
                const __m512i h = gather_rows(km, vindex, blk + offsetof(BlockQ6_K, qh) + 32 * c + l);
                const __m512i lo = _mm512_and_si512(_mm512_srli_epi16(v, 4 * (k >> 1)), m4);
                const __m512i hi = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2 * k), m3), 4);
                _mm512_store_si512(p.q[kg][g], _mm512_or_si512(lo, hi));
            }
            for (int l = 0; l < 16; ++l) {
                int8_t sc[16] = {};
                float d = 0;
                if (l < rows) {
                    const auto* b = reinterpret_cast<const BlockQ6_K*>(blk + size_t(l) * stride);
                    std::memcpy(sc, b->scales, 16);
                    d = f16_to_f32(b->d);
                }
                for (int j = 0; j < 16; ++j) p.sc[j][g][l] = sc[j];
                for (int q = 0; q < 8; ++q)
                    p.mp[q][g][l] = int32_t(uint32_t(uint16_t(int16_t(32 * sc[2 * q]))) |
                                            (uint32_t(uint16_t(int16_t(32 * sc[2 * q + 1]))) << 16));
                p.d[g][l] = d;
                p.dmin[g][l] = d;
            }
        }
    }
}

// ---------------------------------------------------------------- packing from the decode layout
// The same panels from the decode layout (il_layout): each gather of pack_q4_k / pack_q6_k
// (one 4-byte piece of 16 rows) is one vector of a group there, and each row's scales,
// mins and d are lanes of a few vectors, unpacked for all 16 rows at once. A panel's two
// halves are two consecutive groups; a half with no rows is zero, as pack's masked gathers
// leave it.

// Byte b (0..3) of each dword, zero-extended.
GLIA_TARGET_AVX512 inline __m512i dword_byte(__m512i v, int b) {
    return _mm512_and_si512(_mm512_srli_epi32(v, 8 * b), _mm512_set1_epi32(0xFF));
}
// Byte b of each dword, sign-extended.
GLIA_TARGET_AVX512 inline __m512i dword_sbyte(__m512i v, int b) {
    return _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * b), 24);
}
// The f16 halves (low: half 0, high: half 1) of each dword as floats.
GLIA_TARGET_AVX512 inline __m512 dword_half(__m512i v, int half) {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(half ? _mm512_srli_epi32(v, 16) : v));
}

template <class Panel>
GLIA_TARGET_AVX512 void zero_half(Panel& p, int g) {
    const __m512i z = _mm512_setzero_si512();
    for (auto& q : p.q) _mm512_store_si512(q[g], z);
    for (auto& s : p.sc) _mm512_store_si512(s[g], z);
    for (auto& m : p.mp) _mm512_store_si512(m[g], z);
    _mm512_store_ps(p.d[g], _mm512_setzero_ps());
    _mm512_store_ps(p.dmin[g], _mm512_setzero_ps());
}

GLIA_TARGET_AVX512 void il_pack_panel_q4_k(const uint8_t* groups, int nr, int64_t K, void* panel) {
    namespace L = il_layout;
    auto* P = static_cast<PanelQ4K*>(panel);
    const int64_t nsb = K / kQK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3f = _mm512_set1_epi8(0x3F), m30 = _mm512_set1_epi8(0x30);
    const __m512i lo8 = _mm512_set1_epi32(0xFF), b2 = _mm512_set1_epi32(0xFF0000);
    for (int g = 0; g < 2; ++g) {
        if (rows_in(nr, g) == 0) {
            for (int64_t sb = 0; sb < nsb; ++sb) zero_half(P[sb], g);
            continue;
        }
        const uint8_t* grp = groups + size_t(g) * size_t(nsb) * L::kQ4Block;
        for (int64_t sb = 0; sb < nsb; ++sb) {
            PanelQ4K& p = P[sb];
            const uint8_t* b = grp + size_t(sb) * L::kQ4Block;
            for (int jj = 0; jj < 4; ++jj)
                for (int k = 0; k < 8; ++k) {
                    const __m512i v = _mm512_loadu_si512(b + L::kQ4Quants + 64 * (8 * jj + k));
                    _mm512_store_si512(p.q[(2 * jj) * 8 + k][g], _mm512_and_si512(v, m4));
                    _mm512_store_si512(p.q[(2 * jj + 1) * 8 + k][g], _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
                }
            // quant::unpack_k4_scales per lane (as il_tokens): scales 0-3 / mins 0-3 the low six
            // bits of bytes 0-3 / 4-7, scales 4-7 (mins 4-7) the low (high) nibbles of bytes
            // 8-11 below the top two bits of bytes 0-3 (4-7).
            const __m512i dm = _mm512_loadu_si512(b);
            const __m512i A = _mm512_loadu_si512(b + L::kQ4Scales);
            const __m512i B = _mm512_loadu_si512(b + L::kQ4Scales + 64);
            const __m512i C = _mm512_loadu_si512(b + L::kQ4Scales + 128);
            const __m512i sc_lo = _mm512_and_si512(A, m3f);
            const __m512i sc_hi = _mm512_ternarylogic_epi32(_mm512_and_si512(C, m4), _mm512_srli_epi32(A, 2), m30, 0xF8);
            const __m512i m_lo = _mm512_and_si512(B, m3f);
            const __m512i m_hi = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi32(C, 4), m4),
                                                           _mm512_srli_epi32(B, 2), m30, 0xF8);
            for (int j = 0; j < 8; ++j) _mm512_store_si512(p.sc[j][g], dword_byte(j < 4 ? sc_lo : sc_hi, j % 4));
            for (int q = 0; q < 4; ++q) {
                // (m[2q], m[2q + 1]) as the int16 halves of a dword.
                const __m512i m = _mm512_srli_epi32(q < 2 ? m_lo : m_hi, 16 * (q % 2));
                _mm512_store_si512(p.mp[q][g], _mm512_or_si512(_mm512_and_si512(m, lo8),
                                                               _mm512_and_si512(_mm512_slli_epi32(m, 8), b2)));
            }
            _mm512_store_ps(p.d[g], dword_half(dm, 0));
            _mm512_store_ps(p.dmin[g], dword_half(dm, 1));
        }
    }
}

GLIA_TARGET_AVX512 void il_pack_panel_q6_k(const uint8_t* groups, int nr, int64_t K, void* panel) {
    namespace L = il_layout;
    auto* P = static_cast<PanelQ6K*>(panel);
    const int64_t nsb = K / kQK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(3), lo16 = _mm512_set1_epi32(0xFFFF);
    for (int g = 0; g < 2; ++g) {
        if (rows_in(nr, g) == 0) {
            for (int64_t sb = 0; sb < nsb; ++sb) zero_half(P[sb], g);
            continue;
        }
        const uint8_t* grp = groups + size_t(g) * size_t(nsb) * L::kQ6Block;
        for (int64_t sb = 0; sb < nsb; ++sb) {
            PanelQ6K& p = P[sb];
            const uint8_t* b = grp + size_t(sb) * L::kQ6Block;
            for (int kg = 0; kg < 64; ++kg) {
                const int e = 4 * kg, c = e / 128, k = (e % 128) / 32, l = e % 32;
                // pack_q6_k's gathers at ql + 64c + 32(k & 1) + l and qh + 32c + l: 4-byte
                // pieces, so vectors (64c + 32(k & 1) + l) / 4 and (32c + l) / 4.
                const __m512i v = _mm512_loadu_si512(b + L::kQ6Ql + 16 * (64 * c + 32 * (k & 1) + l));
                const __m512i h = _mm512_loadu_si512(b + L::kQ6Qh + 16 * (32 * c + l));
                const __m512i lo = _mm512_and_si512(_mm512_srli_epi16(v, 4 * (k >> 1)), m4);
                const __m512i hi = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2 * k), m3), 4);
                _mm512_store_si512(p.q[kg][g], _mm512_or_si512(lo, hi));
            }
            __m512i sc[16];
            for (int v = 0; v < 4; ++v) {
                const __m512i s = _mm512_loadu_si512(b + 64 * v);
                for (int j = 0; j < 4; ++j) sc[4 * v + j] = dword_sbyte(s, j);
            }
            for (int j = 0; j < 16; ++j) _mm512_store_si512(p.sc[j][g], sc[j]);
            for (int q = 0; q < 8; ++q)  // (32 sc[2q], 32 sc[2q + 1]) as int16 halves
                _mm512_store_si512(p.mp[q][g],
                                   _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi32(sc[2 * q], 5), lo16),
                                                   _mm512_slli_epi32(sc[2 * q + 1], 21)));
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + L::kQ6D)));
            _mm512_store_ps(p.d[g], d);
            _mm512_store_ps(p.dmin[g], d);
        }
    }
}

GLIA_TARGET_AVX512 void pack_q8_0(const uint8_t* w, size_t stride, int nr, int64_t K, void* panel) {
    auto* P = static_cast<BPanel*>(panel);
    const int64_t nb = K / kQK;
    const __m512i vindex = row_index(stride), flip = _mm512_set1_epi8(char(0x80));
    for (int g = 0; g < 2; ++g) {
        const int rows = rows_in(nr, g);
        const __mmask16 km = lane_mask(rows);
        const uint8_t* base = w + size_t(16 * g) * stride;
        for (int64_t ib = 0; ib < nb; ++ib) {
            BPanel& p = P[ib];
            const uint8_t* blk = base + ib * sizeof(BlockQ8_0);
            for (int k = 0; k < 8; ++k) {
                const __m512i v = gather_rows(km, vindex, blk + offsetof(BlockQ8_0, qs) + 4 * k);
                _mm512_store_si512(p.q[k][g], _mm512_xor_si512(v, flip));  // q + 128
            }
            for (int l = 0; l < 16; ++l)
                p.d[g][l] = l < rows ? f16_to_f32(reinterpret_cast<const BlockQ8_0*>(blk + size_t(l) * stride)->d) : 0.f;
        }
    }
}

GLIA_TARGET_AVX512 void pack_q4_0(const uint8_t* w, size_t stride, int nr, int64_t K, void* panel) {
    auto* P = static_cast<BPanel*>(panel);
    const int64_t nb = K / kQK;
    const __m512i vindex = row_index(stride), m4 = _mm512_set1_epi8(0x0F);
    for (int g = 0; g < 2; ++g) {
        const int rows = rows_in(nr, g);
        const __mmask16 km = lane_mask(rows);
        const uint8_t* base = w + size_t(16 * g) * stride;
        for (int64_t ib = 0; ib < nb; ++ib) {
            BPanel& p = P[ib];
            const uint8_t* blk = base + ib * sizeof(BlockQ4_0);
            for (int k = 0; k < 4; ++k) {
                const __m512i v = gather_rows(km, vindex, blk + offsetof(BlockQ4_0, qs) + 4 * k);
                _mm512_store_si512(p.q[k][g], _mm512_and_si512(v, m4));
                _mm512_store_si512(p.q[k + 4][g], _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
            }
            for (int l = 0; l < 16; ++l)
                p.d[g][l] = l < rows ? f16_to_f32(reinterpret_cast<const BlockQ4_0*>(blk + size_t(l) * stride)->d) : 0.f;
        }
    }
}

// ---------------------------------------------------------------- activation side data

size_t no_side(int64_t) { return 0; }
void no_prepare(const uint8_t*, int64_t, void*) {}

size_t bside_bytes(int64_t K) { return size_t(K / kQK) * sizeof(BSide); }

// Q4_K/Q5_K side data: the activation sums over each 32-weight sub-block (int16).
size_t ksum32_bytes(int64_t K) { return size_t(K / kQK) * sizeof(int16_t); }
void prepare_ksum32(const uint8_t* act, int64_t K, void* side) {
    const auto* a = reinterpret_cast<const BlockQ8_K*>(act);
    auto* s = static_cast<int16_t*>(side);
    for (int64_t i = 0; i < K / kQK_K; ++i)
        for (int j = 0; j < 8; ++j) s[8 * i + j] = int16_t(a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
}

template <int OFF>
GLIA_TARGET_AVX512 void prepare_q8_0_act(const uint8_t* act, int64_t K, void* side) {
    const auto* a = reinterpret_cast<const BlockQ8_0*>(act);
    auto* s = static_cast<BSide*>(side);
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < K / kQK; ++i) {
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[i].qs));
        __m256i t = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, q);
        __m128i u = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
        u = _mm_add_epi32(u, _mm_shuffle_epi32(u, 0x4E));
        u = _mm_add_epi32(u, _mm_shuffle_epi32(u, 0xB1));
        s[i].d = f16_to_f32(a[i].d);
        s[i].corr = -OFF * _mm_cvtsi128_si32(u);
    }
}

// ---------------------------------------------------------------- micro-kernels

template <int NT>
GLIA_TARGET_AVX512 inline void store_tile(const __m512 (&acc)[2][NT], int nr, float* out, size_t out_stride,
                                          bool accumulate) {
    for (int g = 0; g < 2; ++g) {
        const int rows = rows_in(nr, g);
        if (rows == 0) continue;
        const __mmask16 km = lane_mask(rows);
        for (int c = 0; c < NT; ++c) {
            float* o = out + c * out_stride + 16 * g;
            const __m512 v = accumulate ? _mm512_add_ps(acc[g][c], _mm512_maskz_loadu_ps(km, o)) : acc[g][c];
            _mm512_mask_storeu_ps(o, km, v);
        }
    }
}

// Min / offset sums of a super-block for token c: NMP pairs, read from the side data
// (Q4_K/Q5_K, 32-weight sums) or from the Q8_K block's 16-weight bsums (Q6_K).
template <class Panel, int NT>
GLIA_TARGET_AVX512 void ktile(const Panel* P, int64_t nsb, const uint8_t* act, size_t act_stride,
                              const uint8_t* side, size_t side_stride, int nr, float* out, size_t out_stride,
                              bool accumulate) {
    constexpr int NSUB = sizeof(Panel::sc) / sizeof(Panel::sc[0]);
    constexpr int NMP = sizeof(Panel::mp) / sizeof(Panel::mp[0]);
    constexpr int G = 64 / NSUB;  // k-groups (of 4 weights) per sub-block
    __m512 acc[2][NT];
    for (int g = 0; g < 2; ++g)
        for (int c = 0; c < NT; ++c) acc[g][c] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
        const Panel& p = P[sb];
        const BlockQ8_K* a[NT];
        const int16_t* sums[NT];
        for (int c = 0; c < NT; ++c) {
            a[c] = reinterpret_cast<const BlockQ8_K*>(act + c * act_stride) + sb;
            sums[c] = NMP == 4 ? reinterpret_cast<const int16_t*>(side + c * side_stride) + 8 * sb : a[c]->bsums;
        }
        __m512i isum[2][NT];
        for (int g = 0; g < 2; ++g)
            for (int c = 0; c < NT; ++c) isum[g][c] = _mm512_setzero_si512();
        for (int j = 0; j < NSUB; ++j) {
            __m512i dot[2][NT];
            for (int g = 0; g < 2; ++g)
                for (int c = 0; c < NT; ++c) dot[g][c] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int k = 0; k < G; ++k) {
                const int kg = j * G + k;
                const __m512i w0 = _mm512_load_si512(p.q[kg][0]);
                const __m512i w1 = _mm512_load_si512(p.q[kg][1]);
#pragma GCC unroll 8
                for (int c = 0; c < NT; ++c) {
                    const __m512i b = _mm512_set1_epi32(load_i32(a[c]->qs + 4 * kg));
                    dot[0][c] = _mm512_dpbusd_epi32(dot[0][c], w0, b);
                    dot[1][c] = _mm512_dpbusd_epi32(dot[1][c], w1, b);
                }
            }
            const __m512i s0 = _mm512_load_si512(p.sc[j][0]);
            const __m512i s1 = _mm512_load_si512(p.sc[j][1]);
            for (int c = 0; c < NT; ++c) {
                isum[0][c] = _mm512_add_epi32(isum[0][c], _mm512_mullo_epi32(dot[0][c], s0));
                isum[1][c] = _mm512_add_epi32(isum[1][c], _mm512_mullo_epi32(dot[1][c], s1));
            }
        }
        const __m512 d0 = _mm512_load_ps(p.d[0]), d1 = _mm512_load_ps(p.d[1]);
        const __m512 m0 = _mm512_load_ps(p.dmin[0]), m1 = _mm512_load_ps(p.dmin[1]);
        for (int c = 0; c < NT; ++c) {
            __m512i ms0 = _mm512_setzero_si512(), ms1 = _mm512_setzero_si512();
            for (int q = 0; q < NMP; ++q) {
                const __m512i b = _mm512_set1_epi32(load_i32(sums[c] + 2 * q));
                ms0 = _mm512_dpwssd_epi32(ms0, _mm512_load_si512(p.mp[q][0]), b);
                ms1 = _mm512_dpwssd_epi32(ms1, _mm512_load_si512(p.mp[q][1]), b);
            }
            const __m512 da = _mm512_set1_ps(a[c]->d);
            const __m512 t0 = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms0), m0, _mm512_mul_ps(_mm512_cvtepi32_ps(isum[0][c]), d0));
            const __m512 t1 = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms1), m1, _mm512_mul_ps(_mm512_cvtepi32_ps(isum[1][c]), d1));
            acc[0][c] = _mm512_fmadd_ps(t0, da, acc[0][c]);
            acc[1][c] = _mm512_fmadd_ps(t1, da, acc[1][c]);
        }
    }
    store_tile<NT>(acc, nr, out, out_stride, accumulate);
}

template <int NT>
GLIA_TARGET_AVX512 void btile(const BPanel* P, int64_t nb, const uint8_t* act, size_t act_stride, const uint8_t* side,
                              size_t side_stride, int nr, float* out, size_t out_stride, bool accumulate) {
    __m512 acc[2][NT];
    for (int g = 0; g < 2; ++g)
        for (int c = 0; c < NT; ++c) acc[g][c] = _mm512_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
        const BPanel& p = P[ib];
        const BlockQ8_0* a[NT];
        const BSide* s[NT];
        __m512i dot[2][NT];
        for (int c = 0; c < NT; ++c) {
            a[c] = reinterpret_cast<const BlockQ8_0*>(act + c * act_stride) + ib;
            s[c] = reinterpret_cast<const BSide*>(side + c * side_stride) + ib;
            dot[0][c] = dot[1][c] = _mm512_set1_epi32(s[c]->corr);
        }
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
            const __m512i w0 = _mm512_load_si512(p.q[k][0]);
            const __m512i w1 = _mm512_load_si512(p.q[k][1]);
#pragma GCC unroll 8
            for (int c = 0; c < NT; ++c) {
                const __m512i b = _mm512_set1_epi32(load_i32(a[c]->qs + 4 * k));
                dot[0][c] = _mm512_dpbusd_epi32(dot[0][c], w0, b);
                dot[1][c] = _mm512_dpbusd_epi32(dot[1][c], w1, b);
            }
        }
        const __m512 d0 = _mm512_load_ps(p.d[0]), d1 = _mm512_load_ps(p.d[1]);
        for (int c = 0; c < NT; ++c) {
            const __m512 da = _mm512_set1_ps(s[c]->d);
            acc[0][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[0][c]), _mm512_mul_ps(d0, da), acc[0][c]);
            acc[1][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[1][c]), _mm512_mul_ps(d1, da), acc[1][c]);
        }
    }
    store_tile<NT>(acc, nr, out, out_stride, accumulate);
}

template <class Panel>
void kcompute(const void* panel, int nr, int64_t K, const uint8_t* act, size_t act_stride, const uint8_t* side,
              size_t side_stride, int nt, float* out, size_t out_stride, bool accumulate) {
    const auto* P = static_cast<const Panel*>(panel);
    const int64_t nsb = K / kQK_K;
    int c = 0;
    for (; c + kTileTokens <= nt; c += kTileTokens)
        ktile<Panel, kTileTokens>(P, nsb, act + c * act_stride, act_stride, side + c * side_stride, side_stride, nr,
                                  out + c * out_stride, out_stride, accumulate);
    const uint8_t* a = act + c * act_stride;
    const uint8_t* s = side + c * side_stride;
    float* o = out + c * out_stride;
    switch (nt - c) {
        case 3: ktile<Panel, 3>(P, nsb, a, act_stride, s, side_stride, nr, o, out_stride, accumulate); break;
        case 2: ktile<Panel, 2>(P, nsb, a, act_stride, s, side_stride, nr, o, out_stride, accumulate); break;
        case 1: ktile<Panel, 1>(P, nsb, a, act_stride, s, side_stride, nr, o, out_stride, accumulate); break;
        default: break;
    }
}

void bcompute(const void* panel, int nr, int64_t K, const uint8_t* act, size_t act_stride, const uint8_t* side,
              size_t side_stride, int nt, float* out, size_t out_stride, bool accumulate) {
    const auto* P = static_cast<const BPanel*>(panel);
    const int64_t nb = K / kQK;
    int c = 0;
    for (; c + kTileTokens <= nt; c += kTileTokens)
        btile<kTileTokens>(P, nb, act + c * act_stride, act_stride, side + c * side_stride, side_stride, nr,
                           out + c * out_stride, out_stride, accumulate);
    const uint8_t* a = act + c * act_stride;
    const uint8_t* s = side + c * side_stride;
    float* o = out + c * out_stride;
    switch (nt - c) {
        case 3: btile<3>(P, nb, a, act_stride, s, side_stride, nr, o, out_stride, accumulate); break;
        case 2: btile<2>(P, nb, a, act_stride, s, side_stride, nr, o, out_stride, accumulate); break;
        case 1: btile<1>(P, nb, a, act_stride, s, side_stride, nr, o, out_stride, accumulate); break;
        default: break;
    }
}

}  // namespace

const Gemm gemm_q4_k{kPanelRows, kpanel_bytes<PanelQ4K>, pack_q4_k, ksum32_bytes,
                     prepare_ksum32, kcompute<PanelQ4K>, gemv_q4_k,
                     16, il_bytes_q4_k, il_pack_q4_k, il_gemv_q4_k, il_pack_panel_q4_k};
const Gemm gemm_q5_k{kPanelRows, kpanel_bytes<PanelQ4K>, pack_q5_k, ksum32_bytes,
                     prepare_ksum32, kcompute<PanelQ4K>, gemv_q5_k, 0, nullptr, nullptr, nullptr, nullptr};
const Gemm gemm_q6_k{kPanelRows, kpanel_bytes<PanelQ6K>, pack_q6_k, no_side, no_prepare, kcompute<PanelQ6K>,
                     gemv_q6_k, 16, il_bytes_q6_k, il_pack_q6_k, il_gemv_q6_k, il_pack_panel_q6_k};
const Gemm gemm_q8_0{kPanelRows, bpanel_bytes, pack_q8_0, bside_bytes, prepare_q8_0_act<128>, bcompute, gemv_q8_0,
                     0, nullptr, nullptr, nullptr, nullptr};
const Gemm gemm_q4_0{kPanelRows, bpanel_bytes, pack_q4_0, bside_bytes, prepare_q8_0_act<8>, bcompute, gemv_q4_0,
                     0, nullptr, nullptr, nullptr, nullptr};

}  // namespace glia::cpu::simd::avx512

#endif  // GLIA_SIMD_X86
