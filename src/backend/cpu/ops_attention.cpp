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
    // Per sequence of the batch: its tokens (in batch order) and the cache rows it may
    // see; then one job list (sequence tile x KV head) for a single pass over the pool, so
    // a batch of many single-token sequences costs one dispatch, not one per sequence.
    // Buffers are kept from call to call (no allocation per step); the workers use the
    // calling thread's buffers through these references (a thread_local named inside the
    // lambda would be the worker's own, empty one).
    struct SeqInfo { int seq; int64_t tok0, n_tok; size_t row0; int64_t tile0; };
    thread_local std::vector<SeqInfo> seqs_tl;
    thread_local std::vector<const uint16_t*> krows_tl, vrows_tl;
    thread_local std::vector<int64_t> toks_tl;
    thread_local std::vector<int> seq_of_tile_tl;
    std::vector<SeqInfo>& seqs = seqs_tl;
    std::vector<const uint16_t*>& krows = krows_tl;
    std::vector<const uint16_t*>& vrows = vrows_tl;
    std::vector<int64_t>& toks = toks_tl;
    std::vector<int>& seq_of_tile = seq_of_tile_tl;
    seqs.clear();
    toks.clear();
    krows.clear();
    vrows.clear();
    seq_of_tile.clear();
    for (int64_t t = 0; t < T; ++t) {
        const int s = seq_of(t);
        bool seen = false;
        for (const SeqInfo& si : seqs) seen |= si.seq == s;
        if (seen) continue;
        SeqInfo si{s, static_cast<int64_t>(toks.size()), 0, krows.size(), static_cast<int64_t>(seq_of_tile.size())};
        int max_pos = 0;
        for (int64_t u = t; u < T; ++u)
            if (seq_of(u) == s) {
                toks.push_back(u);
                max_pos = std::max(max_pos, pos[u]);
            }
        si.n_tok = static_cast<int64_t>(toks.size()) - si.tok0;
        for (int c = 0; c <= max_pos; ++c) {
            krows.push_back(cache.k_row(il, s, c));
            vrows.push_back(cache.v_row(il, s, c));
        }
        const int64_t n_tiles = (si.n_tok + kTileTokens - 1) / kTileTokens;
        for (int64_t i = 0; i < n_tiles; ++i) seq_of_tile.push_back(static_cast<int>(seqs.size()));
        seqs.push_back(si);
    }
    const int64_t n_gtiles = static_cast<int64_t>(seq_of_tile.size());
    // Prefill tiles: one job per (tile, KV head). Decode-sized tiles: one job per (tile,
    // range of KV heads), cells outermost, so every cache row (all heads) is streamed once
    // and contiguously; heads are split only as far as needed to occupy the threads.
    const bool any_prefill = [&] {
        for (const SeqInfo& si : seqs)
            if (std::min<int64_t>(si.n_tok, kTileTokens) * group >= kTileMinQueries) return true;
        return false;
    }();
    const int64_t kv_split =
        any_prefill ? n_kv : std::clamp<int64_t>((2 * pool.size() + n_gtiles - 1) / n_gtiles, 1, n_kv);
    const int64_t n_jobs = n_gtiles * kv_split;
    {
        pool.run([&](int ith, int nth) {
            thread_local std::vector<float> qbuf, sbuf, acc;
            thread_local std::vector<int> lo_hi;
            for (int64_t job = ith; job < n_jobs; job += nth) {
                const int64_t gtile = job / kv_split, part = job % kv_split;
                const int64_t kv0 = part * n_kv / kv_split, kv1 = (part + 1) * n_kv / kv_split;
                const SeqInfo& si = seqs[seq_of_tile[gtile]];
                const int64_t* toks_s = toks.data() + si.tok0;  // this sequence's tokens
                const uint16_t* const* krows_s = krows.data() + si.row0;
                const uint16_t* const* vrows_s = vrows.data() + si.row0;
                const int64_t i0 = (gtile - si.tile0) * kTileTokens;
                const int64_t nt = std::min<int64_t>(kTileTokens, si.n_tok - i0);
                const int nq = static_cast<int>(nt * group);
                // The cells any query of the tile may see.
                int c_lo = std::numeric_limits<int>::max(), c_hi = 0;
                for (int64_t i = i0; i < i0 + nt; ++i) {
                    const int p = pos[toks_s[i]];
                    c_lo = std::min(c_lo, ap.window > 0 ? std::max(0, p - ap.window + 1) : 0);
                    c_hi = std::max(c_hi, p + 1);
                }
                const int nc = c_hi - c_lo;
                const int64_t nh = kv1 - kv0;
                // Query (head h of the range, token i, group head g) at row (h * nt + i) * group + g,
                // q rounded to f16.
                qbuf.resize(static_cast<size_t>(nh * nq) * hd);
                acc.resize(static_cast<size_t>(nh * nq) * hd_v);
                for (int64_t h = 0; h < nh; ++h)
                    for (int64_t i = 0; i < nt; ++i)
                        for (int64_t g = 0; g < group; ++g) {
                            const int64_t head = (kv0 + h) * group + g;
                            const float* qs = reinterpret_cast<const float*>(q.row(head, toks_s[i0 + i]));
                            vm.round_f16(qs, &qbuf[((h * nt + i) * group + g) * hd], hd);
                        }
                if (nq >= kTileMinQueries) {
                    // Prefill: one kernel call per head's tile.
                    lo_hi.resize(2 * static_cast<size_t>(nq));
                    for (int j = 0; j < nq; ++j) {
                        const int p = pos[toks_s[i0 + j / group]];
                        lo_hi[j] = (ap.window > 0 ? std::max(0, p - ap.window + 1) : 0) - c_lo;
                        lo_hi[nq + j] = p + 1 - c_lo;
                    }
                    for (int64_t h = 0; h < nh; ++h) {
                        simd::AttnTile at;
                        at.hd = static_cast<int>(hd);
                        at.hd_v = static_cast<int>(hd_v);
                        at.nq = nq;
                        at.q = &qbuf[static_cast<size_t>(h * nq) * hd];
                        at.k = krows_s + c_lo;
                        at.v = vrows_s + c_lo;
                        at.k_off = (kv0 + h) * hd;
                        at.v_off = (kv0 + h) * hd_v;
                        at.n = nc;
                        at.lo = lo_hi.data();
                        at.hi = lo_hi.data() + nq;
                        at.scale = ap.scale;
                        at.softcap = ap.softcap;
                        at.out = &acc[static_cast<size_t>(h * nq) * hd_v];
                        at.out_stride = static_cast<size_t>(hd_v);
                        kern.tile(at);
                    }
                } else {
                    constexpr int kCells = 16;  // cells per block of the cell loop
                    sbuf.resize(static_cast<size_t>(nh * nq) * nc);
                    for (int c0 = 0; c0 < nc; c0 += kCells) {
                        const int m = std::min(kCells, nc - c0);
                        for (int64_t h = 0; h < nh; ++h)
                            kern.scores(static_cast<int>(hd), nq, &qbuf[static_cast<size_t>(h * nq) * hd],
                                        krows_s + c_lo + c0, (kv0 + h) * hd, m,
                                        &sbuf[static_cast<size_t>(h * nq) * nc + c0], nc);
                    }
                    for (int64_t h = 0; h < nh; ++h)
                        for (int j = 0; j < nq; ++j) {
                            const int p = pos[toks_s[i0 + j / group]];
                            const int lo = ap.window > 0 ? std::max(0, p - ap.window + 1) : 0;
                            float* sj = &sbuf[static_cast<size_t>(h * nq + j) * nc];
                            std::fill(sj, sj + (lo - c_lo), 0.0f);
                            kern.softmax(sj + (lo - c_lo), p + 1 - lo, ap.scale, ap.softcap);
                            std::fill(sj + (p + 1 - c_lo), sj + nc, 0.0f);
                        }
                    std::fill(acc.begin(), acc.end(), 0.0f);
                    for (int c0 = 0; c0 < nc; c0 += kCells) {
                        const int m = std::min(kCells, nc - c0);
                        for (int64_t h = 0; h < nh; ++h)
                            kern.weighted_sum(static_cast<int>(hd_v), nq, &sbuf[static_cast<size_t>(h * nq) * nc + c0],
                                              nc, vrows_s + c_lo + c0, (kv0 + h) * hd_v, m,
                                              &acc[static_cast<size_t>(h * nq) * hd_v]);
                    }
                }
                for (int64_t h = 0; h < nh; ++h)
                    for (int64_t i = 0; i < nt; ++i)
                        for (int64_t g = 0; g < group; ++g) {
                            float* o = reinterpret_cast<float*>(out.row(toks_s[i0 + i])) +
                                       ((kv0 + h) * group + g) * hd_v;
                            const float* a = &acc[((h * nt + i) * group + g) * hd_v];
                            std::copy(a, a + hd_v, o);
                        }
            }
        });
    }
}

}  // namespace glia::cpu
