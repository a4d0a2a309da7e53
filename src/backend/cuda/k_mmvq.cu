// MATMUL on packed quantized weights (packed.cuh) with 8-bit activations, and GET_ROWS
// from packed tables.
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
#include <cstdlib>

#include "dequant.cuh"
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
__device__ __forceinline__ float q4k_term(float xd, float d, float dmin, int isc, int imx) {
    return __fmul_rn(xd, __fmaf_rn(d, float(isc), -__fmul_rn(dmin, float(imx))));
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
        acc = __fadd_rn(acc, q4k_term(xd[0], d, dmin, isc, imx));
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
// bit for bit.
template <int NS>
__device__ __forceinline__ void quantize_block256(const float* __restrict__ x, int8_t* q8, int* xs, float* xd,
                                                  int lane) {
    static_assert(NS == 1 || NS == 8, "one scale per 256 or per 32 values");
    const float4* xp = reinterpret_cast<const float4*>(x + lane * 8);
    const float4 v0 = xp[0], v1 = xp[1];
    const float v[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
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
    if ((lane & 1) == 0) xs[lane / 2] = s;
    if (lane % (32 / NS) == 0) xd[lane / (32 / NS)] = amax / 127.0f;
}

// One warp per 256-value block of one token: int8 values, NS scales, sums of each 16.
template <int NS>
__global__ void quantize_x_kernel(const float* __restrict__ x, int64_t x_row, int K, int T, int8_t* __restrict__ xq,
                                  float* __restrict__ xd, int* __restrict__ xs) {
    pdl_next();
    pdl_wait();
    const int64_t wid = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    const int nb = K / 256;
    if (wid >= int64_t(T) * nb) return;
    const int64_t t = wid / nb;
    const int b = int(wid % nb);
    quantize_block256<NS>(x + t * x_row + b * 256, xq + t * K + b * 256, xs + t * (K / 16) + b * 16,
                          xd + (t * nb + b) * NS, lane);
}

// Shared-memory bytes of one superblock's activations in the one-token dp4a kernel:
// 256 int8 values, 16 sums, up to 8 scales.
constexpr int kSbBytes = 256 + 64 + 32;

// Up to kMaxMats products of one input, one launch: blocks [gstart[m], gstart[m+1]) are
// matrix m's row groups.
constexpr int kMaxMats = 4;
struct MatSet {
    const int4* W[kMaxMats];
    const uint16_t* side[kMaxMats];
    float* out[kMaxMats];
    int N[kMaxMats];
    int gstart[kMaxMats + 1];
    int n;
};

// Block: one warp per K segment, lane = row of the block's group; NT tokens per block.
// With x32 (one token, NT = 1), each warp quantizes its own segment of x into shared
// memory first (quantize_block256, as the separate kernel does) instead of reading xq/xd/xs.
template <DType D, int NT>
__global__ void __launch_bounds__(512) mmvq_kernel(MatSet ms, const int8_t* __restrict__ xq,
                                                   const float* __restrict__ xd, const int* __restrict__ xs, int K,
                                                   int T, int sb_per_seg, const float* __restrict__ x32) {
    extern __shared__ float part[];
    constexpr int C = Pk<D>::C, NS = Pk<D>::NS;
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
                    const int64_t tt = t0 + t;
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

// Where each matrix's segment sums start in the partial buffer.
struct MatOffsets {
    int64_t off[kMaxMats];
};

// out = sum of the segment sums in order from 0 (as the dp4a kernel adds its warps' sums).
__global__ void mmq_reduce_kernel(MatSet ms, const float* __restrict__ part, MatOffsets po, int T, int nseg) {
    pdl_next();
    pdl_wait();
    const int m = blockIdx.y;
    const int64_t n = int64_t(ms.N[m]) * T;
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float* p = part + po.off[m] + i;
    float sum = 0.0f;
    for (int q = 0; q < nseg; ++q) sum = __fadd_rn(sum, p[int64_t(q) * n]);
    ms.out[m][i] = sum;
}

// Tensor-core version for many tokens: a block computes 64 rows x 64 tokens, four warps
// of 16 rows. For each superblock the block stages the two packed row groups and the 64
// tokens' int8 activations in shared memory; each sub-block's integer dot products come
// from mma.sync (int8 in, int32 out, exact), and each output then takes exactly the
// dp4a kernel's float steps in the same order (per-sub-block terms, segment sums added
// in order), so both kernels give the same bits.
constexpr int kXRow = 68;   // words per staged token row (256 bytes + 16 of padding)
constexpr int kXsRow = 20;  // ints per staged token's 16-value sums (16 + 4 of padding: 16-byte rows)

struct MmqTile {
    const uint32_t* w;   // the warp's packed group in shared memory
    const uint16_t* sd;  // its Q6_K side scales
    const int32_t* x;    // staged tokens, kXRow words each
    const float* xd;     // [64][NS]: each token's scales of this superblock
    const int* xs;       // [64][16]
    const uint32_t* hl;  // [2][64][4]: the sums the min / offset terms take, as int8 hi (x64) and lo parts
    int r0, r1;          // the thread's two lane-rows in the group
    int g, tig;
};

__device__ __forceinline__ uint32_t mword(const MmqTile& t, int r, int w) {
    return t.w[((w >> 2) * 32 + r) * 4 + (w & 3)];
}

// For the 8 tokens of column tile nt: the rows' 16 int8 factors (A: a0 row g, a1 row g + 8)
// . each token's sums (the min / offset terms), exact: the sums' hi (x64) and lo parts
// (t.hl) through one mma each.
__device__ __forceinline__ void sums_dot(const MmqTile& t, int a0, int a1, int nt, int (&v)[4]) {
    const int tok = nt * 8 + t.g;
    int rh[4], rl[4];
    mma_k16(rh, a0, a1, int(t.hl[tok * 4 + t.tig]));
    mma_k16(rl, a0, a1, int(t.hl[256 + tok * 4 + t.tig]));
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = 64 * rh[i] + rl[i];
}

template <DType D> struct Mq;

template <> struct Mq<DType::Q4_K> {
    static constexpr int C = 9, NS = 1;
    __device__ static void superblock(const MmqTile& t, float (&seg)[8][4]) {
        uint32_t ra[4], rb[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) ra[i] = mword(t, t.r0, i), rb[i] = mword(t, t.r1, i);
        int isc[8][4], mn[2][8];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) isc[nt][i] = 0;
#pragma unroll
        for (int s = 0; s < 8; ++s) {
            int sc[2];
            q4k_scale_min(ra, s, sc[0], mn[0][s]);
            q4k_scale_min(rb, s, sc[1], mn[1][s]);
            const int wa = 4 + 8 * (s / 2) + t.tig;
            const uint32_t mask = 0x0F0F0F0Fu;
            const int sh = (s & 1) * 4;
            const int a0 = int((mword(t, t.r0, wa) >> sh) & mask), a1 = int((mword(t, t.r1, wa) >> sh) & mask);
            const int a2 = int((mword(t, t.r0, wa + 4) >> sh) & mask),
                      a3 = int((mword(t, t.r1, wa + 4) >> sh) & mask);
#pragma unroll
            for (int nt = 0; nt < 8; ++nt) {
                const int32_t* xr = t.x + (nt * 8 + t.g) * kXRow + 8 * s + t.tig;
                int r[4];
                mma_k32(r, a0, a1, a2, a3, xr[0], xr[4]);
#pragma unroll
                for (int i = 0; i < 4; ++i) isc[nt][i] += sc[i >> 1] * r[i];
            }
        }
        const float d[2] = {h2f(uint16_t(ra[0] & 0xffffu)), h2f(uint16_t(rb[0] & 0xffffu))};
        const float dmin[2] = {h2f(uint16_t(ra[0] >> 16)), h2f(uint16_t(rb[0] >> 16))};
        // imx per output = the row's 8 mins . the token's 8 sums of 32 values, on the tensor
        // cores: mins as int8 A (k 0..7, 8..15 zero), sums as int8 hi (x64) and lo parts
        // (t.hl); exact integers, the same imx as any other order.
        auto pack4 = [](int a, int b, int c, int d) {
            return uint32_t(a) | (uint32_t(b) << 8) | (uint32_t(c) << 16) | (uint32_t(d) << 24);
        };
        const int am0 = int(t.tig == 0   ? pack4(mn[0][0], mn[0][1], mn[0][2], mn[0][3])
                            : t.tig == 1 ? pack4(mn[0][4], mn[0][5], mn[0][6], mn[0][7])
                                         : 0u);
        const int am1 = int(t.tig == 0   ? pack4(mn[1][0], mn[1][1], mn[1][2], mn[1][3])
                            : t.tig == 1 ? pack4(mn[1][4], mn[1][5], mn[1][6], mn[1][7])
                                         : 0u);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
            int imx[4];
            sums_dot(t, am0, am1, nt, imx);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int tk = nt * 8 + t.tig * 2 + (i & 1);
                seg[nt][i] = __fadd_rn(seg[nt][i], q4k_term(t.xd[tk], d[i >> 1], dmin[i >> 1], isc[nt][i], imx[i]));
            }
        }
    }
};

template <> struct Mq<DType::Q6_K> {
    static constexpr int C = 13, NS = 1;
    __device__ static void superblock(const MmqTile& t, float (&seg)[8][4]) {
        const float dr[2] = {h2f(t.sd[t.r0]), h2f(t.sd[t.r1])};
        uint32_t sa[4], sb[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) sa[i] = mword(t, t.r0, 48 + i), sb[i] = mword(t, t.r1, 48 + i);
        int comb[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) comb[nt][i] = 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int s = 4 * h + k;
                const int lw = 16 * h + (k & 1) * 8, hw = 32 + 8 * h;
                const int a0 = int(q6k_word(mword(t, t.r0, lw + t.tig), mword(t, t.r0, hw + t.tig), k));
                const int a1 = int(q6k_word(mword(t, t.r1, lw + t.tig), mword(t, t.r1, hw + t.tig), k));
                const int a2 = int(q6k_word(mword(t, t.r0, lw + 4 + t.tig), mword(t, t.r0, hw + 4 + t.tig), k));
                const int a3 = int(q6k_word(mword(t, t.r1, lw + 4 + t.tig), mword(t, t.r1, hw + 4 + t.tig), k));
                const int sc_a[2] = {int(int8_t(rbyte(sa, 8 * h + 2 * k))), int(int8_t(rbyte(sb, 8 * h + 2 * k)))};
                const int sc_b[2] = {int(int8_t(rbyte(sa, 8 * h + 2 * k + 1))), int(int8_t(rbyte(sb, 8 * h + 2 * k + 1)))};
#pragma unroll
                for (int nt = 0; nt < 8; ++nt) {
                    const int32_t* xr = t.x + (nt * 8 + t.g) * kXRow + 8 * s + t.tig;
                    int ra[4], rb[4];
                    mma_k16(ra, a0, a1, xr[0]);
                    mma_k16(rb, a2, a3, xr[4]);
#pragma unroll
                    for (int i = 0; i < 4; ++i) comb[nt][i] += sc_a[i >> 1] * ra[i] + sc_b[i >> 1] * rb[i];
                }
            }
        }
        // The -32 offset of every 6-bit value: 32 * (the row's 16 scales . the token's 16
        // sums), subtracted once per output, on the tensor cores: the scales as int8 A, the
        // sums as int8 hi (x64) and lo parts (t.hl); exact integers, the same comb.
        const int as0 = int(t.tig == 0 ? sa[0] : t.tig == 1 ? sa[1] : t.tig == 2 ? sa[2] : sa[3]);
        const int as1 = int(t.tig == 0 ? sb[0] : t.tig == 1 ? sb[1] : t.tig == 2 ? sb[2] : sb[3]);
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
            int off[4];
            sums_dot(t, as0, as1, nt, off);
#pragma unroll
            for (int i = 0; i < 4; ++i) comb[nt][i] -= 32 * off[i];
        }
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int tk = nt * 8 + t.tig * 2 + (i & 1);
                seg[nt][i] = __fadd_rn(seg[nt][i], q6k_term(t.xd[tk], dr[i >> 1], comb[nt][i]));
            }
    }
};

template <> struct Mq<DType::Q8_0> {
    static constexpr int C = 17, NS = 8;
    __device__ static void superblock(const MmqTile& t, float (&seg)[8][4]) {
#pragma unroll
        for (int b = 0; b < 8; ++b) {
            const uint32_t da = mword(t, t.r0, 64 + b / 2), db = mword(t, t.r1, 64 + b / 2);
            const float dr[2] = {h2f(uint16_t((da >> (16 * (b & 1))) & 0xffffu)),
                                 h2f(uint16_t((db >> (16 * (b & 1))) & 0xffffu))};
            const int a0 = int(mword(t, t.r0, 8 * b + t.tig)), a1 = int(mword(t, t.r1, 8 * b + t.tig));
            const int a2 = int(mword(t, t.r0, 8 * b + 4 + t.tig)), a3 = int(mword(t, t.r1, 8 * b + 4 + t.tig));
#pragma unroll
            for (int nt = 0; nt < 8; ++nt) {
                const int32_t* xr = t.x + (nt * 8 + t.g) * kXRow + 8 * b + t.tig;
                int r[4];
                mma_k32(r, a0, a1, a2, a3, xr[0], xr[4]);
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int tk = nt * 8 + t.tig * 2 + (i & 1);
                    seg[nt][i] = q8_0_block(seg[nt][i], dr[i >> 1], t.xd[tk * 8 + b], r[i]);
                }
            }
        }
    }
};

// One pipeline stage in shared memory: the two packed row groups of one superblock and
// the 64 tokens' activations for it.
template <int C, int NS>
struct MmqStage {
    static constexpr int kW = 2 * C * 32 * 16, kSide = 128, kX = 64 * kXRow * 4, kXd = 64 * NS * 4,
                         kXs = 64 * kXsRow * 4;
    static constexpr int kBytes = kW + kSide + kX + kXd + kXs;
};

// grid (64-row tiles of every matrix in ms, 64-token tiles, K segments); ms.gstart counts
// 64-row tiles. Block z sums segments z * seg_per_block onwards: with one segment a block
// (grids too small to fill the GPU otherwise) and several segments in all, it writes its
// sums to part (segment-major, [seg][T][N] per matrix at poff[m]) for mmq_reduce_kernel to
// add in order, the dp4a kernel's order; with every segment in one block (grid z = 1) it
// adds each segment's sum to its total in that same order itself. Two stages: the copies of
// superblock j + 1 are in flight while superblock j is computed.
template <DType D>
__global__ void __launch_bounds__(128) mmq_kernel(MatSet ms, const int8_t* __restrict__ xq,
                                                  const float* __restrict__ xd, const int* __restrict__ xs, int K,
                                                  int T, int sb_per_seg, int seg_per_block, float* __restrict__ part,
                                                  MatOffsets po) {
    constexpr int C = Mq<D>::C, NS = Mq<D>::NS;
    using St = MmqStage<C, NS>;
    extern __shared__ __align__(16) uint8_t smem[];
    int mi = 0;
#pragma unroll
    for (int i = 1; i < kMaxMats; ++i)
        if (i < ms.n && int(blockIdx.x) >= ms.gstart[i]) mi = i;
    const int64_t tile = int64_t(blockIdx.x) - ms.gstart[mi];
    const int N = ms.N[mi], groups = (N + 31) / 32;
    const int4* __restrict__ W = ms.W[mi];
    const uint16_t* __restrict__ side = ms.side[mi];
    const int t0 = blockIdx.y * 64;
    const int nsb = K >> 8;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int jb = int(blockIdx.z) * sb_per_seg * seg_per_block, je = min(nsb, jb + sb_per_seg * seg_per_block);

    pdl_next();
    // The weights' copies of a stage (no kernel writes them) and the activations' copies.
    auto issue_w = [&](int stage, int j) {
        uint8_t* st = smem + stage * St::kBytes;
        int4* wsm = reinterpret_cast<int4*>(st);
        for (int idx = threadIdx.x; idx < 2 * C * 32; idx += blockDim.x) {
            const int64_t grp = tile * 2 + idx / (C * 32);
            const bool ok = grp < groups;
            cp_async16(wsm + idx, ok ? W + (grp * nsb + j) * C * 32 + idx % (C * 32) : W, ok);
        }
        if (D == DType::Q6_K && threadIdx.x < 8) {
            const int64_t grp = tile * 2 + threadIdx.x / 4;
            const bool ok = grp < groups;
            cp_async16(st + St::kW + threadIdx.x * 16,
                       ok ? reinterpret_cast<const int4*>(side + (grp * nsb + j) * 32) + threadIdx.x % 4
                          : reinterpret_cast<const int4*>(side),
                       ok);
        }
    };
    auto issue_x = [&](int stage, int j) {
        uint8_t* st = smem + stage * St::kBytes;
        int8_t* xsm = reinterpret_cast<int8_t*>(st + St::kW + St::kSide);
        for (int idx = threadIdx.x; idx < 64 * 16; idx += blockDim.x) {
            const int tok = idx >> 4, ch = idx & 15;
            const bool ok = t0 + tok < T;
            cp_async16(xsm + tok * kXRow * 4 + ch * 16,
                       ok ? reinterpret_cast<const int4*>(xq + int64_t(t0 + tok) * K + j * 256) + ch
                          : reinterpret_cast<const int4*>(xq),
                       ok);
        }
        float* xdsm = reinterpret_cast<float*>(st + St::kW + St::kSide + St::kX);
        for (int idx = threadIdx.x; idx < 64 * NS; idx += blockDim.x) {
            const int tok = idx / NS;
            const bool ok = t0 + tok < T;
            cp_async4(xdsm + idx, ok ? xd + (int64_t(t0 + tok) * (K / 256) + j) * NS + idx % NS : xd, ok);
        }
        int* xssm = reinterpret_cast<int*>(st + St::kW + St::kSide + St::kX + St::kXd);
        if (D != DType::Q8_0)  // Q8_0 has no use for the sums
            for (int idx = threadIdx.x; idx < 64 * 4; idx += blockDim.x) {
                const int tok = idx >> 2, q = idx & 3;
                const bool ok = t0 + tok < T;
                cp_async16(xssm + tok * kXsRow + 4 * q,
                           ok ? reinterpret_cast<const int4*>(xs + int64_t(t0 + tok) * (K / 16) + j * 16) + q
                              : reinterpret_cast<const int4*>(xs),
                           ok);
            }
    };

    float seg[8][4], tot[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) seg[nt][i] = 0.0f, tot[nt][i] = 0.0f;
    if (jb < je) issue_w(0, jb);
    pdl_wait();  // the first weights are on their way; the activations are the previous kernel's
    if (jb < je) issue_x(0, jb);
    cp_async_commit();
    for (int j = jb; j < je; ++j) {
        const int stage = (j - jb) & 1;
        if (j + 1 < je) issue_w(stage ^ 1, j + 1), issue_x(stage ^ 1, j + 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const uint8_t* st = smem + stage * St::kBytes;
        uint32_t* hl = reinterpret_cast<uint32_t*>(smem + 2 * St::kBytes);
        if (D != DType::Q8_0) {
            // The sums the min (Q4_K: 8 of 32 values) or offset (Q6_K: 16 of 16) terms take,
            // split v = 64 hi + lo with lo in 0..63 (both int8) for the tensor cores.
            const int* xs = reinterpret_cast<const int*>(st + St::kW + St::kSide + St::kX + St::kXd);
            for (int idx = threadIdx.x; idx < 64 * 4; idx += blockDim.x) {
                const int tok = idx >> 2, w = idx & 3;
                uint32_t hi = 0, lo = 0;
#pragma unroll
                for (int b = 0; b < 4; ++b) {
                    int v;
                    if (D == DType::Q4_K) {
                        const int s4 = 4 * w + b;
                        v = s4 < 8 ? xs[tok * kXsRow + 2 * s4] + xs[tok * kXsRow + 2 * s4 + 1] : 0;
                    } else {
                        v = xs[tok * kXsRow + 4 * w + b];
                    }
                    hi |= (uint32_t(v >> 6) & 0xffu) << (8 * b);
                    lo |= uint32_t(v & 63) << (8 * b);
                }
                hl[tok * 4 + w] = hi;
                hl[256 + tok * 4 + w] = lo;
            }
            __syncthreads();
        }
        MmqTile t;
        t.hl = hl;
        t.w = reinterpret_cast<const uint32_t*>(st) + (warp >> 1) * C * 32 * 4;
        t.sd = reinterpret_cast<const uint16_t*>(st + St::kW) + (warp >> 1) * 32;
        t.x = reinterpret_cast<const int32_t*>(st + St::kW + St::kSide);
        t.xd = reinterpret_cast<const float*>(st + St::kW + St::kSide + St::kX);
        t.xs = reinterpret_cast<const int*>(st + St::kW + St::kSide + St::kX + St::kXd);
        t.g = lane >> 2;
        t.tig = lane & 3;
        t.r0 = (warp & 1) * 16 + t.g;
        t.r1 = t.r0 + 8;
        Mq<D>::superblock(t, seg);
        if ((j + 1) % sb_per_seg == 0 || j + 1 == je) {  // a segment ends: its sum joins the total
#pragma unroll
            for (int nt = 0; nt < 8; ++nt)
#pragma unroll
                for (int i = 0; i < 4; ++i) tot[nt][i] = __fadd_rn(tot[nt][i], seg[nt][i]), seg[nt][i] = 0.0f;
        }
        __syncthreads();  // this stage is refilled by the next iteration's copies
    }
    float* __restrict__ out = gridDim.z > 1 ? part + po.off[mi] + int64_t(blockIdx.z) * T * N : ms.out[mi];
    const int64_t row0 = tile * 64 + warp * 16 + (lane >> 2);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int64_t row = row0 + (i >> 1) * 8;
            const int tok = t0 + nt * 8 + (lane & 3) * 2 + (i & 1);
            if (row < N && tok < T) out[int64_t(tok) * N + row] = tot[nt][i];
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

size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

// K's segments: its superblocks, at least 2 a segment.
KSplit segments(int64_t K) { return cut_k(int(K / 256), 2); }

// Tokens from which products run on tensor cores (GLIA_MMQ_MIN_T overrides; the results
// are the same bits either way).
int mmq_min_tokens() {
    static const int v = [] {
        const char* e = std::getenv("GLIA_MMQ_MIN_T");
        return e && *e ? std::max(1, std::atoi(e)) : 32;
    }();
    return v;
}

struct XQ {
    int8_t* q;
    float* d;
    int* s;
    float* part;  // tensor-core segment sums
};
size_t xq_bytes(int64_t K, int64_t T) {
    return align256(size_t(T * K)) + align256(size_t(T * K / 32) * 4) + align256(size_t(T * K / 16) * 4);
}
XQ carve(void* scratch, int64_t K, int64_t T) {
    uint8_t* p = static_cast<uint8_t*>(scratch);
    XQ x;
    x.q = reinterpret_cast<int8_t*>(p);
    p += align256(size_t(T * K));
    x.d = reinterpret_cast<float*>(p);
    p += align256(size_t(T * K / 32) * 4);
    x.s = reinterpret_cast<int*>(p);
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

template <DType D>
void launch_mmq(const MatSet& mt, const XQ& q, int K, int T, int sbs, int spb, const MatOffsets& po, dim3 grid,
                cudaStream_t s) {
    constexpr int bytes = 2 * MmqStage<Mq<D>::C, Mq<D>::NS>::kBytes + 2 * 64 * 16;  // + the hi/lo sums
    static bool attr = [] {
        return cudaFuncSetAttribute(mmq_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) == cudaSuccess;
    }();
    if (!attr) fail("cuda: the tensor-core matmul needs ", bytes, " bytes of shared memory per block");
    launch_pdl(mmq_kernel<D>, grid, dim3(128), size_t(bytes), s, mt, static_cast<const int8_t*>(q.q),
               static_cast<const float*>(q.d), static_cast<const int*>(q.s), K, T, sbs, spb, q.part, po);
}

template <DType D, int NT>
void launch_mmvq(const MatSet& ms, int K, const XQ& x, int T, cudaStream_t s, const float* x32 = nullptr) {
    const auto [nsb, sbs, nseg] = segments(K);
    const dim3 grid(unsigned(ms.gstart[ms.n]), unsigned((T + NT - 1) / NT));
    size_t smem = size_t(nseg) * NT * 32 * 4;
    if (x32) smem += size_t(nseg) * sbs * kSbBytes;
    launch_pdl(mmvq_kernel<D, NT>, grid, dim3(unsigned(nseg * 32)), smem, s, ms, static_cast<const int8_t*>(x.q),
               static_cast<const float*>(x.d), static_cast<const int*>(x.s), K, T, sbs, x32);
}

template <DType D>
void launch_mmvq_t(const MatSet& ms, int K, const XQ& x, int T, cudaStream_t s, const float* x32) {
    if (T >= 5) launch_mmvq<D, 8>(ms, K, x, T, s);
    else if (T >= 3) launch_mmvq<D, 4>(ms, K, x, T, s);
    else if (T == 2) launch_mmvq<D, 2>(ms, K, x, T, s);
    else launch_mmvq<D, 1>(ms, K, x, T, s, x32);
}

}  // namespace

bool packing_enabled() {
    static const bool on = [] {
        const char* e = std::getenv("GLIA_CUDA_PACK");
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
    if (T >= mmq_min_tokens()) {
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
    const int64_t threads = int64_t(T) * (K / 256) * 32;
    if (!x32) {
        const unsigned blocks = unsigned((threads + 255) / 256);
        launch_pdl(w0.type == DType::Q8_0 ? quantize_x_kernel<8> : quantize_x_kernel<1>, dim3(blocks), dim3(256), 0,
                   s, static_cast<const float*>(x.ptr<float>()), int64_t(x.nb[1] / 4), K, T, q.q, q.d, q.s);
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
    if (T >= mmq_min_tokens()) {
        // Tensor cores: the same bits as the dp4a kernel, so the switch depends on speed alone.
        MatSet mt = ms;
        for (int m = 0; m < count; ++m) mt.gstart[m + 1] = mt.gstart[m] + (ms.N[m] + 63) / 64;
        const int sbs = sg.per, nseg = sg.nseg;
        MatOffsets po{};
        int64_t total = 0;
        for (int m = 0; m < count; ++m) {
            po.off[m] = total;
            total += int64_t(nseg) * T * ms.N[m];
        }
        const bool whole = mmq_whole_k(row_tiles_of(nodes, count), T, nseg);
        const int spb = whole ? nseg : 1;
        const dim3 grid(unsigned(mt.gstart[count]), unsigned((T + 63) / 64), unsigned(whole ? 1 : nseg));
        switch (w0.type) {
            case DType::Q4_K: launch_mmq<DType::Q4_K>(mt, q, K, T, sbs, spb, po, grid, s); break;
            case DType::Q6_K: launch_mmq<DType::Q6_K>(mt, q, K, T, sbs, spb, po, grid, s); break;
            case DType::Q8_0: launch_mmq<DType::Q8_0>(mt, q, K, T, sbs, spb, po, grid, s); break;
            default: fail("cuda: no packed matmul for ", dtype_name(w0.type));
        }
        if (nseg > 1 && !whole) {
            int maxn = 0;
            for (int m = 0; m < count; ++m) maxn = std::max(maxn, ms.N[m]);
            const int64_t n = int64_t(maxn) * T;
            launch_pdl(mmq_reduce_kernel, dim3(unsigned((n + 255) / 256), unsigned(count)), dim3(256), 0, s, ms,
                       static_cast<const float*>(q.part), po, T, nseg);
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
