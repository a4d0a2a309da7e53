// RES_MIX, the cross-layer residual mix (kimi-k3), first version. Per token, every saved
// stream c_j [E] and the current one get a score sum(rmsnorm(c) * w) (norm without a
// weight), the scores' softmax weighs the raw streams, saved ones in order and the
// current one last (as the CPU's ops_mix.cpp). One block per token: a block reduction per
// stream for its sum of squares (in double, as the CPU) and its score, then one pass that
// mixes. Streams are few (a saved one per block of layers), so the passes are cheap.
#include "strided.cuh"

namespace glia::cuda {
namespace {

constexpr int kThreads = 256;

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
    extern __shared__ float p[];  // ns + 1 mixing weights
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

// The mixing weights live in shared memory: one float per stream.
bool res_mix_shape_supported(const Node& n) { return n.src[ResMixArg::STACK]->ne[1] + 1 <= 8192; }

void launch_res_mix(const Node& n, cudaStream_t s) {
    const Tensor& stack = *n.src[ResMixArg::STACK];
    const Tensor& cur = *n.src[ResMixArg::CUR];
    const int64_t E = cur.ne[0], T = cur.ne[1];
    const size_t shared = size_t(stack.ne[1] + 1) * sizeof(float);
    res_mix_kernel<<<unsigned(T), kThreads, shared, s>>>(View4::of(stack), View4::of(cur),
                                                         n.src[ResMixArg::W]->ptr<float>(), n.p<NormParams>().eps,
                                                         n.out->ptr<float>(), E);
}

}  // namespace glia::cuda
