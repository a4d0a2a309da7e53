// MATMUL with F16/BF16 weights on tensor cores (mma.sync m16n8k16, f32 accumulation), for
// any number of tokens: out[t][r] = W[r] . x[t], x rounded to the weight's 16-bit type first
// (the values the reference's product sees; the products are then exact).
//
// One order of operations for every output, whatever the number of tokens:
//  - K is walked in steps of 32 values. In step j, lane (g = lane / 4, t = lane % 4) of a
//    16-row tile holds values [32j + 8t, 32j + 8t + 8) of rows g and g + 8 and of token g
//    of an 8-token tile, as four 2-value registers each; registers 0, 1 feed one mma and
//    registers 2, 3 the next (so each mma sees the k order the hardware fixes for it, with
//    every lane's 16 bytes loaded in one piece).
//  - The steps are cut into segments that depend on K alone (split_of): each segment's sum
//    is a chain of mma from zero over its steps in order, and the output is
//    ((0 + s0) + s1) + ... in segment order.
//  - Row tiles start at multiples of 16 and token tiles at multiples of 8, so an output has
//    the same place in its mma whatever kernel computes it.
// The one-to-32-token kernel (a warp per segment, weights straight from global memory into
// fragments), the one-to-eight-token streaming kernel (below) and the many-token kernel
// (tiles of 128 rows x 64 tokens staged in shared memory by cp.async) all follow it, so a
// batch changes no bits; which one runs depends on speed alone. GLIA_MMA16_WGMMA=1: many
// tokens on warpgroup instructions instead (mma16_wg_kernel: the same bits, measured slower). Products of one input
// (q/k/v, gate/up) share a launch (Mats16).
//
// One to eight tokens (decode) are bound by the weights' bandwidth: an SM needs ~25 KB of
// loads in flight all the time (4 TB/s x ~0.7 us / 132 SMs). GLIA_MMA16_ROWS picks how:
//  0: the one-to-32-token kernel: a block of 16 rows, 16 warps of 112 registers (one block
//     an SM), each loading its whole 8-step segment at once when K = 4096: the SM's loads
//     come in bursts with nothing in flight between its blocks.
//  1 (default): the streaming kernel, a block per 16-row tile: 8 warps of at most 80
//     registers (three blocks an SM), each with a ring of 4 steps (4 KB) of loads always in
//     flight over its run of segments, x read from shared memory (the tokens' rounded rows,
//     staged once).
//  2: the same, with as many tiles a block as make the grid one wave of resident blocks (a
//     ramp and x staged once a block). Faster alone (bench-ops, 4096 x 4096: 12.9 us against
//     15.9), slower in a decode step (llama3-8b F16 tg128 181 against 185 t/s: its long
//     blocks leave the next kernel no room to start early).
// Measured (bench/LOG.md session 9): llama3-8b F16 tg128 158.8 (0), 185.4 (1).
// Where x and the sums would take more than kStreamSmem (eight tokens of K > 6000) the
// one-to-32-token kernel runs whatever the setting.
#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "common.cuh"
#include "mma.cuh"

namespace glia::cuda {
namespace {

// K's segments: its steps of 32 values, at least 8 a segment.
KSplit split_of(int64_t K) { return cut_k(int(K / 32), 8); }

// Two floats as one register of two 16-bit values (the lower k in the low half).
template <bool bf16>
__device__ __forceinline__ uint32_t pack_h2(float lo, float hi) {
    if constexpr (bf16) return uint32_t(f2bf(lo)) | (uint32_t(f2bf(hi)) << 16);
    else return uint32_t(f2h(lo)) | (uint32_t(f2h(hi)) << 16);
}

// A lane's 8 activation values at offset off: from the 16-bit copy (xh) or rounded here.
template <bool bf16>
__device__ __forceinline__ uint4 x_frag(const float* __restrict__ x32, const uint16_t* __restrict__ xh, int64_t off) {
    if (xh) return *reinterpret_cast<const uint4*>(xh + off);
    const float4 p = *reinterpret_cast<const float4*>(x32 + off);
    const float4 q = *reinterpret_cast<const float4*>(x32 + off + 4);
    return make_uint4(pack_h2<bf16>(p.x, p.y), pack_h2<bf16>(p.z, p.w), pack_h2<bf16>(q.x, q.y),
                      pack_h2<bf16>(q.z, q.w));
}

// Up to kMats products of one input in one launch (q/k/v, gate/up): blocks [start[m],
// start[m + 1]) of the grid's row dimension are matrix m's row tiles (16 or 128 rows).
constexpr int kMats = 4;
struct Mats16 {
    const uint8_t* W[kMats];
    float* out[kMats];
    int N[kMats];
    int start[kMats + 1];
    int n;
    int64_t w_row;  // bytes between weight rows (the same in every matrix)
};
// Block b's matrix, picked with constant indices only (an indexed kernel parameter would
// be copied to local memory by every thread).
struct Mat16 {
    const uint8_t* w;
    float* out;
    int N, first;
};
__device__ __forceinline__ Mat16 mat_of(const Mats16& ms, int b) {
    Mat16 r{ms.W[0], ms.out[0], ms.N[0], 0};
#pragma unroll
    for (int i = 1; i < kMats; ++i)
        if (i < ms.n && b >= ms.start[i]) r = Mat16{ms.W[i], ms.out[i], ms.N[i], ms.start[i]};
    return r;
}

// Each output of a 16-row, 8 NT-token block: its segment sums (part: [nseg][NT][32 lanes][4],
// the lanes' mma layout) added in order from zero.
template <int NT>
__device__ __forceinline__ void add_segments(const float* part, float* __restrict__ out, int N, int T, int r0, int t0,
                                             int nseg) {
    for (int o = threadIdx.x; o < NT * 128; o += blockDim.x) {
        const int i = o >> 7, ln = (o >> 2) & 31, c = o & 3;
        const int row = r0 + (ln >> 2) + 8 * (c >> 1), tk = t0 + 8 * i + 2 * (ln & 3) + (c & 1);
        if (row >= N || tk >= T) continue;
        float sum = 0.0f;
        for (int s = 0; s < nseg; ++s) sum = __fadd_rn(sum, part[((s * NT + i) * 32 + ln) * 4 + c]);
        out[int64_t(tk) * N + row] = sum;
    }
}

constexpr int kAhead = 4;  // steps of weight loads a warp has in flight while it computes as many

// Block: 16 rows x 8 NT tokens, a warp per segment (blockDim = nseg warps, or fewer that take
// segments w, w + warps, ...); each warp's segment sum goes to shared memory and the block
// adds each output's sums in order. A warp loads the next kAhead steps of its two rows
// before it multiplies the current ones. x: float rows (x32, x_row floats apart, 16-byte
// aligned) rounded here, or the 16-bit copy xh (K apart).
template <bool bf16, int NT>
__global__ void __launch_bounds__(512) mma16_rows_kernel(Mats16 ms, const float* __restrict__ x32, int64_t x_row,
                                                         const uint16_t* __restrict__ xh, int T, int K, int cps,
                                                         int nseg) {
    extern __shared__ float part[];  // [nseg][NT][32 lanes][4]
    pdl_next();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const Mat16 mt = mat_of(ms, blockIdx.x);
    const int N = mt.N;
    const uint8_t* __restrict__ w = mt.w;
    float* __restrict__ out = mt.out;
    const int64_t w_row = ms.w_row;
    const int r0 = (int(blockIdx.x) - mt.first) * 16, t0 = blockIdx.y * 8 * NT;
    const int steps = K / 32;
    const bool oka = r0 + g < N, okb = r0 + g + 8 < N;
    const uint4* ra = reinterpret_cast<const uint4*>(w + int64_t(oka ? r0 + g : 0) * w_row) + t;
    const uint4* rb = reinterpret_cast<const uint4*>(w + int64_t(okb ? r0 + g + 8 : 0) * w_row) + t;
    const int64_t xs = xh ? int64_t(K) : x_row;
    // Steps j .. j + kAhead - 1 (those below j1) of rows g and g + 8, zeros past them.
    auto load = [&](uint4 (&wa)[kAhead], uint4 (&wb)[kAhead], int j, int j1) {
#pragma unroll
        for (int u = 0; u < kAhead; ++u) {
            const bool in = j + u < j1;
            wa[u] = in && oka ? __ldg(ra + 4 * (j + u)) : make_uint4(0, 0, 0, 0);
            wb[u] = in && okb ? __ldg(rb + 4 * (j + u)) : make_uint4(0, 0, 0, 0);
        }
    };
    bool waited = false;
    for (int s = warp; s < nseg; s += nw) {
        const int j0 = s * cps, j1 = min(steps, j0 + cps);
        float acc[NT][4];
#pragma unroll
        for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
        uint4 wa[kAhead], wb[kAhead], na[kAhead], nb[kAhead];
        load(wa, wb, j0, j1);
        if (!waited) {
            pdl_wait();  // the first weights are on their way; x is the previous kernel's
            waited = true;
        }
        for (int j = j0; j < j1; j += kAhead) {
            const bool more = j + kAhead < j1;
            if (more) load(na, nb, j + kAhead, j1);
#pragma unroll
            for (int u = 0; u < kAhead; ++u) {
                if (j + u >= j1) break;
#pragma unroll
                for (int i = 0; i < NT; ++i) {
                    const int tk = t0 + 8 * i + g;
                    const uint4 xb = tk < T ? x_frag<bf16>(x32, xh, tk * xs + (j + u) * 32 + 8 * t)
                                            : make_uint4(0, 0, 0, 0);
                    mma_h16<bf16>(acc[i], wa[u].x, wb[u].x, wa[u].y, wb[u].y, xb.x, xb.y);
                    mma_h16<bf16>(acc[i], wa[u].z, wb[u].z, wa[u].w, wb[u].w, xb.z, xb.w);
                }
            }
            if (more) {
#pragma unroll
                for (int u = 0; u < kAhead; ++u) wa[u] = na[u], wb[u] = nb[u];
            }
        }
#pragma unroll
        for (int i = 0; i < NT; ++i)
#pragma unroll
            for (int c = 0; c < 4; ++c) part[((s * NT + i) * 32 + lane) * 4 + c] = acc[i][c];
    }
    if (!waited) pdl_wait();
    __syncthreads();
    add_segments<NT>(part, out, N, T, r0, t0, nseg);
}

// One to eight tokens, streaming: a block of kStreamWarps warps computes R consecutive 16-row
// tiles of one matrix (blocks of 16 R rows in ms) for all T tokens. Its items, (tile,
// segment) tile-major, are cut into runs of consecutive items, a run a warp: a warp's run
// is one stretch of K of each of its tiles, which it streams step after step with a ring
// of kRing steps of loads in flight (slot u reloaded with the step kRing ahead as soon as
// its mma are issued; the next tile's first steps load while the current one ends). At a
// segment's end the warp writes its sum (the T tokens' values only) to shared memory;
// after the block's last step each output adds its segment sums in order from zero. The
// block rounds the T rows of x into shared memory once (rows xk = K + 8 apart, so that the
// tokens' fragments fall in different banks); lanes of tokens g >= T feed zeros (their
// columns are discarded). Rows past N load row N - 1 (their rows are discarded).
constexpr int kStreamWarps = 8, kStreamThreads = kStreamWarps * 32;
constexpr int kStreamSmem = 96 * 1024;  // shared memory a block may take (x and the sums)

template <bool bf16, int kRing, int kMinBlocks>
__global__ void __launch_bounds__(kStreamThreads, kMinBlocks)
    mma16_stream_kernel(Mats16 ms, const float* __restrict__ x32, int64_t x_row, const uint16_t* __restrict__ xh,
                        int T, int K, int cps, int nseg, int R) {
    extern __shared__ __align__(16) uint8_t smem[];
    pdl_next();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int steps = K / 32, xk = K + 8;
    uint16_t* xs = reinterpret_cast<uint16_t*>(smem);           // [T][xk]
    float* part = reinterpret_cast<float*>(smem + size_t(T) * xk * 2);  // [R][nseg][T][16 rows]
    const Mat16 mt = mat_of(ms, blockIdx.x);
    const int N = mt.N, row0 = (int(blockIdx.x) - mt.first) * R * 16, nt = min(R, (N - row0 + 15) / 16);
    // This warp's run: items [i0, i1), n steps from step jc of local tile rc (segment s).
    const int items = nt * nseg, per = (items + kStreamWarps - 1) / kStreamWarps;
    const int i0 = min(items, warp * per), i1 = min(items, i0 + per);
    int rc = i0 / nseg, s = i0 % nseg, jc = s * cps, left = min(cps, steps - jc);
    const int n = (i1 / nseg - rc) * steps + (i1 % nseg) * cps - jc;
    // The load cursor runs kRing steps ahead of (rc, jc): local tile rl, the next step's
    // pieces of rows g and g + 8 at ra and rb, ll steps left in the tile.
    int rl = rc, ll = steps - jc;
    const uint4* ra;
    const uint4* rb;
    auto rows_of = [&](int r, int j) {
        const int a = row0 + 16 * r + g;
        ra = reinterpret_cast<const uint4*>(mt.w + int64_t(min(a, N - 1)) * ms.w_row) + 4 * j + t;
        rb = reinterpret_cast<const uint4*>(mt.w + int64_t(min(a + 8, N - 1)) * ms.w_row) + 4 * j + t;
    };
    rows_of(rl, jc);
    uint4 wa[kRing], wb[kRing];
    auto load = [&](uint4& a, uint4& b) {
        a = __ldg(ra);
        b = __ldg(rb);
        ra += 4, rb += 4;
        if (--ll == 0) {
            ll = steps;
            rows_of(++rl, 0);
        }
    };
#pragma unroll
    for (int u = 0; u < kRing; ++u)
        if (u < n) load(wa[u], wb[u]);
    pdl_wait();  // the first weights are on their way; x is the previous kernel's
    {
        // x's rows, 8 values a thread at a time, four loads in flight before the stores.
        const int per_row = K / 8, all = T * per_row;
        const int64_t xstr = xh ? int64_t(K) : x_row;
        for (int i = threadIdx.x; i < all; i += 4 * kStreamThreads) {
            uint4 v[4];
#pragma unroll
            for (int a = 0; a < 4; ++a) {
                const int c = i + a * kStreamThreads, tk = c / per_row;
                if (c < all) v[a] = x_frag<bf16>(x32, xh, tk * xstr + (c - tk * per_row) * 8);
            }
#pragma unroll
            for (int a = 0; a < 4; ++a) {
                const int c = i + a * kStreamThreads, tk = c / per_row;
                if (c < all) *reinterpret_cast<uint4*>(xs + tk * xk + (c - tk * per_row) * 8) = v[a];
            }
        }
    }
    __syncthreads();
    const uint4* xr = reinterpret_cast<const uint4*>(xs + g * xk) + t;  // token g's fragments (g < T)
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int q = 0; q < n; q += kRing) {
#pragma unroll
        for (int u = 0; u < kRing; ++u) {
            if (q + u >= n) break;
            const uint4 xb = g < T ? xr[4 * jc] : make_uint4(0, 0, 0, 0);
            mma_h16<bf16>(acc, wa[u].x, wb[u].x, wa[u].y, wb[u].y, xb.x, xb.y);
            mma_h16<bf16>(acc, wa[u].z, wb[u].z, wa[u].w, wb[u].w, xb.z, xb.w);
            if (q + u + kRing < n) load(wa[u], wb[u]);
            if (++jc == steps) jc = 0;
            if (--left == 0) {  // segment s of tile rc ends: its sums of the T tokens
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const int tk = 2 * t + (c & 1);
                    if (tk < T) part[((rc * nseg + s) * T + tk) * 16 + g + 8 * (c >> 1)] = acc[c];
                    acc[c] = 0.0f;
                }
                if (++s == nseg) {
                    s = 0;
                    ++rc;
                }
                left = min(cps, steps - s * cps);
            }
        }
    }
    __syncthreads();
    for (int o = threadIdx.x; o < nt * T * 16; o += kStreamThreads) {
        const int r = o / (T * 16), tk = (o >> 4) % T, row = row0 + 16 * r + (o & 15);
        if (row >= N) continue;
        float sum = 0.0f;
        for (int e = 0; e < nseg; ++e) sum = __fadd_rn(sum, part[((r * nseg + e) * T + tk) * 16 + (o & 15)]);
        mt.out[int64_t(tk) * N + row] = sum;
    }
}

// Many tokens: a block computes 128 rows x BN tokens, warps of 64 rows x 32 tokens (2 x
// BN / 32 of them); each step's 128 weight rows and BN token rows (64 bytes each) go to
// shared memory by cp.async, kStages steps ahead. Each warp keeps its running segment sums
// (acc) and totals. Blocks with the same rows are neighbours in the grid (x: token tiles).
constexpr int kBM = 128, kStages = 4;
template <int BN> constexpr int stage_bytes() { return (kBM + BN) * 64; }
template <int BN> constexpr int tile_smem() { return kStages * stage_bytes<BN>(); }

// A many-token block's weight pieces: this thread copies 16-byte pieces tid, tid + threads,
// ... of a step's kBM weight rows (piece c: row c / 4, values 8 (c % 4) .. + 8, at byte 16 c
// of the stage); their sources, set up once (rows past N copy zeros).
template <int kThreads, int kWp>
__device__ __forceinline__ void weight_pieces(const uint8_t* (&src)[kWp], bool (&ok)[kWp], const uint8_t* w,
                                              int64_t w_row, int r0, int N, int tid) {
#pragma unroll
    for (int i = 0; i < kWp; ++i) {
        const int c = tid + kThreads * i, row = c >> 2;
        ok[i] = r0 + row < N;
        src[i] = w + int64_t(ok[i] ? r0 + row : 0) * w_row + (c & 3) * 16;
    }
}

template <bool bf16, int BN>
__global__ void __launch_bounds__(BN * 2, 1) mma16_tile_kernel(Mats16 ms, const uint16_t* __restrict__ xh, int T,
                                                               int K, int cps) {
    extern __shared__ __align__(16) uint8_t smem[];
    constexpr int kThreads = BN * 2, kStageBytes = stage_bytes<BN>();
    pdl_next();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int wm = warp & 1, wn = warp >> 1;
    const Mat16 mt = mat_of(ms, blockIdx.y);
    const int N = mt.N;
    const uint8_t* __restrict__ w = mt.w;
    float* __restrict__ out = mt.out;
    const int64_t w_row = ms.w_row;
    const int n0 = blockIdx.x * BN, r0 = (int(blockIdx.y) - mt.first) * kBM;
    const int steps = K / 32;
    // Stage of step j: this thread copies 16-byte pieces tid, tid + threads, ... of the
    // weight rows and of the token rows (piece c: row c / 4, values 8 (c % 4) .. + 8). The
    // pieces are the same in every step: their sources are set up once (rows past N or T
    // copy zeros).
    constexpr int kWp = kBM * 4 / kThreads, kXp = BN * 4 / kThreads;
    const uint8_t* wsrc[kWp];
    const uint16_t* xsrc[kXp];
    bool wok[kWp], xok[kXp];
    weight_pieces<kThreads>(wsrc, wok, w, w_row, r0, N, tid);
#pragma unroll
    for (int i = 0; i < kXp; ++i) {
        const int c = tid + kThreads * i, row = c >> 2;
        xok[i] = n0 + row < T;
        xsrc[i] = xh + int64_t(xok[i] ? n0 + row : 0) * K + (c & 3) * 8;
    }
    auto load = [&](int j, int stage) {
        uint8_t* st = smem + stage * kStageBytes + tid * 16;
#pragma unroll
        for (int i = 0; i < kWp; ++i) cp_async16(st + kThreads * 16 * i, wsrc[i] + int64_t(j) * 64, wok[i]);
#pragma unroll
        for (int i = 0; i < kXp; ++i) cp_async16(st + kBM * 64 + kThreads * 16 * i, xsrc[i] + int64_t(j) * 32, xok[i]);
    };
    float acc[4][4][4], tot[4][4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[a][b][c] = tot[a][b][c] = 0.0f;
    pdl_wait();
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < steps) load(s, s);
        cp_async_commit();
    }
    int left = cps;  // steps of the current segment still to come
    for (int j = 0; j < steps; ++j) {
        cp_async_wait<kStages - 2>();
        __syncthreads();  // step j's stage has arrived for every thread; step j - 1's is free
        if (j + kStages - 1 < steps) load(j + kStages - 1, (j + kStages - 1) % kStages);
        cp_async_commit();
        const uint8_t* st = smem + (j % kStages) * kStageBytes;
        uint4 xb[4];
#pragma unroll
        for (int b = 0; b < 4; ++b)
            xb[b] = *reinterpret_cast<const uint4*>(st + (kBM + wn * 32 + b * 8 + g) * 64 + t * 16);
#pragma unroll
        for (int a = 0; a < 4; ++a) {
            const uint4 wa = *reinterpret_cast<const uint4*>(st + (wm * 64 + a * 16 + g) * 64 + t * 16);
            const uint4 wb = *reinterpret_cast<const uint4*>(st + (wm * 64 + a * 16 + g + 8) * 64 + t * 16);
#pragma unroll
            for (int b = 0; b < 4; ++b) {
                mma_h16<bf16>(acc[a][b], wa.x, wb.x, wa.y, wb.y, xb[b].x, xb[b].y);
                mma_h16<bf16>(acc[a][b], wa.z, wb.z, wa.w, wb.w, xb[b].z, xb[b].w);
            }
        }
        if (--left == 0 || j + 1 == steps) {  // a segment ends: add its sums in order
            left = cps;
#pragma unroll
            for (int a = 0; a < 4; ++a)
#pragma unroll
                for (int b = 0; b < 4; ++b)
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        tot[a][b][c] = __fadd_rn(tot[a][b][c], acc[a][b][c]);
                        acc[a][b][c] = 0.0f;
                    }
        }
    }
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int row = r0 + wm * 64 + a * 16 + g + 8 * (c >> 1);
                const int tk = n0 + wn * 32 + b * 8 + 2 * t + (c & 1);
                if (row < N && tk < T) out[int64_t(tk) * N + row] = tot[a][b][c];
            }
}

// Many tokens on sm_90a: the tile kernel's tiles (128 rows x BN tokens, steps of 32 values
// staged by cp.async kStages ahead) multiplied by warpgroup instructions (wgmma): two
// warpgroups of 64 rows, A (the weights) from shared memory into registers in mma.sync's
// layout, B (the tokens) read by the instruction from shared memory. The bits are the tile
// kernel's if each instruction sees the values mma.sync sees in each k position: A's
// registers are the same, and x is staged permuted (round_h16_kernel<perm>: position 8c +
// 2t + e of each 32 holds value 8t + 2c + e), so that 16-byte piece c of a step is what
// mma.sync's B fragment registers hold in k order (mma 1: pieces 0, 1; mma 2: 2, 3). Each
// step: its two products issued, the previous step's awaited (its stage and A registers are
// then free), the next stage's copies issued and the next A loaded while these run; a
// segment's end waits for its last products before adding the sums to the totals.
template <bool bf16, int BN>
__global__ void __launch_bounds__(256, 1) mma16_wg_kernel(Mats16 ms, const uint16_t* __restrict__ xh, int T, int K,
                                                         int cps) {
    extern __shared__ __align__(16) uint8_t smem[];
    constexpr int kThreads = 256, kStageBytes = stage_bytes<BN>();
    pdl_next();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const Mat16 mt = mat_of(ms, blockIdx.y);
    const int N = mt.N;
    const uint8_t* __restrict__ w = mt.w;
    float* __restrict__ out = mt.out;
    const int64_t w_row = ms.w_row;
    const int n0 = blockIdx.x * BN, r0 = (int(blockIdx.y) - mt.first) * kBM;
    const int steps = K / 32;
    // Weight piece c: row c / 4, values 8 (c % 4) .. + 8, at byte 16 c of the stage (64-byte
    // rows). Token piece c: token n = c / 4, piece q = c % 4, in core matrix (n / 8, q): byte
    // kBM * 64 + (4 (n / 8) + q) * 128 + 16 (n % 8).
    constexpr int kWp = kBM * 4 / kThreads, kXp = BN * 4 / kThreads;
    const uint8_t* wsrc[kWp];
    const uint16_t* xsrc[kXp];
    int xdst[kXp];
    bool wok[kWp], xok[kXp];
    weight_pieces<kThreads>(wsrc, wok, w, w_row, r0, N, tid);
#pragma unroll
    for (int i = 0; i < kXp; ++i) {
        const int c = tid + kThreads * i, n = c >> 2, q = c & 3;
        xok[i] = n0 + n < T;
        xsrc[i] = xh + int64_t(xok[i] ? n0 + n : 0) * K + q * 8;
        xdst[i] = kBM * 64 + ((n >> 3) * 4 + q) * 128 + (n & 7) * 16;
    }
    auto load = [&](int j, int stage) {
        uint8_t* st = smem + stage * kStageBytes;
#pragma unroll
        for (int i = 0; i < kWp; ++i) cp_async16(st + (tid + kThreads * i) * 16, wsrc[i] + int64_t(j) * 64, wok[i]);
#pragma unroll
        for (int i = 0; i < kXp; ++i) cp_async16(st + xdst[i], xsrc[i] + int64_t(j) * 32, xok[i]);
    };
    float acc[BN / 2], tot[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = tot[i] = 0.0f;
    const int arow = (warp * 16 + g) * 64 + t * 16;  // this lane's A piece: row 16 warp + g, values 8t ..
    pdl_wait();
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < steps) load(s, s);
        cp_async_commit();
    }
    cp_async_wait<kStages - 2>();
    fence_proxy_async();
    __syncthreads();
    uint4 wa[2], wb[2];
    wa[0] = *reinterpret_cast<const uint4*>(smem + arow);
    wb[0] = *reinterpret_cast<const uint4*>(smem + arow + 8 * 64);
    int left = cps, stage = 0;
    // Step j with its A in wa[P], wb[P] (P = j % 2, a constant: registers are not indexed).
    auto step = [&](int j, auto P) {
        constexpr int p = decltype(P)::value;
        const uint8_t* xs = smem + stage * kStageBytes + kBM * 64;
        wgmma_fence();
        wgmma_rs<bf16, BN>(acc, wa[p].x, wb[p].x, wa[p].y, wb[p].y, smem_desc(xs, 128, 512));
        wgmma_rs<bf16, BN>(acc, wa[p].z, wb[p].z, wa[p].w, wb[p].w, smem_desc(xs + 256, 128, 512));
        wgmma_commit();
        if (--left == 0 || j + 1 == steps) {  // a segment ends: add its sums in order
            left = cps;
            wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) {
                keep_reg(acc[i]);
                tot[i] = __fadd_rn(tot[i], acc[i]);
                acc[i] = 0.0f;
            }
        } else {
            wgmma_wait<1>();  // step j - 1's products are done
        }
        keep_reg(wa[1 - p]), keep_reg(wb[1 - p]);
        stage = stage + 1 == kStages ? 0 : stage + 1;
        if (j + 1 < steps) {
            cp_async_wait<kStages - 3>();  // step j + 1's stage has arrived (this thread's copies) ...
            fence_proxy_async();
            __syncthreads();  // ... every thread's; step j - 1's stage is free in both warpgroups
            const int ahead = j + kStages - 1;  // into step j - 1's stage
            const int into = stage + kStages - 2 < kStages ? stage + kStages - 2 : stage - 2;
            if (ahead < steps) load(ahead, into);
            cp_async_commit();
            const uint8_t* sn = smem + stage * kStageBytes + arow;
            wa[1 - p] = *reinterpret_cast<const uint4*>(sn);
            wb[1 - p] = *reinterpret_cast<const uint4*>(sn + 8 * 64);
        }
    };
    int j = 0;
    for (; j + 1 < steps; j += 2) {
        step(j, std::integral_constant<int, 0>());
        step(j + 1, std::integral_constant<int, 1>());
    }
    if (j < steps) step(j, std::integral_constant<int, 0>());
    wgmma_wait<0>();  // (the last step waited already: this tells the assembler so)
#pragma unroll
    for (int i = 0; i < BN / 8; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int row = r0 + warp * 16 + g + 8 * (c >> 1), tk = n0 + 8 * i + 2 * t + (c & 1);
            if (row < N && tk < T) out[int64_t(tk) * N + row] = tot[4 * i + c];
        }
}

// x rows as 16-bit values (K apart), a thread per 8 values.
// perm: each 32 values permuted for the warpgroup kernel (position 8c + 2t + e holds value
// 8t + 2c + e).
template <bool bf16, bool perm>
__global__ void round_h16_kernel(const float* __restrict__ x, int64_t x_row, int K, int T, uint16_t* __restrict__ xh) {
    pdl_next();
    pdl_wait();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, per_row = K / 8;
    if (i >= per_row * T) return;
    const int64_t tk = i / per_row, k = (i % per_row) * 8;
    uint4 v;
    if constexpr (perm) {
        const float* p = x + tk * x_row + (k & ~int64_t(31)) + 2 * ((k >> 3) & 3);
        v.x = pack_h2<bf16>(p[0], p[1]);
        v.y = pack_h2<bf16>(p[8], p[9]);
        v.z = pack_h2<bf16>(p[16], p[17]);
        v.w = pack_h2<bf16>(p[24], p[25]);
    } else {
        const float* p = x + tk * x_row + k;
        v.x = pack_h2<bf16>(p[0], p[1]);
        v.y = pack_h2<bf16>(p[2], p[3]);
        v.z = pack_h2<bf16>(p[4], p[5]);
        v.w = pack_h2<bf16>(p[6], p[7]);
    }
    *reinterpret_cast<uint4*>(xh + tk * K + k) = v;
}

// Tokens from which the many-token kernel runs (GLIA_MMA16_MIN_T overrides; the same bits).
int tile_min_tokens() {
    static const int v = [] {
        const char* e = std::getenv("GLIA_MMA16_MIN_T");
        return e && *e ? std::max(1, std::atoi(e)) : 33;
    }();
    return v;
}

// Warps of a one-to-32-token block (GLIA_MMA16_WARPS; default: a warp per segment).
int rows_warps(int nseg) {
    static const int v = [] {
        const char* e = std::getenv("GLIA_MMA16_WARPS");
        return e && *e ? std::max(1, std::min(16, std::atoi(e))) : 16;
    }();
    return std::min(nseg, v);
}

// The one-to-eight-token kernel (GLIA_MMA16_ROWS, 0 to 2; the same bits): see the header.
int rows_variant() {
    static const int v = [] {
        const char* e = std::getenv("GLIA_MMA16_ROWS");
        return e && *e ? std::max(0, std::min(2, std::atoi(e))) : 1;
    }();
    return v;
}

// The warpgroup kernel for many tokens, with GLIA_MMA16_WGMMA=1 on a GPU of compute
// capability 9.0 when the build has sm_90a machine code (GLIA_CUDA_SM90A). Not the default:
// measured slower than the tile kernel (bench/LOG.md session 10: llama3-8b F16 pp512 9,819
// against 10,568), with the same bits (bench-ops' alone column, sampled text, goldens).
bool wgmma_usable() {
    static const bool v = [] {
#if !defined(GLIA_CUDA_SM90A)
        return false;  // built without sm_90a machine code
#endif
        const char* e = std::getenv("GLIA_MMA16_WGMMA");
        if (!(e && *e == '1')) return false;
        int dev = 0, major = 0;
        return cudaGetDevice(&dev) == cudaSuccess &&
               cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess && major == 9;
    }();
    return v;
}

// Tokens of a many-token block (GLIA_MMA16_BN: 64 or 128; the same bits).
int tile_tokens() {
    static const int v = [] {
        const char* e = std::getenv("GLIA_MMA16_BN");
        return e && std::atoi(e) == 128 ? 128 : 64;
    }();
    return v;
}

// The products' matrices with their first blocks for row tiles of `rows`.
Mats16 mats_of(const Node* const* nodes, int count, int rows) {
    Mats16 ms{};
    ms.n = count;
    ms.w_row = int64_t(nodes[0]->src[MatmulArg::W]->nb[1]);
    for (int m = 0; m < count; ++m) {
        const Tensor& w = *nodes[m]->src[MatmulArg::W];
        ms.W[m] = static_cast<const uint8_t*>(w.data);
        ms.out[m] = nodes[m]->out->ptr<float>();
        ms.N[m] = int(w.ne[1]);
        ms.start[m + 1] = ms.start[m] + (ms.N[m] + rows - 1) / rows;
    }
    return ms;
}

template <bool bf16, int BN>
void launch_tile(const Mats16& ms, int K, int T, const uint16_t* xh, cudaStream_t s) {
    constexpr int smem = tile_smem<BN>();
    static const bool attr = [] {
        return cudaFuncSetAttribute(mma16_tile_kernel<bf16, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) ==
               cudaSuccess;
    }();
    if (!attr) fail("cuda: the F16/BF16 tensor-core product needs ", smem, " bytes of shared memory per block");
    if (ms.start[ms.n] > 65535) fail("cuda: ", ms.start[ms.n], " row tiles of 128 in one F16/BF16 product (65535 at most)");
    const dim3 grid(unsigned((T + BN - 1) / BN), unsigned(ms.start[ms.n]));
    launch_pdl(mma16_tile_kernel<bf16, BN>, grid, dim3(BN * 2), size_t(smem), s, ms, xh, T, K, split_of(K).per);
}

template <bool bf16, int BN>
void launch_wg(const Mats16& ms, int K, int T, const uint16_t* xh, cudaStream_t s) {
    constexpr int smem = tile_smem<BN>();
    static const bool attr = [] {
        return cudaFuncSetAttribute(mma16_wg_kernel<bf16, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) ==
               cudaSuccess;
    }();
    if (!attr) fail("cuda: the F16/BF16 warpgroup product needs ", smem, " bytes of shared memory per block");
    if (ms.start[ms.n] > 65535) fail("cuda: ", ms.start[ms.n], " row tiles of 128 in one F16/BF16 product (65535 at most)");
    const dim3 grid(unsigned((T + BN - 1) / BN), unsigned(ms.start[ms.n]));
    launch_pdl(mma16_wg_kernel<bf16, BN>, grid, dim3(256), size_t(smem), s, ms, xh, T, K, split_of(K).per);
}

template <bool bf16, int NT>
void launch_rows(const Mats16& ms, int K, int T, const float* x32, int64_t x_row, const uint16_t* xh, cudaStream_t s) {
    const KSplit sp = split_of(K);
    const dim3 grid(unsigned(ms.start[ms.n]), unsigned((T + 8 * NT - 1) / (8 * NT)));
    const int warps = rows_warps(sp.nseg);
    const size_t part = size_t(sp.nseg) * NT * 512;
    launch_pdl(mma16_rows_kernel<bf16, NT>, grid, dim3(unsigned(warps * 32)), part, s, ms, x32, x_row, xh, T, K, sp.per,
               sp.nseg);
}

// The streaming kernel, a tile a block or (wave) as many tiles a block as make the grid one
// wave of resident blocks (by registers, or shared memory); false when its shared memory
// would pass kStreamSmem (the caller runs the one-to-32-token kernel).
template <bool bf16, int kRing, int kMinBlocks>
bool launch_stream(const Node* const* nodes, int count, int K, int T, const float* x32, int64_t x_row,
                   const uint16_t* xh, bool wave, cudaStream_t s) {
    const KSplit sp = split_of(K);
    const size_t xbytes = size_t(T) * size_t(K + 8) * 2, sums = size_t(sp.nseg) * size_t(T) * 64;
    if (xbytes + sums > size_t(kStreamSmem)) return false;
    int R = 1;
    if (wave) {  // the fewest tiles a block that make at most `slots` blocks (or all shared memory)
        const int fit = std::max(1, std::min(kMinBlocks, int((227 << 10) / (xbytes + sums + 1024))));
        const int slots = sm_count() * fit, most = int((size_t(kStreamSmem) - xbytes) / sums);
        R = std::max(1, (mats_of(nodes, count, 16).start[count] + slots - 1) / slots);
        while (R < most && mats_of(nodes, count, 16 * R).start[count] > slots) ++R;
        R = std::min(R, most);
    }
    static const bool attr = [] {
        return cudaFuncSetAttribute(mma16_stream_kernel<bf16, kRing, kMinBlocks>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, kStreamSmem) == cudaSuccess;
    }();
    if (!attr) return false;
    const Mats16 ms = mats_of(nodes, count, 16 * R);
    launch_pdl(mma16_stream_kernel<bf16, kRing, kMinBlocks>, dim3(unsigned(ms.start[count])), dim3(kStreamThreads),
               xbytes + size_t(R) * sums, s, ms, x32, x_row, xh, T, K, sp.per, sp.nseg, R);
    return true;
}

template <bool bf16>
bool launch_stream_variant(const Node* const* nodes, int count, int K, int T, const float* x32, int64_t x_row,
                           const uint16_t* xh, cudaStream_t s) {
    switch (rows_variant()) {
        case 1: return launch_stream<bf16, 4, 3>(nodes, count, K, T, x32, x_row, xh, false, s);
        case 2: return launch_stream<bf16, 4, 3>(nodes, count, K, T, x32, x_row, xh, true, s);
        default: return false;
    }
}

template <bool bf16>
void launch_mma16_t(const Node* const* nodes, int count, cudaStream_t s, void* scratch) {
    const Tensor& w = *nodes[0]->src[MatmulArg::W];
    const Tensor& x = *nodes[0]->src[MatmulArg::X];
    const int K = int(w.ne[0]), T = int(x.n_rows());
    uint16_t* xh = static_cast<uint16_t*>(scratch);
    const float* x32 = x.ptr<float>();
    const int64_t x_row = int64_t(x.nb[1] / 4);
    const bool x16 = (reinterpret_cast<uintptr_t>(x.data) & 15) == 0 && x.nb[1] % 16 == 0;
    const bool tile = T >= tile_min_tokens(), wg = tile && wgmma_usable();
    if (tile || !x16) {  // the tile kernels, or rows the kernel cannot read 16 bytes at a time
        const int64_t th = int64_t(T) * (K / 8);
        const dim3 grid(unsigned((th + 255) / 256));
        if (wg) launch_pdl(round_h16_kernel<bf16, true>, grid, dim3(256), 0, s, x32, x_row, K, T, xh);
        else launch_pdl(round_h16_kernel<bf16, false>, grid, dim3(256), 0, s, x32, x_row, K, T, xh);
    }
    if (wg) {
        if (T <= 64) launch_wg<bf16, 64>(mats_of(nodes, count, kBM), K, T, xh, s);
        else launch_wg<bf16, 128>(mats_of(nodes, count, kBM), K, T, xh, s);
        return;
    }
    if (tile) {
        if (tile_tokens() == 128) launch_tile<bf16, 128>(mats_of(nodes, count, kBM), K, T, xh, s);
        else launch_tile<bf16, 64>(mats_of(nodes, count, kBM), K, T, xh, s);
        return;
    }
    const uint16_t* xr = x16 ? nullptr : xh;
    if (T <= 8 && launch_stream_variant<bf16>(nodes, count, K, T, x32, x_row, xr, s)) return;
    const Mats16 ms = mats_of(nodes, count, 16);
    if (T <= 8) launch_rows<bf16, 1>(ms, K, T, x32, x_row, xr, s);
    else if (T <= 16) launch_rows<bf16, 2>(ms, K, T, x32, x_row, xr, s);
    else if (T <= 24) launch_rows<bf16, 3>(ms, K, T, x32, x_row, xr, s);
    else launch_rows<bf16, 4>(ms, K, T, x32, x_row, xr, s);
}

}  // namespace

// The GPU's multiprocessors (132 where the runtime cannot tell).
int sm_count() {
    static const int v = [] {
        int dev = 0, n = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            return 132;
        return std::max(1, n);
    }();
    return v;
}

bool mma16_usable(const Node& n) {
    static const bool on = [] {
        const char* e = std::getenv("GLIA_CUDA_MMA16");
        return !(e && *e == '0');
    }();
    const Tensor& w = *n.src[MatmulArg::W];
    return on && (w.type == DType::F16 || w.type == DType::BF16) && w.ne[0] % 32 == 0 && w.ne[0] <= (1 << 24) &&
           w.ne[1] > 0 && w.ne[1] <= 65535LL * 128 && (reinterpret_cast<uintptr_t>(w.data) & 15) == 0 && w.nb[1] % 16 == 0;
}

bool mma16_fusable(const Node& a, const Node& b) {
    const Tensor& wa = *a.src[MatmulArg::W];
    const Tensor& wb = *b.src[MatmulArg::W];
    const Tensor& xa = *a.src[MatmulArg::X];
    const Tensor& xb = *b.src[MatmulArg::X];
    return mma16_usable(a) && mma16_usable(b) && wa.type == wb.type && wa.ne[0] == wb.ne[0] && wa.nb[1] == wb.nb[1] &&
           xa.data == xb.data && xa.n_rows() == xb.n_rows() && xa.nb[1] == xb.nb[1] && !overlaps(*a.out, xa) &&
           !overlaps(*b.out, xa);
}

// GLIA_MMA16_GROUP=0: each product alone (the same bits).
int mma16_max_group() {
    static const int v = [] {
        const char* e = std::getenv("GLIA_MMA16_GROUP");
        return e && *e == '0' ? 1 : kMats;
    }();
    return v;
}

// scratch: T x K 16-bit values (the rounded activations).
void launch_matmul_mma16(const Node* const* nodes, int count, cudaStream_t s, void* scratch) {
    if (nodes[0]->src[MatmulArg::W]->type == DType::BF16) launch_mma16_t<true>(nodes, count, s, scratch);
    else launch_mma16_t<false>(nodes, count, s, scratch);
}

}  // namespace glia::cuda
