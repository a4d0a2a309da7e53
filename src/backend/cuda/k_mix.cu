// Ops that combine tensors, as the CPU's ops_mix.cpp: MUL_BCAST (b broadcast along every
// dim where it has one element), CONCAT (along any of the four dims), SITU (the gated
// activation b tanh(g / b) sigmoid(g) * c tanh(u / c)) and RES_MIX (the cross-layer residual
// mix of kimi-k3). Inputs are strided views (rows of contiguous values), outputs contiguous.
//   MUL_BCAST, CONCAT, SITU: one thread per output element: memory-bound, each operand byte
//     read once, the output written once, coalesced along ne[0]; the CPU's float
//     expressions in the same order.
//   RES_MIX: per token, every saved stream c_j [E] and the current one get a score
//     sum(rmsnorm(c) * w) (norm without a weight); the scores' softmax weighs the raw
//     streams, saved ones in order and the current one last. One block per token: a block
//     reduction per stream for its sum of squares (in double, as the CPU) and its score,
//     then one pass that mixes. Streams are few (one per block of layers).
#include "strided.cuh"
#include "glu.cuh"

namespace glia::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxStreams = 256;  // RES_MIX: saved streams + the current one, at most

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
    out[idx] = situ_value(g.at(i0, i1), u.at(i0, i1), beta, linear_beta);
}

// Sum over the block of v (T = float or double); the result on every thread. `part`: one
// slot per warp, reused after the trailing barrier.
template <class T> __device__ T block_sum(T v, T* part) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
    if (threadIdx.x % 32 == 0) part[warp] = v;
    __syncthreads();
    T r = 0;
    for (int w = 0; w < n_warps; ++w) r += part[w];
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(kThreads)
    res_mix_kernel(View4 stack, View4 cur, const float* w, float eps, float* out, int64_t E) {
    __shared__ float p[kMaxStreams];  // the ns + 1 mixing weights
    __shared__ double part_d[kThreads / 32];
    __shared__ float part_f[kThreads / 32];
    const int64_t t = blockIdx.x, ns = stack.ne[1];
    auto stream = [&](int64_t j) { return j < ns ? stack.row(j, t) : cur.row(t); };
    for (int64_t j = 0; j <= ns; ++j) {
        const float* c = stream(j);
        double ss = 0;
        for (int64_t d = threadIdx.x; d < E; d += blockDim.x) ss += double(c[d]) * c[d];
        ss = block_sum(ss, part_d);
        const float inv = 1.0f / sqrtf(float(ss / double(E)) + eps);
        float sc = 0;
        for (int64_t d = threadIdx.x; d < E; d += blockDim.x) sc += (c[d] * inv) * w[d];
        sc = block_sum(sc, part_f);
        if (threadIdx.x == 0) p[j] = sc;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float mx = p[0];
        for (int64_t j = 1; j <= ns; ++j) mx = fmaxf(mx, p[j]);
        float sum = 0;
        for (int64_t j = 0; j <= ns; ++j) sum += (p[j] = expf(p[j] - mx));
        for (int64_t j = 0; j <= ns; ++j) p[j] /= sum;
    }
    __syncthreads();
    float* y = out + t * E;
    for (int64_t d = threadIdx.x; d < E; d += blockDim.x) {
        float acc = 0.0f;
        for (int64_t j = 0; j < ns; ++j) acc += p[j] * stack.row(j, t)[d];
        y[d] = acc + cur.row(t)[d] * p[ns];
    }
}

}  // namespace

void launch_mix(const Node& n, cudaStream_t s) {
    const View4 a = View4::of(*n.src[0]);
    float* out = n.out->ptr<float>();
    const int64_t total = n.out->n_elements();
    const unsigned blocks = blocks_for(total, kThreads);
    switch (n.op) {
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
        case Op::RES_MIX: {
            const Tensor& stack = *n.src[ResMixArg::STACK];
            const Tensor& cur = *n.src[ResMixArg::CUR];
            if (stack.ne[1] + 1 > kMaxStreams) fail("cuda: res_mix takes at most ", kMaxStreams - 1, " saved streams");
            res_mix_kernel<<<unsigned(cur.ne[1]), kThreads, 0, s>>>(
                View4::of(stack), View4::of(cur), n.src[ResMixArg::W]->ptr<float>(), n.p<NormParams>().eps, out,
                cur.ne[0]);
            break;
        }
        default: fail("cuda: launch_mix has no kernel for ", op_name(n.op));
    }
}

// The mixing weights live in shared memory: one float per stream.
bool res_mix_shape_supported(const Node& n) { return n.src[ResMixArg::STACK]->ne[1] + 1 <= kMaxStreams; }

}  // namespace glia::cuda
