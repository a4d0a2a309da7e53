// ATTENTION: writes this batch's K and V into the F16 cache, then for every query
// token and head computes softmax(scale * q.k) over the cached positions it may see
// (causal, optionally a sliding window) and the weighted sum of V.
// Numerics follow the reference: q rounded to f16 for q.k, probabilities rounded to
// f16 for the product with V, softmax sum in double.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/f16.h"
#include "runtime/kv_cache.h"

namespace glia::cpu {

void op_attention(const Node& n, ThreadPool& pool) {
    const Tensor& q = *n.src[0];
    const Tensor& k = *n.src[1];
    const Tensor& v = *n.src[2];
    const int32_t* pos = n.src[3]->ptr<int32_t>();
    KVCache& cache = *n.cache;
    const AttnParams& ap = n.attn;
    const int il = ap.layer;
    const int64_t hd = q.ne[0], n_head = q.ne[1], T = q.ne[2];
    const int64_t n_kv = k.ne[1], hd_v = v.ne[0];
    const int64_t group = n_head / n_kv;
    if (cache.k_dim(il) != hd * n_kv || cache.v_dim(il) != hd_v * n_kv)
        fail("attention layer ", il, ": cache row sizes do not match k/v");

    int max_pos = 0;
    for (int64_t t = 0; t < T; ++t) {
        if (pos[t] < 0 || pos[t] >= cache.n_ctx())
            fail("position ", pos[t], " is outside the context of ", cache.n_ctx(), " tokens");
        max_pos = std::max(max_pos, pos[t]);
        for (int64_t h = 0; h < n_kv; ++h) {
            const float* ks = reinterpret_cast<const float*>(k.row(h, t));
            const float* vs = reinterpret_cast<const float*>(v.row(h, t));
            uint16_t* kd = cache.k_row(il, pos[t]) + h * hd;
            uint16_t* vd = cache.v_row(il, pos[t]) + h * hd_v;
            for (int64_t i = 0; i < hd; ++i) kd[i] = f32_to_f16(ks[i]);
            for (int64_t i = 0; i < hd_v; ++i) vd[i] = f32_to_f16(vs[i]);
        }
    }
    const int64_t n_cells = max_pos + 1;
    // Widen the visible part of the cache to f32 once per call.
    std::vector<float> kf(static_cast<size_t>(n_cells) * n_kv * hd), vf(static_cast<size_t>(n_cells) * n_kv * hd_v);
    pool.parallel_for(n_cells, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
            const uint16_t* kr = cache.k_row(il, static_cast<int>(c));
            const uint16_t* vr = cache.v_row(il, static_cast<int>(c));
            for (int64_t i = 0; i < n_kv * hd; ++i) kf[c * n_kv * hd + i] = f16_to_f32(kr[i]);
            for (int64_t i = 0; i < n_kv * hd_v; ++i) vf[c * n_kv * hd_v + i] = f16_to_f32(vr[i]);
        }
    });

    Tensor& out = *n.out;
    pool.run([&](int ith, int nth) {
        std::vector<float> qh(hd), s(n_cells), acc(hd_v);
        for (int64_t job = ith; job < T * n_head; job += nth) {
            const int64_t t = job / n_head, h = job % n_head, kvh = h / group;
            const float* qs = reinterpret_cast<const float*>(q.row(h, t));
            for (int64_t i = 0; i < hd; ++i) qh[i] = round_f16(qs[i]);
            const int p = pos[t];
            const int lo = ap.window > 0 ? std::max(0, p - ap.window + 1) : 0;
            float mx = -std::numeric_limits<float>::infinity();
            for (int c = lo; c <= p; ++c) {
                const float* kr = &kf[(static_cast<size_t>(c) * n_kv + kvh) * hd];
                float d = 0.0f;
                for (int64_t i = 0; i < hd; ++i) d += qh[i] * kr[i];
                d *= ap.scale;
                if (ap.softcap > 0.0f) d = ap.softcap * std::tanh(d / ap.softcap);
                s[c] = d;
                mx = std::max(mx, d);
            }
            double sum = 0.0;
            for (int c = lo; c <= p; ++c) {
                const float e = std::exp(s[c] - mx);
                s[c] = e;
                sum += e;
            }
            const float inv = static_cast<float>(1.0 / sum);
            std::fill(acc.begin(), acc.end(), 0.0f);
            for (int c = lo; c <= p; ++c) {
                const float pc = round_f16(s[c] * inv);
                const float* vr = &vf[(static_cast<size_t>(c) * n_kv + kvh) * hd_v];
                for (int64_t i = 0; i < hd_v; ++i) acc[i] += pc * vr[i];
            }
            float* o = reinterpret_cast<float*>(out.row(t)) + h * hd_v;
            for (int64_t i = 0; i < hd_v; ++i) o[i] = acc[i];
        }
    });
}

}  // namespace glia::cpu
