// Mixture-of-experts routing and the short convolution, first versions.
//   MOE_TOPK / MOE_WEIGHTS: one thread per token over the router logits (n_expert is small:
//     8..256), softmax in float with the max subtracted, selection by probability with ties
//     to the lower id, exactly the CPU's rule.
//   MOE_GATHER_WEIGHTS: one thread per token picks the selected experts' probabilities
//     (computed elsewhere: sigmoid routers) and divides by their sum, clamped below at the
//     smallest normal f16 as the reference does.
//   (The expert products, MOE_EXPERTS and MOE_EXPERTS_GLU, are in k_gemv.cu.)
//   SHORTCONV: one thread per channel walks the batch's tokens in order, carrying the
//     sequence's window in the state tensor.
#include "common.cuh"

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

__global__ void moe_gather_kernel(const char* probs, int64_t p_row, const int32_t* ids, int64_t id_row, int n_used,
                                  bool norm, float* out, int64_t T) {
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= T) return;
    const float* p = reinterpret_cast<const float*>(probs + t * p_row);
    const int32_t* sel = ids + t * id_row;
    float* w = out + t * n_used;
    float sum = 0;
    for (int i = 0; i < n_used; ++i) sum += (w[i] = p[sel[i]]);
    if (norm)
        for (int i = 0; i < n_used; ++i) w[i] /= fmaxf(sum, 6.103515625e-5f);
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

void launch_moe_gather_weights(const Node& n, cudaStream_t s) {
    const Tensor& probs = *n.src[MoeGatherArg::PROBS];
    const Tensor& ids = *n.src[MoeGatherArg::IDS];
    const MoeParams& mp = n.p<MoeParams>();
    const int64_t T = ids.ne[1];
    moe_gather_kernel<<<unsigned((T + 127) / 128), 128, 0, s>>>(
        static_cast<const char*>(probs.data), int64_t(probs.nb[1]), ids.ptr<int32_t>(), int64_t(ids.nb[1] / 4),
        mp.n_used, mp.norm_weights, n.out->ptr<float>(), T);
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
