// MOE: a mixture-of-experts SwiGLU FFN over stacked expert tensors [E, F, n_expert].
// Per token: router logits (F32), softmax, top-k experts (highest probability first,
// ties to the lower id), optional renormalisation of their weights, then the weighted
// sum of the selected experts' outputs, added in selection order as the reference does.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "quant/quant.h"

namespace glia::cpu {

namespace {

// y[r] = W_e[r] . a for every row of expert e's slice of a stacked tensor.
void expert_matvec(const Tensor& w, int64_t e, const uint8_t* act, float* y) {
    const quant::TypeTraits& tr = quant::traits(w.type);
    for (int64_t r = 0; r < w.ne[1]; ++r) tr.vec_dot(w.ne[0], &y[r], w.row(r, e), act);
}

std::vector<uint8_t> quantize_for(const Tensor& w, const float* x, int64_t n) {
    const quant::TypeTraits& tr = quant::traits(w.type);
    std::vector<uint8_t> q(row_bytes(tr.vec_dot_type, n));
    quant::quantize_act_row(tr.vec_dot_type, x, q.data(), n);
    return q;
}

}  // namespace

void op_moe(const Node& n, ThreadPool& pool) {
    const Tensor& x = *n.src[0];
    const Tensor& router = *n.src[1];
    const Tensor& gate = *n.src[2];
    const Tensor& up = *n.src[3];
    const Tensor& down = *n.extra;
    const int64_t E = x.ne[0], T = x.ne[1], n_exp = router.ne[1], F = gate.ne[1];
    const int k = n.i0;
    for (const Tensor* w : {&gate, &up, &down})
        if (!quant::traits(w->type).vec_dot) fail("moe: no dot product for ", dtype_name(w->type));

    pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
        std::vector<float> logits(n_exp), g(F), u(F), h(F), o(E);
        const quant::TypeTraits& rtr = quant::traits(router.type);
        for (int64_t t = t0; t < t1; ++t) {
            const float* xt = reinterpret_cast<const float*>(x.row(t));
            // Router probabilities.
            std::vector<uint8_t> xr = quantize_for(router, xt, E);
            for (int64_t e = 0; e < n_exp; ++e) rtr.vec_dot(E, &logits[e], router.row(e), xr.data());
            const float mx = *std::max_element(logits.begin(), logits.end());
            double sum = 0;
            for (auto& l : logits) sum += (l = std::exp(l - mx));
            const float inv = static_cast<float>(1.0 / sum);
            for (auto& l : logits) l *= inv;
            // Top-k selection.
            std::vector<int32_t> sel(n_exp);
            std::iota(sel.begin(), sel.end(), 0);
            if (n.forced) {
                sel.assign(n.forced + t * k, n.forced + (t + 1) * k);
                for (int32_t e : sel)
                    if (e < 0 || e >= n_exp) fail("moe: forced expert id ", e, " out of range");
            } else {
                std::partial_sort(sel.begin(), sel.begin() + k, sel.end(), [&](int32_t a, int32_t b) {
                    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
                });
                sel.resize(k);
            }
            std::vector<float> wsel(k);
            float wsum = 0;
            for (int i = 0; i < k; ++i) wsum += (wsel[i] = logits[sel[i]]);
            if (n.b0)
                for (auto& w : wsel) w /= wsum;
            // Experts.
            float* y = reinterpret_cast<float*>(n.out->row(t));
            std::vector<uint8_t> xg = quantize_for(gate, xt, E), xu = quantize_for(up, xt, E);
            for (int i = 0; i < k; ++i) {
                expert_matvec(gate, sel[i], xg.data(), g.data());
                expert_matvec(up, sel[i], xu.data(), u.data());
                for (int64_t j = 0; j < F; ++j) h[j] = g[j] / (1.0f + std::exp(-g[j])) * u[j];
                std::vector<uint8_t> hq = quantize_for(down, h.data(), F);
                expert_matvec(down, sel[i], hq.data(), o.data());
                for (int64_t j = 0; j < E; ++j) y[j] = i == 0 ? o[j] * wsel[i] : y[j] + o[j] * wsel[i];
            }
        }
    });
}

}  // namespace glia::cpu
