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

#include "act_prologue.cuh"
#include "dequant.cuh"
#include "glu.cuh"
#include "launch.cuh"
#include "mma.cuh"
#include "mmq_tile.cuh"
#include "packed.cuh"
#include "packed_terms.cuh"

namespace glia::cuda {
namespace {

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

// Block: one warp per K segment, lane = row of the block's group; NT tokens per block.
// With x32 (one token, NT = 1), each warp quantizes its own segment of x into shared
// memory first (quantize_block256, as the separate kernel does) instead of reading xq/xd/xs.
// G: the grid's y is a pair of ga (NT = 1), its expert's matrix and activation row.
// P (one token, x32 = pro.x): the row is made by the prologue pro (act_prologue.cuh) first.
template <DType D, int NT, bool G = false, int P = PRO_NONE>
__global__ void __launch_bounds__(512) mmvq_kernel(MatSet ms, Gather ga, const int8_t* __restrict__ xq,
                                                   const float* __restrict__ xd, const int* __restrict__ xs, int K,
                                                   int T, int sb_per_seg, const float* __restrict__ x32,
                                                   ActPrologue pro) {
    extern __shared__ float part[];
    constexpr int C = Pk<D>::C, NS = Pk<D>::NS;
    static_assert(!G || NT == 1, "a pair a block column");
    static_assert(P == PRO_NONE || (NT == 1 && !G), "a prologue makes one token's row");
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
        // (with a norm prologue, a second record of more than 9 chunks waits for it: the
        // registers of both and the norm's would spill)
        constexpr bool kLate = kTwo && C > 9 && (P == PRO_NORM || P == PRO_ADD_NORM);
        if (j0 < j1) load(wa, sa, j0);
        if (kTwo && !kLate && j0 + 1 < j1) load(wb, sb, j0 + 1);
        pdl_wait();  // the weights' loads are out; x is the previous kernel's
        // Layout after part: per warp, sb_per_seg x (256 int8 + 16 sums + 8 scales); then a
        // norm prologue's row.
        float4* prow = reinterpret_cast<float4*>(reinterpret_cast<uint8_t*>(part + nseg * 32) +
                                                 size_t(nseg) * sb_per_seg * kSbBytes);
        float pscale = 0.0f;
        if constexpr (P == PRO_NORM || P == PRO_ADD_NORM) pscale = pro_norm_scale<P>(pro, prow);
        if constexpr (P != PRO_NONE)
            if (blockIdx.x == 0 && blockIdx.y == 0) pro_store<P>(pro, pscale, prow);
        if constexpr (kLate)
            if (j0 + 1 < j1) load(wb, sb, j0 + 1);
        uint8_t* mine = reinterpret_cast<uint8_t*>(part + nseg * 32) + size_t(seg) * sb_per_seg * kSbBytes;
        int8_t* q8 = reinterpret_cast<int8_t*>(mine);
        int* s16 = reinterpret_cast<int*>(mine + sb_per_seg * 256);
        float* sd = reinterpret_cast<float*>(mine + sb_per_seg * (256 + 64));
        for (int j = j0; j < j1; ++j) {
            if constexpr (P == PRO_NONE) {
                quantize_block256<NS>(x32 + j * 256, q8 + (j - j0) * 256, s16 + (j - j0) * 16, sd + (j - j0) * NS, lane);
            } else {
                float v[8];
                pro_values<P>(pro, pscale, prow, int64_t(j) * 256 + lane * 8, v);
                quantize_vals256<NS>(v, q8 + (j - j0) * 256, s16 + (j - j0) * 16, sd + (j - j0) * NS, lane, nullptr);
            }
        }
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

// Whether products of up to 16 tokens take the few-token tensor-core tiles (each weight
// unpacked once for all of them) rather than the 64-token ones; GLIA_MMQ_FEW=0: the
// 64-token tiles and their thresholds. The same bits either way (tools/cuda_emu; the op
// table's alone column and --check-alone on the H100); llama3-8b batched decode of 4 / 8 /
// 16 sequences 1.28 / 1.71 / 1.64x the 64-token tiles' (bench/LOG.md session 25).
bool mmq_few_tiles() {
    static const bool few = [] {
        const char* e = std::getenv("GLIA_MMQ_FEW");
        return !(e && *e == '0');
    }();
    return few;
}

// Tokens from which products of weight type t run on tensor cores (the same bits either
// way, so speed alone decides). With the few-token tiles (bench/LOG.md session 24,
// bench-ops on the H100, llama3-8b shapes): Q4_K from 4, Q6_K and Q8_0 from 8. With the
// 64-token tiles only (session 8, H200): Q4_K from 8, Q6_K from 16, Q8_0 from 32.
// GLIA_MMQ_MIN_T overrides for every type.
int mmq_min_tokens(DType t) {
    static const int v = [] {
        const char* e = std::getenv("GLIA_MMQ_MIN_T");
        return e && *e ? std::max(1, std::atoi(e)) : 0;
    }();
    if (v) return v;
    if (mmq_few_tiles()) return t == DType::Q4_K ? 4 : 8;
    return t == DType::Q4_K ? 8 : t == DType::Q6_K ? 16 : 32;
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
bool mmq_whole_k(int64_t row_tiles, int64_t token_tiles, int nseg) {
    static const int sms = [] {
        const char* e = std::getenv("GLIA_MMQ_WHOLE");
        if (e && *e == '0') return 0;
        int dev = 0, n = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            return 0;
        return n;
    }();
    return nseg > 1 && sms > 0 && row_tiles * token_tiles >= 2 * int64_t(sms);
}

// Which block tile a tensor-core product of T tokens takes.
enum class MmqTileKind { MANY, FEW8, FEW16 };
MmqTileKind mmq_tile_kind(int64_t T) {
    if (!mmq_few_tiles() || T > 16) return MmqTileKind::MANY;
    return T <= 8 ? MmqTileKind::FEW8 : MmqTileKind::FEW16;
}
struct MmqDims {
    int rb, tb;  // rows and tokens of a block's tile
};
MmqDims mmq_dims(MmqTileKind k) {
    switch (k) {
        case MmqTileKind::FEW8: return {MmqFew8::RB, MmqFew8::TB};
        case MmqTileKind::FEW16: return {MmqFew16::RB, MmqFew16::TB};
        default: return {MmqMany::RB, MmqMany::TB};
    }
}

int64_t row_tiles_of(const Node* const* nodes, int count, int rb) {
    int64_t n = 0;
    for (int m = 0; m < count; ++m) n += (nodes[m]->src[MatmulArg::W]->ne[1] + rb - 1) / rb;
    return n;
}

template <DType D, class S = MmqMany, bool G = false>
void launch_mmq(const MatSet& mt, const XQ& q, int K, int T, int sbs, int spb, dim3 grid,
                cudaStream_t s, const Gather& ga = Gather{}) {
    // the stages, the totals, and (G) the tile's row table
    using St = MmqStage<Mq<D>::C, Mq<D>::NS, S>;
    constexpr int bytes = 2 * St::kBytes + St::kTot + (G ? 128 * 4 : 0);
    static bool attr = [] {
        return cudaFuncSetAttribute(mmq_kernel<D, S, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) ==
               cudaSuccess;
    }();
    if (!attr) fail("cuda: the tensor-core matmul needs ", bytes, " bytes of shared memory per block");
    launch_pdl(mmq_kernel<D, S, G>, grid, dim3(128), size_t(bytes), s, mt, ga, static_cast<const int8_t*>(q.q),
               static_cast<const float*>(q.d), static_cast<const uint32_t*>(q.hl), K, T, sbs, spb, q.part);
}

template <class S>
void launch_mmq_t(DType t, const MatSet& mt, const XQ& q, int K, int T, int sbs, int spb, dim3 grid, cudaStream_t s) {
    switch (t) {
        case DType::Q4_K: launch_mmq<DType::Q4_K, S>(mt, q, K, T, sbs, spb, grid, s); break;
        case DType::Q6_K: launch_mmq<DType::Q6_K, S>(mt, q, K, T, sbs, spb, grid, s); break;
        case DType::Q8_0: launch_mmq<DType::Q8_0, S>(mt, q, K, T, sbs, spb, grid, s); break;
        default: fail("cuda: no packed matmul for ", dtype_name(t));
    }
}

template <DType D, int NT, bool G = false, int P = PRO_NONE>
void launch_mmvq(const MatSet& ms, int K, const XQ& x, int T, cudaStream_t s, const float* x32 = nullptr,
                 const Gather& ga = Gather{}, const ActPrologue& pro = ActPrologue{}) {
    const auto [nsb, sbs, nseg] = segments(K);
    const dim3 grid(unsigned(ms.gstart[ms.n]), unsigned((T + NT - 1) / NT));
    size_t smem = size_t(nseg) * NT * 32 * 4;
    if (x32) smem += size_t(nseg) * sbs * kSbBytes + pro_smem_bytes(P, K);
    launch_pdl(mmvq_kernel<D, NT, G, P>, grid, dim3(unsigned(nseg * 32)), smem, s, ms, ga,
               static_cast<const int8_t*>(x.q), static_cast<const float*>(x.d), static_cast<const int*>(x.s), K, T,
               sbs, x32, pro);
}

template <DType D>
void launch_mmvq_t(const MatSet& ms, int K, const XQ& x, int T, cudaStream_t s, const float* x32,
                   const ActPrologue* pro) {
    if (T >= 5) launch_mmvq<D, 8>(ms, K, x, T, s);
    else if (T >= 3) launch_mmvq<D, 4>(ms, K, x, T, s);
    else if (T == 2) launch_mmvq<D, 2>(ms, K, x, T, s);
    else if (!pro) launch_mmvq<D, 1>(ms, K, x, T, s, x32);
    else if (pro->kind == PRO_SWIGLU) launch_mmvq<D, 1, false, PRO_SWIGLU>(ms, K, x, T, s, pro->x, Gather{}, *pro);
    else if (pro->kind == PRO_NORM) launch_mmvq<D, 1, false, PRO_NORM>(ms, K, x, T, s, pro->x, Gather{}, *pro);
    else launch_mmvq<D, 1, false, PRO_ADD_NORM>(ms, K, x, T, s, pro->x, Gather{}, *pro);
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
        launch_mmq<D, MmqMany, true>(ms, x, K, int(p.B), sg.per, sg.nseg, grid, s, ga);
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
        const MmqDims dm = mmq_dims(mmq_tile_kind(T));
        if (nseg > 1 && !mmq_whole_k(row_tiles_of(nodes, count, dm.rb), (T + dm.tb - 1) / dm.tb, nseg))
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

// One token: the dp4a kernel quantizes its own slices (one launch less per product), when
// its blocks' slices fit in shared memory (with a prologue, with room for its 32 sums).
bool matmul_packed_one_token(const Node& n0, int prologue) {
    const Tensor& w0 = *n0.src[MatmulArg::W];
    const Tensor& x = *n0.src[MatmulArg::X];
    const KSplit sg = segments(w0.ne[0]);
    const size_t pro = prologue != PRO_NONE ? 128 + pro_smem_bytes(prologue, w0.ne[0]) : 0;
    const bool fits = size_t(sg.nseg) * (128 + size_t(sg.per) * kSbBytes) + pro <= 48 * 1024;
    return x.n_rows() == 1 && 1 < mmq_min_tokens(w0.type) && fits && x.nb[1] % 16 == 0;
}

void launch_matmul_packed(const Node* const* nodes, int count, cudaStream_t s, void* scratch, const ActPrologue* pro) {
    const Node& n0 = *nodes[0];
    const Tensor& w0 = *n0.src[MatmulArg::W];
    const Tensor& x = *n0.src[MatmulArg::X];
    const int K = int(w0.ne[0]), T = int(x.n_rows());
    const XQ q = carve(scratch, K, T);
    const KSplit sg = segments(K);
    const bool tensor_cores = T >= mmq_min_tokens(w0.type);
    if (pro && pro->kind == PRO_NONE) pro = nullptr;
    const float* x32 = matmul_packed_one_token(n0, pro ? pro->kind : PRO_NONE) ? x.ptr<float>() : nullptr;
    if (pro && !x32) fail("cuda: a prologue on a product that is not one token's");
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
        const MmqTileKind kind = mmq_tile_kind(T);
        const MmqDims dm = mmq_dims(kind);
        MatSet mt = ms;
        for (int m = 0; m < count; ++m) mt.gstart[m + 1] = mt.gstart[m] + (ms.N[m] + dm.rb - 1) / dm.rb;
        const int sbs = sg.per, nseg = sg.nseg;
        int64_t total = 0;
        for (int m = 0; m < count; ++m) {
            mt.off[m] = total;
            total += int64_t(nseg) * T * ms.N[m];
        }
        const int64_t token_tiles = (T + dm.tb - 1) / dm.tb;
        const bool whole = mmq_whole_k(row_tiles_of(nodes, count, dm.rb), token_tiles, nseg);
        const int spb = whole ? nseg : 1;
        const dim3 grid(unsigned(token_tiles), unsigned(mt.gstart[count]), unsigned(whole ? 1 : nseg));
        switch (kind) {
            case MmqTileKind::FEW8: launch_mmq_t<MmqFew8>(w0.type, mt, q, K, T, sbs, spb, grid, s); break;
            case MmqTileKind::FEW16: launch_mmq_t<MmqFew16>(w0.type, mt, q, K, T, sbs, spb, grid, s); break;
            default: launch_mmq_t<MmqMany>(w0.type, mt, q, K, T, sbs, spb, grid, s);
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
        case DType::Q4_K: launch_mmvq_t<DType::Q4_K>(ms, K, q, T, s, x32, pro); break;
        case DType::Q6_K: launch_mmvq_t<DType::Q6_K>(ms, K, q, T, s, x32, pro); break;
        case DType::Q8_0: launch_mmvq_t<DType::Q8_0>(ms, K, q, T, s, x32, pro); break;
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
