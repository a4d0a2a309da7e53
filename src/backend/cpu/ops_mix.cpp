// Ops that combine tensors: MUL_BCAST (broadcast product), CONCAT, RES_MIX (the
// cross-layer residual mix) and SITU (a gated activation). Inputs may be strided views
// (rows of contiguous elements); outputs are contiguous.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace glia::cpu {

namespace {

inline const float* frow(const Tensor& t, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) {
    return reinterpret_cast<const float*>(t.row(i1, i2, i3));
}

}  // namespace

void op_mul_bcast(const Node& n, ThreadPool& pool) {
    const Tensor& a = *n.src[BinaryArg::A];
    const Tensor& b = *n.src[BinaryArg::B];
    Tensor& out = *n.out;
    const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
    for_rows(pool, a.n_rows(), ne0, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
            const float* ar = frow(a, i1, i2, i3);
            const float* br = frow(b, b.ne[1] == 1 ? 0 : i1, b.ne[2] == 1 ? 0 : i2, b.ne[3] == 1 ? 0 : i3);
            float* y = reinterpret_cast<float*>(out.row(i1, i2, i3));
            if (b.ne[0] == 1)
                for (int64_t i = 0; i < ne0; ++i) y[i] = ar[i] * br[0];
            else
                for (int64_t i = 0; i < ne0; ++i) y[i] = ar[i] * br[i];
        }
    });
}

void op_concat(const Node& n, ThreadPool& pool) {
    const Tensor& a = *n.src[BinaryArg::A];
    const Tensor& b = *n.src[BinaryArg::B];
    Tensor& out = *n.out;
    const int dim = n.p<ConcatParams>().dim;
    const int64_t ne1 = out.ne[1], ne2 = out.ne[2];
    for_rows(pool, out.n_rows(), out.ne[0], [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            int64_t i[4] = {0, r % ne1, (r / ne1) % ne2, r / (ne1 * ne2)};
            float* y = reinterpret_cast<float*>(out.row(i[1], i[2], i[3]));
            if (dim == 0) {
                const float* ar = frow(a, i[1], i[2], i[3]);
                const float* br = frow(b, i[1], i[2], i[3]);
                std::copy(ar, ar + a.ne[0], y);
                std::copy(br, br + b.ne[0], y + a.ne[0]);
                continue;
            }
            const bool from_a = i[dim] < a.ne[dim];
            if (!from_a) i[dim] -= a.ne[dim];
            const float* src = frow(from_a ? a : b, i[1], i[2], i[3]);
            std::copy(src, src + out.ne[0], y);
        }
    });
}

// As the reference: each stream's score is the sum of its weightless RMS norm times w, the
// scores' softmax weighs the raw streams, saved ones in order, the current one last.
void op_res_mix(const Node& n, ThreadPool& pool) {
    const Tensor& stack = *n.src[ResMixArg::STACK];
    const Tensor& cur = *n.src[ResMixArg::CUR];
    const float* w = n.src[ResMixArg::W]->ptr<float>();
    Tensor& out = *n.out;
    const int64_t E = cur.ne[0], T = cur.ne[1], ns = stack.ne[1];
    const float eps = n.p<NormParams>().eps;
    auto score = [&](const float* c) {
        double ss = 0;
        for (int64_t d = 0; d < E; ++d) ss += double(c[d]) * c[d];
        const float inv = 1.0f / std::sqrt(float(ss / double(E)) + eps);
        float s = 0;
        for (int64_t d = 0; d < E; ++d) s += (c[d] * inv) * w[d];
        return s;
    };
    for_rows(pool, T, E * (ns + 1) * 3, [&](int64_t t0, int64_t t1) {
        std::vector<float> p(ns + 1);
        for (int64_t t = t0; t < t1; ++t) {
            for (int64_t j = 0; j < ns; ++j) p[j] = score(frow(stack, j, t));
            const float* ct = frow(cur, t);
            p[ns] = score(ct);
            const float mx = *std::max_element(p.begin(), p.end());
            float sum = 0;
            for (float& x : p) sum += (x = std::exp(x - mx));
            for (float& x : p) x /= sum;
            float* y = reinterpret_cast<float*>(out.row(t));
            std::fill(y, y + E, 0.0f);
            for (int64_t j = 0; j < ns; ++j) {
                const float* c = frow(stack, j, t);
                for (int64_t d = 0; d < E; ++d) y[d] += p[j] * c[d];
            }
            for (int64_t d = 0; d < E; ++d) y[d] += ct[d] * p[ns];
        }
    });
}

float situ_value(float g, float u, float beta, float linear_beta) {
    const float a = beta * std::tanh(g * (1.0f / beta));
    const float sg = 1.0f / (1.0f + std::exp(-g));
    return (a * sg) * (linear_beta * std::tanh(u * (1.0f / linear_beta)));
}

void op_situ(const Node& n, ThreadPool& pool) {
    const Tensor& g = *n.src[GluArg::GATE];
    const Tensor& u = *n.src[GluArg::UP];
    Tensor& out = *n.out;
    const GluParams& gp = n.p<GluParams>();
    const int64_t ne0 = g.ne[0];
    for_rows(pool, g.ne[1], ne0, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* gr = frow(g, r);
            const float* ur = frow(u, r);
            float* y = reinterpret_cast<float*>(out.row(r));
            for (int64_t i = 0; i < ne0; ++i) y[i] = situ_value(gr[i], ur[i], gp.beta, gp.linear_beta);
        }
    });
}

}  // namespace glia::cpu
