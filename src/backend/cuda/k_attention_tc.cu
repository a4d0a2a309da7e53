// ATTENTION on tensor cores (mma.sync m16n8k16, f16 in, f32 accumulation), after the K/V
// rows of the batch are stored (k_attention.cu). One arithmetic for every batch, so that a
// token's bits never depend on what else is in the step (DESIGN.md principle 6):
//   - the rows of a product are (token, query head) pairs; a warp holds 16 of them, the query
//     heads of a GQA group side by side, so one K/V tile load serves the whole group;
//   - a token's visible cells are walked in tiles of kTile cells at absolute positions
//     (kTile * i), an online softmax over the tiles of each chunk of 2^chunk_shift cells
//     (also at absolute positions: attn_chunk_shift, one size for every mode and step); a chunk's (max, sum, accumulator) is folded into the running
//     result chunk by chunk, in order (fold_chunk). A tile or chunk that holds none of a
//     row's cells changes nothing of that row.
//   - Many-token steps (TILE mode): a block of kWarps warps takes consecutive tokens of the
//     batch and walks their whole history, folding as it goes. Few-token steps (SPLIT mode):
//     a one-warp block takes one token's chunks (chunk-parallel, "flash decoding"), writes
//     each chunk's partial result, and a merge kernel folds them in order. Both compute the
//     same tiles, the same online softmax and the same folds, so they give the same bits.
// q is rounded to f16 for q.k and the probabilities to f16 for the product with V (as the
// CUDA-core kernel and the reference do); scores are kept in base 2 (scale * log2 e).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "common.cuh"
#include "mma.cuh"

namespace glia::cuda {
namespace {

constexpr int kTile = 64;    // cells per K/V tile: the online softmax's step
// Cells per chunk, the unit of the fold (and of SPLIT mode's parallelism): 2^kChunkShift,
// or GLIA_CUDA_ATTN_CHUNK (64, 128, 256 or 512: A/B; a whole number of tiles).
constexpr int kChunkShift = 8;
constexpr int kTileShift = 6;
static_assert(kTile == 1 << kTileShift, "tiles of 2^kTileShift cells");
constexpr int kWarps = 4;          // TILE mode
constexpr int kSplitMaxTokens = 128;  // steps of at most this many tokens use SPLIT mode (batched decode)
constexpr float kLog2e = 1.4426950408889634f;

struct TcJob {
    Rows q;
    const uint16_t* kc;
    int64_t kc_row;
    const uint16_t* vc;
    int64_t vc_row;
    const int32_t* pos;
    const int32_t* seq;
    const int32_t* pages;
    int64_t pages_row;
    AttnParams ap;
    float* out;
    float* part;  // SPLIT: [T][n_head][max_chunks][hd_v + 2] (max, sum, accumulator)
    int T, n_head, group, max_chunks;
    int chunk_shift;  // cells per chunk: 2^chunk_shift (attn_chunk_shift)
};

__device__ __forceinline__ int lo_of(const AttnParams& ap, int p) { return ap.window > 0 ? max(0, p - ap.window + 1) : 0; }

// Folds one chunk's (m, l) into the running (M, L); a and b scale the running accumulator
// and the chunk's: A = fmaf(o, b, A * a). Chunks without a visible cell (m = -inf) are skipped
// by the caller. The same expressions in both modes and in the merge.
__device__ __forceinline__ void fold_chunk(float& M, float& L, float m, float l, float& a, float& b) {
    const float Mn = fmaxf(M, m);
    a = exp2f(M - Mn);
    b = exp2f(m - Mn);
    L = fmaf(l, b, L * a);
    M = Mn;
}

// True when p holds on every lane of the warp (lanes' votes through shuffles).
__device__ __forceinline__ bool warp_all(bool p) {
    int v = p;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) v &= __shfl_xor_sync(0xffffffffu, v, o);
    return v != 0;
}

__device__ __forceinline__ uint32_t pack_h2(float lo, float hi) {
    return uint32_t(f2h(lo)) | (uint32_t(f2h(hi)) << 16);
}

// A block's walk over cells: chunks first, first + step, ... up to last; in each, the tiles
// that meet [tlo, thi].
struct Cursor {
    int chunk, tile;
};

// HALF (SPLIT mode, GQA groups of at most 8): rows 8-15 of the warp are padding, so their
// softmax is skipped (their products still run: the mma takes 16 rows); the real rows' bits
// are the same.
template <int HD, int HDV, int W, bool SPLIT, int STAGES, bool HALF = false>
__global__ void __launch_bounds__(W * 32, 1) attend_tc_kernel(TcJob J) {
    static_assert(HD % 16 == 0 && HDV % 16 == 0, "head sizes: multiples of 16");
    static_assert(HD == HDV, "K and V rows are staged together");
    constexpr int KS = HD + 8, VS = HDV + 8;  // halfs per staged row (16 bytes of padding: no bank conflicts)
    constexpr int kStage = kTile * (KS + VS);  // halfs per pipeline stage
    constexpr int NB = HDV / 8;                // accumulator column blocks
    constexpr int QK = HD / 16;                // k steps of q.k
    constexpr int CL = HALF ? 2 : 4;           // accumulator elements of real rows (c < CL)
    constexpr int RI = HALF ? 1 : 2;           // a thread's real rows
    static_assert(!HALF || SPLIT, "padding rows only in SPLIT mode");
    extern __shared__ __align__(16) uint8_t smem[];
    uint16_t* stage_base = reinterpret_cast<uint16_t*>(smem);
    float* fold_acc = reinterpret_cast<float*>(smem + STAGES * kStage * 2);  // TILE: [NB * 4][W * 32]
    __shared__ int s_seq[W * 16], s_pos[W * 16], s_done[W * 16];
    __shared__ int s_cur, s_lo, s_hi;
    pdl_next();
    pdl_wait();

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
    const int hk = blockIdx.y;
    const int group = J.group;
    const int tpw = SPLIT ? 1 : 16 / group;             // tokens a warp holds
    // The block's first token (TILE: the last tokens first, whose histories are longest).
    const int t0 = SPLIT ? int(blockIdx.z) : int(gridDim.x - 1 - blockIdx.x) * W * tpw;
    const int ntok = SPLIT ? 1 : min(W * tpw, J.T - t0);
    const float scale_log2 = J.ap.scale * kLog2e;  // scores straight to base 2 (no soft-cap)

    // This thread's two rows (g and g + 8 of its warp): token index within the block, head.
    int rtok[2], rhead[2];
    bool rreal[2];
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
        const int r = g + 8 * ri;
        const int tl = warp * tpw + r / group;
        rreal[ri] = r < tpw * group && tl < ntok;
        rtok[ri] = tl;
        rhead[ri] = hk * group + r % group;
    }
    if (threadIdx.x < ntok) {
        s_seq[threadIdx.x] = J.seq[t0 + threadIdx.x];
        s_pos[threadIdx.x] = J.pos[t0 + threadIdx.x];
        s_done[threadIdx.x] = 0;
    }
    // q (rounded to f16) as mma A fragments.
    uint32_t qf[QK][4];
#pragma unroll
    for (int kk = 0; kk < QK; ++kk) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int ri = c & 1, col = kk * 16 + 2 * tq + 8 * (c >> 1);
            float x0 = 0.0f, x1 = 0.0f;
            if (rreal[ri]) {
                const float* qr = J.q.f(rhead[ri], t0 + rtok[ri]);
                x0 = qr[col];
                x1 = qr[col + 1];
            }
            qf[kk][c] = pack_h2(x0, x1);
        }
    }
    if constexpr (!SPLIT) {
        for (int i = threadIdx.x; i < NB * 4 * W * 32; i += W * 32) fold_acc[i] = 0.0f;
    }
    __syncthreads();

    float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.0f, 0.0f};  // TILE: the running fold
    float m[2], l[2], o[NB][4];                                 // the chunk's online softmax
    auto reset_chunk = [&] {
#pragma unroll
        for (int ri = 0; ri < 2; ++ri) m[ri] = -INFINITY, l[ri] = 0.0f;
#pragma unroll
        for (int nb = 0; nb < NB; ++nb)
#pragma unroll
            for (int c = 0; c < 4; ++c) o[nb][c] = 0.0f;
    };

    for (;;) {  // one pass per sequence among the block's tokens (SPLIT: one pass)
        if (threadIdx.x == 0) {
            int cur = -1, lo = INT32_MAX, hi = -1;
            for (int i = 0; i < ntok; ++i) {
                if (s_done[i]) continue;
                if (cur < 0) cur = s_seq[i];
                if (s_seq[i] != cur) continue;
                lo = min(lo, lo_of(J.ap, s_pos[i]));
                hi = max(hi, s_pos[i]);
                s_done[i] = 1;
            }
            s_cur = cur, s_lo = lo, s_hi = hi;
        }
        __syncthreads();
        const int cur = s_cur, clo = s_lo, chi = s_hi;
        if (cur < 0) break;
        bool act[2];
        int rp[2], rlo[2];
#pragma unroll
        for (int ri = 0; ri < 2; ++ri) {
            act[ri] = rreal[ri] && s_seq[rtok[ri]] == cur;
            rp[ri] = act[ri] ? s_pos[rtok[ri]] : -1;
            rlo[ri] = act[ri] ? lo_of(J.ap, rp[ri]) : 0;
        }
        const int32_t* table = J.pages + int64_t(cur) * J.pages_row;
        const int bs_shift = __ffs(J.ap.block_size) - 1, bs_mask = J.ap.block_size - 1;  // a power of two
        const int tlo = clo / kTile, thi = chi / kTile;
        const int cs = J.chunk_shift, tiles_per_chunk = 1 << (cs - kTileShift);
        const int c_first = clo >> cs, c_last = chi >> cs;
        const int c_step = SPLIT ? int(gridDim.x) : 1;
        Cursor first{c_first + (SPLIT ? int(blockIdx.x) : 0), 0};
        first.tile = max(first.chunk * tiles_per_chunk, tlo);
        auto advance = [&](Cursor c) {
            if (c.tile + 1 <= min(c.chunk * tiles_per_chunk + tiles_per_chunk - 1, thi)) return Cursor{c.chunk, c.tile + 1};
            const int nc = c.chunk + c_step;
            return Cursor{nc, max(nc * tiles_per_chunk, tlo)};
        };
        // Stages a tile's K and V rows (zeros outside [clo, chi]: cells never written may hold
        // anything). A thread copies 16 bytes of rows r0, r0 + RS, ... of both caches; a page
        // holds whole 16-cell blocks (block_size >= 16: attention_tc_usable), so one page-table
        // read serves a thread's rows of a 16-row group and the rest are a stride away.
        auto load = [&](int st, int tile) {
            uint16_t* ks = stage_base + st * kStage;
            uint16_t* vs = ks + kTile * KS;
            constexpr int kch = HD / 8;
            constexpr int RS = W * 32 / kch;       // rows one round of the block's threads covers
            constexpr int GR = RS < 16 ? 16 : RS;  // rows of a page-table read
            constexpr int PER = GR / RS;           // a thread's rows in one
            static_assert(kTile % GR == 0 && GR % RS == 0, "whole rounds of 16-byte copies");
            const int r0 = threadIdx.x / kch, ch = threadIdx.x % kch;
            const int c0 = tile * kTile;
            const bool all_in = c0 >= clo && c0 + kTile - 1 <= chi;
            const int64_t kstep = int64_t(RS) * J.kc_row, vstep = int64_t(RS) * J.vc_row;
#pragma unroll
            for (int g = 0; g < kTile / GR; ++g) {
                const int cg = c0 + g * GR + r0;  // the thread's first cell of the group
                const bool any = all_in || (cg <= chi && cg + (PER - 1) * RS >= clo);
                const int64_t cell = any ? (int64_t(table[cg >> bs_shift]) << bs_shift) + (cg & bs_mask) : int64_t(0);
                const uint16_t* kp = J.kc + cell * J.kc_row + int64_t(hk) * HD + ch * 8;
                const uint16_t* vp = J.vc + cell * J.vc_row + int64_t(hk) * HD + ch * 8;
#pragma unroll
                for (int i = 0; i < PER; ++i) {
                    const int r = g * GR + r0 + i * RS;
                    const bool ok = all_in || (c0 + r >= clo && c0 + r <= chi);
                    cp_async16(ks + r * KS + ch * 8, kp + i * kstep, ok);
                    cp_async16(vs + r * VS + ch * 8, vp + i * vstep, ok);
                }
            }
        };
        reset_chunk();
        // A ring of STAGES tiles: STAGES - 1 loads in flight behind the tile being computed.
        Cursor it = first, ld = first;
        for (int i = 0; i < STAGES - 1; ++i) {
            if (ld.chunk <= c_last) {
                load(i, ld.tile);
                ld = advance(ld);
            }
            cp_async_commit();
        }
        int st = 0;
        while (it.chunk <= c_last) {
            const Cursor nx = advance(it);
            if (ld.chunk <= c_last) {
                load((st + STAGES - 1) % STAGES, ld.tile);
                ld = advance(ld);
            }
            cp_async_commit();
            cp_async_wait<STAGES - 1>();
            __syncthreads();
            const uint16_t* ks = stage_base + st * kStage;
            const uint16_t* vs = ks + kTile * KS;
            // S = q . K^T for the warp's 16 rows and the tile's 64 cells.
            float s[8][4];
#pragma unroll
            for (int nb = 0; nb < 8; ++nb)
#pragma unroll
                for (int c = 0; c < 4; ++c) s[nb][c] = 0.0f;
            const int mi = lane >> 3, mr = lane & 7;
#pragma unroll
            for (int kk = 0; kk < QK; ++kk)
#pragma unroll
                for (int nb = 0; nb < 8; nb += 2) {
                    uint32_t b[4];
                    ldsm_x4(b, ks + ((nb + (mi >> 1)) * 8 + mr) * KS + kk * 16 + (mi & 1) * 8);
                    mma_h16<false>(s[nb], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b[0], b[1]);
                    mma_h16<false>(s[nb + 1], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b[2], b[3]);
                }
            // Scores in base 2, cells a row cannot see at -inf (a tile every real row of the warp
            // sees whole skips the test: the same values; padding rows, as in decode's groups of
            // under 16 heads, are never written); the online softmax.
            const int cell0 = it.tile * kTile;
            const bool whole = warp_all((!rreal[0] || (act[0] && cell0 >= rlo[0] && cell0 + kTile - 1 <= rp[0])) &&
                                        (!rreal[1] || (act[1] && cell0 >= rlo[1] && cell0 + kTile - 1 <= rp[1])));
            // (The soft-cap and mask branches are taken once a tile, not once a score; the last
            // product rounded on its own, so that no instantiation fuses it into the exponent's
            // subtraction and the modes keep one arithmetic.)
            if (J.ap.softcap > 0) {
#pragma unroll
                for (int nb = 0; nb < 8; ++nb)
#pragma unroll
                    for (int c = 0; c < CL; ++c)
                        s[nb][c] = __fmul_rn(J.ap.softcap * tanhf(s[nb][c] * J.ap.scale / J.ap.softcap), kLog2e);
            } else {
#pragma unroll
                for (int nb = 0; nb < 8; ++nb)
#pragma unroll
                    for (int c = 0; c < CL; ++c) s[nb][c] = __fmul_rn(s[nb][c], scale_log2);
            }
            if (!whole) {
#pragma unroll
                for (int nb = 0; nb < 8; ++nb)
#pragma unroll
                    for (int c = 0; c < CL; ++c) {
                        const int ri = c >> 1, cell = cell0 + nb * 8 + 2 * tq + (c & 1);
                        if (!(act[ri] && cell >= rlo[ri] && cell <= rp[ri])) s[nb][c] = -INFINITY;
                    }
            }
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int nb = 0; nb < 8; ++nb)
#pragma unroll
                for (int c = 0; c < CL; ++c) mx[c >> 1] = fmaxf(mx[c >> 1], s[nb][c]);
            float corr[2] = {1.0f, 1.0f}, base[2] = {0.0f, 0.0f}, sum[2] = {0.0f, 0.0f};
#pragma unroll
            for (int ri = 0; ri < RI; ++ri) {
                mx[ri] = fmaxf(mx[ri], __shfl_xor_sync(0xffffffffu, mx[ri], 1));
                mx[ri] = fmaxf(mx[ri], __shfl_xor_sync(0xffffffffu, mx[ri], 2));
                const float mn = fmaxf(m[ri], mx[ri]);
                const bool none = mn == -INFINITY;  // nothing visible yet: the tile changes nothing
                corr[ri] = none ? 1.0f : exp2f(m[ri] - mn);
                base[ri] = none ? 0.0f : mn;
                m[ri] = mn;
            }
#pragma unroll
            for (int nb = 0; nb < 8; ++nb)
#pragma unroll
                for (int c = 0; c < CL; ++c) {
                    const float p = exp2f(s[nb][c] - base[c >> 1]);
                    s[nb][c] = p;
                    sum[c >> 1] += p;
                }
#pragma unroll
            for (int ri = 0; ri < RI; ++ri) {
                sum[ri] += __shfl_xor_sync(0xffffffffu, sum[ri], 1);
                sum[ri] += __shfl_xor_sync(0xffffffffu, sum[ri], 2);
                l[ri] = fmaf(l[ri], corr[ri], sum[ri]);
            }
            // A tile that moved no row's maximum leaves the accumulator as it is (corr is then
            // exactly 1, and x * 1 is x): a warp-uniform skip of the rescale, the same bits.
            if (!warp_all(corr[0] == 1.0f && corr[1] == 1.0f)) {
#pragma unroll
                for (int nb = 0; nb < NB; ++nb)
#pragma unroll
                    for (int c = 0; c < CL; ++c) o[nb][c] *= corr[c >> 1];
            }
            // o += P . V (P rounded to f16 as the A operand).
#pragma unroll
            for (int j = 0; j < kTile / 16; ++j) {
                const uint32_t a0 = pack_h2(s[2 * j][0], s[2 * j][1]), a2 = pack_h2(s[2 * j + 1][0], s[2 * j + 1][1]);
                const uint32_t a1 = HALF ? 0u : pack_h2(s[2 * j][2], s[2 * j][3]),
                               a3 = HALF ? 0u : pack_h2(s[2 * j + 1][2], s[2 * j + 1][3]);
#pragma unroll
                for (int nb = 0; nb < NB; nb += 2) {
                    uint32_t b[4];
                    ldsm_x4_trans(b, vs + (j * 16 + (mi & 1) * 8 + mr) * VS + (nb + (mi >> 1)) * 8);
                    mma_h16<false>(o[nb], a0, a1, a2, a3, b[0], b[1]);
                    mma_h16<false>(o[nb + 1], a0, a1, a2, a3, b[2], b[3]);
                }
            }
            if (nx.chunk != it.chunk) {  // the chunk is complete
                if constexpr (SPLIT) {
                    const int slot = it.chunk - c_first;
#pragma unroll
                    for (int ri = 0; ri < 2; ++ri) {
                        if (!act[ri]) continue;
                        float* pp = J.part + ((int64_t(t0 + rtok[ri]) * J.n_head + rhead[ri]) * J.max_chunks + slot) *
                                                 (HDV + 2);
                        if (tq == 0) pp[0] = m[ri], pp[1] = l[ri];
#pragma unroll
                        for (int nb = 0; nb < NB; ++nb) {
                            pp[2 + nb * 8 + 2 * tq] = o[nb][2 * ri];
                            pp[2 + nb * 8 + 2 * tq + 1] = o[nb][2 * ri + 1];
                        }
                    }
                } else {
                    float a[2], b[2];
                    bool has[2];
#pragma unroll
                    for (int ri = 0; ri < 2; ++ri) {
                        has[ri] = m[ri] > -INFINITY;
                        if (has[ri]) fold_chunk(M[ri], L[ri], m[ri], l[ri], a[ri], b[ri]);
                    }
#pragma unroll
                    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
                        for (int c = 0; c < 4; ++c) {
                            if (!has[c >> 1]) continue;
                            float& A = fold_acc[(nb * 4 + c) * (W * 32) + threadIdx.x];
                            A = fmaf(o[nb][c], b[c >> 1], A * a[c >> 1]);
                        }
                }
                reset_chunk();
            }
            __syncthreads();  // the stage is consumed before it is filled again
            st = (st + 1) % STAGES;
            it = nx;
        }
        cp_async_wait<0>();
        if constexpr (SPLIT) break;
        __syncthreads();  // every thread has read this pass's sequence before the next is chosen
    }
    if constexpr (!SPLIT) {
#pragma unroll
        for (int ri = 0; ri < 2; ++ri) {
            if (!rreal[ri]) continue;
            const float inv = 1.0f / L[ri];
            float* out = J.out + (int64_t(t0 + rtok[ri]) * J.n_head + rhead[ri]) * HDV;
#pragma unroll
            for (int nb = 0; nb < NB; ++nb)
#pragma unroll
                for (int c = 2 * ri; c < 2 * ri + 2; ++c)
                    out[nb * 8 + 2 * tq + (c & 1)] = fold_acc[(nb * 4 + c) * (W * 32) + threadIdx.x] * inv;
        }
    }
}

// The chunks a SPLIT merge folds for job (token * n_head + head): from the chunk of the
// token's first visible cell to its own.
__device__ __forceinline__ int merge_chunks(const TcJob& J, int64_t job) {
    const int p = J.pos[int(job / J.n_head)];
    return (p >> J.chunk_shift) - (lo_of(J.ap, p) >> J.chunk_shift) + 1;
}

// SPLIT mode's merge: a block per (token, head), a thread per value dim, folding the token's
// chunks in order. The loads of kMergeAhead chunks' (max, sum, accumulator) are issued before their
// folds (the folds wait on nothing but registers), so a deep cache's hundreds of chunks cost a
// few memory round trips, not one each. The same fold_chunk expressions in the same order.
constexpr int kMergeAhead = 16;
__global__ void attend_tc_merge_kernel(TcJob J, int hd_v) {
    pdl_next();
    pdl_wait();
    const int64_t job = blockIdx.x;  // token * n_head + head
    const int ns = merge_chunks(J, job);
    const float* pp = J.part + job * J.max_chunks * (hd_v + 2);
    for (int i = threadIdx.x; i < hd_v; i += blockDim.x) {
        float M = -INFINITY, L = 0.0f, A = 0.0f;
        for (int c0 = 0; c0 < ns; c0 += kMergeAhead) {
            float mc[kMergeAhead], lc[kMergeAhead] = {}, xc[kMergeAhead] = {};
#pragma unroll
            for (int u = 0; u < kMergeAhead; ++u) {
                mc[u] = -INFINITY;
                if (c0 + u < ns) {
                    const float* q = pp + int64_t(c0 + u) * (hd_v + 2);
                    mc[u] = __ldcg(q);
                    lc[u] = __ldcg(q + 1);
                    xc[u] = __ldcg(q + 2 + i);
                }
            }
#pragma unroll
            for (int u = 0; u < kMergeAhead; ++u) {
                if (!(mc[u] > -INFINITY)) continue;  // past the last chunk, or no visible cell
                float a, b;
                fold_chunk(M, L, mc[u], lc[u], a, b);
                A = fmaf(xc[u], b, A * a);
            }
        }
        J.out[job * hd_v + i] = A * (1.0f / L);
    }
}

// The same merge with the chunks' partial results brought into shared memory a piece of
// `piece` chunks at a time, every element by its own cp.async (all in flight at once), and a
// thread per value dim (blockDim.x == hd_v). The default since it was measured (H200,
// llama3-8b shape, T=1: past 32768 75.1-75.4 -> 66.4-66.8 us the op, past 4096 the same within
// noise; bench/LOG.md 2026-12-07); GLIA_CUDA_ATTN_MERGE=direct takes the merge above. ncu
// (H100, T=1 past 32768) had put that one at 20.7 us beside the split kernel's 57.7,
// latency-bound (32 blocks, 4 % of issue slots).
constexpr int kMergeSmem = 48 * 1024;  // bytes of a piece at most
__global__ void attend_tc_merge_staged_kernel(TcJob J, int hd_v, int piece) {
    extern __shared__ float part[];  // [piece][hd_v + 2]
    pdl_next();
    pdl_wait();
    const int64_t job = blockIdx.x;  // token * n_head + head
    const int ns = merge_chunks(J, job);
    const int row = hd_v + 2, i = threadIdx.x;
    const float* pp = J.part + job * J.max_chunks * row;
    float M = -INFINITY, L = 0.0f, A = 0.0f;
    for (int c0 = 0; c0 < ns; c0 += piece) {
        const int nc = min(piece, ns - c0);
        __syncthreads();  // the previous piece is folded
        for (int e = threadIdx.x; e < nc * row; e += blockDim.x) cp_async4(part + e, pp + int64_t(c0) * row + e, true);
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
        // Unrolled: the shared loads and the exponentials of several chunks overlap; the
        // dependent chain a chunk adds is one product and one fma on L and on A.
#pragma unroll 8
        for (int c = 0; c < nc; ++c) {
            const float mc = part[c * row];
            if (!(mc > -INFINITY)) continue;  // no visible cell in this chunk
            float a, b;
            fold_chunk(M, L, mc, part[c * row + 1], a, b);
            A = fmaf(part[c * row + 2 + i], b, A * a);
        }
    }
    J.out[job * hd_v + i] = A * (1.0f / L);
}

template <int HD, int HDV, int W, bool SPLIT, int STAGES>
size_t tc_smem() {
    return size_t(STAGES * kTile * (HD + 8 + HDV + 8)) * 2 + (SPLIT ? 0 : size_t(HDV / 8) * 4 * W * 32 * 4);
}

template <int HD, int HDV, int W, bool SPLIT, int STAGES, bool HALF = false>
void launch_tc(dim3 grid, cudaStream_t s, const TcJob& J) {
    const size_t smem = tc_smem<HD, HDV, W, SPLIT, STAGES>();
    static const bool attr = [smem] {
        return cudaFuncSetAttribute(attend_tc_kernel<HD, HDV, W, SPLIT, STAGES, HALF>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)) == cudaSuccess;
    }();
    if (!attr) fail("cuda: tensor-core attention needs ", smem, " bytes of shared memory per block");
    launch_pdl(attend_tc_kernel<HD, HDV, W, SPLIT, STAGES, HALF>, grid, dim3(W * 32), smem, s, J);
}

// SPLIT-mode stages: GLIA_CUDA_ATTN_STAGES=2 or 4 fixes them (A/B); 0: by the step's size.
int split_stages() {
    static const int v = [] {
        const char* e = std::getenv("GLIA_CUDA_ATTN_STAGES");
        return e && (std::string(e) == "2" || std::string(e) == "4") ? std::atoi(e) : 0;
    }();
    return v;
}

// Warps of a TILE-mode block (GLIA_CUDA_ATTN_WARPS=8: 8, for A/B).
int tile_warps() {
    static const int w = [] {
        const char* e = std::getenv("GLIA_CUDA_ATTN_WARPS");
        return e && std::string(e) == "8" ? 8 : kWarps;
    }();
    return w;
}

// SPLIT mode's padding-row skip (HALF) for GQA groups of at most 8; GLIA_CUDA_ATTN_HALF=0
// turns it off (A/B: the same bits either way).
bool split_half_on() {
    static const bool on = [] {
        const char* e = std::getenv("GLIA_CUDA_ATTN_HALF");
        return !(e && std::string(e) == "0");
    }();
    return on;
}

template <int HD, bool HALF>
void launch_split(bool deep, dim3 grid, cudaStream_t s, const TcJob& J) {
    if (deep) launch_tc<HD, HD, 1, true, 4, HALF>(grid, s, J);
    else launch_tc<HD, HD, 1, true, 2, HALF>(grid, s, J);
}

// SPLIT mode: four stages (a chunk's four tiles in flight at once) when few blocks share the
// GPU (decode of a few sequences), else two (more blocks a multiprocessor). The same bits.
template <int HD>
void launch_tc_mode(bool split, bool deep, dim3 grid, cudaStream_t s, const TcJob& J) {
    if (split && J.group <= 8 && split_half_on()) launch_split<HD, true>(deep, grid, s, J);
    else if (split) launch_split<HD, false>(deep, grid, s, J);
    else if (tile_warps() == 8) launch_tc<HD, HD, 8, false, 2>(grid, s, J);
    else launch_tc<HD, HD, kWarps, false, 2>(grid, s, J);
}

// The staged merge's chunks a piece (0: the direct merge). By default as many as shared
// memory allows; GLIA_CUDA_ATTN_MERGE=staged:N caps the piece at N chunks (the emulator's
// small cases then fold several pieces), GLIA_CUDA_ATTN_MERGE=direct takes the direct merge.
// Both give the same bits (the chunks folded in the same order by the same operations).
int merge_piece() {
    static const int v = [] {
        const char* e = std::getenv("GLIA_CUDA_ATTN_MERGE");
        const std::string s(e ? e : "");
        if (s == "direct") return 0;
        return s.size() > 7 && s.rfind("staged:", 0) == 0 ? std::max(1, std::atoi(s.c_str() + 7)) : 1 << 30;
    }();
    return v;
}

int attn_chunk_shift() {
    static const int v = [] {
        const char* e = std::getenv("GLIA_CUDA_ATTN_CHUNK");
        const std::string s(e ? e : "");
        for (int sh = kTileShift; sh <= 9; ++sh)
            if (s == std::to_string(1 << sh)) return sh;
        return kChunkShift;
    }();
    return v;
}

int64_t max_chunks_of(const Tensor& kc) {
    const int64_t chunk = int64_t(1) << attn_chunk_shift();
    return (kc.ne[1] + chunk - 1) / chunk + 1;
}

// SPLIT-mode tokens per launch, so that the chunks' partial results fit 256 MiB.
int64_t split_tokens_per_launch(int64_t n_head, int64_t hd_v, int64_t max_chunks) {
    const int64_t per_token = n_head * max_chunks * (hd_v + 2) * 4;
    return std::clamp<int64_t>((int64_t(256) << 20) / per_token, 1, kSplitMaxTokens);
}

}  // namespace

bool attention_tc_usable(const Node& n) {
    // The default (checked on an H100 against the scalar reference, bench/LOG.md 2026-12-06);
    // GLIA_CUDA_ATTN_TC=0 takes the CUDA-core kernel of k_attention.cu instead, for bisecting.
    static const bool on = [] {
        const char* e = std::getenv("GLIA_CUDA_ATTN_TC");
        return !(e && std::string(e) == "0");
    }();
    const Tensor& q = *n.src[AttnArg::Q];
    const Tensor& k = *n.src[AttnArg::K];
    const Tensor& v = *n.src[AttnArg::V];
    const Tensor& kc = *n.src[AttnArg::K_CACHE];
    const Tensor& vc = *n.src[AttnArg::V_CACHE];
    const int64_t hd = q.ne[0], hd_v = v.ne[0], group = q.ne[1] / k.ne[1];
    const int bs = n.p<AttnParams>().block_size;  // pages of 16 cells or more (a power of two): load()
    return on && kc.type == DType::F16 && vc.type == DType::F16 && hd == hd_v && (hd == 64 || hd == 128) && group <= 16 && bs >= 16 && (bs & (bs - 1)) == 0 &&
           kc.nb[1] % 16 == 0 && vc.nb[1] % 16 == 0 &&
           (reinterpret_cast<uintptr_t>(kc.data) & 15) == 0 && (reinterpret_cast<uintptr_t>(vc.data) & 15) == 0;
}

size_t attention_tc_scratch_bytes(const Node& n) {
    const Tensor& q = *n.src[AttnArg::Q];
    const Tensor& v = *n.src[AttnArg::V];
    if (q.ne[2] > kSplitMaxTokens) return 0;
    const int64_t mc = max_chunks_of(*n.src[AttnArg::K_CACHE]);
    const int64_t T = std::min<int64_t>(q.ne[2], split_tokens_per_launch(q.ne[1], v.ne[0], mc));
    return size_t(T * q.ne[1] * mc * (v.ne[0] + 2) * 4);
}

// After the store (launch_attention): the attention itself.
void launch_attention_tc(const Node& n, cudaStream_t s, float* scratch) {
    const Tensor& q = *n.src[AttnArg::Q];
    const Tensor& k = *n.src[AttnArg::K];
    const Tensor& v = *n.src[AttnArg::V];
    const Tensor& kc = *n.src[AttnArg::K_CACHE];
    const Tensor& vc = *n.src[AttnArg::V_CACHE];
    const Tensor& pages = *n.src[AttnArg::PAGES];
    const int64_t hd = q.ne[0], n_head = q.ne[1], T = q.ne[2], n_kv = k.ne[1], hd_v = v.ne[0];
    const int group = int(n_head / n_kv);
    TcJob J;
    J.q = Rows::of(q);
    J.kc = kc.ptr<uint16_t>();
    J.kc_row = int64_t(kc.nb[1] / 2);
    J.vc = vc.ptr<uint16_t>();
    J.vc_row = int64_t(vc.nb[1] / 2);
    J.pos = n.src[AttnArg::POS]->ptr<int32_t>();
    J.seq = n.src[AttnArg::SEQ]->ptr<int32_t>();
    J.pages = pages.ptr<int32_t>();
    J.pages_row = int64_t(pages.nb[1] / 4);
    J.ap = n.p<AttnParams>();
    J.out = n.out->ptr<float>();
    J.part = scratch;
    J.T = int(T), J.n_head = int(n_head), J.group = group;
    J.max_chunks = int(max_chunks_of(kc));
    J.chunk_shift = attn_chunk_shift();
    // SPLIT mode's four stages only while every block has a multiprocessor to itself: two
    // stages fit three one-warp blocks a multiprocessor, which is worth more once blocks queue
    // (H100, llama3-8b shape, past 32768: T=1 249 -> 124 us; bench/LOG.md 2026-12-06 session 19).
    auto deep_for = [&](int64_t blocks) {
        return split_stages() == 4 || (split_stages() == 0 && blocks <= int64_t(sm_count()));
    };
    auto launch = [&](bool split, dim3 grid, const TcJob& job) {
        const bool deep = split && deep_for(int64_t(grid.x) * grid.y * grid.z);
        if (hd == 64) launch_tc_mode<64>(split, deep, grid, s, job);
        else launch_tc_mode<128>(split, deep, grid, s, job);
    };
    if (T > kSplitMaxTokens) {
        const int per_block = tile_warps() * (16 / group);
        launch(false, dim3(unsigned((T + per_block - 1) / per_block), unsigned(n_kv)), J);
        return;
    }
    const int64_t chunk = split_tokens_per_launch(n_head, hd_v, J.max_chunks);
    for (int64_t t0 = 0; t0 < T; t0 += chunk) {
        const int64_t nt = std::min(chunk, T - t0);
        TcJob P = J;
        Tensor qv = q;
        qv.data = static_cast<char*>(q.data) + t0 * q.nb[2];
        P.q = Rows::of(qv);
        P.pos = J.pos + t0;
        P.seq = J.seq + t0;
        P.out = J.out + t0 * n_head * hd_v;
        P.T = int(nt);
        // Block slots per (token, KV head): enough blocks to fill the GPU at any depth; a slot
        // takes chunks slot, slot + slots, ... of its token.
        const int64_t slots = std::clamp<int64_t>(2048 / (n_kv * nt), 1, J.max_chunks);
        launch(true, dim3(unsigned(slots), unsigned(n_kv), unsigned(nt)), P);
        if (merge_piece() == 0) {
            launch_pdl(attend_tc_merge_kernel, dim3(unsigned(nt * n_head)), dim3(unsigned(std::min<int64_t>(hd_v, 128))),
                       0, s, P, int(hd_v));
        } else {
            const int64_t row_bytes = (hd_v + 2) * 4;
            const int64_t piece = std::min<int64_t>({merge_piece(), kMergeSmem / row_bytes, J.max_chunks});
            launch_pdl(attend_tc_merge_staged_kernel, dim3(unsigned(nt * n_head)), dim3(unsigned(hd_v)),
                       size_t(piece * row_bytes), s, P, int(hd_v), int(piece));
        }
    }
}

}  // namespace glia::cuda
