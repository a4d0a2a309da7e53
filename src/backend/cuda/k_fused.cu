// Kernels for pairs of nodes that a segment launches as one (cuda_backend.cu decides):
// a residual ADD followed by the RMS_NORM of its result. Each output is computed with
// exactly the expressions and reduction order of the separate kernels (k_rows.cu), so
// fusing changes no bits; it only saves a launch and a pass over the sum.
#include "common.cuh"

namespace glia::cuda {
namespace {

// One block (256 threads) per row: sum = a + b (stored), then the row's RMS norm of sum.
__global__ void add_rms_norm_kernel(Rows a, Rows b, float* sum, const float* w, float eps, float* out, int64_t ne0) {
    pdl_next();
    pdl_wait();
    const int64_t r = blockIdx.x;
    const float* ar = a.f(r % a.ne1, r / a.ne1);
    const float* br = b.f(r % b.ne1, r / b.ne1);
    float* xr = sum + r * ne0;
    float ss = 0;
    for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) {
        const float v = ar[i] + br[i];
        xr[i] = v;
        ss += v * v;
    }
    const float scale = rsqrtf(block_sum(ss) / float(ne0) + eps);
    float* o = out + r * ne0;
    for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) o[i] = xr[i] * scale * (w ? w[i] : 1.0f);
}

// The same with float4 chunks in rms_norm4_kernel's order (norm_threads(ne0) threads; each
// thread reads back only the sums it wrote).
__global__ void __launch_bounds__(1024) add_rms_norm4_kernel(Rows a, Rows b, float* sum, const float* w, float eps, float* out, int64_t ne0) {
    pdl_next();
    pdl_wait();
    const int64_t r = blockIdx.x, n4 = ne0 / 4;
    const float4* ar = reinterpret_cast<const float4*>(a.f(r % a.ne1, r / a.ne1));
    const float4* br = reinterpret_cast<const float4*>(b.f(r % b.ne1, r / b.ne1));
    float4* xr = reinterpret_cast<float4*>(sum + r * ne0);
    const int bd = blockDim.x;
    float ss = 0;
    for (int64_t i0 = threadIdx.x; i0 < n4; i0 += 4 * bd) {
        float4 va[4], vb[4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
            if (i0 + k * bd < n4) va[k] = ar[i0 + k * bd], vb[k] = br[i0 + k * bd];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (i0 + k * bd < n4) {
                v = make_float4(va[k].x + vb[k].x, va[k].y + vb[k].y, va[k].z + vb[k].z, va[k].w + vb[k].w);
                xr[i0 + k * bd] = v;
            }
            ss = sumsq4(ss, v);
        }
    }
    norm_write4(xr, rsqrtf(block_sum(ss) / float(ne0) + eps), w, out + r * ne0, n4);
}

}  // namespace

bool add_rms_norm_fusable(const Node& add, const Node& norm) {
    if (add.op != Op::ADD || norm.op != Op::RMS_NORM || norm.src[NormArg::X] != add.out) return false;
    const Tensor* a = add.src[BinaryArg::A];
    const Tensor* b = add.src[BinaryArg::B];
    const Tensor* x = norm.src[NormArg::X];
    return a && b && a->type == DType::F32 && b->type == DType::F32 && a->ne[0] == b->ne[0] &&
           a->n_rows() == b->n_rows() && a->ne[1] == b->ne[1] && a->ne[3] == 1 && b->ne[3] == 1 && x->ne[3] == 1 &&
           add.out->is_contiguous() && norm.out->is_contiguous();
}

void launch_add_rms_norm(const Node& add, const Node& norm, cudaStream_t s) {
    const Tensor& a = *add.src[BinaryArg::A];
    const Tensor& b = *add.src[BinaryArg::B];
    const Tensor* w = norm.src[NormArg::W];
    const int64_t rows = a.ne[1] * a.ne[2];
    const bool vec = rows16(a) && rows16(b) && aligned16(add.out->data) && aligned16(norm.out->data) &&
                     (!w || aligned16(w->data));
    launch_pdl(vec ? add_rms_norm4_kernel : add_rms_norm_kernel, dim3(unsigned(rows)),
               dim3(vec ? norm_threads(a.ne[0]) : 256), 0, s, Rows::of(a), Rows::of(b), add.out->ptr<float>(),
               w ? w->ptr<float>() : nullptr, norm.p<NormParams>().eps, norm.out->ptr<float>(), a.ne[0]);
}

}  // namespace glia::cuda
