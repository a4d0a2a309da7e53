// Element-wise ops over strided views, contiguous outputs (as the CPU's ops_recurrent.cpp
// and ops_mix.cpp): UNARY (silu, sigmoid, softplus), MUL_BCAST (b broadcast along every
// dim where it has one element), CONCAT (along any of the four dims) and SITU (the gated
// activation b tanh(g / b) sigmoid(g) * c tanh(u / c)). One thread per output element:
// memory-bound, each operand byte read once, the output written once, coalesced along
// ne[0]. The arithmetic is the CPU's float expressions, in the same order.
#include "strided.cuh"

namespace glia::cuda {
namespace {

constexpr int kThreads = 256;

__device__ inline float unary_value(UnaryKind k, float x) {
    switch (k) {
        case UnaryKind::SILU: return x / (1.0f + expf(-x));
        case UnaryKind::SIGMOID: return 1.0f / (1.0f + expf(-x));
        case UnaryKind::SOFTPLUS: return x > 20.0f ? x : logf(1.0f + expf(x));
    }
    return x;
}

__global__ void unary_kernel(View4 x, UnaryKind kind, float* out, int64_t n) {
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    int64_t i[4];
    unflatten(idx, x.ne, i);
    out[idx] = unary_value(kind, x.at(i[0], i[1], i[2], i[3]));
}

__global__ void mul_bcast_kernel(View4 a, View4 b, float* out, int64_t n) {
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    int64_t i[4];
    unflatten(idx, a.ne, i);
    const float y = b.at(b.ne[0] == 1 ? 0 : i[0], b.ne[1] == 1 ? 0 : i[1], b.ne[2] == 1 ? 0 : i[2],
                         b.ne[3] == 1 ? 0 : i[3]);
    out[idx] = a.at(i[0], i[1], i[2], i[3]) * y;
}

__global__ void concat_kernel(View4 a, View4 b, int dim, float* out, int64_t n) {
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    int64_t ne[4] = {a.ne[0], a.ne[1], a.ne[2], a.ne[3]};
    ne[dim] += b.ne[dim];
    int64_t i[4];
    unflatten(idx, ne, i);
    const bool from_a = i[dim] < a.ne[dim];
    if (!from_a) i[dim] -= a.ne[dim];
    out[idx] = (from_a ? a : b).at(i[0], i[1], i[2], i[3]);
}

__global__ void situ_kernel(View4 g, View4 u, float beta, float linear_beta, float* out, int64_t n) {
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    const int64_t i0 = idx % g.ne[0], i1 = idx / g.ne[0];
    const float gv = g.at(i0, i1), uv = u.at(i0, i1);
    const float a = beta * tanhf(gv * (1.0f / beta));
    const float sg = 1.0f / (1.0f + expf(-gv));
    out[idx] = (a * sg) * (linear_beta * tanhf(uv * (1.0f / linear_beta)));
}

}  // namespace

void launch_elementwise(const Node& n, cudaStream_t s) {
    const View4 a = View4::of(*n.src[0]);
    float* out = n.out->ptr<float>();
    const int64_t total = n.out->n_elements();
    const unsigned blocks = blocks_for(total, kThreads);
    switch (n.op) {
        case Op::UNARY: unary_kernel<<<blocks, kThreads, 0, s>>>(a, n.p<UnaryParams>().kind, out, total); break;
        case Op::MUL_BCAST: mul_bcast_kernel<<<blocks, kThreads, 0, s>>>(a, View4::of(*n.src[1]), out, total); break;
        case Op::CONCAT:
            concat_kernel<<<blocks, kThreads, 0, s>>>(a, View4::of(*n.src[1]), n.p<ConcatParams>().dim, out,
                                                      total);
            break;
        case Op::SITU: {
            const GluParams& gp = n.p<GluParams>();
            situ_kernel<<<blocks, kThreads, 0, s>>>(a, View4::of(*n.src[GluArg::UP]), gp.beta, gp.linear_beta, out,
                                                    total);
            break;
        }
        default: fail("cuda: launch_elementwise has no kernel for ", op_name(n.op));
    }
}

}  // namespace glia::cuda
