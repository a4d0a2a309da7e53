// Mixture of experts and the short convolution, first versions.
//   MOE_TOPK / MOE_WEIGHTS: one thread per token over the router logits (n_expert is small:
//     8..256), softmax in float with the max subtracted, selection by probability with ties
//     to the lower id, exactly the CPU's rule.
//   MOE_EXPERTS: per (token, selected expert), a block computes the SwiGLU hidden row
//     (gate and up rows, one warp per output) into global scratch, then the down rows,
//     adding weight * result into the token's output in selection order (one block per
//     token walks its experts in order, so the sum's order is the CPU's).
//   SHORTCONV: one thread per channel walks the batch's tokens in order, carrying the
//     sequence's window in the state tensor.
#include "dequant.cuh"

namespace glia::cuda {
namespace {

__global__ void moe_route_kernel(const float* logits, int64_t n_exp, int64_t T, int n_used, const int32_t* ids_in,
                                 bool norm, int32_t* ids_out, float* w_out) {
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const float* l = logits + t * n_exp;
    float mx = -INFINITY;
    for (int64_t e = 0; e < n_exp; ++e) mx = fmaxf(mx, l[e]);
    double sum = 0;
    for (int64_t e = 0; e < n_exp; ++e) sum += expf(l[e] - mx);
    const float inv = float(1.0 / sum);
    auto prob = [&](int64_t e) { return expf(l[e] - mx) * inv; };
    if (ids_out) {
        // Selection: n_used passes, each the best not yet taken (ties to the lower id).
        for (int k = 0; k < n_used; ++k) {
            int best = -1;
            float bp = -1.0f;
            for (int64_t e = 0; e < n_exp; ++e) {
                bool taken = false;
                for (int j = 0; j < k; ++j) taken |= ids_out[t * n_used + j] == e;
                const float pe = prob(e);
                if (!taken && pe > bp) bp = pe, best = int(e);
            }
            ids_out[t * n_used + k] = best;
        }
        return;
    }
    float ws = 0;
    for (int k = 0; k < n_used; ++k) ws += (w_out[t * n_used + k] = prob(ids_in[t * n_used + k]));
    if (norm)
        for (int k = 0; k < n_used; ++k) w_out[t * n_used + k] /= ws;
}

// dot of a dequantized row (K values) with x, by one warp; result on every lane.
template <DType D> __device__ float warp_row_dot(const uint8_t* row, const float* x, int64_t K) {
    const int lane = threadIdx.x % 32;
    float acc = 0;
    for (int64_t c = lane; c < K / 32; c += 32) {
        float v[32];
        Dq<D>::chunk(row, c, v);
#pragma unroll
        for (int i = 0; i < 32; ++i) acc = fmaf(v[i], x[c * 32 + i], acc);
    }
    return warp_sum(acc);
}

// One block per token: for each selected expert in order, hidden = silu(gate x) * (up x)
// into scratch, then out += w * (down hidden).
template <DType D>
__global__ void moe_experts_kernel(const float* x, const uint8_t* gate, const uint8_t* up, const uint8_t* down,
                                   int64_t gate_row, int64_t gate_exp, int64_t down_row, int64_t down_exp,
                                   const int32_t* ids, const float* wts, int n_used, int64_t E, int64_t F,
                                   float* hidden, float* out) {
    const int64_t t = blockIdx.x;
    const int warp = threadIdx.x / 32, n_warps = blockDim.x / 32, lane = threadIdx.x % 32;
    const float* xt = x + t * E;
    float* h = hidden + t * F;
    float* o = out + t * E;
    for (int k = 0; k < n_used; ++k) {
        const int e = ids[t * n_used + k];
        const float w = wts[t * n_used + k];
        for (int64_t f = warp; f < F; f += n_warps) {
            const float g = warp_row_dot<D>(gate + e * gate_exp + f * gate_row, xt, E);
            const float u = warp_row_dot<D>(up + e * gate_exp + f * gate_row, xt, E);
            if (lane == 0) h[f] = g / (1.0f + expf(-g)) * u;
        }
        __syncthreads();
        for (int64_t r = warp; r < E; r += n_warps) {
            const float y = warp_row_dot<D>(down + e * down_exp + r * down_row, h, F);
            if (lane == 0) o[r] = k == 0 ? y * w : o[r] + y * w;
        }
        __syncthreads();
    }
}

__global__ void shortconv_kernel(Rows x, const float* w, float* state, int64_t st_row, const int32_t* seq, float* out,
                                 int64_t C, int64_t T, int L) {
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int64_t t = 0; t < T; ++t) {
        float* st = state + int64_t(seq[t]) * st_row;  // L-1 past inputs, oldest first, channel-major rows
        const float xc = x.f(t)[c];
        float acc = 0.0f;
        for (int k = 0; k < L - 1; ++k) acc += st[k * C + c] * w[c * L + k];
        acc += xc * w[c * L + L - 1];
        out[t * C + c] = acc;
        for (int k = 0; k + 1 < L - 1; ++k) st[k * C + c] = st[(k + 1) * C + c];
        st[(L - 2) * C + c] = xc;
    }
}

}  // namespace

void launch_moe_route(const Node& n, cudaStream_t s) {
    const Tensor& l = *n.src[0];
    const int64_t T = l.ne[1];
    const MoeParams& mp = n.p<MoeParams>();
    const unsigned blocks = unsigned((T + 127) / 128);
    if (n.op == Op::MOE_TOPK)
        moe_route_kernel<<<blocks, 128, 0, s>>>(l.ptr<float>(), l.ne[0], T, mp.n_used, nullptr, false,
                                                n.out->ptr<int32_t>(), nullptr);
    else
        moe_route_kernel<<<blocks, 128, 0, s>>>(l.ptr<float>(), l.ne[0], T, mp.n_used,
                                                n.src[MoeWeightsArg::IDS]->ptr<int32_t>(), mp.norm_weights, nullptr,
                                                n.out->ptr<float>());
}

void launch_moe_experts(const Node& n, cudaStream_t s, float* hidden) {
    const Tensor& x = *n.src[MoeExpertsArg::X];
    const Tensor& g = *n.src[MoeExpertsArg::GATE];
    const Tensor& u = *n.src[MoeExpertsArg::UP];
    const Tensor& d = *n.src[MoeExpertsArg::DOWN];
    const int64_t E = x.ne[0], T = x.ne[1], F = g.ne[1];
    GLIA_CUDA_TYPE_SWITCH(g.type, (moe_experts_kernel<D><<<unsigned(T), 256, 0, s>>>(
                                      x.ptr<float>(), static_cast<const uint8_t*>(g.data),
                                      static_cast<const uint8_t*>(u.data), static_cast<const uint8_t*>(d.data),
                                      int64_t(g.nb[1]), int64_t(g.nb[2]), int64_t(d.nb[1]), int64_t(d.nb[2]),
                                      n.src[MoeExpertsArg::IDS]->ptr<int32_t>(),
                                      n.src[MoeExpertsArg::WEIGHTS]->ptr<float>(), n.p<MoeParams>().n_used, E, F,
                                      hidden, n.out->ptr<float>())));
}

size_t moe_scratch_bytes(const Node& n) {
    return size_t(n.src[MoeExpertsArg::X]->ne[1]) * size_t(n.src[MoeExpertsArg::GATE]->ne[1]) * sizeof(float);
}

void launch_shortconv(const Node& n, cudaStream_t s) {
    const Tensor& x = *n.src[ShortconvArg::X];
    const Tensor& w = *n.src[ShortconvArg::KERNEL];
    Tensor& st = *n.src[ShortconvArg::STATE];
    const int64_t C = x.ne[0], T = x.ne[1];
    shortconv_kernel<<<unsigned((C + 127) / 128), 128, 0, s>>>(Rows::of(x), w.ptr<float>(), st.ptr<float>(),
                                                               int64_t(st.nb[1] / 4),
                                                               n.src[ShortconvArg::SEQ]->ptr<int32_t>(),
                                                               n.out->ptr<float>(), C, T, int(w.ne[0]));
}

}  // namespace glia::cuda
