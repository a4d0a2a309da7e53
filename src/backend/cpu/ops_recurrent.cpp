// Ops of the linear-attention (recurrent) blocks: UNARY (element-wise silu, sigmoid,
// softplus over any strided view) and DELTA_NET, the gated delta rule.
//
// DELTA_NET keeps one dk x dv matrix S per value head and sequence, in the sequence's row
// of the state operand. For each token of a sequence, in batch order:
//   S = diag(exp(g)) S              (g: one log-decay per head, or one per key channel)
//   u = beta (v - S^T k)            (the delta rule: what S does not yet predict for k)
//   S = S + k u^T
//   o = S^T q * q_scale
// This is the recurrent form, exact for any split of a prompt into steps: one batch, chunks
// and single-token decode see the same arithmetic in the same order. Work is split over
// (sequence, head) pairs, each running its own tokens in order.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace glia::cpu {

namespace {

inline float apply_unary(UnaryKind k, float x) {
    switch (k) {
        case UnaryKind::SILU: return x / (1.0f + std::exp(-x));
        case UnaryKind::SIGMOID: return 1.0f / (1.0f + std::exp(-x));
        case UnaryKind::SOFTPLUS: return x > 20.0f ? x : std::log(1.0f + std::exp(x));
    }
    return x;
}

inline const float* frow(const Tensor& t, int64_t i1, int64_t i2) {
    return reinterpret_cast<const float*>(t.row(i1, i2));
}

}  // namespace

void op_unary(const Node& n, ThreadPool& pool) {
    const Tensor& x = *n.src[0];
    Tensor& out = *n.out;
    const UnaryKind kind = n.p<UnaryParams>().kind;
    const int64_t ne0 = x.ne[0], ne1 = x.ne[1], ne2 = x.ne[2];
    for_rows(pool, x.n_rows(), ne0, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
            const float* xr = reinterpret_cast<const float*>(x.row(i1, i2, i3));
            float* y = reinterpret_cast<float*>(out.row(i1, i2, i3));
            for (int64_t i = 0; i < ne0; ++i) y[i] = apply_unary(kind, xr[i]);
        }
    });
}

void op_delta_net(const Node& n, ThreadPool& pool) {
    const Tensor& q = *n.src[DeltaNetArg::Q];
    const Tensor& k = *n.src[DeltaNetArg::K];
    const Tensor& v = *n.src[DeltaNetArg::V];
    const Tensor& g = *n.src[DeltaNetArg::G];
    const Tensor& beta = *n.src[DeltaNetArg::BETA];
    Tensor& st = *n.src[DeltaNetArg::STATE];
    const int32_t* seq = n.src[DeltaNetArg::SEQ]->ptr<int32_t>();
    Tensor& out = *n.out;
    const int64_t dk = q.ne[0], nk = q.ne[1], T = q.ne[2], dv = v.ne[0], nv = v.ne[1];
    const bool per_channel = g.ne[0] == dk;
    const float q_scale = n.p<DeltaNetParams>().q_scale;

    // The sequences of the batch, in order of first appearance.
    std::vector<int32_t> slots;
    for (int64_t t = 0; t < T; ++t)
        if (std::find(slots.begin(), slots.end(), seq[t]) == slots.end()) slots.push_back(seq[t]);
    const int64_t n_jobs = static_cast<int64_t>(slots.size()) * nv;
    auto job = [&](int64_t j0, int64_t j1) {
        std::vector<float> decay(dk), u(dv);
        for (int64_t j = j0; j < j1; ++j) {
            const int32_t slot = slots[j / nv];
            const int64_t h = j % nv, hk = h % nk;
            float* S = reinterpret_cast<float*>(st.row(slot)) + h * dk * dv;
            for (int64_t t = 0; t < T; ++t) {
                if (seq[t] != slot) continue;
                const float* qt = frow(q, hk, t);
                const float* kt = frow(k, hk, t);
                const float* vt = frow(v, h, t);
                const float* gt = frow(g, h, t);
                const float bt = frow(beta, h, t)[0];
                for (int64_t i = 0; i < dk; ++i) decay[i] = std::exp(gt[per_channel ? i : 0]);
                for (int64_t i = 0; i < dk; ++i) {
                    float* Si = S + i * dv;
                    for (int64_t c = 0; c < dv; ++c) Si[c] *= decay[i];
                }
                std::copy(vt, vt + dv, u.begin());
                for (int64_t i = 0; i < dk; ++i) {
                    const float* Si = S + i * dv;
                    const float ki = kt[i];
                    for (int64_t c = 0; c < dv; ++c) u[c] -= Si[c] * ki;
                }
                for (int64_t c = 0; c < dv; ++c) u[c] *= bt;
                float* o = reinterpret_cast<float*>(out.row(h, t));
                std::fill(o, o + dv, 0.0f);
                for (int64_t i = 0; i < dk; ++i) {
                    float* Si = S + i * dv;
                    const float ki = kt[i], qi = qt[i] * q_scale;
                    for (int64_t c = 0; c < dv; ++c) {
                        Si[c] += ki * u[c];
                        o[c] += Si[c] * qi;
                    }
                }
            }
        }
    };
    if (n_jobs < 2) job(0, n_jobs);
    else pool.parallel_for(n_jobs, job);
}

}  // namespace glia::cpu
