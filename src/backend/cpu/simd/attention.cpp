// Attention kernels: the scalar reference and the AVX-512 level (see attention.h); cache
// rows are widened by kv_rows.h.
#include "backend/cpu/simd/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/simd/avx512_math.h"
#include "backend/cpu/simd/internal.h"
#include "core/f16.h"

#ifdef GLIA_SIMD_X86
#include <immintrin.h>
#endif

namespace glia::cpu::simd {
namespace {

// ---------------------------------------------------------------- scalar

void scores_scalar(int hd, int nq, const float* q, const uint8_t* const* k, KvType kt, size_t off, int n, float* s,
                   size_t s_stride) {
    thread_local std::vector<float> kr;
    kr.resize(static_cast<size_t>(hd));
    for (int c = 0; c < n; ++c) {
        kv_widen_scalar(kt, k[c], off, hd, kr.data());
        for (int j = 0; j < nq; ++j) {
            const float* qj = q + static_cast<size_t>(j) * hd;
            float d = 0.0f;
            for (int i = 0; i < hd; ++i) d += qj[i] * kr[i];
            s[j * s_stride + c] = d;
        }
    }
}

void weighted_sum_scalar(int hd, int nq, const float* p, size_t p_stride, const uint8_t* const* v, KvType vt,
                         size_t off, int n, float* acc) {
    thread_local std::vector<float> vr;
    vr.resize(static_cast<size_t>(hd));
    for (int c = 0; c < n; ++c) {
        kv_widen_scalar(vt, v[c], off, hd, vr.data());
        for (int j = 0; j < nq; ++j) {
            const float pc = p[j * p_stride + c];
            if (pc == 0.0f) continue;
            float* a = acc + static_cast<size_t>(j) * hd;
            for (int i = 0; i < hd; ++i) a[i] += pc * vr[i];
        }
    }
}

// The first cell after c (relative to the tile) where a new absolute chunk begins.
inline int chunk_end(int pos0, int c) { return ((pos0 + c) / kAttnChunk + 1) * kAttnChunk - pos0; }

// Folds one chunk's (m_k, l_k, a_k) into a query's running (m, l, a), where a and a_k are
// averages (weights that sum to one): a = a (l x / L) + a_k (l_k y / L), L the new sum. The
// first chunk (m = -inf) is taken as it is, bit for bit (its weight l_k / l_k is exactly
// one); a chunk without cells (m_k = -inf) changes nothing.
void fold_scalar(float& m, float& l, float* a, float mk, float lk, const float* ak, int hd_v) {
    if (mk == -std::numeric_limits<float>::infinity()) return;
    const float mn = std::max(m, mk);
    const float x = m == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(m - mn);
    const float y = std::exp(mk - mn);
    const float L = std::fma(l, x, lk * y);
    const float wa = (l * x) / L, wb = (lk * y) / L;
    for (int i = 0; i < hd_v; ++i) a[i] = std::fma(a[i], wa, ak[i] * wb);
    l = L;
    m = mn;
}

void fold_records_scalar(const AttnFold& f) {
    const size_t rs = attn_record(f.hd_v);
    std::vector<float> acc(f.hd_v);
    for (int j = 0; j < f.nq; ++j) {
        float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int k = 0; k < f.n_chunks; ++k) {
            const float* r = f.rec + (static_cast<size_t>(k) * f.nq + j) * rs;
            fold_scalar(m, l, acc.data(), r[0], r[1], r + 2, f.hd_v);
        }
        float* o = f.out + j * f.out_stride;
        std::copy(acc.begin(), acc.end(), o);
    }
}

void tile_scalar(const AttnTile& t) {
    std::vector<float> s(kAttnChunk), acc(t.hd_v), ak(t.hd_v);
    const size_t rs = attn_record(t.hd_v);
    int n_chunks = 0;  // chunks of the call (partial mode's record index)
    for (int c = 0; c < t.n; c = chunk_end(t.pos0, c)) ++n_chunks;
    for (int h = 0; h < t.nh; ++h)
        for (int j = 0; j < t.nq; ++j) {
            const float* qj = t.q + h * t.q_head_stride + static_cast<size_t>(j) * t.hd;
            const size_t k_off = t.k_off + static_cast<size_t>(h) * t.hd, v_off = t.v_off + static_cast<size_t>(h) * t.hd_v;
            float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (int k = 0, c0 = 0; k < n_chunks; ++k) {
                const int ce = chunk_end(t.pos0, c0);
                const int a = std::max(c0, t.lo[j]), b = std::min({ce, t.n, t.hi[j]}), n = b - a;
                float mk = -std::numeric_limits<float>::infinity(), lk = 0.0f;
                std::fill(ak.begin(), ak.end(), 0.0f);
                if (n > 0) {
                    scores_scalar(t.hd, 1, qj, t.k + a, t.k_type, k_off, n, s.data(), n);
                    for (int c = 0; c < n; ++c) {
                        float d = s[c] * t.scale;
                        if (t.softcap > 0.0f) d = std::tanh(d * (1.0f / t.softcap)) * t.softcap;
                        s[c] = d;
                        mk = std::max(mk, d);
                    }
                    // The probabilities within the chunk, rounded to f16 as the reference
                    // rounds the softmax's (so a query whose cells lie in one chunk gets its
                    // rounding exactly).
                    for (int c = 0; c < n; ++c) {
                        s[c] = std::exp(s[c] - mk);
                        lk += s[c];
                    }
                    for (int c = 0; c < n; ++c) s[c] = round_f16(s[c] / lk);
                    weighted_sum_scalar(t.hd_v, 1, s.data(), n, t.v + a, t.v_type, v_off, n, ak.data());
                }
                if (t.partial) {
                    float* r = t.partial + h * t.partial_head_stride + (static_cast<size_t>(k) * t.nq + j) * rs;
                    r[0] = mk;
                    r[1] = lk;
                    std::copy(ak.begin(), ak.end(), r + 2);
                } else {
                    fold_scalar(m, l, acc.data(), mk, lk, ak.data(), t.hd_v);
                }
                c0 = ce;
            }
            if (t.partial) continue;
            float* o = t.out + h * t.out_head_stride + j * t.out_stride;
            std::copy(acc.begin(), acc.end(), o);
        }
}

// ---------------------------------------------------------------- AVX-512

#ifdef GLIA_SIMD_X86
using avx512::exp_ps;
// The tile kernel keeps 16 queries in the lanes of a vector: scores come out as one
// vector per cell (no horizontal sums), the softmax runs down the cells with vertical
// operations, and the weighted sum broadcasts each probability against f32 value rows.
// Keys and values are widened to f32 a piece of cells at a time, once for all queries.

// Widens n rows' head at `off` (dst: n rows of hd values).
GLIA_TARGET_AVX512 void widen_rows(const uint8_t* const* rows, KvType t, size_t off, int n, int hd, float* dst) {
    for (int c = 0; c < n; ++c) kv_widen_avx512(t, rows[c], off, hd, dst + static_cast<size_t>(c) * hd);
}

// Where the kernels read cell c's values d.. (16 at a time): rows widened to f32 beforehand
// (kv, rows of hd values), or F16 cache rows converted as they are read (the same f32
// values, without the pass that widens them).
struct WidenedRows {
    const float* kv;
    int hd;
    GLIA_TARGET_AVX512 __m512 load(int c, int d) const {
        return _mm512_loadu_ps(kv + static_cast<size_t>(c) * hd + d);
    }
};
struct F16Rows {
    const uint8_t* const* rows;
    size_t off;  // the head's first value
    GLIA_TARGET_AVX512 __m512 load(int c, int d) const {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[c] + 2 * (off + d))));
    }
};

// Scores of a tile of at most 4 queries (decode: one token's query heads of a KV head),
// 4 cells at a time: lane j * 4 + i holds query j against cell i, so a vector does 16 useful
// products where the query-lane layout (one lane per query) would do nq. Every lane runs
// the same chain as there, fma(k[d], q[d], acc) for d = 0, 1, ... from 0, so the bits are
// those of the query-lane kernel. rows: m rows of hd values (hd % 16 == 0);
// q4[d * 16 + j * 4 + i] = q_j[d]; scores go to s[c * 16 + j] (lanes j >= 4 untouched).
// Returns the cells done (a multiple of 16); the caller does the rest the usual way.
template <class Rows>
GLIA_TARGET_AVX512 int scores_few_queries(const Rows& rows, int m, int hd, const float* q4, __m512 vscale, float* s) {
    thread_local std::vector<float> kt;  // 4 cells' rows, 4 x 4 blocks transposed
    kt.resize(static_cast<size_t>(hd) * 16);
    const __m512i to_cells = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    int c = 0;
    for (; c + 16 <= m; c += 16) {
        // Cells c + 4 b + i, b < 4: their values for d = 16 blk + 4 L + r sit at
        // kt[b][blk][r][L][i] (unpack / shuffle within 128-bit lanes).
        for (int b = 0; b < 4; ++b)
            for (int blk = 0; blk < hd / 16; ++blk) {
                const int r = c + 4 * b;
                const __m512 r0 = rows.load(r, blk * 16), r1 = rows.load(r + 1, blk * 16),
                             r2 = rows.load(r + 2, blk * 16), r3 = rows.load(r + 3, blk * 16);
                const __m512 t0 = _mm512_unpacklo_ps(r0, r1), t1 = _mm512_unpackhi_ps(r0, r1);
                const __m512 t2 = _mm512_unpacklo_ps(r2, r3), t3 = _mm512_unpackhi_ps(r2, r3);
                float* o = &kt[(static_cast<size_t>(b) * hd + blk * 16) * 4];
                _mm512_storeu_ps(o, _mm512_shuffle_ps(t0, t2, 0x44));
                _mm512_storeu_ps(o + 16, _mm512_shuffle_ps(t0, t2, 0xEE));
                _mm512_storeu_ps(o + 32, _mm512_shuffle_ps(t1, t3, 0x44));
                _mm512_storeu_ps(o + 48, _mm512_shuffle_ps(t1, t3, 0xEE));
            }
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int d = 0; d < hd; ++d) {
            const size_t at = static_cast<size_t>(d / 16) * 64 + (d % 4) * 16 + (d % 16) / 4 * 4;
            const __m512 qd = _mm512_loadu_ps(q4 + static_cast<size_t>(d) * 16);
            const float* k0 = &kt[at];
            a0 = _mm512_fmadd_ps(_mm512_broadcast_f32x4(_mm_loadu_ps(k0)), qd, a0);
            a1 = _mm512_fmadd_ps(_mm512_broadcast_f32x4(_mm_loadu_ps(k0 + static_cast<size_t>(hd) * 4)), qd, a1);
            a2 = _mm512_fmadd_ps(_mm512_broadcast_f32x4(_mm_loadu_ps(k0 + static_cast<size_t>(hd) * 8)), qd, a2);
            a3 = _mm512_fmadd_ps(_mm512_broadcast_f32x4(_mm_loadu_ps(k0 + static_cast<size_t>(hd) * 12)), qd, a3);
        }
        const __m512 acc[4] = {a0, a1, a2, a3};
        for (int b = 0; b < 4; ++b) {
            const __m512 v = _mm512_permutexvar_ps(to_cells, _mm512_mul_ps(acc[b], vscale));  // [cell][query]
            float* o = s + static_cast<size_t>(c + 4 * b) * 16;
            _mm_storeu_ps(o, _mm512_castps512_ps128(v));
            _mm_storeu_ps(o + 16, _mm512_extractf32x4_ps(v, 1));
            _mm_storeu_ps(o + 32, _mm512_extractf32x4_ps(v, 2));
            _mm_storeu_ps(o + 48, _mm512_extractf32x4_ps(v, 3));
        }
    }
    return c;
}

// Scores of cells [c, m) for one group of 16 queries (q: transposed, q[d * 16 + lane]) from
// the widened key rows kv: s[c * 16 + lane], scaled (soft-capped later).
GLIA_TARGET_AVX512 void scores_query_lanes(const float* kv, int c, int m, int hd, const float* q, __m512 vscale,
                                           float* s) {
    for (; c + 4 <= m; c += 4) {
        const float* k0 = kv + static_cast<size_t>(c) * hd;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int d = 0; d < hd; ++d) {
            const __m512 qd = _mm512_loadu_ps(q + d * 16);
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(k0[d]), qd, a0);
            a1 = _mm512_fmadd_ps(_mm512_set1_ps(k0[hd + d]), qd, a1);
            a2 = _mm512_fmadd_ps(_mm512_set1_ps(k0[2 * hd + d]), qd, a2);
            a3 = _mm512_fmadd_ps(_mm512_set1_ps(k0[3 * hd + d]), qd, a3);
        }
        _mm512_storeu_ps(s + (c + 0) * 16, _mm512_mul_ps(a0, vscale));
        _mm512_storeu_ps(s + (c + 1) * 16, _mm512_mul_ps(a1, vscale));
        _mm512_storeu_ps(s + (c + 2) * 16, _mm512_mul_ps(a2, vscale));
        _mm512_storeu_ps(s + (c + 3) * 16, _mm512_mul_ps(a3, vscale));
    }
    for (; c < m; ++c) {
        const float* k0 = kv + static_cast<size_t>(c) * hd;
        __m512 a0 = _mm512_setzero_ps();
        for (int d = 0; d < hd; ++d) a0 = _mm512_fmadd_ps(_mm512_set1_ps(k0[d]), _mm512_loadu_ps(q + d * 16), a0);
        _mm512_storeu_ps(s + c * 16, _mm512_mul_ps(a0, vscale));
    }
}

// Scores of one head's queries against the m widened key rows of a piece: s[g][c][lane]
// (group g of 16 queries at s + g * kAttnChunk * 16), scaled (soft-capped later).
GLIA_TARGET_AVX512 void chunk_scores(const float* kv, int m, int hd, int n_groups, const float* qt, const float* q4,
                                     __m512 vscale, float* sc) {
    for (int g = 0; g < n_groups; ++g) {
        float* s = sc + static_cast<size_t>(g) * kAttnChunk * 16;
        const int c = q4 ? scores_few_queries(WidenedRows{kv, hd}, m, hd, q4, vscale, s) : 0;
        scores_query_lanes(kv, c, m, hd, qt + static_cast<size_t>(g) * hd * 16, vscale, s);
    }
}

// A query's running state: maximum, sum, and (in acc) the weighted values so far.
struct Running {
    float* m;
    float* l;
    float* acc;
};

// The fold of one chunk into 16 lanes' running maxima and sums (pm, pl), leaving the
// factors for the running values (x) and the chunk's (y) in fx, fy: the first chunk is
// taken as it is (x = 0, y = 1), a lane without cells in the chunk is unchanged (x = 1, y = 0).
GLIA_TARGET_AVX512 inline void fold_lanes(float* pm, float* pl, __m512 mk, __m512 lk, float* fx, float* fy) {
    const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    const __mmask16 here = _mm512_cmp_ps_mask(mk, ninf, _CMP_NEQ_OQ);
    const __m512 m_old = _mm512_loadu_ps(pm);
    const __m512 m_new = _mm512_mask_max_ps(m_old, here, m_old, mk);
    const __mmask16 had = _mm512_cmp_ps_mask(m_old, ninf, _CMP_NEQ_OQ);
    const __m512 x =
        _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), here, _mm512_maskz_mov_ps(had, exp_ps(_mm512_sub_ps(m_old, m_new))));
    const __m512 y = _mm512_maskz_mov_ps(here, exp_ps(_mm512_sub_ps(mk, m_new)));
    _mm512_storeu_ps(pm, m_new);
    const __m512 l_old = _mm512_loadu_ps(pl);
    _mm512_storeu_ps(pl, _mm512_mask_mov_ps(l_old, here, _mm512_fmadd_ps(l_old, x, _mm512_mul_ps(lk, y))));
    _mm512_storeu_ps(fx, x);
    _mm512_storeu_ps(fy, y);
}

// a = a x + ak y, 16 values.
GLIA_TARGET_AVX512 inline void fold_values(float* a, __m512 ak, float x, float y) {
    _mm512_storeu_ps(a, _mm512_fmadd_ps(_mm512_loadu_ps(a), _mm512_set1_ps(x), _mm512_mul_ps(ak, _mm512_set1_ps(y))));
}

GLIA_TARGET_AVX512 void fold_records_avx512(const AttnFold& f) {
    if (f.hd_v % 16) return fold_records_scalar(f);
    const size_t rs = attn_record(f.hd_v);
    alignas(64) float pm[16], pl[16], fx[16], fy[16], mk[16], lk[16];
    thread_local std::vector<float> acc;
    for (int j0 = 0; j0 < f.nq; j0 += 16) {
        const int nj = std::min(16, f.nq - j0);
        acc.assign(static_cast<size_t>(nj) * f.hd_v, 0.0f);
        std::fill(pm, pm + 16, -std::numeric_limits<float>::infinity());
        std::fill(pl, pl + 16, 0.0f);
        for (int k = 0; k < f.n_chunks; ++k) {
            std::fill(mk, mk + 16, -std::numeric_limits<float>::infinity());
            std::fill(lk, lk + 16, 0.0f);
            for (int jj = 0; jj < nj; ++jj) {
                const float* r = f.rec + (static_cast<size_t>(k) * f.nq + j0 + jj) * rs;
                mk[jj] = r[0];
                lk[jj] = r[1];
            }
            fold_lanes(pm, pl, _mm512_load_ps(mk), _mm512_load_ps(lk), fx, fy);
            for (int jj = 0; jj < nj; ++jj) {
                if (fy[jj] == 0.0f && fx[jj] == 1.0f) continue;
                const float* r = f.rec + (static_cast<size_t>(k) * f.nq + j0 + jj) * rs + 2;
                for (int i = 0; i < f.hd_v; i += 16)
                    fold_values(&acc[static_cast<size_t>(jj) * f.hd_v + i], _mm512_loadu_ps(r + i), fx[jj], fy[jj]);
            }
        }
        for (int jj = 0; jj < nj; ++jj) {
            const __m512 l = _mm512_set1_ps(pl[jj]);
            float* o = f.out + (j0 + jj) * f.out_stride;
            for (int i = 0; i < f.hd_v; i += 16)
                _mm512_storeu_ps(o + i, _mm512_div_ps(_mm512_loadu_ps(&acc[static_cast<size_t>(jj) * f.hd_v + i]), l));
        }
    }
}

// A piece of a chunk's probability-weighted values for NJ queries (probabilities at s + c *
// 16 + jj) and NV vectors of 16 outputs from i0, over the m value rows in cell order:
// a[jj * hd_v + i0 + 16 x ...] += p[c][jj] * v[c][i0 + 16 x ...], one FMA chain per output
// (zeroed at the chunk's start, carried from piece to piece through memory). NJ and NV are
// constants so that the NJ x NV sums stay in registers.
template <int NJ, int NV, class Rows>
GLIA_TARGET_AVX512 inline void weighted_values(const Rows& rows, int hd_v, int i0, int m, const float* s, float* a) {
    __m512 ak[NJ][NV];
    for (int jj = 0; jj < NJ; ++jj)
        for (int x = 0; x < NV; ++x) ak[jj][x] = _mm512_loadu_ps(a + static_cast<size_t>(jj) * hd_v + i0 + 16 * x);
    for (int c = 0; c < m; ++c) {
        const float* pc = s + c * 16;
        for (int x = 0; x < NV; ++x) {
            const __m512 vx = rows.load(c, i0 + 16 * x);
            for (int jj = 0; jj < NJ; ++jj) ak[jj][x] = _mm512_fmadd_ps(_mm512_set1_ps(pc[jj]), vx, ak[jj][x]);
        }
    }
    for (int jj = 0; jj < NJ; ++jj)
        for (int x = 0; x < NV; ++x) _mm512_storeu_ps(a + static_cast<size_t>(jj) * hd_v + i0 + 16 * x, ak[jj][x]);
}

template <int NJ, class Rows>
GLIA_TARGET_AVX512 inline void weighted_values_nv(const Rows& rows, int hd_v, int i0, int nv, int m, const float* s,
                                                  float* a) {
    switch (nv) {
        case 1: return weighted_values<NJ, 1>(rows, hd_v, i0, m, s, a);
        case 2: return weighted_values<NJ, 2>(rows, hd_v, i0, m, s, a);
        case 3: return weighted_values<NJ, 3>(rows, hd_v, i0, m, s, a);
        default: return weighted_values<NJ, 4>(rows, hd_v, i0, m, s, a);
    }
}

// weighted_values for nj = 1..4 live queries (only their sums: decode of a GQA group of
// 1-3 heads computes no dead lanes; each is the same chain in cell order either way).
template <class Rows>
GLIA_TARGET_AVX512 inline void values_of(const Rows& rows, int nj, int hd_v, int i0, int nv, int m, const float* s,
                                         float* a) {
    switch (nj) {
        case 1: return weighted_values_nv<1>(rows, hd_v, i0, nv, m, s, a);
        case 2: return weighted_values_nv<2>(rows, hd_v, i0, nv, m, s, a);
        case 3: return weighted_values_nv<3>(rows, hd_v, i0, nv, m, s, a);
        default: return weighted_values_nv<4>(rows, hd_v, i0, nv, m, s, a);
    }
}

// Lanes of the softmax, 16 to a group: a tile of few queries (decode: one token's GQA group
// of 1-4 heads) packs several KV heads' queries into one group (head h, query j at group
// h / hpg, lane (h % hpg) * nq + j), so the softmax and the folds run on live lanes only;
// otherwise head h has groups h * n_groups.. (query j at group j / 16, lane j % 16). Every
// lane's arithmetic is the same either way: the layout changes no bits.
struct Lanes {
    bool few;
    int nq, n_groups, hpg, n_sgroups;
    Lanes(int nq_, int nh) : few(nq_ <= 4), nq(nq_), n_groups((nq_ + 15) / 16), hpg(few ? 16 / nq_ : 1) {
        n_sgroups = few ? (nh + hpg - 1) / hpg : nh * n_groups;
    }
    size_t of(int h, int j) const {
        return few ? static_cast<size_t>(h / hpg) * 16 + (h % hpg) * nq + j
                   : (static_cast<size_t>(h) * n_groups + j / 16) * 16 + j % 16;
    }
    size_t lanes() const { return static_cast<size_t>(n_sgroups) * 16; }
};

// Lane L's score of cell c in the chunk's score buffer ([group][cell][lane]).
inline size_t score_at(size_t lane, int c) {
    return (lane / 16) * kAttnChunk * 16 + static_cast<size_t>(c) * 16 + lane % 16;
}

// Decode tiles read cells a piece at a time, every head of the call in turn: a head's piece
// in f32 (8 KiB at head size 128) stays in the L1 cache for the kernel that reads it, and the
// piece's rows (one page of the cache) are read from memory once, whole, for all heads.
// Prompt tiles (many queries a row) take a whole chunk at a time: their weighted sums then
// stay in registers across the chunk's cells.
constexpr int kPiece = 16;

// Reads the rows' spans [off, off + n_values) in order, just before the kernel uses them:
// sequential reads of a page's rows start the hardware's stream prefetcher, which keeps far
// more of the page in flight than software prefetches (measured: bench/LOG.md).
inline void touch_span(const uint8_t* const* rows, KvType t, size_t off, int n_values, int n) {
    const size_t last = t == KvType::Q8_0 ? kQ8_0Bytes : t == KvType::Q4_0 ? kQ4_0Bytes : 2;
    const size_t b0 = kv_offset_bytes(t, off), b1 = kv_offset_bytes(t, off + n_values - 1) + last;
    uint8_t x = 0;
    for (int c = 0; c < n; ++c)
        for (size_t b = b0; b < b1; b = (b | 63) + 1) x |= rows[c][b];  // a byte of each line of the span
    asm volatile("" : : "r"(x));
}

GLIA_TARGET_AVX512 void tile_avx512(const AttnTile& t) {
    if (t.hd % 16 || t.hd_v % 16) return tile_scalar(t);
    const Lanes ln(t.nq, t.nh);
    const int n_groups = ln.n_groups;
    const bool few = ln.few;
    const size_t q_blk = static_cast<size_t>(n_groups) * t.hd * 16;  // one head's transposed queries
    thread_local std::vector<float> qt, q4, sc, sc1, kv, run_m, run_l, acc, ak, fx, fy;
    qt.assign(t.nh * q_blk, 0.0f);
    sc.resize(static_cast<size_t>(ln.n_sgroups) * kAttnChunk * 16);
    const int piece = few ? kPiece : kAttnChunk;
    kv.resize(static_cast<size_t>(piece) * std::max(t.hd, t.hd_v));
    run_m.assign(ln.lanes(), -std::numeric_limits<float>::infinity());
    run_l.assign(ln.lanes(), 0.0f);
    acc.assign(static_cast<size_t>(t.nh) * t.nq * t.hd_v, 0.0f);
    ak.resize(static_cast<size_t>(t.nh) * t.nq * t.hd_v);
    fx.resize(ln.lanes());
    fy.resize(ln.lanes());
    // Queries transposed: qt[h][g][d][lane].
    for (int h = 0; h < t.nh; ++h)
        for (int j = 0; j < t.nq; ++j)
            for (int d = 0; d < t.hd; ++d)
                qt[h * q_blk + (static_cast<size_t>(j / 16) * t.hd + d) * 16 + j % 16] =
                    t.q[h * t.q_head_stride + static_cast<size_t>(j) * t.hd + d];
    const __m512 vscale = _mm512_set1_ps(t.softcap > 0.0f ? 1.0f : t.scale);
    // Few queries (decode): each query repeated over 4 lanes, for scores_few_queries; a
    // head's scores go to sc1 first, then to their packed lanes.
    if (few) {
        sc1.resize(static_cast<size_t>(kPiece) * 16);
        q4.assign(static_cast<size_t>(t.nh) * t.hd * 16, 0.0f);
        for (int h = 0; h < t.nh; ++h)
            for (int j = 0; j < t.nq; ++j)
                for (int d = 0; d < t.hd; ++d)
                    for (int i = 0; i < 4; ++i)
                        q4[(static_cast<size_t>(h) * t.hd + d) * 16 + j * 4 + i] =
                            t.q[h * t.q_head_stride + static_cast<size_t>(j) * t.hd + d];
    }
    // Each lane's range of cells (lanes without a query see none).
    thread_local std::vector<int32_t> lanes_lo, lanes_hi;
    lanes_lo.assign(ln.lanes(), 0);
    lanes_hi.assign(ln.lanes(), 0);
    for (int h = 0; h < t.nh; ++h)
        for (int j = 0; j < t.nq; ++j) {
            lanes_lo[ln.of(h, j)] = t.lo[j];
            lanes_hi[ln.of(h, j)] = t.hi[j];
        }
    const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    // Decode tiles read F16 rows directly (a prompt tile's values are read by several groups
    // of 4 queries: widened once).
    const bool direct_k = few && t.k_type == KvType::F16, direct_v = few && t.v_type == KvType::F16;

    // Chunks of absolute positions. In each: every head's scores, the softmax of all lanes,
    // every head's weighted values; cells a piece at a time, every head per piece, each
    // piece's rows read in order just before (touch_span).
    const size_t rs = attn_record(t.hd_v);
    for (int c0 = 0, chunk = 0; c0 < t.n;) {
        const int c1 = std::min(t.n, chunk_end(t.pos0, c0)), m = c1 - c0;
        for (int p = 0; p < m; p += piece) {
            const int pm = std::min(piece, m - p);
            touch_span(t.k + c0 + p, t.k_type, t.k_off, t.nh * t.hd, pm);
            for (int h = 0; h < t.nh; ++h) {
                const size_t k_off = t.k_off + static_cast<size_t>(h) * t.hd;
                if (direct_k) {  // F16 rows read as they are; the cells after the last 16 widened
                    const int c = scores_few_queries(F16Rows{t.k + c0 + p, k_off}, pm, t.hd,
                                                     &q4[static_cast<size_t>(h) * t.hd * 16], vscale, sc1.data());
                    widen_rows(t.k + c0 + p + c, t.k_type, k_off, pm - c, t.hd, kv.data() + static_cast<size_t>(c) * t.hd);
                    scores_query_lanes(kv.data(), c, pm, t.hd, &qt[h * q_blk], vscale, sc1.data());
                } else {
                    widen_rows(t.k + c0 + p, t.k_type, k_off, pm, t.hd, kv.data());
                }
                if (!few) {
                    chunk_scores(kv.data(), pm, t.hd, n_groups, &qt[h * q_blk], nullptr, vscale,
                                 &sc[score_at(ln.of(h, 0), p)]);
                    continue;
                }
                if (!direct_k)
                    chunk_scores(kv.data(), pm, t.hd, 1, &qt[h * q_blk], &q4[static_cast<size_t>(h) * t.hd * 16], vscale,
                                 sc1.data());
                float* dst = &sc[score_at(ln.of(h, 0), p)];
                for (int c = 0; c < pm; ++c)
                    std::copy(&sc1[static_cast<size_t>(c) * 16], &sc1[static_cast<size_t>(c) * 16] + t.nq, dst + c * 16);
            }
        }
        // The chunk's softmax per lane (its own cells only), and the fold factors: x for
        // the state so far, y for this chunk; lanes without cells here keep theirs.
        for (int g = 0; g < ln.n_sgroups; ++g) {
            float* s = &sc[static_cast<size_t>(g) * kAttnChunk * 16];
            if (t.softcap > 0.0f)
                for (size_t i = 0; i < static_cast<size_t>(m) * 16; ++i)
                    s[i] = std::tanh(s[i] * t.scale * (1.0f / t.softcap)) * t.softcap;
            const __m512i vlo = _mm512_loadu_si512(&lanes_lo[g * 16]), vhi = _mm512_loadu_si512(&lanes_hi[g * 16]);
            auto valid = [&](int c) GLIA_TARGET_AVX512 {
                const __m512i vc = _mm512_set1_epi32(c0 + c);
                return static_cast<__mmask16>(_mm512_cmpge_epi32_mask(vc, vlo) & _mm512_cmplt_epi32_mask(vc, vhi));
            };
            __m512 mk = ninf;
            for (int c = 0; c < m; ++c) mk = _mm512_mask_max_ps(mk, valid(c), mk, _mm512_loadu_ps(s + c * 16));
            __m512 lk = _mm512_setzero_ps();
            for (int c = 0; c < m; ++c) {
                const __m512 e = _mm512_maskz_mov_ps(valid(c), exp_ps(_mm512_sub_ps(_mm512_loadu_ps(s + c * 16), mk)));
                lk = _mm512_add_ps(lk, e);
                _mm512_storeu_ps(s + c * 16, avx512::round_f16_ps(e));
            }
            if (t.partial) {  // the chunk's maximum and sum, as they are
                _mm512_storeu_ps(&fx[g * 16], mk);
                _mm512_storeu_ps(&fy[g * 16], lk);
                continue;
            }
            fold_lanes(&run_m[g * 16], &run_l[g * 16], mk, lk, &fx[g * 16], &fy[g * 16]);
        }
        // The chunk's weighted values (ak: query j of head h at (h * nq + j) * hd_v), 4
        // queries x 64 outputs in registers per piece.
        std::fill(ak.begin(), ak.end(), 0.0f);
        for (int p = 0; p < m; p += piece) {
            const int pm = std::min(piece, m - p);
            touch_span(t.v + c0 + p, t.v_type, t.v_off, t.nh * t.hd_v, pm);
            for (int h = 0; h < t.nh; ++h) {
                const size_t v_off = t.v_off + static_cast<size_t>(h) * t.hd_v;
                if (!direct_v) widen_rows(t.v + c0 + p, t.v_type, v_off, pm, t.hd_v, kv.data());
                for (int j0 = 0; j0 < t.nq; j0 += 4) {
                    const int nj = std::min(4, t.nq - j0);
                    const float* s = &sc[score_at(ln.of(h, j0), p)];  // lanes of one group: queries j0..
                    float* a = &ak[(static_cast<size_t>(h) * t.nq + j0) * t.hd_v];
                    for (int i0 = 0; i0 < t.hd_v; i0 += 64) {
                        const int nv = std::min(4, (t.hd_v - i0) / 16);
                        if (direct_v)
                            values_of(F16Rows{t.v + c0 + p, v_off}, nj, t.hd_v, i0, nv, pm, s, a);
                        else
                            values_of(WidenedRows{kv.data(), t.hd_v}, nj, t.hd_v, i0, nv, pm, s, a);
                    }
                }
            }
        }
        // Folded into the running sums (a lane without cells here has x = 1, y = 0:
        // unchanged), or left as the chunk's records.
        for (int h = 0; h < t.nh; ++h)
            for (int j = 0; j < t.nq; ++j) {
                const size_t l = ln.of(h, j);
                const float* a = &ak[(static_cast<size_t>(h) * t.nq + j) * t.hd_v];
                if (t.partial) {  // the record: m_k, l_k, the weighted values
                    float* r = t.partial + h * t.partial_head_stride + (static_cast<size_t>(chunk) * t.nq + j) * rs;
                    r[0] = fx[l];
                    r[1] = fy[l];
                    std::copy(a, a + t.hd_v, r + 2);
                    continue;
                }
                if (fy[l] == 0.0f && fx[l] == 1.0f) continue;
                float* a_h = &acc[(static_cast<size_t>(h) * t.nq + j) * t.hd_v];
                for (int i = 0; i < t.hd_v; i += 16) fold_values(a_h + i, _mm512_loadu_ps(a + i), fx[l], fy[l]);
            }
        c0 = c1;
        ++chunk;
    }
    if (t.partial) return;

    // out = acc / l.
    for (int h = 0; h < t.nh; ++h)
        for (int j = 0; j < t.nq; ++j) {
            const __m512 l = _mm512_set1_ps(run_l[ln.of(h, j)]);
            const float* a = &acc[(static_cast<size_t>(h) * t.nq + j) * t.hd_v];
            float* o = t.out + h * t.out_head_stride + j * t.out_stride;
            for (int i = 0; i < t.hd_v; i += 16) _mm512_storeu_ps(o + i, _mm512_div_ps(_mm512_loadu_ps(a + i), l));
        }
}

#endif

}  // namespace

const AttnKernels& attn_kernels(Isa isa) {
    static const AttnKernels scalar{tile_scalar, fold_records_scalar};
#ifdef GLIA_SIMD_X86
    static const AttnKernels avx512{tile_avx512, fold_records_avx512};
    if (isa == Isa::Avx512 && isa_supported(Isa::Avx512)) return avx512;
#endif
    (void)isa;
    return scalar;
}

}  // namespace glia::cpu::simd
