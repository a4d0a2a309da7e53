#include "model/shard.h"

#include <deque>
#include <string>

#include "core/error.h"

namespace glia {
namespace {

std::string divisors_hint(const ModelProfile& p, int world) {
    std::string s;
    for (int n : tp_worlds(p))
        if (n > 1) s += (s.empty() ? "" : ", ") + std::to_string(n);
    return s.empty() ? cat("this model cannot be split; run it with -tp 1 (or split its layers across devices)")
                     : cat("use -tp ", s, " (instead of ", world, "), or -tp 1");
}

}  // namespace

std::string tp_missing(const ModelProfile& p) {
    std::string rec;
    for (int il = 0; il < p.n_layer; ++il)
        if (p.layer_kind[il] == LayerKind::RECURRENT) rec += (rec.empty() ? "" : ", ") + std::to_string(il);
    if (!rec.empty())
        return cat("its recurrent layers (blocks ", rec, ") have no split by heads yet (their state would stay on the "
                   "rank that owns each head)");
    if (p.mla_kv_lora_rank > 0) return "its latent attention (one shared compressed KV vector per token) has no split yet";
    if (p.n_expert_shared > 0 || p.n_expert_latent > 0) return "its shared / latent MoE experts have no split yet";
    return "";
}

namespace {

bool splits(const ModelProfile& p, int world, std::string* why) {
    auto no = [&](const std::string& w) {
        if (why) *why = w;
        return false;
    };
    if (world < 1) return no(cat("the number of ranks must be at least 1, not ", world));
    if (world == 1) return true;
    if (std::string u = tp_missing(p); !u.empty()) return no(u);
    if (p.n_head % world != 0)
        return no(cat(p.n_head, " attention heads do not divide into ", world, " ranks (each rank holds whole heads)"));
    for (int il = 0; il < p.n_layer; ++il) {
        const int kv = p.n_head_kv[il];
        if (kv > 0 && kv % world != 0 && world % kv != 0)
            return no(cat("block ", il, " has ", kv, " KV heads, which neither divide into ", world,
                          " ranks nor are repeated evenly over them (GQA groups stay whole)"));
        if (p.n_ff[il] % world != 0)
            return no(cat("block ", il, "'s feed-forward width ", p.n_ff[il], " does not divide into ", world, " ranks"));
    }
    if (p.n_ff_expert % world != 0)
        return no(cat("the experts' feed-forward width ", p.n_ff_expert, " does not divide into ", world, " ranks"));
    return true;
}

}  // namespace

std::vector<int> tp_worlds(const ModelProfile& p, int max_world) {
    std::vector<int> out;
    for (int n = 1; n <= max_world; ++n)
        if (splits(p, n, nullptr)) out.push_back(n);
    return out;
}

ModelProfile shard_profile(const ModelProfile& p, int rank, int world) {
    std::string why;
    if (!splits(p, world, &why))
        fail("tensor parallelism: the ", p.arch, " model cannot be split into ", world, " ranks: ", why, "; ",
             tp_missing(p).empty() ? divisors_hint(p, world) : "run it with -tp 1");
    if (rank < 0 || rank >= world) fail("tensor parallelism: rank ", rank, " outside 0..", world - 1);
    ModelProfile s = p;
    s.tp = TensorParallel{rank, world, world > 1 && p.n_vocab % world == 0};
    if (world == 1) return s;
    s.n_head = p.n_head / world;
    for (int il = 0; il < p.n_layer; ++il) {
        if (p.n_head_kv[il] > 0) s.n_head_kv[il] = std::max(1, p.n_head_kv[il] / world);
        s.n_ff[il] = p.n_ff[il] / world;
    }
    s.n_ff_expert = p.n_ff_expert / world;
    // A split head of a tied model reads a slice of the embeddings, bound as output.weight.
    if (s.tp.lm_head_split) s.tied_output = false;
    return s;
}

namespace {

// base + off; a tensor list without data (glia plan on a header) stays without.
void* at(void* base, size_t off) { return base ? static_cast<uint8_t*>(base) + off : nullptr; }

struct Slicer {
    const WeightSet& full;
    const ModelProfile& fp;  // the whole model
    const ModelProfile& rp;  // this rank's
    std::deque<Tensor> out;

    const Tensor* find(const std::string& name) const { return const_cast<WeightSet&>(full).find(name); }

    void keep(const Tensor& t, const std::string& name) {
        Tensor c = t;
        c.name = name;
        c.view_src = nullptr;
        c.view_offs = 0;
        out.push_back(std::move(c));
    }
    // Rows [r0, r0 + n) of every matrix of t (dim 1; 3-D expert tensors keep their stride).
    void rows(const Tensor& t, int64_t r0, int64_t n, const std::string& name) {
        if (r0 < 0 || r0 + n > t.ne[1]) fail("tensor parallelism: rows ", r0, "..", r0 + n, " outside '", t.name, "'");
        Tensor c = t;
        c.ne[1] = n;
        c.data = at(t.data, size_t(r0) * t.nb[1]);
        keep(c, name);
    }
    // Columns [c0, c0 + n) of every row (dim 0): a strided view starting on a block.
    void cols(const Tensor& t, int64_t c0, int64_t n, const char* what) {
        const DTypeInfo& ti = dtype_info(t.type);
        if (n % ti.block_size != 0 || c0 % ti.block_size != 0)
            fail("tensor parallelism over ", rp.tp.world, " ranks: '", t.name, "' (", ti.name, ", blocks of ",
                 ti.block_size, " values) would be split along its rows of ", t.ne[0], " values (", what, ") into ", n,
                 " per rank, not a whole number of blocks; use a -tp whose share is a multiple of ", ti.block_size,
                 " values, a file whose ", what, " matrices use a type with smaller blocks (e.g. Q8_0 or Q4_0: 32), or "
                 "split the layers across devices instead (-sm layer)");
        Tensor c = t;
        c.ne[0] = n;
        c.data = at(t.data, size_t(c0 / ti.block_size) * ti.type_size);
        keep(c, t.name);
    }
    // Elements [e0, e0 + n) of a vector (a bias).
    void elems(const Tensor& t, int64_t e0, int64_t n) {
        if (t.ne[1] != 1 || dtype_info(t.type).block_size != 1)
            fail("tensor parallelism: '", t.name, "' is not a plain vector");
        Tensor c = t;
        c.ne[0] = n;
        c.data = at(t.data, size_t(e0) * t.nb[0]);
        for (int d = 1; d < 4; ++d) c.nb[d] = c.row_size();
        keep(c, t.name);
    }

    void layer(int il) {
        const std::string blk = "blk." + std::to_string(il) + ".";
        const int W = rp.tp.world, r = rp.tp.rank;
        const int64_t hk = fp.head_dim_k_of(il), hv = fp.head_dim_v_of(il);
        const int64_t nh = rp.n_head, nkv_full = fp.n_head_kv[il], nkv = rp.n_head_kv[il];
        // Query heads [h0, h0 + nh); KV heads [kv0, kv0 + nkv) (a repeated head when fewer than ranks).
        const int64_t h0 = int64_t(r) * nh;
        const int64_t kv0 = nkv_full >= W ? int64_t(r) * nkv : int64_t(r) * nkv_full / W;
        const int64_t nq_full = int64_t(fp.n_head) * hk;
        if (const Tensor* q = find(blk + "attn_q.weight")) {
            const int64_t per_head = q->ne[1] / fp.n_head;  // hk, or 2 hk with a stacked output gate
            rows(*q, h0 * per_head, nh * per_head, q->name);
        }
        if (const Tensor* k = find(blk + "attn_k.weight")) rows(*k, kv0 * hk, nkv * hk, k->name);
        if (const Tensor* v = find(blk + "attn_v.weight")) rows(*v, kv0 * hv, nkv * hv, v->name);
        if (const Tensor* qkv = find(blk + "attn_qkv.weight")) {
            // Fused: this rank's rows of each part, bound as separate projections.
            const int64_t nk_full = nkv_full * hk;
            rows(*qkv, h0 * hk, nh * hk, blk + "attn_q.weight");
            rows(*qkv, nq_full + kv0 * hk, nkv * hk, blk + "attn_k.weight");
            rows(*qkv, nq_full + nk_full + kv0 * hv, nkv * hv, blk + "attn_v.weight");
        }
        if (const Tensor* b = find(blk + "attn_q.bias")) elems(*b, h0 * hk, nh * hk);
        if (const Tensor* b = find(blk + "attn_k.bias")) elems(*b, kv0 * hk, nkv * hk);
        if (const Tensor* b = find(blk + "attn_v.bias")) elems(*b, kv0 * hv, nkv * hv);
        if (const Tensor* o = find(blk + "attn_output.weight")) cols(*o, h0 * hv, nh * hv, "attn_output");

        const int64_t F = fp.n_ff[il], Fl = rp.n_ff[il];
        const Tensor* gate = find(blk + "ffn_gate.weight");
        if (gate) rows(*gate, r * Fl, Fl, gate->name);
        if (const Tensor* up = find(blk + "ffn_up.weight")) {
            if (!gate && up->ne[1] == 2 * F) {
                // Gate and up stacked: this rank's rows of each, bound as separate matrices.
                rows(*up, r * Fl, Fl, blk + "ffn_gate.weight");
                rows(*up, F + r * Fl, Fl, blk + "ffn_up.weight");
            } else {
                rows(*up, r * Fl, Fl, up->name);
            }
        }
        if (const Tensor* d = find(blk + "ffn_down.weight")) cols(*d, r * Fl, Fl, "ffn_down");
        const int64_t Fe = fp.n_ff_expert > 0 ? fp.n_ff_expert : F, Fel = Fe / W;
        for (const char* n : {"ffn_gate_exps.weight", "ffn_up_exps.weight"})
            if (const Tensor* t = find(blk + n)) rows(*t, r * Fel, Fel, t->name);
        if (const Tensor* t = find(blk + "ffn_down_exps.weight")) cols(*t, r * Fel, Fel, "ffn_down_exps");
        if (find(blk + "ffn_gate_up_exps.weight"))
            fail("tensor parallelism: '", blk, "ffn_gate_up_exps.weight' (fused expert gate and up) has no split yet");
    }
};

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

}  // namespace

std::unique_ptr<WeightSet> shard_weights(const WeightSet& full, const ModelProfile& fp, const ModelProfile& rp) {
    Slicer sl{full, fp, rp, {}};
    if (rp.tp.world == 1) {
        for (const Tensor& t : full.all()) sl.keep(t, t.name);
        return std::make_unique<WeightSet>(full.path(), std::move(sl.out));
    }
    // The tensors each layer splits, by name; everything else is replicated (norms, the
    // router, scale vectors, the embeddings). Only families built from the shared blocks
    // get here (Model::shard), and those read no other matrix of a block.
    static const char* kSplit[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_qkv.weight",
                                   "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.weight",
                                   "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "ffn_gate_exps.weight",
                                   "ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_up_exps.weight"};
    for (int il = 0; il < fp.n_layer; ++il) sl.layer(il);
    for (const Tensor& t : full.all()) {
        bool split = false;
        if (starts_with(t.name, "blk."))
            for (const char* s : kSplit) {
                const std::string n = t.name;
                const size_t dot = n.find('.', 4);
                if (dot != std::string::npos && n.compare(dot + 1, std::string::npos, s) == 0) split = true;
            }
        if (t.name == "output.weight" && rp.tp.lm_head_split) split = true;
        if (!split) sl.keep(t, t.name);
    }
    if (rp.tp.lm_head_split) {
        // This rank's rows of the LM head (of the embeddings when they are tied).
        const Tensor* head = sl.find(fp.tied_output ? "token_embd.weight" : "output.weight");
        if (!head) fail(full.path(), ": no LM head to split");
        const int64_t V = fp.n_vocab / rp.tp.world;
        sl.rows(*head, int64_t(rp.tp.rank) * V, V, "output.weight");
    }
    return std::make_unique<WeightSet>(full.path(), std::move(sl.out));
}

}  // namespace glia
