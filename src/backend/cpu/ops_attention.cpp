// ATTENTION: writes this batch's K and V into the layer's pages (the cells the runtime
// chose; F16, BF16, or quantized a row at a time into Q8_0 / Q4_0 blocks), then for every query token and head computes softmax(scale * q.k) over the
// cached positions it may see (causal, optionally a sliding window) and the weighted sum
// of V. Tokens of several sequences may share a batch: each attends only to its own
// sequence's pages, found through the page table operand.
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
#include "quant/quant.h"

namespace glia::cpu {

namespace {

// Queries are processed in tiles: up to kTileTokens tokens of one sequence times the
// `group` query heads that share a KV head, so each key and value row is read once per
// tile. Within a tile each query sees only its own causal (and window) range.
constexpr int64_t kTileTokens = 16;
constexpr int kPrefillQueries = 8;  // tiles of fewer queries (decode) split their KV heads among threads

// One sequence of the batch: its tokens (indices into the batch, in order), the cache rows
// it may see (one pointer per position, through its page table) and its first tile.
struct SeqInfo { int seq; int64_t tok0, n_tok; size_t row0; int64_t tile0; };

// A tile of a sequence: its tokens [i0, i0 + nt) of the sequence's, the cells [c_lo, c_hi)
// its queries may see, where its chunks end (relative to c_lo), the parts its cells are cut
// into, and where its records start (parts > 1).
struct TileSpan {
    int64_t i0 = 0, nt = 0;
    int c_lo = 0, c_hi = 0;
    std::vector<int> chunk_ends;
    int64_t parts = 1;
    size_t rec0 = 0;
};

// One job: a tile's KV heads [kv0, kv1) over its chunks [chunk0, chunk1).
struct AttnJob {
    int64_t gtile, kv0, kv1, chunk0, chunk1;
};

// A part of a tile shared among threads covers at least this many chunks.
constexpr int64_t kMinPartChunks = 4;

// The batch grouped by sequence, with row pointers and one job list (sequence tile x KV
// head range x chunk range) for a single pass over the pool. Kept from call to call per thread (no
// allocation per step); the workers read the calling thread's through references.
struct AttnPlan {
    std::vector<SeqInfo> seqs;
    std::vector<const uint8_t*> krows, vrows;
    std::vector<int64_t> toks;
    std::vector<int> seq_of_tile;
    std::vector<TileSpan> spans;
    std::vector<AttnJob> jobs;
    std::vector<float> records;
    std::vector<std::pair<int64_t, int64_t>> folds;
};

// A tile's outputs (head h of nh from kv0, token i, group head g at acc row (h * nt + i) *
// group + g) into the output rows of its tokens.
void write_heads(Tensor& out, const float* acc, const int64_t* toks, int64_t nt, int64_t group, int64_t kv0,
                 int64_t nh, int64_t hd_v) {
    for (int64_t h = 0; h < nh; ++h)
        for (int64_t i = 0; i < nt; ++i)
            for (int64_t g = 0; g < group; ++g) {
                float* o = reinterpret_cast<float*>(out.row(toks[i])) + ((kv0 + h) * group + g) * hd_v;
                const float* a = acc + ((h * nt + i) * group + g) * hd_v;
                std::copy(a, a + hd_v, o);
            }
}

simd::KvType kv_type(DType t) {
    switch (t) {
        case DType::BF16: return simd::KvType::BF16;
        case DType::Q8_0: return simd::KvType::Q8_0;
        case DType::Q4_0: return simd::KvType::Q4_0;
        default: return simd::KvType::F16;
    }
}

// One token's heads [hd, n_kv] (rows of `src`, head h at src.row(h, t)) written as a cache
// row of type `type`: F16 head by head; the other types gathered into one f32 row and
// converted as the reference's CPU backend converts f32 into them at run time (Q8_0 and
// Q4_0 blocks may then span heads of 8 or 16 values).
void store_row(const Tensor& src, int64_t t, DType type, uint8_t* dst, const simd::VecMath& vm,
               std::vector<float>& tmp) {
    const int64_t hd = src.ne[0], n_kv = src.ne[1];
    if (type == DType::F16) {
        for (int64_t h = 0; h < n_kv; ++h)
            vm.to_f16(reinterpret_cast<const float*>(src.row(h, t)), reinterpret_cast<uint16_t*>(dst) + h * hd, hd);
        return;
    }
    tmp.resize(static_cast<size_t>(hd * n_kv));
    for (int64_t h = 0; h < n_kv; ++h) {
        const float* r = reinterpret_cast<const float*>(src.row(h, t));
        std::copy(r, r + hd, tmp.data() + h * hd);
    }
    quant::quantize_act_row(type, tmp.data(), dst, hd * n_kv);
}

// Stores this batch's K and V rows (converted, in parallel) into their cells.
void store_kv(const Node& n, ThreadPool& pool) {
    const Tensor& k = *n.src[AttnArg::K];
    const Tensor& v = *n.src[AttnArg::V];
    Tensor& kc = *n.src[AttnArg::K_CACHE];
    Tensor& vc = *n.src[AttnArg::V_CACHE];
    const int32_t* cells = n.src[AttnArg::CELLS]->ptr<int32_t>();
    const int64_t T = k.ne[2], n_kv = k.ne[1], hd = k.ne[0], hd_v = v.ne[0];
    const simd::VecMath& vm = simd::vec_math();
    for_rows(pool, T, n_kv * (hd + hd_v), [&](int64_t t0, int64_t t1) {
        thread_local std::vector<float> tmp;
        for (int64_t t = t0; t < t1; ++t) {
            store_row(k, t, kc.type, static_cast<uint8_t*>(kc.row(cells[t])), vm, tmp);
            store_row(v, t, vc.type, static_cast<uint8_t*>(vc.row(cells[t])), vm, tmp);
        }
    });
}

// Groups the batch's tokens by sequence and collects each sequence's visible rows.
void plan_batch(const Node& n, AttnPlan& pl) {
    const int32_t* pos = n.src[AttnArg::POS]->ptr<int32_t>();
    const int32_t* seq = n.src[AttnArg::SEQ]->ptr<int32_t>();
    const Tensor& kc = *n.src[AttnArg::K_CACHE];
    const Tensor& vc = *n.src[AttnArg::V_CACHE];
    const Tensor& pages = *n.src[AttnArg::PAGES];
    const int bs = n.p<AttnParams>().block_size;
    const int64_t T = n.src[AttnArg::Q]->ne[2];
    pl.seqs.clear();
    pl.toks.clear();
    pl.krows.clear();
    pl.vrows.clear();
    pl.seq_of_tile.clear();
    for (int64_t t = 0; t < T; ++t) {
        const int s = seq[t];
        bool seen = false;
        for (const SeqInfo& si : pl.seqs) seen |= si.seq == s;
        if (seen) continue;
        SeqInfo si{s, static_cast<int64_t>(pl.toks.size()), 0, pl.krows.size(),
                    static_cast<int64_t>(pl.seq_of_tile.size())};
        int max_pos = 0;
        for (int64_t u = t; u < T; ++u)
            if (seq[u] == s) {
                pl.toks.push_back(u);
                max_pos = std::max(max_pos, pos[u]);
            }
        si.n_tok = static_cast<int64_t>(pl.toks.size()) - si.tok0;
        const int32_t* table = reinterpret_cast<const int32_t*>(pages.row(s));
        for (int c = 0; c <= max_pos; ++c) {
            const int64_t cell = int64_t(table[c / bs]) * bs + c % bs;
            pl.krows.push_back(static_cast<const uint8_t*>(kc.row(cell)));
            pl.vrows.push_back(static_cast<const uint8_t*>(vc.row(cell)));
        }
        const int64_t n_tiles = (si.n_tok + kTileTokens - 1) / kTileTokens;
        for (int64_t i = 0; i < n_tiles; ++i) pl.seq_of_tile.push_back(static_cast<int>(pl.seqs.size()));
        pl.seqs.push_back(si);
    }
}

}  // namespace

void op_attention(const Node& n, ThreadPool& pool) {
    const Tensor& q = *n.src[AttnArg::Q];
    const Tensor& k = *n.src[AttnArg::K];
    const Tensor& v = *n.src[AttnArg::V];
    const int32_t* pos = n.src[AttnArg::POS]->ptr<int32_t>();
    const AttnParams& ap = n.p<AttnParams>();
    const int64_t hd = q.ne[0];
    const int64_t n_kv = k.ne[1], hd_v = v.ne[0];
    const int64_t group = q.ne[1] / n_kv;
    const simd::VecMath& vm = simd::vec_math();
    store_kv(n, pool);

    thread_local AttnPlan plan_tl;
    AttnPlan& pl = plan_tl;
    plan_batch(n, pl);
    const std::vector<SeqInfo>& seqs = pl.seqs;
    const std::vector<const uint8_t*>& krows = pl.krows;
    const std::vector<const uint8_t*>& vrows = pl.vrows;
    const simd::KvType k_type = kv_type(n.src[AttnArg::K_CACHE]->type);
    const simd::KvType v_type = kv_type(n.src[AttnArg::V_CACHE]->type);
    const std::vector<int64_t>& toks = pl.toks;
    const std::vector<int>& seq_of_tile = pl.seq_of_tile;
    const simd::AttnKernels& kern = simd::attn_kernels();
    Tensor& out = *n.out;
    const int64_t n_gtiles = static_cast<int64_t>(seq_of_tile.size());
    // Each tile: its first token, tokens, and the cells any of its queries may see.
    std::vector<TileSpan>& spans = pl.spans;
    spans.resize(static_cast<size_t>(n_gtiles));
    for (int64_t gt = 0; gt < n_gtiles; ++gt) {
        const SeqInfo& si = seqs[seq_of_tile[gt]];
        TileSpan& ts = spans[gt];
        ts.i0 = (gt - si.tile0) * kTileTokens;
        ts.nt = std::min<int64_t>(kTileTokens, si.n_tok - ts.i0);
        ts.c_lo = std::numeric_limits<int>::max();
        ts.c_hi = 0;
        for (int64_t i = ts.i0; i < ts.i0 + ts.nt; ++i) {
            const int p = pos[toks[si.tok0 + i]];
            ts.c_lo = std::min(ts.c_lo, ap.window > 0 ? std::max(0, p - ap.window + 1) : 0);
            ts.c_hi = std::max(ts.c_hi, p + 1);
        }
    }
    // Prefill tiles: one job per (tile, KV head). Decode-sized tiles: one job per (tile,
    // range of KV heads), the heads split only as far as needed to occupy the threads (one
    // job reads the cells once for all its heads). Where the threads still outnumber the
    // jobs (one sequence, few KV heads, a deep cache), a tile's cells are cut at chunk
    // boundaries into parts that leave records, folded afterwards in chunk order: every
    // (tile, head) gets the bits of one call over all its cells whichever way it is shared.
    const bool any_prefill = [&] {
        for (const SeqInfo& si : seqs)
            if (std::min<int64_t>(si.n_tok, kTileTokens) * group >= kPrefillQueries) return true;
        return false;
    }();
    const int64_t nth = pool.size();
    const int64_t kv_split = any_prefill ? n_kv : std::clamp<int64_t>((nth + n_gtiles - 1) / n_gtiles, 1, n_kv);
    const int64_t want_parts = any_prefill ? 1 : (nth + n_gtiles * kv_split - 1) / (n_gtiles * kv_split);
    std::vector<AttnJob>& jobs = pl.jobs;
    jobs.clear();
    size_t rec_floats = 0;
    const size_t rs = simd::attn_record(static_cast<int>(hd_v));
    for (int64_t gt = 0; gt < n_gtiles; ++gt) {
        TileSpan& ts = spans[gt];
        // Chunk boundaries of the tile's cells (relative to c_lo).
        std::vector<int>& ends = ts.chunk_ends;
        ends.clear();
        for (int c = 0; c < ts.c_hi - ts.c_lo;) {
            c = std::min(ts.c_hi - ts.c_lo, ((ts.c_lo + c) / simd::kAttnChunk + 1) * simd::kAttnChunk - ts.c_lo);
            ends.push_back(c);
        }
        const int64_t n_chunks = static_cast<int64_t>(ends.size());
        ts.parts = std::clamp<int64_t>(want_parts, 1, std::max<int64_t>(1, n_chunks / kMinPartChunks));
        ts.rec0 = rec_floats;
        if (ts.parts > 1) rec_floats += static_cast<size_t>(n_kv * n_chunks * ts.nt * group) * rs;
        for (int64_t hp = 0; hp < kv_split; ++hp)
            for (int64_t p = 0; p < ts.parts; ++p) {
                AttnJob j;
                j.gtile = gt;
                j.kv0 = hp * n_kv / kv_split;
                j.kv1 = (hp + 1) * n_kv / kv_split;
                j.chunk0 = p * n_chunks / ts.parts;
                j.chunk1 = (p + 1) * n_chunks / ts.parts;
                jobs.push_back(j);
            }
    }
    std::vector<float>& records = pl.records;
    if (records.size() < rec_floats) records.resize(rec_floats);

    const int64_t n_jobs = static_cast<int64_t>(jobs.size());
    // Jobs in chunks claimed by whichever thread is free (a job's result does not depend on
    // the thread that runs it): a worker the system took off its core delays only its chunk.
    pool.parallel_for(n_jobs, [&](int64_t jb0, int64_t jb1) {
        thread_local std::vector<float> qbuf, acc;
        thread_local std::vector<int> lo_hi;
        for (int64_t jb = jb0; jb < jb1; ++jb) {
            const AttnJob& job = jobs[jb];
            const TileSpan& ts = spans[job.gtile];
            const SeqInfo& si = seqs[seq_of_tile[job.gtile]];
            const int64_t* toks_s = toks.data() + si.tok0;  // this sequence's tokens
            const uint8_t* const* krows_s = krows.data() + si.row0;
            const uint8_t* const* vrows_s = vrows.data() + si.row0;
            const int64_t i0 = ts.i0, nt = ts.nt, kv0 = job.kv0, nh = job.kv1 - job.kv0;
            const int nq = static_cast<int>(nt * group);
            const int64_t n_chunks = static_cast<int64_t>(ts.chunk_ends.size());
            // This job's cells: [a, b) of the tile's, whole chunks.
            const int a = job.chunk0 == 0 ? 0 : ts.chunk_ends[job.chunk0 - 1];
            const int b = ts.chunk_ends[job.chunk1 - 1];
            const int c_lo = ts.c_lo + a;
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
            // One tile kernel call for the job's heads, prompts and decode alike: a query's
            // bits depend only on its own position and the cache (PrefillDecodeBits.*); the
            // cells are read once for all the heads.
            lo_hi.resize(2 * static_cast<size_t>(nq));
            for (int j = 0; j < nq; ++j) {
                const int p = pos[toks_s[i0 + j / group]];
                const int lo = (ap.window > 0 ? std::max(0, p - ap.window + 1) : 0) - c_lo;
                const int hi = p + 1 - c_lo;
                lo_hi[j] = std::clamp(lo, 0, b - a);
                lo_hi[nq + j] = std::clamp(hi, 0, b - a);
            }
            simd::AttnTile at;
            at.hd = static_cast<int>(hd);
            at.hd_v = static_cast<int>(hd_v);
            at.nq = nq;
            at.q = qbuf.data();
            at.nh = static_cast<int>(nh);
            at.q_head_stride = static_cast<size_t>(nq) * hd;
            at.out_head_stride = static_cast<size_t>(nq) * hd_v;
            at.k = krows_s + c_lo;
            at.v = vrows_s + c_lo;
            at.k_off = kv0 * hd;
            at.v_off = kv0 * hd_v;
            at.k_type = k_type;
            at.v_type = v_type;
            at.n = b - a;
            at.pos0 = c_lo;  // the cache rows are indexed by position
            at.lo = lo_hi.data();
            at.hi = lo_hi.data() + nq;
            at.scale = ap.scale;
            at.softcap = ap.softcap;
            at.out = acc.data();
            at.out_stride = static_cast<size_t>(hd_v);
            if (ts.parts > 1) {  // records of heads kv0.., chunks chunk0..
                at.partial_head_stride = static_cast<size_t>(n_chunks * nq) * rs;
                at.partial = records.data() + ts.rec0 + static_cast<size_t>(kv0) * at.partial_head_stride +
                             static_cast<size_t>(job.chunk0 * nq) * rs;
            }
            kern.tile(at);
            if (at.partial) continue;
            write_heads(out, acc.data(), toks_s + i0, nt, group, kv0, nh, hd_v);
        }
    });
    if (rec_floats == 0) return;
    // The parts' records folded in chunk order, a job per (tile, KV head).
    std::vector<std::pair<int64_t, int64_t>>& folds = pl.folds;
    folds.clear();
    for (int64_t gt = 0; gt < n_gtiles; ++gt)
        if (spans[gt].parts > 1)
            for (int64_t h = 0; h < n_kv; ++h) folds.emplace_back(gt, h);
    const int64_t n_folds = static_cast<int64_t>(folds.size());
    pool.parallel_for(n_folds, [&](int64_t f0, int64_t f1) {
        thread_local std::vector<float> acc;
        for (int64_t fi = f0; fi < f1; ++fi) {
            const auto [gt, h] = folds[fi];
            const TileSpan& ts = spans[gt];
            const SeqInfo& si = seqs[seq_of_tile[gt]];
            const int nq = static_cast<int>(ts.nt * group);
            const int64_t n_chunks = static_cast<int64_t>(ts.chunk_ends.size());
            acc.resize(static_cast<size_t>(nq) * hd_v);
            simd::AttnFold f;
            f.nq = nq;
            f.hd_v = static_cast<int>(hd_v);
            f.n_chunks = static_cast<int>(n_chunks);
            f.rec = records.data() + ts.rec0 + static_cast<size_t>(h * n_chunks * nq) * rs;
            f.out = acc.data();
            f.out_stride = static_cast<size_t>(hd_v);
            kern.fold(f);
            write_heads(out, acc.data(), toks.data() + si.tok0 + ts.i0, ts.nt, group, h, 1, hd_v);
        }
    });
}

}  // namespace glia::cpu
