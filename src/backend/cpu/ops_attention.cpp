// ATTENTION: writes this batch's K and V into the F16 cache, then for every query
// token and head computes softmax(scale * q.k) over the cached positions it may see
// (causal, optionally a sliding window) and the weighted sum of V. Tokens of several
// sequences may share a batch: each attends only to its own sequence's cache.
// Numerics follow the reference: q rounded to f16 for q.k, probabilities rounded to
// f16 for the product with V (kernels in simd/attention.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/simd/attention.h"
#include "backend/cpu/simd/vecmath.h"
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

    // Store this batch's K and V (rows converted to f16 in parallel).
    const simd::VecMath& vm = simd::vec_math();
    for (int64_t t = 0; t < T; ++t) {
        const int s = seq_of(t);
        if (s < 0 || s >= cache.n_seq()) fail("sequence id ", s, " outside the cache's ", cache.n_seq(), " slots");
        if (pos[t] < 0 || pos[t] >= cache.capacity(s))
            fail("position ", pos[t], " of sequence ", s, " is outside its reserved ", cache.capacity(s), " cache cells");
    }
    for_rows(pool, T, n_kv * (hd + hd_v), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const int s = seq_of(t);
            for (int64_t h = 0; h < n_kv; ++h) {
                vm.to_f16(reinterpret_cast<const float*>(k.row(h, t)), cache.k_row(il, s, pos[t]) + h * hd, hd);
                vm.to_f16(reinterpret_cast<const float*>(v.row(h, t)), cache.v_row(il, s, pos[t]) + h * hd_v, hd_v);
            }
        }
    });

    // Queries are processed in tiles: up to kTileTokens tokens of one sequence times the
    // `group` query heads that share a KV head, so each key and value row is read once
    // per tile. Within a tile each query sees only its own causal (and window) range.
    constexpr int64_t kTileTokens = 16;
    constexpr int kTileMinQueries = 8;  // smaller tiles (decode) take the per-query kernels
    const simd::AttnKernels& kern = simd::attn_kernels();
    Tensor& out = *n.out;
    // Buffers kept from call to call: no allocation per step. The workers below use the
    // calling thread's buffers through these references (a thread_local named inside the
    // lambda would be the worker's own, empty one).
    thread_local std::vector<int> seqs_tl;
    thread_local std::vector<const uint16_t*> krows_tl, vrows_tl;
    thread_local std::vector<int64_t> toks_tl;
    std::vector<int>& seqs = seqs_tl;
    std::vector<const uint16_t*>& krows = krows_tl;
    std::vector<const uint16_t*>& vrows = vrows_tl;
    std::vector<int64_t>& toks = toks_tl;
    seqs.clear();
    for (int64_t t = 0; t < T; ++t)
        if (std::find(seqs.begin(), seqs.end(), seq_of(t)) == seqs.end()) seqs.push_back(seq_of(t));
    for (const int s : seqs) {
        toks.clear();
        int max_pos = 0;
        for (int64_t t = 0; t < T; ++t)
            if (seq_of(t) == s) {
                toks.push_back(t);
                max_pos = std::max(max_pos, pos[t]);
            }
        const int n_cells = max_pos + 1;
        krows.resize(n_cells);
        vrows.resize(n_cells);
        for (int c = 0; c < n_cells; ++c) {
            krows[c] = cache.k_row(il, s, c);
            vrows[c] = cache.v_row(il, s, c);
        }
        const int64_t n_tiles = (static_cast<int64_t>(toks.size()) + kTileTokens - 1) / kTileTokens;
        const int64_t n_jobs = n_tiles * n_kv;
        pool.run([&](int ith, int nth) {
            thread_local std::vector<float> qbuf, sbuf, acc;
            thread_local std::vector<int> lo_hi;
            for (int64_t job = ith; job < n_jobs; job += nth) {
                const int64_t tile = job / n_kv, kvh = job % n_kv;
                const int64_t i0 = tile * kTileTokens;
                const int64_t nt = std::min<int64_t>(kTileTokens, static_cast<int64_t>(toks.size()) - i0);
                const int nq = static_cast<int>(nt * group);
                // The cells any query of the tile may see.
                int c_lo = std::numeric_limits<int>::max(), c_hi = 0;
                for (int64_t i = i0; i < i0 + nt; ++i) {
                    const int p = pos[toks[i]];
                    c_lo = std::min(c_lo, ap.window > 0 ? std::max(0, p - ap.window + 1) : 0);
                    c_hi = std::max(c_hi, p + 1);
                }
                const int nc = c_hi - c_lo;
                qbuf.resize(static_cast<size_t>(nq) * hd);
                if (nq < kTileMinQueries) sbuf.resize(static_cast<size_t>(nq) * nc);
                acc.resize(static_cast<size_t>(nq) * hd_v);
                // Query j = (token i, head g of the group), q rounded to f16.
                for (int64_t i = 0; i < nt; ++i)
                    for (int64_t g = 0; g < group; ++g) {
                        const float* qs = reinterpret_cast<const float*>(q.row(kvh * group + g, toks[i0 + i]));
                        vm.round_f16(qs, &qbuf[(i * group + g) * hd], hd);
                    }
                if (nq >= kTileMinQueries) {
                    // Prefill: one kernel call for the whole tile.
                    lo_hi.resize(2 * static_cast<size_t>(nq));
                    for (int j = 0; j < nq; ++j) {
                        const int p = pos[toks[i0 + j / group]];
                        lo_hi[j] = (ap.window > 0 ? std::max(0, p - ap.window + 1) : 0) - c_lo;
                        lo_hi[nq + j] = p + 1 - c_lo;
                    }
                    simd::AttnTile at;
                    at.hd = static_cast<int>(hd);
                    at.hd_v = static_cast<int>(hd_v);
                    at.nq = nq;
                    at.q = qbuf.data();
                    at.k = krows.data() + c_lo;
                    at.v = vrows.data() + c_lo;
                    at.k_off = kvh * hd;
                    at.v_off = kvh * hd_v;
                    at.n = nc;
                    at.lo = lo_hi.data();
                    at.hi = lo_hi.data() + nq;
                    at.scale = ap.scale;
                    at.softcap = ap.softcap;
                    acc.resize(static_cast<size_t>(nq) * hd_v);
                    at.out = acc.data();
                    at.out_stride = static_cast<size_t>(hd_v);
                    kern.tile(at);
                } else {
                    kern.scores(static_cast<int>(hd), nq, qbuf.data(), krows.data() + c_lo, kvh * hd, nc, sbuf.data(),
                                nc);
                    for (int j = 0; j < nq; ++j) {
                        const int p = pos[toks[i0 + j / group]];
                        const int lo = ap.window > 0 ? std::max(0, p - ap.window + 1) : 0;
                        float* sj = &sbuf[static_cast<size_t>(j) * nc];
                        std::fill(sj, sj + (lo - c_lo), 0.0f);
                        kern.softmax(sj + (lo - c_lo), p + 1 - lo, ap.scale, ap.softcap);
                        std::fill(sj + (p + 1 - c_lo), sj + nc, 0.0f);
                    }
                    kern.weighted_sum(static_cast<int>(hd_v), nq, sbuf.data(), nc, vrows.data() + c_lo, kvh * hd_v,
                                      nc, acc.data());
                }
                for (int64_t i = 0; i < nt; ++i)
                    for (int64_t g = 0; g < group; ++g) {
                        float* o = reinterpret_cast<float*>(out.row(toks[i0 + i])) + (kvh * group + g) * hd_v;
                        const float* a = &acc[(i * group + g) * hd_v];
                        std::copy(a, a + hd_v, o);
                    }
            }
        });
    }
}

}  // namespace glia::cpu
