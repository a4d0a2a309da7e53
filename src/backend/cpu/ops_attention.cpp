// ATTENTION: writes this batch's K and V into the F16 cache, then for every query
// token and head computes softmax(scale * q.k) over the cached positions it may see
// (causal, optionally a sliding window) and the weighted sum of V. Tokens of several
// sequences may share a batch: each attends only to its own sequence's cache.
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
    const int32_t* seq = n.extra ? n.extra->ptr<int32_t>() : nullptr;
    KVCache& cache = *n.cache;
    const AttnParams& ap = n.attn;
    const int il = ap.layer;
    const int64_t hd = q.ne[0], n_head = q.ne[1], T = q.ne[2];
    const int64_t n_kv = k.ne[1], hd_v = v.ne[0];
    const int64_t group = n_head / n_kv;
    if (cache.k_dim(il) != hd * n_kv || cache.v_dim(il) != hd_v * n_kv)
        fail("attention layer ", il, ": cache row sizes do not match k/v");
    auto seq_of = [&](int64_t t) { return seq ? seq[t] : 0; };

    // Store this batch's K and V.
    for (int64_t t = 0; t < T; ++t) {
        const int s = seq_of(t);
        if (s < 0 || s >= cache.n_seq()) fail("sequence id ", s, " outside the cache's ", cache.n_seq(), " slots");
        if (pos[t] < 0 || pos[t] >= cache.capacity(s))
            fail("position ", pos[t], " of sequence ", s, " is outside its reserved ", cache.capacity(s), " cache cells");
        for (int64_t h = 0; h < n_kv; ++h) {
            const float* ks = reinterpret_cast<const float*>(k.row(h, t));
            const float* vs = reinterpret_cast<const float*>(v.row(h, t));
            uint16_t* kd = cache.k_row(il, s, pos[t]) + h * hd;
            uint16_t* vd = cache.v_row(il, s, pos[t]) + h * hd_v;
            for (int64_t i = 0; i < hd; ++i) kd[i] = f32_to_f16(ks[i]);
            for (int64_t i = 0; i < hd_v; ++i) vd[i] = f32_to_f16(vs[i]);
        }
    }

    Tensor& out = *n.out;
    std::vector<int> seqs;
    for (int64_t t = 0; t < T; ++t)
        if (std::find(seqs.begin(), seqs.end(), seq_of(t)) == seqs.end()) seqs.push_back(seq_of(t));
    std::vector<float> kf, vf;
    std::vector<int64_t> toks;
    for (const int s : seqs) {
        toks.clear();
        int max_pos = 0;
        for (int64_t t = 0; t < T; ++t)
            if (seq_of(t) == s) {
                toks.push_back(t);
                max_pos = std::max(max_pos, pos[t]);
            }
        const int64_t n_cells = max_pos + 1;
        // Widen the visible part of this sequence's cache to f32 once.
        kf.resize(static_cast<size_t>(n_cells) * n_kv * hd);
        vf.resize(static_cast<size_t>(n_cells) * n_kv * hd_v);
        pool.parallel_for(n_cells, [&](int64_t c0, int64_t c1) {
            for (int64_t c = c0; c < c1; ++c) {
                const uint16_t* kr = cache.k_row(il, s, static_cast<int>(c));
                const uint16_t* vr = cache.v_row(il, s, static_cast<int>(c));
                for (int64_t i = 0; i < n_kv * hd; ++i) kf[c * n_kv * hd + i] = f16_to_f32(kr[i]);
                for (int64_t i = 0; i < n_kv * hd_v; ++i) vf[c * n_kv * hd_v + i] = f16_to_f32(vr[i]);
            }
        });
        const int64_t n_jobs = static_cast<int64_t>(toks.size()) * n_head;
        pool.run([&](int ith, int nth) {
            std::vector<float> qh(hd), sc(n_cells), acc(hd_v);
            for (int64_t job = ith; job < n_jobs; job += nth) {
                const int64_t t = toks[job / n_head], h = job % n_head, kvh = h / group;
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
                    if (ap.softcap > 0.0f) d = std::tanh(d * (1.0f / ap.softcap)) * ap.softcap;
                    sc[c] = d;
                    mx = std::max(mx, d);
                }
                double sum = 0.0;
                for (int c = lo; c <= p; ++c) {
                    const float e = std::exp(sc[c] - mx);
                    sc[c] = e;
                    sum += e;
                }
                const float inv = static_cast<float>(1.0 / sum);
                std::fill(acc.begin(), acc.end(), 0.0f);
                for (int c = lo; c <= p; ++c) {
                    const float pc = round_f16(sc[c] * inv);
                    const float* vr = &vf[(static_cast<size_t>(c) * n_kv + kvh) * hd_v];
                    for (int64_t i = 0; i < hd_v; ++i) acc[i] += pc * vr[i];
                }
                float* o = reinterpret_cast<float*>(out.row(t)) + h * hd_v;
                for (int64_t i = 0; i < hd_v; ++i) o[i] = acc[i];
            }
        });
    }
}

}  // namespace glia::cpu
