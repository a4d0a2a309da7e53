// MATMUL on packed quantized weights (packed.cuh) with 8-bit activations, and GET_ROWS
// from packed tables.
//
// The activations of each token are quantized once per product to blocks of 32 int8
// values with a float scale (d = max|x| / 127) and the integer sums of each 16 values.
// A lane owns one weight row and walks K in order: each 32-value sub-block's dot product
// is exact integer arithmetic (dp4a), scaled by the block's float factors with
// round-to-nearest operations that never contract, and added to the lane's running sum.
// K is cut into segments that depend on K alone (one warp each); the segments' sums are
// added in order. Every output is therefore the same sequence of float operations
// whatever the number of tokens in the step: a batch changes no bits.
#include "dequant.cuh"
#include "packed.cuh"

namespace glia::cuda {
namespace {

__device__ __forceinline__ uint32_t rbyte(const uint32_t* w, int i) { return (w[i >> 2] >> (8 * (i & 3))) & 0xffu; }

__device__ __forceinline__ void load8(const int8_t* p, int* x) {
    const int4 a = __ldg(reinterpret_cast<const int4*>(p));
    const int4 b = __ldg(reinterpret_cast<const int4*>(p) + 1);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

template <DType D> struct Pk;

// Q4_K: value = d * sc * q - dmin * m per 32-value sub-block s (q 4-bit).
template <> struct Pk<DType::Q4_K> {
    static constexpr int C = 9;
    __device__ static void dot(const uint32_t* w, uint32_t, const int8_t* xq, const float* xd, const int* xs,
                               float& acc) {
        const float d = h2f(uint16_t(w[0] & 0xffffu)), dmin = h2f(uint16_t(w[0] >> 16));
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
                if (s < 4) {
                    sc = int(rbyte(w, 4 + s) & 63);
                    m = int(rbyte(w, 8 + s) & 63);
                } else {
                    sc = int((rbyte(w, 8 + s) & 0xF) | ((rbyte(w, s) >> 6) << 4));
                    m = int((rbyte(w, 8 + s) >> 4) | ((rbyte(w, 4 + s) >> 6) << 4));
                }
                const int isum = h ? sh : sl;
                const int xsum = xs[2 * s] + xs[2 * s + 1];
                const float c = __fmul_rn(xd[s], __fsub_rn(__fmul_rn(d, float(sc * isum)), __fmul_rn(dmin, float(m * xsum))));
                acc = __fadd_rn(acc, c);
            }
        }
    }
};

// Q6_K: value = d * sc16 * (q - 32), q 6-bit, a signed scale per 16 values.
template <> struct Pk<DType::Q6_K> {
    static constexpr int C = 13;
    __device__ static void dot(const uint32_t* w, uint32_t side, const int8_t* xq, const float* xd, const int* xs,
                               float& acc) {
        const float d = h2f(uint16_t(side));
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
                    const uint32_t l4 = w[16 * h + (k & 1) * 8 + i];
                    const uint32_t lo = k < 2 ? (l4 & 0x0F0F0F0Fu) : ((l4 >> 4) & 0x0F0F0F0Fu);
                    const uint32_t hi = ((w[32 + 8 * h + i] >> (2 * k)) & 0x03030303u) << 4;
                    if (i < 4) sa = __dp4a(int(lo | hi), xa[i], sa);
                    else sb = __dp4a(int(lo | hi), xa[i], sb);
                }
                const int sca = int(int8_t(rbyte(w, 192 + 8 * h + 2 * k)));
                const int scb = int(int8_t(rbyte(w, 193 + 8 * h + 2 * k)));
                const int comb = sca * (sa - 32 * xs[2 * s]) + scb * (sb - 32 * xs[2 * s + 1]);
                acc = __fadd_rn(acc, __fmul_rn(xd[s], __fmul_rn(d, float(comb))));
            }
        }
    }
};

// Q8_0: eight blocks of 32 int8 values, each with its f16 scale.
template <> struct Pk<DType::Q8_0> {
    static constexpr int C = 17;
    __device__ static void dot(const uint32_t* w, uint32_t, const int8_t* xq, const float* xd, const int*, float& acc) {
#pragma unroll
        for (int b = 0; b < 8; ++b) {
            int xa[8];
            load8(xq + 32 * b, xa);
            int s = 0;
#pragma unroll
            for (int i = 0; i < 8; ++i) s = __dp4a(int(w[8 * b + i]), xa[i], s);
            const float db = h2f(uint16_t(rbyte(w, 256 + 2 * b) | (rbyte(w, 257 + 2 * b) << 8)));
            acc = __fadd_rn(acc, __fmul_rn(xd[b], __fmul_rn(db, float(s))));
        }
    }
};

// One warp per 32-value block of one token: int8 values, scale, sums of each 16.
__global__ void quantize_x_kernel(const float* __restrict__ x, int64_t x_row, int K, int T, int8_t* __restrict__ xq,
                                  float* __restrict__ xd, int* __restrict__ xs) {
    const int64_t wid = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    const int nb = K / 32;
    if (wid >= int64_t(T) * nb) return;
    const int64_t t = wid / nb;
    const int b = int(wid % nb);
    const float v = x[t * x_row + b * 32 + lane];
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    const int q = max(-127, min(127, __float2int_rn(v * id)));
    xq[t * K + b * 32 + lane] = int8_t(q);
    int s = q;
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) {
        xd[t * nb + b] = d;
        xs[t * 2 * nb + 2 * b] = s;
    }
    if (lane == 16) xs[t * 2 * nb + 2 * b + 1] = s;
}

// Block: one warp per K segment, lane = row of group blockIdx.x; NT tokens per block.
template <DType D, int NT>
__global__ void __launch_bounds__(512) mmvq_kernel(const int4* __restrict__ W, const uint16_t* __restrict__ side,
                                                   const int8_t* __restrict__ xq, const float* __restrict__ xd,
                                                   const int* __restrict__ xs, float* __restrict__ out, int K, int N,
                                                   int T, int sb_per_seg) {
    extern __shared__ float part[];
    constexpr int C = Pk<D>::C;
    const int lane = threadIdx.x & 31, seg = threadIdx.x >> 5, nseg = blockDim.x >> 5;
    const int64_t g = blockIdx.x;
    const int t0 = blockIdx.y * NT;
    const int nsb = K >> 8;
    const int j0 = seg * sb_per_seg, j1 = min(nsb, j0 + sb_per_seg);
    float acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
    for (int j = j0; j < j1; ++j) {
        const int4* rec = W + (g * nsb + j) * C * 32 + lane;
        uint32_t w[4 * C];
#pragma unroll
        for (int c = 0; c < C; ++c) {
            const int4 v = __ldg(rec + 32 * c);
            w[4 * c] = uint32_t(v.x), w[4 * c + 1] = uint32_t(v.y), w[4 * c + 2] = uint32_t(v.z),
                      w[4 * c + 3] = uint32_t(v.w);
        }
        const uint32_t sd = side ? uint32_t(__ldg(side + (g * nsb + j) * 32 + lane)) : 0u;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (t0 + t < T) {
                const int64_t tt = t0 + t;
                Pk<D>::dot(w, sd, xq + tt * K + j * 256, xd + tt * (K / 32) + j * 8, xs + tt * (K / 16) + j * 16,
                           acc[t]);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) part[(seg * NT + t) * 32 + lane] = acc[t];
    __syncthreads();
    if (seg != 0) return;
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

struct XQ {
    int8_t* q;
    float* d;
    int* s;
};
XQ carve(void* scratch, int64_t K, int64_t T) {
    uint8_t* p = static_cast<uint8_t*>(scratch);
    XQ x;
    x.q = reinterpret_cast<int8_t*>(p);
    p += align256(size_t(T * K));
    x.d = reinterpret_cast<float*>(p);
    p += align256(size_t(T * K / 32) * 4);
    x.s = reinterpret_cast<int*>(p);
    return x;
}

template <DType D, int NT>
void launch_mmvq(const PackedShape& ps, const void* w, const XQ& x, float* out, int T, cudaStream_t s) {
    const int nsb = int(ps.nsb);
    const int sbs = std::max(2, (nsb + 15) / 16);
    const int nseg = (nsb + sbs - 1) / sbs;
    const dim3 grid(unsigned(ps.groups), unsigned((T + NT - 1) / NT));
    const int4* W = static_cast<const int4*>(w);
    const uint16_t* side =
        D == DType::Q6_K ? reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(w) + ps.main_bytes()) : nullptr;
    mmvq_kernel<D, NT><<<grid, nseg * 32, size_t(nseg) * NT * 32 * 4, s>>>(W, side, x.q, x.d, x.s, out, int(ps.K),
                                                                          int(ps.N), T, sbs);
}

template <DType D>
void launch_mmvq_t(const PackedShape& ps, const void* w, const XQ& x, float* out, int T, cudaStream_t s) {
    if (T >= 5) launch_mmvq<D, 8>(ps, w, x, out, T, s);
    else if (T >= 3) launch_mmvq<D, 4>(ps, w, x, out, T, s);
    else if (T == 2) launch_mmvq<D, 2>(ps, w, x, out, T, s);
    else launch_mmvq<D, 1>(ps, w, x, out, T, s);
}

}  // namespace

void launch_pack(DType t, const uint8_t* src, size_t row_bytes, const PackedShape& s, void* dst, cudaStream_t st) {
    const int64_t total = s.groups * s.nsb * s.chunks * 32;
    const size_t blk = row_bytes / size_t(s.nsb);
    uint16_t* side = t == DType::Q6_K ? reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(dst) + s.main_bytes()) : nullptr;
    pack_kernel<<<unsigned((total + 255) / 256), 256, 0, st>>>(t, src, row_bytes, blk, s.N, s.nsb, s.chunks,
                                                               static_cast<int4*>(dst), side, total);
}

size_t matmul_packed_scratch_bytes(const Node& n) {
    const int64_t K = n.src[MatmulArg::W]->ne[0], T = n.src[MatmulArg::X]->n_rows();
    return align256(size_t(T * K)) + align256(size_t(T * K / 32) * 4) + align256(size_t(T * K / 16) * 4);
}

void launch_matmul_packed(const Node& n, cudaStream_t s, void* scratch) {
    const Tensor& w = *n.src[MatmulArg::W];
    const Tensor& x = *n.src[MatmulArg::X];
    const PackedShape ps = packed_shape(w);
    const int K = int(ps.K), T = int(x.n_rows());
    const XQ q = carve(scratch, K, T);
    const int64_t threads = int64_t(T) * K;
    quantize_x_kernel<<<unsigned((threads + 255) / 256), 256, 0, s>>>(x.ptr<float>(), int64_t(x.nb[1] / 4), K, T, q.q,
                                                                      q.d, q.s);
    float* out = n.out->ptr<float>();
    switch (w.type) {
        case DType::Q4_K: launch_mmvq_t<DType::Q4_K>(ps, w.data, q, out, T, s); break;
        case DType::Q6_K: launch_mmvq_t<DType::Q6_K>(ps, w.data, q, out, T, s); break;
        case DType::Q8_0: launch_mmvq_t<DType::Q8_0>(ps, w.data, q, out, T, s); break;
        default: fail("cuda: no packed matmul for ", dtype_name(w.type));
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
        case DType::Q4_K: get_rows_packed_kernel<DType::Q4_K><<<grid, 64, 0, s>>>(W, side, ids.ptr<int32_t>(), n.out->ptr<float>(), K); break;
        case DType::Q6_K: get_rows_packed_kernel<DType::Q6_K><<<grid, 64, 0, s>>>(W, side, ids.ptr<int32_t>(), n.out->ptr<float>(), K); break;
        case DType::Q8_0: get_rows_packed_kernel<DType::Q8_0><<<grid, 64, 0, s>>>(W, side, ids.ptr<int32_t>(), n.out->ptr<float>(), K); break;
        default: fail("cuda: no packed rows for ", dtype_name(table.type));
    }
}

}  // namespace glia::cuda
