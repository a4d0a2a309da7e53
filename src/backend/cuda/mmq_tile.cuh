// The tensor-core product on packed quantized weights (int8 mma.sync), for prompts, batches
// and MoE experts with many pairs; k_mmvq.cu launches it.
#pragma once

#include "common.cuh"
#include "launch.cuh"
#include "mma.cuh"
#include "packed_terms.cuh"

namespace glia::cuda {
namespace {

// Tensor-core version for many tokens: a block computes 64 rows x 64 tokens, four warps of
// 32 rows (one packed row group) x 32 tokens; for up to 16 tokens, 128 rows x 8 or 16
// tokens, each warp a row group for all of them (MmqShape). For each superblock the block
// stages its packed row groups and its tokens' int8 activations (with their scales and the hi / lo
// parts of their sums of 16) in shared memory; ldmatrix gives the mma fragments. Each
// sub-block's integer dot products come from mma.sync (int8 in, int32 out, exact), and
// each output then takes exactly the dp4a kernel's float steps in the same order
// (per-superblock terms, segment sums added in order), so both kernels give the same bits.
constexpr int kXRow = 272;  // bytes per staged token row (256 + 16 of padding: ldmatrix rows on distinct banks)

// Exact int -> float for |v| < 2^22 with two full-rate operations (the conversion
// instruction runs at a quarter of the rate); the same value as float(v).
__device__ __forceinline__ float small_i2f(int v) { return __int_as_float(0x4B400000 + v) - 12582912.0f; }

struct MmqTile {
    const uint8_t* w;   // the warp's packed row group in shared memory (int4 chunk c of row r at (c * 32 + r) * 16)
    const uint16_t* sd; // its Q6_K side scales
    const uint8_t* x;   // the warp's 32 staged tokens, kXRow bytes each
    const uint8_t* hl;  // their sums of 16 as int8 hi (x64) / lo words, interleaved: 32 bytes a token
    const float* xd;    // their scales of this superblock, NS each
    int lane, g, tig;
};

// A fragments of m-tile mt (rows 16 mt .. + 16 of the group) from chunks c, c + 1: r[0] row
// g chunk c, r[1] row g + 8 chunk c, r[2] row g chunk c + 1, r[3] row g + 8 chunk c + 1.
__device__ __forceinline__ void a_frag(const MmqTile& t, int mt, int c, uint32_t (&r)[4]) {
    const int L = t.lane;
    ldsm_x4(r, t.w + ((c + (L >> 4)) * 32 + 16 * mt + 8 * ((L >> 3) & 1) + (L & 7)) * 16);
}
// B fragments of sub-block s (bytes 32 s .. + 32) for the warp's NTL 8-token tiles (one
// tile: lanes 16-31 name the rows lanes 0-15 do, and r[2], r[3] go unused).
template <int NTL>
__device__ __forceinline__ void b_frag(const MmqTile& t, int s, uint32_t (&b)[NTL][2]) {
    const int L = t.lane;
#pragma unroll
    for (int np = 0; np < (NTL + 1) / 2; ++np) {
        uint32_t r[4];
        ldsm_x4(r, t.x + (np * 16 + (NTL > 1 ? 8 * (L >> 4) : 0) + (L & 7)) * kXRow + 32 * s + 16 * ((L >> 3) & 1));
        b[2 * np][0] = r[0], b[2 * np][1] = r[1];
        if constexpr (NTL > 1) b[2 * np + 1][0] = r[2], b[2 * np + 1][1] = r[3];
    }
}
// Chunk c's 16 bytes of the thread's row h (g + 8 h) of m-tile mt.
__device__ __forceinline__ uint4 row_chunk(const MmqTile& t, int mt, int h, int c) {
    return *reinterpret_cast<const uint4*>(t.w + (c * 32 + 16 * mt + 8 * h + t.g) * 16);
}
__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// For 8-token tile nt: the rows' 16 int8 factors (a0 row g, a1 row g + 8) . each token's 16
// sums of 16 values, exact: the sums' hi (x64) and lo parts through one mma each.
__device__ __forceinline__ void sums_dot(const MmqTile& t, int a0, int a1, int nt, int (&v)[4]) {
    const uint2 p = *reinterpret_cast<const uint2*>(t.hl + (nt * 8 + t.g) * 32 + t.tig * 8);
    int rh[4], rl[4];
    mma_k16(rh, a0, a1, int(p.x));
    mma_k16(rl, a0, a1, int(p.y));
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = 64 * rh[i] + rl[i];
}

// A warp's integer sums of one superblock, [m-tile][n-tile][output], set to zero.
template <int NTL>
__device__ __forceinline__ void zero_sums(int (&v)[2][NTL][4]) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < NTL; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) v[mt][nt][i] = 0;
}

// Output i of an mma tile: row g + 8 (i >> 1), token 2 tig + (i & 1).
template <DType D> struct Mq;

template <> struct Mq<DType::Q4_K> {
    static constexpr int C = 9, NS = 1;
    template <int NTL>
    __device__ static void superblock(const MmqTile& t, float (&seg)[2][NTL][4]) {
        float d[2][2], dm[2][2];
        uint32_t sc[2][2][2], mdup[2][2];  // [mt][h]: scales of sub-blocks 0-3 / 4-7 as bytes; mins for the sums mma
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const uint4 v = row_chunk(t, mt, h, 0);  // d, dmin, then the 12 bytes of 6-bit scales and mins
                d[mt][h] = h2f(uint16_t(v.x & 0xffffu));
                dm[mt][h] = h2f(uint16_t(v.x >> 16));
                // q4k_scale_min for four sub-blocks at once (a byte each)
                sc[mt][h][0] = v.y & 0x3F3F3F3Fu;
                sc[mt][h][1] = (v.w & 0x0F0F0F0Fu) | ((v.y >> 2) & 0x30303030u);
                const uint32_t mlo = v.z & 0x3F3F3F3Fu;
                const uint32_t mhi = ((v.w >> 4) & 0x0F0F0F0Fu) | ((v.z >> 2) & 0x30303030u);
                // k 4 tig .. + 3 of the sums mma: m[2 tig], m[2 tig], m[2 tig + 1], m[2 tig + 1]
                mdup[mt][h] = __byte_perm(t.tig < 2 ? mlo : mhi, 0, (t.tig & 1) ? 0x3322 : 0x1100);
            }
        int isc[2][NTL][4];
        zero_sums(isc);
#pragma unroll 1
        for (int p = 0; p < 4; ++p) {
            uint32_t q[2][4];
            a_frag(t, 0, 1 + 2 * p, q[0]);
            a_frag(t, 1, 1 + 2 * p, q[1]);
#pragma unroll
            for (int hb = 0; hb < 2; ++hb) {
                const int s = 2 * p + hb;
                uint32_t b[NTL][2];
                b_frag<NTL>(t, s, b);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    int a[4];
#pragma unroll
                    for (int i = 0; i < 4; ++i) a[i] = int((hb ? q[mt][i] >> 4 : q[mt][i]) & 0x0F0F0F0Fu);
                    const int s0 = int(((p >= 2 ? sc[mt][0][1] : sc[mt][0][0]) >> (8 * (s & 3))) & 0xffu);
                    const int s1 = int(((p >= 2 ? sc[mt][1][1] : sc[mt][1][0]) >> (8 * (s & 3))) & 0xffu);
#pragma unroll
                    for (int nt = 0; nt < NTL; ++nt) {
                        int r[4];
                        mma_k32(r, a[0], a[1], a[2], a[3], int(b[nt][0]), int(b[nt][1]));
                        isc[mt][nt][0] += s0 * r[0];
                        isc[mt][nt][1] += s0 * r[1];
                        isc[mt][nt][2] += s1 * r[2];
                        isc[mt][nt][3] += s1 * r[3];
                    }
                }
            }
        }
        // imx per output = the row's 8 mins . the token's 8 sums of 32 values = the mins
        // doubled . the 16 sums of 16, on the tensor cores (exact integers).
#pragma unroll
        for (int nt = 0; nt < NTL; ++nt) {
            const float2 xd = *reinterpret_cast<const float2*>(t.xd + nt * 8 + 2 * t.tig);
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
                int imx[4];
                sums_dot(t, int(mdup[mt][0]), int(mdup[mt][1]), nt, imx);
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    seg[mt][nt][i] = __fadd_rn(seg[mt][nt][i], q4k_term(i & 1 ? xd.y : xd.x, d[mt][i >> 1], dm[mt][i >> 1],
                                                                        float(isc[mt][nt][i]), small_i2f(imx[i])));
            }
        }
    }
};

template <> struct Mq<DType::Q6_K> {
    static constexpr int C = 13, NS = 1;
    template <int NTL>
    __device__ static void superblock(const MmqTile& t, float (&seg)[2][NTL][4]) {
        float dr[2][2];
        uint4 scw[2][2];  // [mt][h]: the row's 16 int8 scales
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                dr[mt][h] = h2f(t.sd[16 * mt + 8 * h + t.g]);
                scw[mt][h] = row_chunk(t, mt, h, 12);
            }
        int comb[2][NTL][4];
        zero_sums(comb);
#pragma unroll 1
        for (int h = 0; h < 2; ++h) {
            uint32_t lq[2][2][4], hq[2][4];  // low 4 bits (chunks 4h .. 4h + 3), high 2 bits (8 + 2h, 9 + 2h)
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
                a_frag(t, mt, 4 * h, lq[mt][0]);
                a_frag(t, mt, 4 * h + 2, lq[mt][1]);
                a_frag(t, mt, 8 + 2 * h, hq[mt]);
            }
#pragma unroll 1
            for (int k = 0; k < 4; ++k) {
                const int s = 4 * h + k;
                uint32_t b[NTL][2];
                b_frag<NTL>(t, s, b);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    int a[4];
#pragma unroll
                    for (int i = 0; i < 4; ++i)
                        a[i] = int(q6k_word((k & 1) ? lq[mt][1][i] : lq[mt][0][i], hq[mt][i], k));
                    const int byte = 8 * h + 2 * k;
                    const uint32_t w0 = word_of(scw[mt][0], byte >> 2), w1 = word_of(scw[mt][1], byte >> 2);
                    const int sa0 = int(int8_t(w0 >> (8 * (byte & 3)))), sb0 = int(int8_t(w0 >> (8 * (byte & 3) + 8)));
                    const int sa1 = int(int8_t(w1 >> (8 * (byte & 3)))), sb1 = int(int8_t(w1 >> (8 * (byte & 3) + 8)));
#pragma unroll
                    for (int nt = 0; nt < NTL; ++nt) {
                        int ra[4], rb[4];
                        mma_k16(ra, a[0], a[1], int(b[nt][0]));
                        mma_k16(rb, a[2], a[3], int(b[nt][1]));
                        comb[mt][nt][0] += sa0 * ra[0] + sb0 * rb[0];
                        comb[mt][nt][1] += sa0 * ra[1] + sb0 * rb[1];
                        comb[mt][nt][2] += sa1 * ra[2] + sb1 * rb[2];
                        comb[mt][nt][3] += sa1 * ra[3] + sb1 * rb[3];
                    }
                }
            }
        }
        // The -32 offset of every 6-bit value: 32 * (the row's 16 scales . the token's 16
        // sums), on the tensor cores (exact integers, the same comb).
#pragma unroll
        for (int nt = 0; nt < NTL; ++nt) {
            const float2 xd = *reinterpret_cast<const float2*>(t.xd + nt * 8 + 2 * t.tig);
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
                int off[4];
                sums_dot(t, int(word_of(scw[mt][0], t.tig)), int(word_of(scw[mt][1], t.tig)), nt, off);
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    seg[mt][nt][i] = __fadd_rn(seg[mt][nt][i], q6k_term(i & 1 ? xd.y : xd.x, dr[mt][i >> 1],
                                                                        comb[mt][nt][i] - 32 * off[i]));
            }
        }
    }
};

template <> struct Mq<DType::Q8_0> {
    static constexpr int C = 17, NS = 8;
    template <int NTL>
    __device__ static void superblock(const MmqTile& t, float (&seg)[2][NTL][4]) {
        uint4 dw[2][2];  // [mt][h]: the row's 8 f16 block scales
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) dw[mt][h] = row_chunk(t, mt, h, 16);
#pragma unroll 1
        for (int b = 0; b < 8; ++b) {
            uint32_t bb[NTL][2], q[2][4];
            b_frag<NTL>(t, b, bb);
            a_frag(t, 0, 2 * b, q[0]);
            a_frag(t, 1, 2 * b, q[1]);
            float dr[2][2];  // [mt][h]: the rows' scales of block b
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int h = 0; h < 2; ++h) dr[mt][h] = h2f(uint16_t(word_of(dw[mt][h], b >> 1) >> (16 * (b & 1))));
#pragma unroll
            for (int nt = 0; nt < NTL; ++nt) {
                const float x0 = t.xd[(nt * 8 + 2 * t.tig) * 8 + b], x1 = t.xd[(nt * 8 + 2 * t.tig + 1) * 8 + b];
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    int r[4];
                    mma_k32(r, int(q[mt][0]), int(q[mt][1]), int(q[mt][2]), int(q[mt][3]), int(bb[nt][0]),
                            int(bb[nt][1]));
#pragma unroll
                    for (int i = 0; i < 4; ++i)
                        seg[mt][nt][i] = q8_0_block(seg[mt][nt][i], dr[mt][i >> 1], i & 1 ? x1 : x0, r[i]);
                }
            }
        }
    }
};

// A block's tile of the tensor-core product: WM x WN warps of 32 rows (one packed row group)
// x NTL 8-token tiles each, 128 threads; RB rows x TB tokens. The tile shape changes which
// block computes an output, never its steps, so every shape gives the same bits.
template <int WM_, int WN_, int NTL_>
struct MmqShape {
    static constexpr int WM = WM_, WN = WN_, NTL = NTL_, RB = 32 * WM, TB = 8 * NTL * WN;
    static_assert(WM * WN == 4, "four warps a block");
};
using MmqMany = MmqShape<2, 2, 4>;  // 64 rows x 64 tokens: prompts and large batches
using MmqFew8 = MmqShape<4, 1, 1>;  // 128 rows x 8 tokens: each weight unpacked once for them
using MmqFew16 = MmqShape<4, 1, 2>; // 128 rows x 16 tokens

// One pipeline stage in shared memory: the WM packed row groups of one superblock and the TB
// tokens' activations for it.
template <int C, int NS, class S>
struct MmqStage {
    static constexpr int kW = S::WM * C * 32 * 16, kSide = S::WM * 64, kX = S::TB * kXRow, kHl = S::TB * 32,
                         kXd = S::TB * NS * 4;
    static constexpr int kBytes = kW + kSide + kX + kHl + kXd;
    static constexpr int kTot = 2 * S::NTL * 128 * 16;  // the totals: a float4 per thread per (m-tile, n-tile)
};

// grid (TB-token tiles, RB-row tiles of every matrix in ms, K segments); ms.gstart counts
// RB-row tiles, and the blocks of one row tile are neighbours (its weights are read from
// memory once for all token tiles). Block z sums segments z * seg_per_block onwards: with
// one segment a block (grids too small to fill the GPU otherwise) and several segments in
// all, it writes its sums to part (segment-major, [seg][T][N] per matrix at ms.off) for
// mmq_reduce_kernel to add in order, the dp4a kernel's order; with every segment in one
// block (grid z = 1) it adds each segment's sum to its total in that same order itself.
// Two stages: the copies of superblock j + 1 are in flight while superblock j is computed.
// G (MmqMany only): the grid's x is a tile of one expert's pairs (ga.tiles), whose
// activation rows and output rows come from a table in shared memory (after the totals);
// every K segment in the block.
template <DType D, class S, bool G = false>
__global__ void __launch_bounds__(128, 3) mmq_kernel(MatSet ms, Gather ga, const int8_t* __restrict__ xq,
                                                     const float* __restrict__ xd, const uint32_t* __restrict__ xhl,
                                                     int K, int T, int sb_per_seg, int seg_per_block,
                                                     float* __restrict__ part) {
    constexpr int C = Mq<D>::C, NS = Mq<D>::NS, WM = S::WM, NTL = S::NTL, TB = S::TB;
    static_assert(!G || (WM == 2 && TB == 64), "expert tiles are 64 pairs");
    using St = MmqStage<C, NS, S>;
    extern __shared__ __align__(16) uint8_t smem[];
    const MatQ m = mat_at(ms, int(blockIdx.y));
    const int64_t tile = int64_t(blockIdx.y) - m.first;
    const int N = m.N, groups = (N + 31) / 32;
    const int4* __restrict__ W = m.W;
    const uint16_t* __restrict__ side = m.side;
    int t0 = blockIdx.x * TB;
    const int nsb = K >> 8;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int jb = int(blockIdx.z) * sb_per_seg * seg_per_block, je = min(nsb, jb + sb_per_seg * seg_per_block);

    pdl_next();
    int left = T - t0;  // tokens of this tile that exist (tokens past them read as zeros)
    int* rows = reinterpret_cast<int*>(smem + 2 * St::kBytes + St::kTot);  // G: [64] activation rows, [64] outputs
    if constexpr (G) {
        pdl_wait();  // the pairs' order is the previous kernel's
        const int bx = int(blockIdx.x);
        if (bx >= ga.tiles[ga.n_exp]) return;
        int lo = 0, hi = ga.n_exp - 1;  // the expert e with tiles[e] <= bx < tiles[e + 1]
        while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (ga.tiles[mid] <= bx) lo = mid;
            else hi = mid - 1;
        }
        const int first = ga.pos[lo] + (bx - ga.tiles[lo]) * 64;
        left = min(64, ga.pos[lo + 1] - first);
        if (tid < 64) {
            const int p = tid < left ? ga.sorted[first + tid] : 0;
            rows[tid] = p / ga.x_div;
            rows[64 + tid] = p;
        }
        W += int64_t(lo) * ga.mat_groups * nsb * C * 32;
        if (side) side += int64_t(lo) * ga.mat_groups * nsb * 32;
        t0 = 0;
        __syncthreads();
    }
    // The weights' copies of a stage (no kernel writes them) and the activations' copies.
    // A thread copies the same pieces of every superblock: their offsets are set up once.
    const int64_t gstride = int64_t(nsb) * C * 32;  // int4 between the records of two row groups
    const int4* __restrict__ Wt = W + tile * WM * gstride;
    const int here = min(WM, groups - int(tile) * WM);  // the tile's row groups that exist
    auto issue_w = [&](int stage, int j) {
        int4* wsm = reinterpret_cast<int4*>(smem + stage * St::kBytes);
        const int4* src = Wt + j * C * 32;
#pragma unroll
        for (int k = 0; k < (WM * C * 32 + 127) / 128; ++k) {
            const int idx = tid + 128 * k;
            if (idx < WM * C * 32) {
                const int grp = WM == 2 ? int(idx >= C * 32) : idx / (C * 32);
                const bool ok = grp < here;
                cp_async16(wsm + idx, ok ? src + grp * (gstride - C * 32) + idx : W, ok);
            }
        }
        if (D == DType::Q6_K && tid < 4 * WM) {
            const bool ok = tid / 4 < here;
            cp_async16(smem + stage * St::kBytes + St::kW + tid * 16,
                       ok ? reinterpret_cast<const int4*>(side + ((tile * WM + tid / 4) * nsb + j) * 32) + tid % 4
                          : reinterpret_cast<const int4*>(side),
                       ok);
        }
    };
    // x: token (tid / 16) + 8k, 16-byte piece tid % 16; the sums: token tid / 2, half tid % 2;
    // the scales: token tid (NS = 1) or (tid / 8) + 16k, scale tid % 8 (NS = 8); tokens
    // below TB. Row r of the tile reads activation row t0 + r (G: rows[r]).
    auto xrow = [&](int r) -> int64_t {
        if constexpr (G) return rows[r];
        else return t0 + r;
    };
    const int8_t* __restrict__ xsrc = xq + (G ? 0 : xrow(tid >> 4) * K) + (tid & 15) * 16;
    const uint32_t* __restrict__ hsrc = xhl + (G ? 0 : xrow(tid >> 1) * nsb * 8) + (tid & 1) * 4;
    const float* __restrict__ dsrc =
        NS == 1 ? xd + (G ? 0 : xrow(tid) * nsb) : xd + (G ? 0 : xrow(tid >> 3) * nsb * 8) + (tid & 7);
    auto issue_x = [&](int stage, int j) {
        uint8_t* st = smem + stage * St::kBytes;
        uint8_t* xsm = st + St::kW + St::kSide + (tid >> 4) * kXRow + (tid & 15) * 16;
#pragma unroll
        for (int k = 0; k < TB / 8; ++k) {
            const bool ok = (tid >> 4) + 8 * k < left;
            const int64_t off = G ? xrow((tid >> 4) + 8 * k) * K : int64_t(8 * k) * K;
            cp_async16(xsm + 8 * k * kXRow, ok ? xsrc + off + j * 256 : xq, ok);
        }
        if (D != DType::Q8_0 && tid < 2 * TB) {  // Q8_0 has no use for the sums
            const bool ok = (tid >> 1) < left;
            const int64_t off = G ? xrow(tid >> 1) * nsb * 8 : 0;
            cp_async16(st + St::kW + St::kSide + St::kX + tid * 16, ok ? hsrc + off + j * 8 : xhl, ok);
        }
        float* xdsm = reinterpret_cast<float*>(st + St::kW + St::kSide + St::kX + St::kHl);
        if (NS == 1) {
            const int64_t off = G && tid < 64 ? xrow(tid) * nsb : 0;
            if (tid < TB) cp_async4(xdsm + tid, tid < left ? dsrc + off + j : xd, tid < left);
        } else {
#pragma unroll
            for (int k = 0; k < (TB * 8 + 127) / 128; ++k) {
                const int tk = (tid >> 3) + 16 * k;
                const bool ok = tk < left;
                const int64_t off = G ? xrow(tk) * nsb * 8 : int64_t(16 * k) * nsb * 8;
                if (tk < TB) cp_async4(xdsm + tid + 128 * k, ok ? dsrc + off + j * 8 : xd, ok);
            }
        }
    };

    // The running segment sums in registers; the totals in shared memory (after the stages),
    // float4 q of thread tid at tot4[q * 128 + tid], touched once a segment.
    float seg[2][NTL][4];
    float4* tot4 = reinterpret_cast<float4*>(smem + 2 * St::kBytes);
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < NTL; ++nt) {
#pragma unroll
            for (int i = 0; i < 4; ++i) seg[mt][nt][i] = 0.0f;
            tot4[(mt * NTL + nt) * 128 + tid] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    if (jb < je) issue_w(0, jb);
    if constexpr (!G) pdl_wait();  // the first weights are on their way; the activations are the previous kernel's
    if (jb < je) issue_x(0, jb);
    cp_async_commit();
    const int wm = warp % WM, wn = warp / WM;
    MmqTile t;
    t.lane = lane;
    t.g = lane >> 2;
    t.tig = lane & 3;
    for (int j = jb; j < je; ++j) {
        const int stage = (j - jb) & 1;
        if (j + 1 < je) issue_w(stage ^ 1, j + 1), issue_x(stage ^ 1, j + 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const uint8_t* st = smem + stage * St::kBytes;
        t.w = st + wm * C * 32 * 16;
        t.sd = reinterpret_cast<const uint16_t*>(st + St::kW) + wm * 32;
        t.x = st + St::kW + St::kSide + wn * NTL * 8 * kXRow;
        t.hl = st + St::kW + St::kSide + St::kX + wn * NTL * 8 * 32;
        t.xd = reinterpret_cast<const float*>(st + St::kW + St::kSide + St::kX + St::kHl) + wn * NTL * 8 * NS;
        Mq<D>::template superblock<NTL>(t, seg);
        if ((j + 1) % sb_per_seg == 0 || j + 1 == je) {  // a segment ends: its sum joins the total
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int nt = 0; nt < NTL; ++nt) {
                    float4& tv = tot4[(mt * NTL + nt) * 128 + tid];
                    float4 v = tv;
                    v.x = __fadd_rn(v.x, seg[mt][nt][0]);
                    v.y = __fadd_rn(v.y, seg[mt][nt][1]);
                    v.z = __fadd_rn(v.z, seg[mt][nt][2]);
                    v.w = __fadd_rn(v.w, seg[mt][nt][3]);
                    tv = v;
#pragma unroll
                    for (int i = 0; i < 4; ++i) seg[mt][nt][i] = 0.0f;
                }
        }
        __syncthreads();  // this stage is refilled by the next iteration's copies
    }
    float* __restrict__ out = gridDim.z > 1 ? part + m.off + int64_t(blockIdx.z) * T * N : m.out;
    const int64_t row0 = tile * S::RB + wm * 32 + t.g;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < NTL; ++nt) {
            const float4 v = tot4[(mt * NTL + nt) * 128 + tid];
            const float tv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int64_t row = row0 + 16 * mt + 8 * (i >> 1);
                const int tok = wn * NTL * 8 + nt * 8 + 2 * t.tig + (i & 1);
                if (row < N && tok < left) out[int64_t(G ? rows[64 + tok] : t0 + tok) * N + row] = tv[i];
            }
        }
}

}  // namespace
}  // namespace glia::cuda
