// Mixture-of-experts routing and the short convolution, first versions.
//   MOE_TOPK / MOE_WEIGHTS: one warp per token over the router logits, softmax in float
//     with the max subtracted (the sum in double in expert order), selection by probability
//     with ties to the lower id, the CPU's rule.
//   MOE_GATHER_WEIGHTS: one thread per token picks the selected experts' probabilities
//     (computed elsewhere: sigmoid routers) and divides by their sum, clamped below at the
//     smallest normal f16 as the reference does.
//   (The expert products, MOE_EXPERTS and MOE_EXPERTS_GLU, are in k_gemv.cu and, on packed
//   stacks, k_mmvq.cu.)
//   SHORTCONV: one thread per channel walks the batch's tokens in order, carrying the
//     sequence's window in the state tensor.
#include "common.cuh"

namespace glia::cuda {
namespace {

// A warp per token: its lanes' experts (e = lane, lane + 32, ...) get their probabilities in
// shared memory (the sum of the exponentials in double, in expert order, by lane 0 as the
// CPU adds it); each selection round takes the warp's best not yet taken (the highest
// probability, ties to the lower id) and marks it taken. With ids_out and w_out (MOE_TOPK
// and the MOE_WEIGHTS of its selection in one launch) the selected probabilities are the
// weights, as MOE_WEIGHTS computes them.
__global__ void moe_route_kernel(const float* logits, int64_t n_exp, int64_t T, int n_used, const int32_t* ids_in,
                                 bool norm, int32_t* ids_out, float* w_out) {
    extern __shared__ float part[];  // [warps][n_exp]
    pdl_next();
    pdl_wait();
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    const int64_t t = int64_t(blockIdx.x) * (blockDim.x >> 5) + wib;
    if (t >= T) return;
    float* p = part + wib * n_exp;
    const float* l = logits + t * n_exp;
    float mx = -INFINITY;
    for (int64_t e = lane; e < n_exp; e += 32) mx = fmaxf(mx, l[e]);
    mx = warp_max(mx);
    for (int64_t e = lane; e < n_exp; e += 32) p[e] = expf(l[e] - mx);
    __syncwarp();
    float inv = 0.0f;
    if (lane == 0) {
        double sum = 0;
        for (int64_t e = 0; e < n_exp; ++e) sum += p[e];
        inv = float(1.0 / sum);
    }
    inv = __shfl_sync(0xffffffffu, inv, 0);
    for (int64_t e = lane; e < n_exp; e += 32) p[e] *= inv;
    __syncwarp();
    if (ids_out) {
        float ws = 0.0f;
        for (int k = 0; k < n_used; ++k) {
            float bp = -1.0f;  // taken experts hold -2
            int best = -1;
            for (int64_t e = lane; e < n_exp; e += 32)
                if (p[e] > bp) bp = p[e], best = int(e);
            for (int o = 16; o > 0; o >>= 1) {
                const float op = __shfl_xor_sync(0xffffffffu, bp, o);
                const int oe = __shfl_xor_sync(0xffffffffu, best, o);
                if (op > bp || (op == bp && oe < best)) bp = op, best = oe;
            }
            if (lane == 0) {
                ids_out[t * n_used + k] = best;
                if (w_out) ws += (w_out[t * n_used + k] = bp);
            }
            if (best >= 0 && lane == (best & 31)) p[best] = -2.0f;
            __syncwarp();
        }
        if (w_out && norm && lane == 0)
            for (int k = 0; k < n_used; ++k) w_out[t * n_used + k] /= ws;
        return;
    }
    if (lane != 0) return;
    float ws = 0;
    for (int k = 0; k < n_used; ++k) {
        const int32_t e = ids_in[t * n_used + k];
        ws += (w_out[t * n_used + k] = e >= 0 && e < n_exp ? p[e] : 0.0f);
    }
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
    const int warps = 4;  // tokens a block
    const dim3 blocks(unsigned((T + warps - 1) / warps));
    const size_t smem = size_t(warps) * size_t(l.ne[0]) * sizeof(float);
    if (n.op == Op::MOE_TOPK)
        launch_pdl(moe_route_kernel, blocks, dim3(32 * warps), smem, s, l.ptr<float>(), l.ne[0], T, mp.n_used,
                   static_cast<const int32_t*>(nullptr), false, n.out->ptr<int32_t>(), static_cast<float*>(nullptr));
    else
        launch_pdl(moe_route_kernel, blocks, dim3(32 * warps), smem, s, l.ptr<float>(), l.ne[0], T, mp.n_used,
                   static_cast<const int32_t*>(n.src[MoeWeightsArg::IDS]->ptr<int32_t>()), bool(mp.norm_weights),
                   static_cast<int32_t*>(nullptr), n.out->ptr<float>());
}

bool moe_route_fusable(const Node& topk, const Node& w, bool placed) {
    if (topk.op != Op::MOE_TOPK || w.op != Op::MOE_WEIGHTS) return false;
    const Tensor& l = *topk.src[MoeTopkArg::LOGITS];
    const Tensor& l2 = *w.src[MoeWeightsArg::LOGITS];
    const Tensor& ids = *w.src[MoeWeightsArg::IDS];
    if (l2.ne[0] != l.ne[0] || l2.ne[1] != l.ne[1] || w.p<MoeParams>().n_used != topk.p<MoeParams>().n_used)
        return false;
    if (!placed) return w.src[MoeWeightsArg::LOGITS]->root() == l.root() && ids.root() == topk.out->root();
    return l2.data == l.data && ids.data == topk.out->data && !overlaps(*topk.out, l) && !overlaps(*w.out, l) &&
           !overlaps(*w.out, *topk.out);
}

void launch_moe_route_pair(const Node& topk, const Node& w, cudaStream_t s) {
    const Tensor& l = *topk.src[MoeTopkArg::LOGITS];
    const int64_t T = l.ne[1];
    const int warps = 4;
    launch_pdl(moe_route_kernel, dim3(unsigned((T + warps - 1) / warps)), dim3(32 * warps),
               size_t(warps) * size_t(l.ne[0]) * sizeof(float), s, l.ptr<float>(), l.ne[0], T,
               topk.p<MoeParams>().n_used, static_cast<const int32_t*>(nullptr), bool(w.p<MoeParams>().norm_weights),
               topk.out->ptr<int32_t>(), w.out->ptr<float>());
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
