// Row-wise and element-wise kernels: embedding rows, RMSNorm, ADD/MUL/SCALE/SOFTCAP,
// SwiGLU/GeGLU, RoPE (and ROPE_FREQS). All memory-bound: one pass over their operands, one thread per
// element (or one block per row for the norm's reduction).
#include "dequant.cuh"

namespace glia::cuda {
namespace {

template <DType T>
__global__ void get_rows_kernel(const uint8_t* table, int64_t row_bytes, const int32_t* ids, float* out, int64_t n) {
    pdl_next();
    pdl_wait();
    const int64_t t = blockIdx.y;
    const uint8_t* row = table + int64_t(ids[t]) * row_bytes;
    for (int64_t c = blockIdx.x * blockDim.x + threadIdx.x; c < n / 32; c += gridDim.x * blockDim.x) {
        float y[32];
        Dq<T>::chunk(row, c, y);
#pragma unroll
        for (int i = 0; i < 32; ++i) out[t * n + c * 32 + i] = y[i];
    }
}

// One block per row: sum of squares in double-free float (block reduction), then scale.
__global__ void rms_norm_kernel(Rows x, const float* w, float eps, float* out, int64_t ne0) {
    pdl_next();
    pdl_wait();
    const int64_t r = blockIdx.x, i1 = r % x.ne1, i2 = r / x.ne1;
    const float* xr = x.f(i1, i2);
    float ss = 0;
    for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) ss += xr[i] * xr[i];
    const float scale = rsqrtf(block_sum(ss) / float(ne0) + eps);
    float* o = out + r * ne0;
    for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) o[i] = xr[i] * scale * (w ? w[i] : 1.0f);
}

// The same with float4 chunks (norm_threads(ne0) threads; ne0 % 4 == 0, 16-byte rows).
__device__ __forceinline__ void rms_norm4_row(Rows x, const float* w, float eps, float* out, int64_t ne0, int64_t r) {
    const int64_t i1 = r % x.ne1, i2 = r / x.ne1, n4 = ne0 / 4;
    const float4* xr = reinterpret_cast<const float4*>(x.f(i1, i2));
    const int bd = blockDim.x;
    float ss = 0;
    for (int64_t b = threadIdx.x; b < n4; b += 4 * bd) {
        float4 v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = b + k * bd < n4 ? xr[b + k * bd] : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int k = 0; k < 4; ++k) ss = sumsq4(ss, v[k]);
    }
    norm_write4(xr, rsqrtf(block_sum(ss) / float(ne0) + eps), w, out + r * ne0, n4);
}
__global__ void __launch_bounds__(1024) rms_norm4_kernel(Rows x, const float* w, float eps, float* out, int64_t ne0) {
    pdl_next();
    pdl_wait();
    rms_norm4_row(x, w, eps, out, ne0, blockIdx.x);
}
// Two norms of rows of one length in one launch (q and k norms): blocks [0, rows_a) take
// a's rows, the rest b's; each row as rms_norm4_kernel computes it.
struct NormJob {
    Rows x;
    const float* w;
    float* out;
    int64_t rows;
};
__global__ void __launch_bounds__(1024) rms_norm4_pair_kernel(NormJob a, NormJob b, float eps, int64_t ne0) {
    pdl_next();
    pdl_wait();
    const int64_t r = blockIdx.x;
    if (r < a.rows) rms_norm4_row(a.x, a.w, eps, a.out, ne0, r);
    else rms_norm4_row(b.x, b.w, eps, b.out, ne0, r - a.rows);
}

__device__ inline float gelu_ref(float x) {
    // As the CPU (and the reference): the input rounded to f16, tanh-GELU, result rounded to f16.
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = round_h(x);
    return round_h(0.5f * h * (1.0f + tanhf(0.79788456080286535588f * h * (1.0f + 0.044715f * h * h))));
}

__global__ void binary_kernel(Op op, Rows a, Rows b, bool bcast, float s, float* out, int64_t ne0, int64_t rows) {
    pdl_next();
    pdl_wait();
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= ne0 * rows) return;
    const int64_t r = idx / ne0, i = idx % ne0;
    const float x = a.f(r % a.ne1, r / a.ne1)[i];
    float y = 0.0f;
    if (b.p) y = bcast ? b.f(0)[i] : b.f(r % b.ne1, r / b.ne1)[i];
    float v;
    switch (op) {
        case Op::ADD: v = x + y; break;
        case Op::MUL: v = x * y; break;
        case Op::SCALE: v = x * s; break;
        case Op::SOFTCAP: v = tanhf(x * (1.0f / s)) * s; break;
        case Op::SWIGLU: v = x / (1.0f + expf(-x)) * y; break;
        default: v = gelu_ref(x) * y; break;
    }
    out[idx] = v;
}

// One rotated tensor of a ROPE launch (q, and k when a pair of nodes launches together).
struct RopeJob {
    Rows x;
    float* out;
    int64_t n_head;
};

// One thread per rotated pair; the angle by the CPU's float recurrence theta *= scale,
// divided by the pair's frequency factor when there are some (ROPE_FREQS). Threads past
// job ja's pairs take job jb's (n_head 0: none); each element's arithmetic is the same either way.
__global__ void rope_kernel(RopeJob ja, RopeJob jb, const int32_t* pos, const float* freqs, RopeParams p,
                            float theta_scale, int64_t hd, int64_t T) {
    pdl_next();
    pdl_wait();
    int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t pairs = hd / 2;
    if (idx >= pairs * (ja.n_head + jb.n_head) * T) return;
    const bool second = idx >= pairs * ja.n_head * T;
    if (second) idx -= pairs * ja.n_head * T;
    const Rows x = second ? jb.x : ja.x;
    float* out = second ? jb.out : ja.out;
    const int64_t n_head = second ? jb.n_head : ja.n_head;
    const int64_t i = idx % pairs, h = (idx / pairs) % n_head, t = idx / (pairs * n_head);
    const float* src = x.f(h, t);
    float* dst = out + (t * n_head + h) * hd;
    const int i0 = int(2 * i);
    if (i0 >= p.n_dims) {
        dst[i0] = src[i0];
        dst[i0 + 1] = src[i0 + 1];
        return;
    }
    float theta = float(pos[t]);
    for (int k = 0; k < i0; k += 2) theta *= theta_scale;
    const float th = freqs ? p.freq_scale * (theta / freqs[i]) : theta * p.freq_scale;
    const float c = cosf(th), s = sinf(th);
    const int a = p.type == RopeType::NEOX ? i0 / 2 : i0;
    const int b = p.type == RopeType::NEOX ? i0 / 2 + p.n_dims / 2 : i0 + 1;
    const float x0 = src[a], x1 = src[b];
    dst[a] = x0 * c - x1 * s;
    dst[b] = x0 * s + x1 * c;
}

}  // namespace

bool rows_type_supported(DType t) { return type_supported(t); }

void launch_get_rows(const Node& n, cudaStream_t s) {
    const Tensor& table = *n.src[GetRowsArg::TABLE];
    const Tensor& ids = *n.src[GetRowsArg::IDS];
    const int64_t E = table.ne[0], T = ids.ne[0];
    const dim3 grid(unsigned((E / 32 + 127) / 128), unsigned(T));
    GLIA_CUDA_TYPE_SWITCH(table.type, (launch_pdl(get_rows_kernel<D>, grid, dim3(128), 0, s,
                                                     static_cast<const uint8_t*>(table.data), int64_t(table.nb[1]),
                                                     ids.ptr<int32_t>(), n.out->ptr<float>(), E)));
}

namespace {
// Rows the float4 kernel takes (16-byte rows, output and weights).
bool norm_vec(const Node& n) {
    const Tensor* w = n.src[NormArg::W];
    return rows16(*n.src[NormArg::X]) && aligned16(n.out->data) && (!w || aligned16(w->data));
}
NormJob norm_job(const Node& n) {
    const Tensor& x = *n.src[NormArg::X];
    const Tensor* w = n.src[NormArg::W];
    return NormJob{Rows::of(x), w ? w->ptr<float>() : nullptr, n.out->ptr<float>(), x.ne[1] * x.ne[2]};
}
}  // namespace

void launch_rms_norm(const Node& n, cudaStream_t s) {
    const Tensor& x = *n.src[NormArg::X];
    const Tensor* w = n.src[NormArg::W];
    const int64_t rows = x.ne[1] * x.ne[2];
    const bool vec = norm_vec(n);
    launch_pdl(vec ? rms_norm4_kernel : rms_norm_kernel, dim3(unsigned(rows)), dim3(vec ? norm_threads(x.ne[0]) : 256),
               0, s, Rows::of(x), w ? w->ptr<float>() : nullptr, n.p<NormParams>().eps, n.out->ptr<float>(), x.ne[0]);
}

bool norm_pair_fusable(const Node& a, const Node& b, bool placed) {
    if (a.op != Op::RMS_NORM || b.op != Op::RMS_NORM) return false;
    const Tensor& xa = *a.src[NormArg::X];
    const Tensor& xb = *b.src[NormArg::X];
    if (xa.ne[0] != xb.ne[0] || xa.ne[3] != 1 || xb.ne[3] != 1 || a.p<NormParams>().eps != b.p<NormParams>().eps)
        return false;
    if (!placed) return true;
    return norm_vec(a) && norm_vec(b) && !overlaps(*b.out, xa) && !overlaps(*a.out, xb) && !overlaps(*a.out, *b.out);
}

void launch_norm_pair(const Node& a, const Node& b, cudaStream_t s) {
    const NormJob ja = norm_job(a), jb = norm_job(b);
    const int64_t ne0 = a.src[NormArg::X]->ne[0];
    launch_pdl(rms_norm4_pair_kernel, dim3(unsigned(ja.rows + jb.rows)), dim3(norm_threads(ne0)), 0, s, ja, jb,
               a.p<NormParams>().eps, ne0);
}

void launch_binary(const Node& n, cudaStream_t s) {
    const Tensor& a = *n.src[0];
    const Tensor* b = n.src[1];
    const int64_t ne0 = a.ne[0], rows = a.ne[1] * a.ne[2];
    float p = 0.0f;
    if (n.op == Op::SCALE) p = n.p<ScaleParams>().s;
    if (n.op == Op::SOFTCAP) p = n.p<SoftcapParams>().cap;
    Rows rb{};
    if (b) rb = Rows::of(*b);
    const int64_t total = ne0 * rows;
    launch_pdl(binary_kernel, dim3(unsigned((total + 255) / 256)), dim3(256), 0, s, n.op, Rows::of(a), rb,
               b && b->n_rows() == 1, p, n.out->ptr<float>(), ne0, rows);
}

namespace {

// (value, index) a thread or warp holds: the larger value wins, equal values go to the
// lower index, NaN never wins (as the CPU's `v[i] > v[best]` scan).
__device__ __forceinline__ void argmax_take(float& bv, int& bi, float v, int i) {
    if (v > bv || (v == bv && i < bi)) bv = v, bi = i;
}

// One block per row.
__global__ void argmax_kernel(Rows x, int64_t n, int32_t* __restrict__ out) {
    pdl_next();
    pdl_wait();
    const int64_t r = blockIdx.x;
    const float* v = x.f(r);
    float bv = -INFINITY;
    int bi = int(n);  // no value yet: any -inf or larger value at a lower index takes it
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) argmax_take(bv, bi, v[i], int(i));
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        argmax_take(bv, bi, ov, oi);
    }
    __shared__ float sv[32];
    __shared__ int si[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) sv[warp] = bv, si[warp] = bi;
    __syncthreads();
    if (warp != 0) return;
    bv = lane < int(blockDim.x >> 5) ? sv[lane] : -INFINITY;
    bi = lane < int(blockDim.x >> 5) ? si[lane] : int(n);
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        argmax_take(bv, bi, ov, oi);
    }
    // A NaN first value stops the CPU's scan at 0; so does a row of NaN alone.
    if (lane == 0) out[r] = (isnan(v[0]) || bi >= n) ? 0 : bi;
}

}  // namespace

void launch_argmax(const Node& n, cudaStream_t s) {
    const Tensor& x = *n.src[0];
    launch_pdl(argmax_kernel, dim3(unsigned(x.n_rows())), dim3(1024), 0, s, Rows::of(x), x.ne[0],
               n.out->ptr<int32_t>());
}

bool rope_pair_fusable(const Node& a, const Node& b, bool placed) {
    if (a.op != b.op || (a.op != Op::ROPE && a.op != Op::ROPE_FREQS)) return false;
    const Tensor& xa = *a.src[RopeArg::X];
    const Tensor& xb = *b.src[RopeArg::X];
    const RopeParams& pa = a.p<RopeParams>();
    const RopeParams& pb = b.p<RopeParams>();
    return a.src[RopeArg::POS] == b.src[RopeArg::POS] && xa.ne[0] == xb.ne[0] && xa.ne[2] == xb.ne[2] &&
           (a.op == Op::ROPE || a.src[RopeFreqsArg::FREQS] == b.src[RopeFreqsArg::FREQS]) &&
           pa.type == pb.type && pa.n_dims == pb.n_dims &&
           pa.freq_base == pb.freq_base && pa.freq_scale == pb.freq_scale &&
           // Both run at once: neither may write where the other reads (the arena gives k's
           // output the memory of q's input once the separate kernels would be done with it,
           // unless the memory plan knows they run together: launches_with_next).
           (!placed || (!overlaps(*b.out, xa) && !overlaps(*a.out, xb) && !overlaps(*a.out, *b.out)));
}

void launch_rope_pair(const Node& n, const Node* m, cudaStream_t s) {
    const Tensor& x = *n.src[RopeArg::X];
    const RopeParams& p = n.p<RopeParams>();
    const int64_t hd = x.ne[0], T = x.ne[2];
    const float theta_scale = powf(p.freq_base, -2.0f / float(p.n_dims));
    const RopeJob a{Rows::of(x), n.out->ptr<float>(), x.ne[1]};
    RopeJob b{Rows{}, nullptr, 0};
    if (m) b = RopeJob{Rows::of(*m->src[RopeArg::X]), m->out->ptr<float>(), m->src[RopeArg::X]->ne[1]};
    const int64_t total = hd / 2 * (a.n_head + b.n_head) * T;
    const float* freqs = n.op == Op::ROPE_FREQS ? n.src[RopeFreqsArg::FREQS]->ptr<float>() : nullptr;
    launch_pdl(rope_kernel, dim3(unsigned((total + 255) / 256)), dim3(256), 0, s, a, b,
               n.src[RopeArg::POS]->ptr<int32_t>(), freqs, p, theta_scale, hd, T);
}

void launch_rope(const Node& n, cudaStream_t s) { launch_rope_pair(n, nullptr, s); }

}  // namespace glia::cuda
