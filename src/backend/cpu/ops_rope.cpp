// ROPE: rotary position embedding. theta_i = pos * base^(-2i/n_dims), computed by
// repeated multiplication in float as the reference does (keeps long positions close).
// ROPE_FREQS: the same with theta_i divided by a per-pair factor (partial "proportional"
// RoPE stores 1e30 for the pairs it leaves alone: their angle is 0).
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace glia::cpu {

namespace {

void rope_impl(const Node& n, ThreadPool& pool, const float* freqs) {
    const Tensor& x = *n.src[0];
    const int32_t* pos = n.src[1]->ptr<int32_t>();
    Tensor& out = *n.out;
    const RopeParams& p = n.p<RopeParams>();
    const int64_t hd = x.ne[0], n_head = x.ne[1], T = x.ne[2];
    const int nd = p.n_dims;
    const float theta_scale = std::pow(p.freq_base, -2.0f / float(nd));
    for_rows(pool, T, hd * n_head, [&](int64_t t_begin, int64_t t_end) {
        thread_local std::vector<float> cs;  // cos, sin per pair (kept: no allocation per step)
        cs.resize(nd);
        for (int64_t t = t_begin; t < t_end; ++t) {
            float theta = static_cast<float>(pos[t]);
            for (int i0 = 0; i0 < nd; i0 += 2) {
                const float th = freqs ? p.freq_scale * (theta / freqs[i0 / 2]) : theta * p.freq_scale;
                cs[i0] = std::cos(th);
                cs[i0 + 1] = std::sin(th);
                theta *= theta_scale;
            }
            for (int64_t h = 0; h < n_head; ++h) {
                const float* src = reinterpret_cast<const float*>(x.row(h, t));
                float* dst = reinterpret_cast<float*>(out.row(h, t));
                for (int i0 = 0; i0 < nd; i0 += 2) {
                    const float c = cs[i0], s = cs[i0 + 1];
                    const int a = p.type == RopeType::NEOX ? i0 / 2 : i0;
                    const int b = p.type == RopeType::NEOX ? i0 / 2 + nd / 2 : i0 + 1;
                    const float x0 = src[a], x1 = src[b];
                    dst[a] = x0 * c - x1 * s;
                    dst[b] = x0 * s + x1 * c;
                }
                for (int64_t i = nd; i < hd; ++i) dst[i] = src[i];
            }
        }
    });
}

}  // namespace

void op_rope(const Node& n, ThreadPool& pool) { rope_impl(n, pool, nullptr); }

void op_rope_freqs(const Node& n, ThreadPool& pool) {
    rope_impl(n, pool, n.src[RopeFreqsArg::FREQS]->ptr<float>());
}

}  // namespace glia::cpu
