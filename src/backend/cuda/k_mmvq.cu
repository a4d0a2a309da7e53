// MATMUL on packed quantized weights (packed.cuh) with 8-bit activations, GET_ROWS from
// packed tables, and the MoE expert products on packed stacks.
//
// The activations of each token are quantized once per product to int8 with the integer
// sums of each 16 values and float scales (d = max|x| / 127) over the block size the
// reference uses for the weight type: one scale per 256 values for the K-quants (as its
// Q8_K), one per 32 for Q8_0 (as its Q8_0 activations; 256 there measurably doubled the
// error against the goldens). A lane owns one weight row and walks K in order: each
// superblock's dot product is exact integer arithmetic (dp4a; the weights' integer
// sub-block scales folded in as integers), scaled by the block's float factors with
// round-to-nearest operations that never contract, and added to the lane's running sum.
// K is cut into segments that depend on K alone (one warp each); the segments' sums are
// added in order. Every output is therefore the same sequence of float operations
// whatever the number of tokens in the step: a batch changes no bits.
//
// MoE experts: each (token, selected expert) pair is a column of its expert's matrix. Few
// pairs: the dp4a kernel, a block per (row group, pair). Many: the pairs sorted by expert
// (moe_sort_kernel) and the tensor-core kernel over each expert's 64-pair tiles, reading
// the expert's rows once for all of them. Either way a pair's outputs take the steps above,
// so they too are the same bits whatever the batch; act(gate, up) is quantized for the
// down products by one kernel, and the down products are added in selection order.
#include <cstdlib>

#include "dequant.cuh"
#include "glu.cuh"
#include "launch.cuh"
#include "mma.cuh"
#include "packed.cuh"

namespace glia::cuda {
namespace {

__device__ __forceinline__ uint32_t rbyte(const uint32_t* w, int i) { return (w[i >> 2] >> (8 * (i & 3))) & 0xffu; }

// 32 int8 activations (global or shared memory).
__device__ __forceinline__ void load8(const int8_t* p, int* x) {
    const int4 a = *reinterpret_cast<const int4*>(p);
    const int4 b = *(reinterpret_cast<const int4*>(p) + 1);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

// One superblock's contribution to an output, from exact integer sums. Both kernels (dp4a
// and tensor cores) call these, so every output gets the same bits.
//   Q4_K: isc = sum of sc_s * (q . x)_s, imx = sum of m_s * (sum of x)_s
//   Q6_K: comb = sum over 16-value groups of sc_g * ((q . x)_g - 32 (sum of x)_g)
//   Q8_0: each 32-value block adds (d_b * xd_b) * (q . x)_b to the sum in order (q8_0_block)
__device__ __forceinline__ float q4k_term(float xd, float d, float dmin, float isc, float imx) {
    return __fmul_rn(xd, __fmaf_rn(d, isc, -__fmul_rn(dmin, imx)));
}
__device__ __forceinline__ float q6k_term(float xd, float d, int comb) { return __fmul_rn(xd, __fmul_rn(d, float(comb))); }
__device__ __forceinline__ float q8_0_block(float acc, float d, float xd, int isum) {
    return __fadd_rn(acc, __fmul_rn(__fmul_rn(d, xd), float(isum)));
}

// Q4_K sub-block s's scale and min from the record's words 1..3 (bytes 4..15).
__device__ __forceinline__ void q4k_scale_min(const uint32_t* rec, int s, int& sc, int& m) {
    if (s < 4) {
        sc = int(rbyte(rec, 4 + s) & 63);
        m = int(rbyte(rec, 8 + s) & 63);
    } else {
        sc = int((rbyte(rec, 8 + s) & 0xF) | ((rbyte(rec, s) >> 6) << 4));
        m = int((rbyte(rec, 8 + s) >> 4) | ((rbyte(rec, 4 + s) >> 6) << 4));
    }
}

// Q6_K: the 6-bit values (0..63) of words i of the record for sub-block s = 4h + k.
__device__ __forceinline__ uint32_t q6k_word(uint32_t l4, uint32_t h4, int k) {
    const uint32_t lo = k < 2 ? (l4 & 0x0F0F0F0Fu) : ((l4 >> 4) & 0x0F0F0F0Fu);
    return lo | (((h4 >> (2 * k)) & 0x03030303u) << 4);
}

template <DType D> struct Pk;

// Q4_K: value = d * sc * q - dmin * m per 32-value sub-block s (q 4-bit).
template <> struct Pk<DType::Q4_K> {
    static constexpr int C = 9;
    static constexpr int NS = 1;
    __device__ static void dot(const uint32_t* w, uint32_t, const int8_t* xq, const float* xd, const int* xs,
                               float& acc) {
        const float d = h2f(uint16_t(w[0] & 0xffffu)), dmin = h2f(uint16_t(w[0] >> 16));
        int isc = 0, imx = 0;
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            int xa[8], xb[8];
            load8(xq + 64 * p, xa);
            load8(xq + 64 * p + 32, xb);
            int sl = 0, sh = 0;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const uint32_t q = w[4 + 8 * p + i];
                sl = __dp4a(int(q & 0x0F0F0F0Fu), xa[i], sl);
                sh = __dp4a(int((q >> 4) & 0x0F0F0F0Fu), xb[i], sh);
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int s = 2 * p + h;
                int sc, m;
                q4k_scale_min(w, s, sc, m);
                isc += sc * (h ? sh : sl);
                imx += m * (xs[2 * s] + xs[2 * s + 1]);
            }
        }
        acc = __fadd_rn(acc, q4k_term(xd[0], d, dmin, float(isc), float(imx)));
    }
};

// Q6_K: value = d * sc16 * (q - 32), q 6-bit, a signed scale per 16 values.
template <> struct Pk<DType::Q6_K> {
    static constexpr int C = 13;
    static constexpr int NS = 1;
    __device__ static void dot(const uint32_t* w, uint32_t side, const int8_t* xq, const float* xd, const int* xs,
                               float& acc) {
        const float d = h2f(uint16_t(side));
        int comb = 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int s = 4 * h + k;
                int xa[8];
                load8(xq + 32 * s, xa);
                int sa = 0, sb = 0;
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    const int q = int(q6k_word(w[16 * h + (k & 1) * 8 + i], w[32 + 8 * h + i], k));
                    if (i < 4) sa = __dp4a(q, xa[i], sa);
                    else sb = __dp4a(q, xa[i], sb);
                }
                const int sca = int(int8_t(rbyte(w, 192 + 8 * h + 2 * k)));
                const int scb = int(int8_t(rbyte(w, 193 + 8 * h + 2 * k)));
                comb += sca * (sa - 32 * xs[2 * s]) + scb * (sb - 32 * xs[2 * s + 1]);
            }
        }
        acc = __fadd_rn(acc, q6k_term(xd[0], d, comb));
    }
};

// Q8_0: eight blocks of 32 int8 values, each with its f16 scale; eight activation scales.
template <> struct Pk<DType::Q8_0> {
    static constexpr int C = 17;
    static constexpr int NS = 8;
    __device__ static void dot(const uint32_t* w, uint32_t, const int8_t* xq, const float* xd, const int*,
                               float& acc) {
#pragma unroll
        for (int b = 0; b < 8; ++b) {
            int xa[8];
            load8(xq + 32 * b, xa);
            int s = 0;
#pragma unroll
            for (int i = 0; i < 8; ++i) s = __dp4a(int(w[8 * b + i]), xa[i], s);
            const float db = h2f(uint16_t(rbyte(w, 256 + 2 * b) | (rbyte(w, 257 + 2 * b) << 8)));
            acc = q8_0_block(acc, db, xd[b], s);
        }
    }
};

// Quantizes one 256-value block (8 values a lane of one warp): int8 values at q8, the 16
// sums of 16 values at xs, and NS scales (one per 256 / NS values) at xd. The separate
// kernel and the dp4a kernel's own quantization (one token) both run this, so they agree
// bit for bit. With hl, the sums also go there for the tensor cores as int8 parts v = 64 hi
// + lo (lo in 0..63): 32 bytes, words hi(w), lo(w) for w = 0..3 (sums 4w .. 4w + 3).
// quantize_vals256 takes the lane's 8 values (256 l .. + 8) from registers.
template <int NS>
__device__ __forceinline__ void quantize_vals256(const float (&v)[8], int8_t* q8, int* xs, float* xd, int lane,
                                                 uint8_t* hl) {
    static_assert(NS == 1 || NS == 8, "one scale per 256 or per 32 values");
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(v[i]));
    if (NS == 1) {
        amax = warp_max(amax);
    } else {  // the 4 lanes of one 32-value block
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    }
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    int q[8], s = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        q[i] = max(-127, min(127, __float2int_rn(v[i] * id)));
        s += q[i];
    }
    int2 packed;
    packed.x = (q[0] & 0xff) | ((q[1] & 0xff) << 8) | ((q[2] & 0xff) << 16) | ((q[3] & 0xff) << 24);
    packed.y = (q[4] & 0xff) | ((q[5] & 0xff) << 8) | ((q[6] & 0xff) << 16) | ((q[7] & 0xff) << 24);
    *reinterpret_cast<int2*>(q8 + lane * 8) = packed;
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    if ((lane & 1) == 0) {
        xs[lane / 2] = s;
        if (hl) {
            const int i = lane / 2;
            hl[8 * (i >> 2) + (i & 3)] = uint8_t(s >> 6);
            hl[8 * (i >> 2) + 4 + (i & 3)] = uint8_t(s & 63);
        }
    }
    if (lane % (32 / NS) == 0) xd[lane / (32 / NS)] = amax / 127.0f;
}
template <int NS>
__device__ __forceinline__ void quantize_block256(const float* __restrict__ x, int8_t* q8, int* xs, float* xd,
                                                  int lane, uint8_t* hl = nullptr) {
    const float4* xp = reinterpret_cast<const float4*>(x + lane * 8);
    const float4 v0 = xp[0], v1 = xp[1];
    const float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
    quantize_vals256<NS>(v, q8, xs, xd, lane, hl);
}

// One warp per 256-value block of one token: int8 values, NS scales, sums of each 16.
template <int NS>
__global__ void quantize_x_kernel(const float* __restrict__ x, int64_t x_row, int K, int T, int8_t* __restrict__ xq,
                                  float* __restrict__ xd, int* __restrict__ xs, uint32_t* __restrict__ xhl) {
    pdl_next();
    pdl_wait();
    const int64_t wid = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    const int nb = K / 256;
    if (wid >= int64_t(T) * nb) return;
    const int64_t t = wid / nb;
    const int b = int(wid % nb);
    quantize_block256<NS>(x + t * x_row + b * 256, xq + t * K + b * 256, xs + t * (K / 16) + b * 16,
                          xd + (t * nb + b) * NS, lane,
                          xhl ? reinterpret_cast<uint8_t*>(xhl + (t * nb + b) * 8) : nullptr);
}

// Shared-memory bytes of one superblock's activations in the one-token dp4a kernel:
// 256 int8 values, 16 sums, up to 8 scales.
constexpr int kSbBytes = 256 + 64 + 32;

// Up to kMaxMats products of one input, one launch: blocks [gstart[m], gstart[m+1]) are
// matrix m's row groups (tiles for the tensor-core kernel); off[m]: where its segment sums
// start in the tensor-core kernel's partial buffer.
constexpr int kMaxMats = 4;
struct MatSet {
    const int4* W[kMaxMats];
    const uint16_t* side[kMaxMats];
    float* out[kMaxMats];
    int N[kMaxMats];
    int gstart[kMaxMats + 1];
    int n;
    int64_t off[kMaxMats];
};

// MoE expert products (G kernels): the columns are (token, selected expert) pairs, each
// multiplied by its own expert's matrix of a packed stack (packed.cuh).
struct Gather {
    const int32_t* ids;     // the expert of pair b
    const int32_t* sorted;  // the pairs sorted by expert (tensor cores)
    const int32_t* pos;     // [E + 1]: expert e's pairs are sorted[pos[e] .. pos[e + 1])
    const int32_t* tiles;   // [E + 1]: its 64-pair tiles are the grid's x in [tiles[e], tiles[e + 1])
    int n_exp;
    int x_div;              // pair b reads activation row b / x_div
    int64_t mat_groups;     // row groups of one expert's matrix
};

// Block: one warp per K segment, lane = row of the block's group; NT tokens per block.
// With x32 (one token, NT = 1), each warp quantizes its own segment of x into shared
// memory first (quantize_block256, as the separate kernel does) instead of reading xq/xd/xs.
// G: the grid's y is a pair of ga (NT = 1), its expert's matrix and activation row.
template <DType D, int NT, bool G = false>
__global__ void __launch_bounds__(512) mmvq_kernel(MatSet ms, Gather ga, const int8_t* __restrict__ xq,
                                                   const float* __restrict__ xd, const int* __restrict__ xs, int K,
                                                   int T, int sb_per_seg, const float* __restrict__ x32) {
    extern __shared__ float part[];
    constexpr int C = Pk<D>::C, NS = Pk<D>::NS;
    static_assert(!G || NT == 1, "a pair a block column");
    pdl_next();
    int mi = 0;
#pragma unroll
    for (int i = 1; i < kMaxMats; ++i)
        if (i < ms.n && int(blockIdx.x) >= ms.gstart[i]) mi = i;
    const int4* __restrict__ W = ms.W[mi];
    const uint16_t* __restrict__ side = ms.side[mi];
    const int lane = threadIdx.x & 31, seg = threadIdx.x >> 5, nseg = blockDim.x >> 5;
    const int64_t g = int64_t(blockIdx.x) - ms.gstart[mi];
    const int t0 = blockIdx.y * NT;
    const int nsb = K >> 8;
    int64_t xrow = t0;  // the activation row of column t0
    if constexpr (G) {
        pdl_wait();  // the pair's expert is the previous kernel's
        const int64_t e = min(max(ga.ids[blockIdx.y], 0), ga.n_exp - 1);  // (a routing never gives others)
        W += e * ga.mat_groups * nsb * C * 32;
        if (side) side += e * ga.mat_groups * nsb * 32;
        xrow = blockIdx.y / ga.x_div;
    }
    const int j0 = seg * sb_per_seg, j1 = min(nsb, j0 + sb_per_seg);
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    // Loads record j of this lane's row (and its Q6_K side scale).
    auto load = [&](uint32_t* w, uint32_t& sd, int j) {
        const int4* rec = W + (g * nsb + j) * C * 32 + lane;
#pragma unroll
        for (int c = 0; c < C; ++c) {
            const int4 v = __ldg(rec + 32 * c);
            w[4 * c] = uint32_t(v.x), w[4 * c + 1] = uint32_t(v.y), w[4 * c + 2] = uint32_t(v.z),
                      w[4 * c + 3] = uint32_t(v.w);
        }
        sd = side ? uint32_t(__ldg(side + (g * nsb + j) * 32 + lane)) : 0u;
    };
    if (NT == 1 && x32) {
        // The first records' loads go out before the quantization, and each record's
        // successor (two buffers where registers allow) loads while it is computed.
        constexpr bool kTwo = C <= 13;
        uint32_t wa[4 * C], wb[kTwo ? 4 * C : 1];
        uint32_t sa = 0, sb = 0;
        if (j0 < j1) load(wa, sa, j0);
        if (kTwo && j0 + 1 < j1) load(wb, sb, j0 + 1);
        pdl_wait();  // the weights' loads are out; x is the previous kernel's
        // Layout after part: per warp, sb_per_seg x (256 int8 + 16 sums + 8 scales).
        uint8_t* mine = reinterpret_cast<uint8_t*>(part + nseg * 32) + size_t(seg) * sb_per_seg * kSbBytes;
        int8_t* q8 = reinterpret_cast<int8_t*>(mine);
        int* s16 = reinterpret_cast<int*>(mine + sb_per_seg * 256);
        float* sd = reinterpret_cast<float*>(mine + sb_per_seg * (256 + 64));
        for (int j = j0; j < j1; ++j)
            quantize_block256<NS>(x32 + j * 256, q8 + (j - j0) * 256, s16 + (j - j0) * 16, sd + (j - j0) * NS, lane);
        __syncwarp();
        if (kTwo) {
            for (int j = j0; j < j1; j += 2) {
                Pk<D>::dot(wa, sa, q8 + (j - j0) * 256, sd + (j - j0) * NS, s16 + (j - j0) * 16, acc[0]);
                if (j + 2 < j1) load(wa, sa, j + 2);
                if (j + 1 < j1) {
                    Pk<D>::dot(wb, sb, q8 + (j + 1 - j0) * 256, sd + (j + 1 - j0) * NS, s16 + (j + 1 - j0) * 16,
                               acc[0]);
                    if (j + 3 < j1) load(wb, sb, j + 3);
                }
            }
        } else {
            for (int j = j0; j < j1; ++j) {
                if (j > j0) load(wa, sa, j);
                Pk<D>::dot(wa, sa, q8 + (j - j0) * 256, sd + (j - j0) * NS, s16 + (j - j0) * 16, acc[0]);
            }
        }
    } else {
        pdl_wait();
        for (int j = j0; j < j1; ++j) {
            uint32_t w[4 * C], sd;
            load(w, sd, j);
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                if (t0 + t < T) {
                    const int64_t tt = xrow + t;
                    Pk<D>::dot(w, sd, xq + tt * K + j * 256, xd + (tt * (K / 256) + j) * NS,
                               xs + tt * (K / 16) + j * 16, acc[t]);
                }
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) part[(seg * NT + t) * 32 + lane] = acc[t];
    __syncthreads();
    if (seg != 0) return;
    const int N = ms.N[mi];
    float* __restrict__ out = ms.out[mi];
    const int64_t row = g * 32 + lane;
    if (row >= N) return;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        if (t0 + t >= T) break;
        float sum = 0.0f;
        for (int q = 0; q < nseg; ++q) sum = __fadd_rn(sum, part[(q * NT + t) * 32 + lane]);
        out[int64_t(t0 + t) * N + row] = sum;
    }
}

// Matrix b of a set (b: the grid's row-tile index), picked with constant indices only (an
// indexed kernel parameter would be copied to local memory by every thread).
struct MatQ {
    const int4* W;
    const uint16_t* side;
    float* out;
    int N, first;
    int64_t off;
};
__device__ __forceinline__ MatQ mat_at(const MatSet& ms, int b) {
    MatQ r{ms.W[0], ms.side[0], ms.out[0], ms.N[0], 0, ms.off[0]};
#pragma unroll
    for (int i = 1; i < kMaxMats; ++i)
        if (i < ms.n && b >= ms.gstart[i]) r = MatQ{ms.W[i], ms.side[i], ms.out[i], ms.N[i], ms.gstart[i], ms.off[i]};
    return r;
}

// out = sum of the segment sums in order from 0 (as the dp4a kernel adds its warps' sums).
__global__ void mmq_reduce_kernel(MatSet ms, const float* __restrict__ part, int T, int nseg) {
    pdl_next();
    pdl_wait();
    int N = ms.N[0];
    float* out = ms.out[0];
    int64_t off = ms.off[0];
#pragma unroll
    for (int k = 1; k < kMaxMats; ++k)
        if (int(blockIdx.y) == k) N = ms.N[k], out = ms.out[k], off = ms.off[k];
    const int64_t n = int64_t(N) * T;
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float* p = part + off + i;
    float sum = 0.0f;
    for (int q = 0; q < nseg; ++q) sum = __fadd_rn(sum, p[int64_t(q) * n]);
    out[i] = sum;
}

// Tensor-core version for many tokens: a block computes 64 rows x 64 tokens, four warps of
// 32 rows (one packed row group) x 32 tokens. For each superblock the block stages the two
// packed row groups and the 64 tokens' int8 activations (with their scales and the hi / lo
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
// B fragments of sub-block s (bytes 32 s .. + 32) for the warp's four 8-token tiles.
__device__ __forceinline__ void b_frag(const MmqTile& t, int s, uint32_t (&b)[4][2]) {
    const int L = t.lane;
#pragma unroll
    for (int np = 0; np < 2; ++np) {
        uint32_t r[4];
        ldsm_x4(r, t.x + (np * 16 + 8 * (L >> 4) + (L & 7)) * kXRow + 32 * s + 16 * ((L >> 3) & 1));
        b[2 * np][0] = r[0], b[2 * np][1] = r[1], b[2 * np + 1][0] = r[2], b[2 * np + 1][1] = r[3];
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

// Output i of an mma tile: row g + 8 (i >> 1), token 2 tig + (i & 1).
template <DType D> struct Mq;

template <> struct Mq<DType::Q4_K> {
    static constexpr int C = 9, NS = 1;
    __device__ static void superblock(const MmqTile& t, float (&seg)[2][4][4]) {
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
        int isc[2][4][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i) isc[mt][nt][i] = 0;
#pragma unroll 1
        for (int p = 0; p < 4; ++p) {
            uint32_t q[2][4];
            a_frag(t, 0, 1 + 2 * p, q[0]);
            a_frag(t, 1, 1 + 2 * p, q[1]);
#pragma unroll
            for (int hb = 0; hb < 2; ++hb) {
                const int s = 2 * p + hb;
                uint32_t b[4][2];
                b_frag(t, s, b);
#pragma unroll
                for (int mt = 0; mt < 2; ++mt) {
                    int a[4];
#pragma unroll
                    for (int i = 0; i < 4; ++i) a[i] = int((hb ? q[mt][i] >> 4 : q[mt][i]) & 0x0F0F0F0Fu);
                    const int s0 = int(((p >= 2 ? sc[mt][0][1] : sc[mt][0][0]) >> (8 * (s & 3))) & 0xffu);
                    const int s1 = int(((p >= 2 ? sc[mt][1][1] : sc[mt][1][0]) >> (8 * (s & 3))) & 0xffu);
#pragma unroll
                    for (int nt = 0; nt < 4; ++nt) {
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
        for (int nt = 0; nt < 4; ++nt) {
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
    __device__ static void superblock(const MmqTile& t, float (&seg)[2][4][4]) {
        float dr[2][2];
        uint4 scw[2][2];  // [mt][h]: the row's 16 int8 scales
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                dr[mt][h] = h2f(t.sd[16 * mt + 8 * h + t.g]);
                scw[mt][h] = row_chunk(t, mt, h, 12);
            }
        int comb[2][4][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int nt = 0; nt < 4; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i) comb[mt][nt][i] = 0;
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
                uint32_t b[4][2];
                b_frag(t, s, b);
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
                    for (int nt = 0; nt < 4; ++nt) {
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
        for (int nt = 0; nt < 4; ++nt) {
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
    __device__ static void superblock(const MmqTile& t, float (&seg)[2][4][4]) {
        uint4 dw[2][2];  // [mt][h]: the row's 8 f16 block scales
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) dw[mt][h] = row_chunk(t, mt, h, 16);
#pragma unroll 1
        for (int b = 0; b < 8; ++b) {
            uint32_t bb[4][2], q[2][4];
            b_frag(t, b, bb);
            a_frag(t, 0, 2 * b, q[0]);
            a_frag(t, 1, 2 * b, q[1]);
            float dr[2][2];  // [mt][h]: the rows' scales of block b
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int h = 0; h < 2; ++h) dr[mt][h] = h2f(uint16_t(word_of(dw[mt][h], b >> 1) >> (16 * (b & 1))));
#pragma unroll
            for (int nt = 0; nt < 4; ++nt) {
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

// One pipeline stage in shared memory: the two packed row groups of one superblock and the
// 64 tokens' activations for it.
template <int C, int NS>
struct MmqStage {
    static constexpr int kW = 2 * C * 32 * 16, kSide = 128, kX = 64 * kXRow, kHl = 64 * 32, kXd = 64 * NS * 4;
    static constexpr int kBytes = kW + kSide + kX + kHl + kXd;
};

// grid (64-token tiles, 64-row tiles of every matrix in ms, K segments); ms.gstart counts
// 64-row tiles, and the blocks of one row tile are neighbours (its weights are read from
// memory once for all token tiles). Block z sums segments z * seg_per_block onwards: with
// one segment a block (grids too small to fill the GPU otherwise) and several segments in
// all, it writes its sums to part (segment-major, [seg][T][N] per matrix at ms.off) for
// mmq_reduce_kernel to add in order, the dp4a kernel's order; with every segment in one
// block (grid z = 1) it adds each segment's sum to its total in that same order itself.
// Two stages: the copies of superblock j + 1 are in flight while superblock j is computed.
// G: the grid's x is a tile of one expert's pairs (ga.tiles), whose activation rows and
// output rows come from a table in shared memory (after the totals); every K segment in
// the block.
template <DType D, bool G = false>
__global__ void __launch_bounds__(128, 3) mmq_kernel(MatSet ms, Gather ga, const int8_t* __restrict__ xq,
                                                     const float* __restrict__ xd, const uint32_t* __restrict__ xhl,
                                                     int K, int T, int sb_per_seg, int seg_per_block,
                                                     float* __restrict__ part) {
    constexpr int C = Mq<D>::C, NS = Mq<D>::NS;
    using St = MmqStage<C, NS>;
    extern __shared__ __align__(16) uint8_t smem[];
    const MatQ m = mat_at(ms, int(blockIdx.y));
    const int64_t tile = int64_t(blockIdx.y) - m.first;
    const int N = m.N, groups = (N + 31) / 32;
    const int4* __restrict__ W = m.W;
    const uint16_t* __restrict__ side = m.side;
    int t0 = blockIdx.x * 64;
    const int nsb = K >> 8;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int jb = int(blockIdx.z) * sb_per_seg * seg_per_block, je = min(nsb, jb + sb_per_seg * seg_per_block);

    pdl_next();
    int left = T - t0;  // tokens of this tile that exist (tokens past them read as zeros)
    int* rows = reinterpret_cast<int*>(smem + 2 * St::kBytes + 128 * 32 * 4);  // G: [64] activation rows, [64] outputs
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
    const int4* __restrict__ Wt = W + tile * 2 * gstride;
    const bool ok1 = tile * 2 + 1 < groups;  // the tile's second row group exists
    auto issue_w = [&](int stage, int j) {
        int4* wsm = reinterpret_cast<int4*>(smem + stage * St::kBytes);
        const int4* src = Wt + j * C * 32;
#pragma unroll
        for (int k = 0; k < (2 * C * 32 + 127) / 128; ++k) {
            const int idx = tid + 128 * k;
            if (idx < 2 * C * 32) {
                const bool hi = idx >= C * 32;
                const bool ok = !hi || ok1;
                cp_async16(wsm + idx, ok ? src + (hi ? gstride - C * 32 + idx : idx) : W, ok);
            }
        }
        if (D == DType::Q6_K && tid < 8) {
            const bool ok = tid < 4 || ok1;
            cp_async16(smem + stage * St::kBytes + St::kW + tid * 16,
                       ok ? reinterpret_cast<const int4*>(side + ((tile * 2 + tid / 4) * nsb + j) * 32) + tid % 4
                          : reinterpret_cast<const int4*>(side),
                       ok);
        }
    };
    // x: token (tid / 16) + 8k, 16-byte piece tid % 16; the sums: token tid / 2, half tid % 2;
    // the scales: token tid (NS = 1) or (tid / 8) + 16k, scale tid % 8 (NS = 8). Row r of
    // the tile reads activation row t0 + r (G: rows[r]).
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
        for (int k = 0; k < 8; ++k) {
            const bool ok = (tid >> 4) + 8 * k < left;
            const int64_t off = G ? xrow((tid >> 4) + 8 * k) * K : int64_t(8 * k) * K;
            cp_async16(xsm + 8 * k * kXRow, ok ? xsrc + off + j * 256 : xq, ok);
        }
        if (D != DType::Q8_0) {  // Q8_0 has no use for the sums
            const bool ok = (tid >> 1) < left;
            const int64_t off = G ? xrow(tid >> 1) * nsb * 8 : 0;
            cp_async16(st + St::kW + St::kSide + St::kX + tid * 16, ok ? hsrc + off + j * 8 : xhl, ok);
        }
        float* xdsm = reinterpret_cast<float*>(st + St::kW + St::kSide + St::kX + St::kHl);
        if (NS == 1) {
            const int64_t off = G && tid < 64 ? xrow(tid) * nsb : 0;
            if (tid < 64) cp_async4(xdsm + tid, tid < left ? dsrc + off + j : xd, tid < left);
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const bool ok = (tid >> 3) + 16 * k < left;
                const int64_t off = G ? xrow((tid >> 3) + 16 * k) * nsb * 8 : int64_t(16 * k) * nsb * 8;
                cp_async4(xdsm + tid + 128 * k, ok ? dsrc + off + j * 8 : xd, ok);
            }
        }
    };

    // The running segment sums in registers; the totals in shared memory (after the stages),
    // float4 q of thread tid at tot4[q * 128 + tid], touched once a segment.
    float seg[2][4][4];
    float4* tot4 = reinterpret_cast<float4*>(smem + 2 * St::kBytes);
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
            for (int i = 0; i < 4; ++i) seg[mt][nt][i] = 0.0f;
            tot4[(mt * 4 + nt) * 128 + tid] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    if (jb < je) issue_w(0, jb);
    if constexpr (!G) pdl_wait();  // the first weights are on their way; the activations are the previous kernel's
    if (jb < je) issue_x(0, jb);
    cp_async_commit();
    const int wm = warp & 1, wn = warp >> 1;
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
        t.x = st + St::kW + St::kSide + wn * 32 * kXRow;
        t.hl = st + St::kW + St::kSide + St::kX + wn * 32 * 32;
        t.xd = reinterpret_cast<const float*>(st + St::kW + St::kSide + St::kX + St::kHl) + wn * 32 * NS;
        Mq<D>::superblock(t, seg);
        if ((j + 1) % sb_per_seg == 0 || j + 1 == je) {  // a segment ends: its sum joins the total
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int nt = 0; nt < 4; ++nt) {
                    float4& tv = tot4[(mt * 4 + nt) * 128 + tid];
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
    const int64_t row0 = tile * 64 + wm * 32 + t.g;
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
            const float4 v = tot4[(mt * 4 + nt) * 128 + tid];
            const float tv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int64_t row = row0 + 16 * mt + 8 * (i >> 1);
                const int tok = wn * 32 + nt * 8 + 2 * t.tig + (i & 1);
                if (row < N && tok < left) out[int64_t(G ? rows[64 + tok] : t0 + tok) * N + row] = tv[i];
            }
        }
}

// Record byte i of a 256-value GGUF block of type t (packed.cuh's records).
__device__ inline uint8_t record_byte(DType t, const uint8_t* blk, int i) {
    if (t != DType::Q8_0) return blk[i];
    if (i < 256) return blk[(i / 32) * 34 + 2 + i % 32];
    i -= 256;
    return blk[(i / 2) * 34 + i % 2];
}

__global__ void pack_kernel(DType t, const uint8_t* __restrict__ src, size_t row_bytes, size_t blk_bytes, int64_t N,
                            int64_t nsb, int C, int4* __restrict__ dst, uint16_t* __restrict__ side, int64_t total) {
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    const int l = int(idx % 32), c = int((idx / 32) % C);
    const int64_t j = (idx / (32 * C)) % nsb, g = idx / (32 * C * nsb);
    const int64_t r = g * 32 + l;
    union { int4 v; uint8_t b[16]; } u;
    u.v = make_int4(0, 0, 0, 0);
    if (r < N) {
        const uint8_t* blk = src + r * row_bytes + j * blk_bytes;
#pragma unroll
        for (int i = 0; i < 16; ++i) u.b[i] = record_byte(t, blk, 16 * c + i);
        if (side && c == 0) side[(g * nsb + j) * 32 + l] = uint16_t(blk[208] | (blk[209] << 8));
    } else if (side && c == 0) {
        side[(g * nsb + j) * 32 + l] = 0;
    }
    dst[idx] = u.v;
}

// Embedding rows from a packed table: the row's block is gathered back into the GGUF
// layout and dequantized as the row kernel does (the same values as the CPU).
template <DType D>
__global__ void get_rows_packed_kernel(const int4* __restrict__ W, const uint16_t* __restrict__ side,
                                       const int32_t* __restrict__ ids, float* __restrict__ out, int K) {
    pdl_next();
    pdl_wait();
    constexpr int C = Pk<D>::C;
    const int64_t t = blockIdx.y;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= K / 32) return;
    const int64_t nsb = K / 256, r = ids[t], g = r / 32, l = r % 32, j = c / 8;
    const int4* rec = W + (g * nsb + j) * C * 32 + l;
    union { int4 v[C]; uint8_t b[16 * C]; } u;
#pragma unroll
    for (int i = 0; i < C; ++i) u.v[i] = rec[32 * i];
    alignas(16) uint8_t blk[288];
    if (D == DType::Q8_0) {
        for (int b = 0; b < 8; ++b) {
            blk[b * 34] = u.b[256 + 2 * b];
            blk[b * 34 + 1] = u.b[257 + 2 * b];
            for (int i = 0; i < 32; ++i) blk[b * 34 + 2 + i] = u.b[32 * b + i];
        }
    } else {
        for (int i = 0; i < 16 * C; ++i) blk[i] = u.b[i];
        if (D == DType::Q6_K) {
            const uint16_t dv = side[(g * nsb + j) * 32 + l];
            blk[208] = uint8_t(dv & 0xff);
            blk[209] = uint8_t(dv >> 8);
        }
    }
    float y[32];
    Dq<D>::chunk(blk, c % 8, y);
    float* o = out + t * K + int64_t(c) * 32;
#pragma unroll
    for (int i = 0; i < 32; ++i) o[i] = y[i];
}

// MoE: the pairs sorted by expert (one block): each expert's count, its first pair and its
// first 64-pair tile, then the pairs in their places. Their order within an expert does not
// matter: a column's outputs do not depend on the other columns of its tile.
__global__ void __launch_bounds__(1024) moe_sort_kernel(const int32_t* __restrict__ ids, int B, int E,
                                                        int32_t* __restrict__ sorted, int32_t* __restrict__ pos,
                                                        int32_t* __restrict__ tiles) {
    extern __shared__ __align__(16) uint8_t smem[];
    int* cnt = reinterpret_cast<int*>(smem);
    int* cur = cnt + E;
    pdl_next();
    pdl_wait();
    for (int e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = 0;
    __syncthreads();
    for (int b = threadIdx.x; b < B; b += blockDim.x)
        if (unsigned(ids[b]) < unsigned(E)) atomicAdd(&cnt[ids[b]], 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        int p = 0, t = 0;
        for (int e = 0; e < E; ++e) {
            pos[e] = cur[e] = p;
            tiles[e] = t;
            p += cnt[e];
            t += (cnt[e] + 63) / 64;
        }
        pos[E] = p;
        tiles[E] = t;
    }
    __syncthreads();
    for (int b = threadIdx.x; b < B; b += blockDim.x)
        if (unsigned(ids[b]) < unsigned(E)) sorted[atomicAdd(&cur[ids[b]], 1)] = b;
}

// MoE: h = act(gate, up) of every pair, quantized for the down product as the separate
// quantizer does (a warp per 256 values).
template <int NS>
__global__ void moe_act_quantize_kernel(const float* __restrict__ gate, const float* __restrict__ up, int F, int B,
                                        bool situ, float beta, float linear_beta, int8_t* __restrict__ xq,
                                        float* __restrict__ xd, int* __restrict__ xs, uint32_t* __restrict__ xhl) {
    pdl_next();
    pdl_wait();
    const int64_t wid = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31, nb = F / 256;
    if (wid >= int64_t(B) * nb) return;
    const int64_t b = wid / nb;
    const int j = int(wid % nb);
    const int64_t o = b * F + j * 256 + lane * 8;
    const float4 g0 = *reinterpret_cast<const float4*>(gate + o), g1 = *reinterpret_cast<const float4*>(gate + o + 4);
    const float4 u0 = *reinterpret_cast<const float4*>(up + o), u1 = *reinterpret_cast<const float4*>(up + o + 4);
    const float g[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
    const float u[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = situ ? situ_value(g[i], u[i], beta, linear_beta) : swiglu_value(g[i], u[i]);
    quantize_vals256<NS>(v, xq + b * F + j * 256, xs + b * (F / 16) + j * 16, xd + (b * nb + j) * NS, lane,
                         xhl ? reinterpret_cast<uint8_t*>(xhl + (b * nb + j) * 8) : nullptr);
}

// MoE: h = act(gate, up) in place of gate, for a down stack that is not packed.
__global__ void moe_act_kernel(float* __restrict__ gate, const float* __restrict__ up, int64_t n, bool situ, float beta,
                               float linear_beta) {
    pdl_next();
    pdl_wait();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) gate[i] = situ ? situ_value(gate[i], up[i], beta, linear_beta) : swiglu_value(gate[i], up[i]);
}

// MoE: out[t] = the sum over i, in selection order, of weight[t][i] * o[t n_used + i]
// (y = w_0 o_0, then y + w_i o_i, each step rounded).
__global__ void moe_combine_kernel(const float* __restrict__ o, const float* __restrict__ w, int n_used, int T,
                                   int K, float* __restrict__ out, int64_t out_row) {
    pdl_next();
    pdl_wait();
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= int64_t(T) * K) return;
    const int64_t t = i / K, k = i % K;
    const float* wt = w + t * n_used;
    const float* ot = o + t * n_used * K + k;
    float y = __fmul_rn(wt[0], ot[0]);
    for (int u = 1; u < n_used; ++u) y = __fadd_rn(y, __fmul_rn(wt[u], ot[int64_t(u) * K]));
    out[t * out_row + k] = y;
}

// MoE, few pairs: the down products of one token's selected experts and their weighted sum
// in one block (grid: row groups x tokens). Warp w takes pair w / nseg's segment w % nseg
// (and w + warps, ... when there are more); each output then takes mmvq_kernel's steps
// (the segment sums added in order from 0) and moe_combine_kernel's (y = w_0 o_0, then
// y + w_i o_i): the bits of the two launches it replaces.
template <DType D>
__global__ void __launch_bounds__(512) moe_down_kernel(MatSet ms, Gather ga, const int8_t* __restrict__ xq,
                                                       const float* __restrict__ xd, const int* __restrict__ xs, int K,
                                                       int n_used, int sb_per_seg, int nseg,
                                                       const float* __restrict__ weights, float* __restrict__ out,
                                                       int64_t out_row) {
    extern __shared__ float part[];  // [n_used * nseg][32]
    constexpr int C = Pk<D>::C, NS = Pk<D>::NS;
    pdl_next();
    pdl_wait();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int64_t g = blockIdx.x, t = blockIdx.y;
    const int nsb = K >> 8;
    for (int q = warp; q < n_used * nseg; q += nw) {
        const int i = q / nseg, seg = q % nseg;
        const int64_t b = t * n_used + i;
        const int64_t e = min(max(ga.ids[b], 0), ga.n_exp - 1);
        const int64_t base = (e * ga.mat_groups + g) * nsb;  // the pair's row group, in records
        const int j0 = seg * sb_per_seg, j1 = min(nsb, j0 + sb_per_seg);
        float acc = 0.0f;
        for (int j = j0; j < j1; ++j) {
            uint32_t w[4 * C];
            const int4* rec = ms.W[0] + (base + j) * C * 32 + lane;
#pragma unroll
            for (int c = 0; c < C; ++c) {
                const int4 v = __ldg(rec + 32 * c);
                w[4 * c] = uint32_t(v.x), w[4 * c + 1] = uint32_t(v.y), w[4 * c + 2] = uint32_t(v.z),
                          w[4 * c + 3] = uint32_t(v.w);
            }
            const uint32_t sd = ms.side[0] ? uint32_t(__ldg(ms.side[0] + (base + j) * 32 + lane)) : 0u;
            Pk<D>::dot(w, sd, xq + b * K + j * 256, xd + (b * nsb + j) * NS, xs + b * (K / 16) + j * 16, acc);
        }
        part[q * 32 + lane] = acc;
    }
    __syncthreads();
    const int64_t row = g * 32 + lane;
    if (warp != 0 || row >= ms.N[0]) return;
    float y = 0.0f;
    for (int i = 0; i < n_used; ++i) {
        float o = 0.0f;
        for (int q = 0; q < nseg; ++q) o = __fadd_rn(o, part[(i * nseg + q) * 32 + lane]);
        const float wi = weights[t * n_used + i];
        y = i == 0 ? __fmul_rn(wi, o) : __fadd_rn(y, __fmul_rn(wi, o));
    }
    out[t * out_row + row] = y;
}

size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

// K's segments: its superblocks, at least 2 a segment.
KSplit segments(int64_t K) { return cut_k(int(K / 256), 2); }

// Tokens from which products of weight type t run on tensor cores (the same bits either
// way, so speed alone decides; measured on the H200, bench/LOG.md session 8: Q4_K from 8;
// Q6_K from 16, the dp4a kernel still winning at 8; Q8_0 from 32, the dp4a kernel winning
// at 16, its per-block float steps making the tile heavier). GLIA_MMQ_MIN_T overrides for
// every type.
int mmq_min_tokens(DType t) {
    static const int v = [] {
        const char* e = std::getenv("GLIA_MMQ_MIN_T");
        return e && *e ? std::max(1, std::atoi(e)) : 0;
    }();
    return v ? v : t == DType::Q4_K ? 8 : t == DType::Q6_K ? 16 : 32;
}

struct XQ {
    int8_t* q;
    float* d;
    int* s;
    uint32_t* hl;  // the sums of 16 as int8 hi / lo words (tensor cores)
    float* part;   // tensor-core segment sums
};
size_t xq_bytes(int64_t K, int64_t T) {
    return align256(size_t(T * K)) + align256(size_t(T * K / 32) * 4) + align256(size_t(T * K / 16) * 4) +
           align256(size_t(T * K / 8));
}
XQ carve(void* scratch, int64_t K, int64_t T) {
    uint8_t* p = static_cast<uint8_t*>(scratch);
    XQ x;
    x.q = reinterpret_cast<int8_t*>(p);
    p += align256(size_t(T * K));
    x.d = reinterpret_cast<float*>(p);
    p += align256(size_t(T * K / 32) * 4);
    x.s = reinterpret_cast<int*>(p);
    p += align256(size_t(T * K / 16) * 4);
    x.hl = reinterpret_cast<uint32_t*>(p);
    x.part = reinterpret_cast<float*>(static_cast<uint8_t*>(scratch) + xq_bytes(K, T));
    return x;
}

// Whether a tensor-core product sums every K segment inside one block: when its tiles
// alone fill the GPU twice over (no partial sums, no reduction launch, and the copies of a
// block's pipeline run over all of K). Either way the same bits; GLIA_MMQ_WHOLE=0: never.
bool mmq_whole_k(int64_t row_tiles, int64_t T, int nseg) {
    static const int sms = [] {
        const char* e = std::getenv("GLIA_MMQ_WHOLE");
        if (e && *e == '0') return 0;
        int dev = 0, n = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            return 0;
        return n;
    }();
    return nseg > 1 && sms > 0 && row_tiles * ((T + 63) / 64) >= 2 * int64_t(sms);
}

int64_t row_tiles_of(const Node* const* nodes, int count) {
    int64_t n = 0;
    for (int m = 0; m < count; ++m) n += (nodes[m]->src[MatmulArg::W]->ne[1] + 63) / 64;
    return n;
}

template <DType D, bool G = false>
void launch_mmq(const MatSet& mt, const XQ& q, int K, int T, int sbs, int spb, dim3 grid,
                cudaStream_t s, const Gather& ga = Gather{}) {
    // the stages, the totals, and (G) the tile's row table
    constexpr int bytes = 2 * MmqStage<Mq<D>::C, Mq<D>::NS>::kBytes + 128 * 32 * 4 + (G ? 128 * 4 : 0);
    static bool attr = [] {
        return cudaFuncSetAttribute(mmq_kernel<D, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) ==
               cudaSuccess;
    }();
    if (!attr) fail("cuda: the tensor-core matmul needs ", bytes, " bytes of shared memory per block");
    launch_pdl(mmq_kernel<D, G>, grid, dim3(128), size_t(bytes), s, mt, ga, static_cast<const int8_t*>(q.q),
               static_cast<const float*>(q.d), static_cast<const uint32_t*>(q.hl), K, T, sbs, spb, q.part);
}

template <DType D, int NT, bool G = false>
void launch_mmvq(const MatSet& ms, int K, const XQ& x, int T, cudaStream_t s, const float* x32 = nullptr,
                 const Gather& ga = Gather{}) {
    const auto [nsb, sbs, nseg] = segments(K);
    const dim3 grid(unsigned(ms.gstart[ms.n]), unsigned((T + NT - 1) / NT));
    size_t smem = size_t(nseg) * NT * 32 * 4;
    if (x32) smem += size_t(nseg) * sbs * kSbBytes;
    launch_pdl(mmvq_kernel<D, NT, G>, grid, dim3(unsigned(nseg * 32)), smem, s, ms, ga, static_cast<const int8_t*>(x.q),
               static_cast<const float*>(x.d), static_cast<const int*>(x.s), K, T, sbs, x32);
}

template <DType D>
void launch_mmvq_t(const MatSet& ms, int K, const XQ& x, int T, cudaStream_t s, const float* x32) {
    if (T >= 5) launch_mmvq<D, 8>(ms, K, x, T, s);
    else if (T >= 3) launch_mmvq<D, 4>(ms, K, x, T, s);
    else if (T == 2) launch_mmvq<D, 2>(ms, K, x, T, s);
    else launch_mmvq<D, 1>(ms, K, x, T, s, x32);
}

// MoE experts with packed stacks: the scratch's parts.
struct MoeParts {
    int64_t K, F, E, T, n_used, B;
    bool sorted;  // tensor cores over the pairs sorted by expert
};
MoeParts moe_parts(const Node& n) {
    const Tensor& gate = *n.src[MoeExpertsArg::GATE];
    MoeParts p;
    p.K = gate.ne[0];
    p.F = gate.ne[1];
    p.E = gate.ne[2];
    p.T = n.src[MoeExpertsArg::X]->ne[1];
    p.n_used = n.src[MoeExpertsArg::IDS]->ne[0];
    p.B = p.T * p.n_used;
    p.sorted = p.B >= moe_packed_min_pairs(p.E);
    return p;
}
struct MoeScratch {
    XQ x[2], h;            // the tokens' activations quantized for gate and up, the pairs' hidden ones
    float *gate, *up, *o;  // per pair: gate and up products [B][F], down products [B][K]
    float* xr;             // the tokens' activations rounded for a stack that is not packed
    int32_t *sorted, *pos, *tiles;
};
// The parts in order, from base (nullptr: only their total size, returned).
size_t moe_carve(const MoeParts& p, uint8_t* base, MoeScratch* m) {
    size_t at = 0;
    auto take = [&](size_t bytes) {
        uint8_t* r = base ? base + at : nullptr;
        at += align256(bytes);
        return r;
    };
    uint8_t* x0 = take(xq_bytes(p.K, p.T));
    uint8_t* x1 = take(xq_bytes(p.K, p.T));
    uint8_t* h = take(xq_bytes(p.F, p.B));
    float* g = reinterpret_cast<float*>(take(size_t(p.B * p.F) * 4));
    float* u = reinterpret_cast<float*>(take(size_t(p.B * p.F) * 4));
    float* o = reinterpret_cast<float*>(take(size_t(p.B * p.K) * 4));
    float* xr = reinterpret_cast<float*>(take(size_t(p.T * p.K) * 4));
    int32_t* so = reinterpret_cast<int32_t*>(take(size_t(p.B) * 4));
    int32_t* po = reinterpret_cast<int32_t*>(take(size_t(p.E + 1) * 4));
    int32_t* ti = reinterpret_cast<int32_t*>(take(size_t(p.E + 1) * 4));
    if (m) *m = MoeScratch{{carve(x0, p.K, p.T), carve(x1, p.K, p.T)}, carve(h, p.F, p.B), g, u, o, xr, so, po, ti};
    return at;
}

// One packed stack's MatSet entry m: its expert's rows N, packed data at w.data.
void set_stack(MatSet& ms, int m, const Tensor& w, float* out, int rows_per_block) {
    const PackedShape ps = packed_shape(w);
    ms.W[m] = static_cast<const int4*>(w.data);
    ms.side[m] = w.type == DType::Q6_K
                     ? reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(w.data) + ps.main_bytes())
                     : nullptr;
    ms.out[m] = out;
    ms.N[m] = int(w.ne[1]);
    ms.gstart[m + 1] = ms.gstart[m] + int((w.ne[1] + rows_per_block - 1) / rows_per_block);
}

// The products of packed stacks of one type D (one, or gate and up in one launch) for
// every pair: out[b][r] = W_{ids[b]}[r] . x(b / x_div).
template <DType D>
void moe_products(const Tensor* const* ws, float* const* outs, int count, const XQ& x, int K, const MoeParts& p,
                  const Gather& ga0, cudaStream_t s) {
    Gather ga = ga0;
    ga.mat_groups = ws[0]->ne[1] / 32;
    MatSet ms{};
    ms.n = count;
    const KSplit sg = segments(K);
    if (p.sorted) {
        for (int m = 0; m < count; ++m) set_stack(ms, m, *ws[m], outs[m], 64);
        // the sum over experts of ceil(pairs / 64) is at most B / 64 + the experts with a pair
        const dim3 grid(unsigned(p.B / 64 + std::min(p.E, p.B)), unsigned(ms.gstart[count]), 1);
        launch_mmq<D, true>(ms, x, K, int(p.B), sg.per, sg.nseg, grid, s, ga);
    } else {
        for (int m = 0; m < count; ++m) set_stack(ms, m, *ws[m], outs[m], 32);
        launch_mmvq<D, 1, true>(ms, K, x, int(p.B), s, nullptr, ga);
    }
}
void moe_products_t(const Tensor* const* ws, float* const* outs, int count, const XQ& x, int K, const MoeParts& p,
                    const Gather& ga, cudaStream_t s) {
    switch (ws[0]->type) {
        case DType::Q4_K: moe_products<DType::Q4_K>(ws, outs, count, x, K, p, ga, s); break;
        case DType::Q6_K: moe_products<DType::Q6_K>(ws, outs, count, x, K, p, ga, s); break;
        case DType::Q8_0: moe_products<DType::Q8_0>(ws, outs, count, x, K, p, ga, s); break;
        default: fail("cuda: no packed expert product for ", dtype_name(ws[0]->type));
    }
}

template <DType D>
void moe_down(const Tensor& down, const XQ& h, int F, const MoeParts& p, const Gather& ga0, const float* weights,
              float* out, int64_t out_row, cudaStream_t s) {
    Gather ga = ga0;
    ga.mat_groups = down.ne[1] / 32;
    MatSet ms{};
    ms.n = 1;
    set_stack(ms, 0, down, out, 32);
    const KSplit sg = segments(F);
    const int jobs = int(p.n_used) * sg.nseg, warps = std::min(jobs, 16);
    launch_pdl(moe_down_kernel<D>, dim3(unsigned(ms.gstart[1]), unsigned(p.T)), dim3(unsigned(32 * warps)),
               size_t(jobs) * 32 * 4, s, ms, ga, static_cast<const int8_t*>(h.q), static_cast<const float*>(h.d),
               static_cast<const int*>(h.s), F, int(p.n_used), sg.per, sg.nseg, weights, out, out_row);
}
void moe_down_t(const Tensor& down, const XQ& h, int F, const MoeParts& p, const Gather& ga, const float* weights,
                float* out, int64_t out_row, cudaStream_t s) {
    switch (down.type) {
        case DType::Q4_K: moe_down<DType::Q4_K>(down, h, F, p, ga, weights, out, out_row, s); break;
        case DType::Q6_K: moe_down<DType::Q6_K>(down, h, F, p, ga, weights, out, out_row, s); break;
        case DType::Q8_0: moe_down<DType::Q8_0>(down, h, F, p, ga, weights, out, out_row, s); break;
        default: fail("cuda: no packed expert product for ", dtype_name(down.type));
    }
}

// rows of x (float, x_row apart) quantized for packed weights of type t (hl: with the sums'
// hi / lo words for the tensor cores).
void quantize_for(DType t, const float* x, int64_t x_row, int64_t K, int64_t rows, const XQ& q, bool hl, cudaStream_t s) {
    const bool q80 = t == DType::Q8_0;
    const int64_t threads = rows * (K / 256) * 32;
    launch_pdl(q80 ? quantize_x_kernel<8> : quantize_x_kernel<1>, dim3(unsigned((threads + 255) / 256)), dim3(256), 0, s,
               x, x_row, int(K), int(rows), q.q, q.d, q.s, hl && !q80 ? q.hl : nullptr);
}

}  // namespace

// Pairs from which the expert products run on tensor cores over the pairs sorted by
// expert: from 8 a expert on average. Below that the dp4a kernel, which reads an expert's
// matrix once per pair (from L2 when shared), measured faster (bench/LOG.md session 9:
// qwen3-30b-a3b shapes, 512 pairs of 128 experts: 7,581 against 6,451 generated t/s).
// GLIA_MOE_MMQ_MIN overrides; the same bits either way.
int64_t moe_packed_min_pairs(int64_t n_exp) {
    static const int64_t v = [] {
        const char* e = std::getenv("GLIA_MOE_MMQ_MIN");
        return e && *e ? int64_t(std::max(1, std::atoi(e))) : int64_t(0);
    }();
    return v ? v : 8 * n_exp;
}

// A stack the expert path takes as it is: packed, or one the float kernels dequantize.
bool stack_ok(const Tensor& w) {
    return packable(w) || (experts_type_supported(w.type) && w.ne[0] % 32 == 0 && experts_shape_supported(w.ne[0], w.ne[1]));
}

bool moe_packed_ok(const Node& n) {
    const Tensor* x = n.src[MoeExpertsArg::X];
    const Tensor* g = n.src[MoeExpertsArg::GATE];
    const Tensor* u = n.src[MoeExpertsArg::UP];
    const Tensor* d = n.src[MoeExpertsArg::DOWN];
    const Tensor* ids = n.src[MoeExpertsArg::IDS];
    const Tensor* w = n.src[MoeExpertsArg::WEIGHTS];
    if (!x || !g || !u || !d || !ids || !w || !stack_ok(*g) || !stack_ok(*u) || !stack_ok(*d)) return false;
    return x->type == DType::F32 && x->is_contiguous() && x->ne[0] == g->ne[0] && g->ne[0] == u->ne[0] &&
           g->ne[1] == u->ne[1] && g->ne[2] == u->ne[2] && d->ne[0] == g->ne[1] && d->ne[1] == g->ne[0] &&
           d->ne[2] == g->ne[2] && ids->type == DType::I32 && ids->is_contiguous() && w->type == DType::F32 &&
           w->is_contiguous() && ids->ne[1] == x->ne[1] && n.out->is_contiguous() &&
           g->ne[2] <= 4096;  // the sort kernel's counts and cursors in 32 KB of shared memory
}

size_t moe_packed_scratch_bytes(const Node& n) { return moe_carve(moe_parts(n), nullptr, nullptr); }

void launch_moe_experts_packed(const Node& n, cudaStream_t s, void* scratch) {
    const Tensor& x = *n.src[MoeExpertsArg::X];
    const Tensor* gate = n.src[MoeExpertsArg::GATE];
    const Tensor* up = n.src[MoeExpertsArg::UP];
    const Tensor* down = n.src[MoeExpertsArg::DOWN];
    const int32_t* ids = n.src[MoeExpertsArg::IDS]->ptr<int32_t>();
    const float* weights = n.src[MoeExpertsArg::WEIGHTS]->ptr<float>();
    const MoeParts p = moe_parts(n);
    MoeScratch m;
    moe_carve(p, static_cast<uint8_t*>(scratch), &m);
    bool situ = false;
    float beta = 1.0f, linear_beta = 1.0f;
    if (n.op == Op::MOE_EXPERTS_GLU) {
        const GluParams& gp = n.p<GluParams>();
        if (gp.kind != GluKind::SWIGLU && gp.kind != GluKind::SITU) fail("cuda: moe_experts_glu: no kernel for this activation");
        situ = gp.kind == GluKind::SITU;
        beta = gp.beta;
        linear_beta = gp.linear_beta;
    }
    const bool pg = packable(*gate), pu = packable(*up), pd = packable(*down);
    if (p.sorted && (pg || pu || pd))
        launch_pdl(moe_sort_kernel, dim3(1), dim3(1024), size_t(2 * p.E) * 4, s, ids, int(p.B), int(p.E), m.sorted,
                   m.pos, m.tiles);
    Gather ga{ids, m.sorted, m.pos, m.tiles, int(p.E), int(p.n_used), 0};
    // 1: gate and up products of every pair (one launch when both are packed alike).
    const float* x32 = x.ptr<float>();
    if (pg && pu && gate->type == up->type) {
        quantize_for(gate->type, x32, p.K, p.K, p.T, m.x[0], p.sorted, s);
        const Tensor* gu[2] = {gate, up};
        float* gu_out[2] = {m.gate, m.up};
        moe_products_t(gu, gu_out, 2, m.x[0], int(p.K), p, ga, s);
    } else {
        for (int i = 0; i < 2; ++i) {
            const Tensor* w = i ? up : gate;
            float* out = i ? m.up : m.gate;
            if (!packable(*w)) {
                launch_experts_stack(*w, x, ids, int(p.n_used), out, m.xr, s);
                continue;
            }
            quantize_for(w->type, x32, p.K, p.K, p.T, m.x[i], p.sorted, s);
            moe_products_t(&w, &out, 1, m.x[i], int(p.K), p, ga, s);
        }
    }
    // 2-3: h = act(gate, up), then the down products added in selection order.
    if (!pd) {
        const int64_t nh = p.B * p.F;
        launch_pdl(moe_act_kernel, dim3(unsigned((nh + 255) / 256)), dim3(256), 0, s, m.gate,
                   static_cast<const float*>(m.up), nh, situ, beta, linear_beta);
        launch_experts_down(*down, m.gate, ids, int(p.n_used), weights, p.T, n.out->ptr<float>(), s);
        return;
    }
    const bool d80 = down->type == DType::Q8_0;
    const int64_t hthreads = p.B * (p.F / 256) * 32;
    launch_pdl(d80 ? moe_act_quantize_kernel<8> : moe_act_quantize_kernel<1>, dim3(unsigned((hthreads + 255) / 256)),
               dim3(256), 0, s, static_cast<const float*>(m.gate), static_cast<const float*>(m.up), int(p.F),
               int(p.B), situ, beta, linear_beta, m.h.q, m.h.d, m.h.s, p.sorted && !d80 ? m.h.hl : nullptr);
    ga.x_div = 1;
    if (!p.sorted) {  // the down products and their sum in one launch
        moe_down_t(*down, m.h, int(p.F), p, ga, weights, n.out->ptr<float>(), int64_t(n.out->nb[1] / 4), s);
        return;
    }
    float* dn_out = m.o;
    moe_products_t(&down, &dn_out, 1, m.h, int(p.F), p, ga, s);
    const int64_t outs = p.T * p.K;
    launch_pdl(moe_combine_kernel, dim3(unsigned((outs + 255) / 256)), dim3(256), 0, s, static_cast<const float*>(m.o),
               weights, int(p.n_used), int(p.T), int(p.K), n.out->ptr<float>(), int64_t(n.out->nb[1] / 4));
}

bool packing_enabled() {
    static const bool on = [] {
        const char* e = std::getenv("GLIA_CUDA_PACK");
        return !(e && *e == '0');
    }();
    return on;
}

bool expert_packing_enabled() {
    static const bool on = [] {
        const char* e = std::getenv("GLIA_MOE_PACK");
        return !(e && *e == '0');
    }();
    return on;
}

void launch_pack(DType t, const uint8_t* src, size_t row_bytes, const PackedShape& s, void* dst, cudaStream_t st) {
    const int64_t total = s.groups * s.nsb * s.chunks * 32;
    const size_t blk = row_bytes / size_t(s.nsb);
    uint16_t* side = t == DType::Q6_K ? reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(dst) + s.main_bytes()) : nullptr;
    pack_kernel<<<unsigned((total + 255) / 256), 256, 0, st>>>(t, src, row_bytes, blk, s.N, s.nsb, s.chunks,
                                                               static_cast<int4*>(dst), side, total);
}

size_t matmul_packed_scratch_bytes(const Node* const* nodes, int count) {
    const int64_t K = nodes[0]->src[MatmulArg::W]->ne[0], T = nodes[0]->src[MatmulArg::X]->n_rows();
    size_t bytes = xq_bytes(K, T);
    if (T >= mmq_min_tokens(nodes[0]->src[MatmulArg::W]->type)) {
        const int nseg = segments(K).nseg;
        if (nseg > 1 && !mmq_whole_k(row_tiles_of(nodes, count), T, nseg))
            for (int m = 0; m < count; ++m) bytes += size_t(nseg * T * nodes[m]->src[MatmulArg::W]->ne[1]) * 4;
    }
    return bytes;
}

bool matmul_packed_fusable(const Node& a, const Node& b) {
    const Tensor& wa = *a.src[MatmulArg::W];
    const Tensor& wb = *b.src[MatmulArg::W];
    const Tensor& xa = *a.src[MatmulArg::X];
    const Tensor& xb = *b.src[MatmulArg::X];
    return wa.type == wb.type && wa.ne[0] == wb.ne[0] && xa.data == xb.data && xa.n_rows() == xb.n_rows() &&
           xa.nb[1] == xb.nb[1];
}

int matmul_packed_max_group() { return kMaxMats; }

void launch_matmul_packed(const Node* const* nodes, int count, cudaStream_t s, void* scratch) {
    const Node& n0 = *nodes[0];
    const Tensor& w0 = *n0.src[MatmulArg::W];
    const Tensor& x = *n0.src[MatmulArg::X];
    const int K = int(w0.ne[0]), T = int(x.n_rows());
    const XQ q = carve(scratch, K, T);
    // One token: the dp4a kernel quantizes its own slices (one launch less per product).
    const KSplit sg = segments(K);
    const bool fits = size_t(sg.nseg) * (128 + size_t(sg.per) * kSbBytes) <= 48 * 1024;
    const float* x32 = T == 1 && fits && (x.nb[1] % 16 == 0) ? x.ptr<float>() : nullptr;
    const bool tensor_cores = T >= mmq_min_tokens(w0.type);
    const int64_t threads = int64_t(T) * (K / 256) * 32;
    if (!x32) {
        const unsigned blocks = unsigned((threads + 255) / 256);
        launch_pdl(w0.type == DType::Q8_0 ? quantize_x_kernel<8> : quantize_x_kernel<1>, dim3(blocks), dim3(256), 0,
                   s, static_cast<const float*>(x.ptr<float>()), int64_t(x.nb[1] / 4), K, T, q.q, q.d, q.s,
                   tensor_cores && w0.type != DType::Q8_0 ? q.hl : nullptr);
    }
    MatSet ms{};
    ms.n = count;
    ms.gstart[0] = 0;
    for (int m = 0; m < count; ++m) {
        const Tensor& w = *nodes[m]->src[MatmulArg::W];
        const PackedShape ps = packed_shape(w);
        ms.W[m] = static_cast<const int4*>(w.data);
        ms.side[m] = w.type == DType::Q6_K
                         ? reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(w.data) + ps.main_bytes())
                         : nullptr;
        ms.out[m] = nodes[m]->out->ptr<float>();
        ms.N[m] = int(ps.N);
        ms.gstart[m + 1] = ms.gstart[m] + int(ps.groups);
    }
    if (tensor_cores) {
        // Tensor cores: the same bits as the dp4a kernel, so the switch depends on speed alone.
        MatSet mt = ms;
        for (int m = 0; m < count; ++m) mt.gstart[m + 1] = mt.gstart[m] + (ms.N[m] + 63) / 64;
        const int sbs = sg.per, nseg = sg.nseg;
        int64_t total = 0;
        for (int m = 0; m < count; ++m) {
            mt.off[m] = total;
            total += int64_t(nseg) * T * ms.N[m];
        }
        const bool whole = mmq_whole_k(row_tiles_of(nodes, count), T, nseg);
        const int spb = whole ? nseg : 1;
        const dim3 grid(unsigned((T + 63) / 64), unsigned(mt.gstart[count]), unsigned(whole ? 1 : nseg));
        switch (w0.type) {
            case DType::Q4_K: launch_mmq<DType::Q4_K>(mt, q, K, T, sbs, spb, grid, s); break;
            case DType::Q6_K: launch_mmq<DType::Q6_K>(mt, q, K, T, sbs, spb, grid, s); break;
            case DType::Q8_0: launch_mmq<DType::Q8_0>(mt, q, K, T, sbs, spb, grid, s); break;
            default: fail("cuda: no packed matmul for ", dtype_name(w0.type));
        }
        if (nseg > 1 && !whole) {
            int maxn = 0;
            for (int m = 0; m < count; ++m) maxn = std::max(maxn, ms.N[m]);
            const int64_t n = int64_t(maxn) * T;
            launch_pdl(mmq_reduce_kernel, dim3(unsigned((n + 255) / 256), unsigned(count)), dim3(256), 0, s, mt,
                       static_cast<const float*>(q.part), T, nseg);
        }
        return;
    }
    switch (w0.type) {
        case DType::Q4_K: launch_mmvq_t<DType::Q4_K>(ms, K, q, T, s, x32); break;
        case DType::Q6_K: launch_mmvq_t<DType::Q6_K>(ms, K, q, T, s, x32); break;
        case DType::Q8_0: launch_mmvq_t<DType::Q8_0>(ms, K, q, T, s, x32); break;
        default: fail("cuda: no packed matmul for ", dtype_name(w0.type));
    }
}

void launch_get_rows_packed(const Node& n, cudaStream_t s) {
    const Tensor& table = *n.src[GetRowsArg::TABLE];
    const Tensor& ids = *n.src[GetRowsArg::IDS];
    const PackedShape ps = packed_shape(table);
    const int K = int(ps.K);
    const int64_t T = ids.ne[0];
    const dim3 grid(unsigned((K / 32 + 63) / 64), unsigned(T));
    const int4* W = static_cast<const int4*>(table.data);
    const uint16_t* side = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(table.data) + ps.main_bytes());
    switch (table.type) {
        case DType::Q4_K: launch_pdl(get_rows_packed_kernel<DType::Q4_K>, grid, dim3(64), 0, s, W, side, ids.ptr<int32_t>(), n.out->ptr<float>(), K); break;
        case DType::Q6_K: launch_pdl(get_rows_packed_kernel<DType::Q6_K>, grid, dim3(64), 0, s, W, side, ids.ptr<int32_t>(), n.out->ptr<float>(), K); break;
        case DType::Q8_0: launch_pdl(get_rows_packed_kernel<DType::Q8_0>, grid, dim3(64), 0, s, W, side, ids.ptr<int32_t>(), n.out->ptr<float>(), K); break;
        default: fail("cuda: no packed rows for ", dtype_name(table.type));
    }
}

}  // namespace glia::cuda
