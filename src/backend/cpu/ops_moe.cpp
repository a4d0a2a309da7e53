// Mixture of experts, in three ops so that the routing and the expert products can run on
// different devices (--cpu-moe keeps only the expert products in host memory):
//   MOE_TOPK     router logits -> the n_used experts of highest softmax probability
//                (highest first, ties to the lower id)
//   MOE_WEIGHTS  their probabilities, optionally renormalised to sum to one
//   MOE_EXPERTS  the weighted sum of the selected SwiGLU experts over stacked expert
//                tensors [E, F, n_expert], added in selection order as the reference does.
//   MOE_EXPERTS_GLU  the same with another gated activation (SITU)
//   MOE_GATHER_WEIGHTS  the selected experts' weights from probabilities computed elsewhere
//                (sigmoid routers), renormalised
// and MATMUL_HEADS, a stack of per-head matrices applied head by head (absorbed MLA).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/simd/simd.h"
#include "core/error.h"
#include "quant/quant.h"

namespace glia::cpu {

namespace {

// y[r] = W_e[r] . a for every row of expert e's slice of a stacked tensor.
void expert_matvec(const Tensor& w, int64_t e, const uint8_t* act, float* y) {
    const quant::TypeTraits& tr = quant::traits(w.type);
    for (int64_t r = 0; r < w.ne[1]; ++r) tr.vec_dot(w.ne[0], &y[r], w.row(r, e), act);
}

void quantize_for(const Tensor& w, const float* x, int64_t n, std::vector<uint8_t>& q) {
    const quant::TypeTraits& tr = quant::traits(w.type);
    q.resize(row_bytes(tr.vec_dot_type, n));
    quant::quantize_act_row(tr.vec_dot_type, x, q.data(), n);
}

// Softmax of one token's router logits (max subtracted, double sum, as before the split).
void softmax_row(const float* l, int64_t n, float* p) {
    const float mx = *std::max_element(l, l + n);
    double sum = 0;
    for (int64_t e = 0; e < n; ++e) sum += (p[e] = std::exp(l[e] - mx));
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t e = 0; e < n; ++e) p[e] *= inv;
}

}  // namespace

void op_moe_topk(const Node& n, ThreadPool& pool) {
    const Tensor& logits = *n.src[MoeTopkArg::LOGITS];
    const int64_t n_exp = logits.ne[0], T = logits.ne[1];
    const int k = n.p<MoeParams>().n_used;
    for_rows(pool, T, n_exp * 8, [&](int64_t t0, int64_t t1) {
        std::vector<float> p(n_exp);
        std::vector<int32_t> sel(n_exp);
        for (int64_t t = t0; t < t1; ++t) {
            softmax_row(reinterpret_cast<const float*>(logits.row(t)), n_exp, p.data());
            std::iota(sel.begin(), sel.end(), 0);
            std::partial_sort(sel.begin(), sel.begin() + k, sel.end(),
                              [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
            std::copy(sel.begin(), sel.begin() + k, reinterpret_cast<int32_t*>(n.out->row(t)));
        }
    });
}

void op_moe_weights(const Node& n, ThreadPool& pool) {
    const Tensor& logits = *n.src[MoeWeightsArg::LOGITS];
    const Tensor& ids = *n.src[MoeWeightsArg::IDS];
    const int64_t n_exp = logits.ne[0], T = logits.ne[1];
    const MoeParams& mp = n.p<MoeParams>();
    for_rows(pool, T, n_exp * 8, [&](int64_t t0, int64_t t1) {
        std::vector<float> p(n_exp);
        for (int64_t t = t0; t < t1; ++t) {
            softmax_row(reinterpret_cast<const float*>(logits.row(t)), n_exp, p.data());
            const int32_t* sel = reinterpret_cast<const int32_t*>(ids.row(t));
            float* w = reinterpret_cast<float*>(n.out->row(t));
            float wsum = 0;
            for (int i = 0; i < mp.n_used; ++i) wsum += (w[i] = p[sel[i]]);
            if (mp.norm_weights)
                for (int i = 0; i < mp.n_used; ++i) w[i] /= wsum;
        }
    });
}

namespace {

// An expert's products through the SIMD kernels of its type (the newer ops use these).
void expert_matvec_simd(const Tensor& w, int64_t e, const uint8_t* act, float* y) {
    const simd::TypeKernels& kk = simd::kernels(w.type);
    for (int64_t r = 0; r < w.ne[1]; ++r) kk.vec_dot(w.ne[0], &y[r], w.row(r, e), act);
}

void quantize_for_simd(const Tensor& w, const float* x, int64_t n, std::vector<uint8_t>& q) {
    const simd::TypeKernels& kk = simd::kernels(w.type);
    q.resize(row_bytes(kk.act_type, n));
    if (kk.act_type == DType::F32) std::memcpy(q.data(), x, sizeof(float) * n);
    else kk.quantize_act(x, q.data(), n);
}

// The weighted sum of the selected experts, act(gate, up) between their products; `fast`:
// the SIMD dot products (else the scalar table's, as MOE_EXPERTS has always used).
template <class Act>
void moe_experts_impl(const Node& n, ThreadPool& pool, int k, Act act, bool fast = false) {
    auto matvec = fast ? expert_matvec_simd : expert_matvec;
    auto quantize = fast ? quantize_for_simd : quantize_for;
    const Tensor& x = *n.src[MoeExpertsArg::X];
    const Tensor& gate = *n.src[MoeExpertsArg::GATE];
    const Tensor& up = *n.src[MoeExpertsArg::UP];
    const Tensor& down = *n.src[MoeExpertsArg::DOWN];
    const Tensor& ids = *n.src[MoeExpertsArg::IDS];
    const Tensor& weights = *n.src[MoeExpertsArg::WEIGHTS];
    const int64_t E = x.ne[0], T = x.ne[1], F = gate.ne[1];
    pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
        std::vector<float> g(F), u(F), h(F), o(E);
        std::vector<uint8_t> xg, xu, hq;
        for (int64_t t = t0; t < t1; ++t) {
            const float* xt = reinterpret_cast<const float*>(x.row(t));
            const int32_t* sel = reinterpret_cast<const int32_t*>(ids.row(t));
            const float* wsel = reinterpret_cast<const float*>(weights.row(t));
            float* y = reinterpret_cast<float*>(n.out->row(t));
            quantize(gate, xt, E, xg);
            quantize(up, xt, E, xu);
            for (int i = 0; i < k; ++i) {
                matvec(gate, sel[i], xg.data(), g.data());
                matvec(up, sel[i], xu.data(), u.data());
                for (int64_t j = 0; j < F; ++j) h[j] = act(g[j], u[j]);
                quantize(down, h.data(), F, hq);
                matvec(down, sel[i], hq.data(), o.data());
                for (int64_t j = 0; j < E; ++j) y[j] = i == 0 ? o[j] * wsel[i] : y[j] + o[j] * wsel[i];
            }
        }
    });
}

}  // namespace

void op_moe_experts(const Node& n, ThreadPool& pool) {
    moe_experts_impl(n, pool, n.p<MoeParams>().n_used,
                     [](float g, float u) { return g / (1.0f + std::exp(-g)) * u; });
}

void op_moe_experts_glu(const Node& n, ThreadPool& pool) {
    const GluParams& gp = n.p<GluParams>();
    if (gp.kind == GluKind::SITU)
        moe_experts_impl(
            n, pool, gp.n_used, [&](float g, float u) { return situ_value(g, u, gp.beta, gp.linear_beta); }, true);
    else if (gp.kind == GluKind::SWIGLU)
        moe_experts_impl(
            n, pool, gp.n_used, [](float g, float u) { return g / (1.0f + std::exp(-g)) * u; }, true);
    else
        fail("moe_experts_glu: activation not implemented on the CPU");
}

void op_moe_gather_weights(const Node& n, ThreadPool& pool) {
    const Tensor& probs = *n.src[MoeGatherArg::PROBS];
    const Tensor& ids = *n.src[MoeGatherArg::IDS];
    const MoeParams& mp = n.p<MoeParams>();
    for_rows(pool, ids.ne[1], mp.n_used * 8, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const float* p = reinterpret_cast<const float*>(probs.row(t));
            const int32_t* sel = reinterpret_cast<const int32_t*>(ids.row(t));
            float* w = reinterpret_cast<float*>(n.out->row(t));
            float sum = 0;
            for (int i = 0; i < mp.n_used; ++i) sum += (w[i] = p[sel[i]]);
            // The reference clamps the sum (to the smallest normal f16) before dividing.
            if (mp.norm_weights)
                for (int i = 0; i < mp.n_used; ++i) w[i] /= std::max(sum, 6.103515625e-5f);
        }
    });
}

// One matrix per head: quantize each (head, token) row of x once, then its head's rows.
void op_matmul_heads(const Node& n, ThreadPool& pool) {
    const Tensor& w = *n.src[MatmulArg::W];
    const Tensor& x = *n.src[MatmulArg::X];
    const int64_t K = w.ne[0], N = w.ne[1], H = x.ne[1], T = x.ne[2];
    const simd::TypeKernels& kk = simd::kernels(w.type);
    for_rows(pool, H * T, K * N, [&](int64_t j0, int64_t j1) {
        std::vector<uint8_t> act;
        for (int64_t j = j0; j < j1; ++j) {
            const int64_t h = j % H, t = j / H;
            quantize_for_simd(w, reinterpret_cast<const float*>(x.row(h, t)), K, act);
            float* y = reinterpret_cast<float*>(n.out->row(h, t));
            for (int64_t r = 0; r < N; ++r) kk.vec_dot(K, &y[r], w.row(r, h), act.data());
        }
    });
}

}  // namespace glia::cpu
