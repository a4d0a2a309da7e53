#include "model/blocks.h"

#include <cmath>

#include "core/error.h"
#include "parallel/communicator.h"

namespace glia {

// The weights of a gated delta net block (their shapes follow the ssm.* keys).
static void bind_delta_net(WeightSet& w, const ModelProfile& p, int il, LayerWeights& L) {
    const int64_t E = p.n_embd, nv = p.ssm_dt_rank, inner = p.ssm_d_inner;
    const int64_t conv_ch = 2 * int64_t(p.ssm_n_group) * p.ssm_d_state + inner;
    if (p.ssm_d_state <= 0) fail("blk.", il, ": gated delta net weights but no ", p.arch, ".ssm.state_size key");
    L.wqkv = w.layer(il, "attn_qkv.weight", {E, conv_ch});
    L.ssm_gate = w.layer(il, "attn_gate.weight", {E, inner});
    L.conv_kernel = w.layer(il, "ssm_conv1d.weight", {p.ssm_conv_kernel, conv_ch});
    L.ssm_dt_bias = w.layer(il, "ssm_dt.bias", {nv});
    L.ssm_a = w.layer(il, "ssm_a", {nv});
    L.ssm_beta = w.layer(il, "ssm_beta.weight", {E, nv});
    L.ssm_alpha = w.layer(il, "ssm_alpha.weight", {E, nv});
    L.ssm_norm = w.layer(il, "ssm_norm.weight", {inner / nv});
    L.ssm_out = w.layer(il, "ssm_out.weight", {inner, E});
    for (Tensor* t : {L.conv_kernel, L.ssm_dt_bias, L.ssm_a, L.ssm_norm})
        if (t->type != DType::F32) fail("blk.", il, ": '", t->name, "' must be F32");
}

LayerWeights bind_layer(WeightSet& w, const ModelProfile& p, int il) {
    const int64_t E = p.n_embd, hk = p.head_dim_k_of(il), hv = p.head_dim_v_of(il);
    const int64_t nq = int64_t(p.n_head) * hk, nk = int64_t(p.n_head_kv[il]) * hk, nv = int64_t(p.n_head_kv[il]) * hv;
    const int64_t F = p.n_ff[il];
    LayerWeights L;
    L.attn_norm = w.layer(il, "attn_norm.weight", {E});
    if (p.layer_kind[il] == LayerKind::RECURRENT) {
        if (w.layer_opt(il, "shortconv.in_proj.weight")) {
            L.conv_in = w.layer(il, "shortconv.in_proj.weight", {E, 3 * E});
            L.conv_kernel = w.layer(il, "shortconv.conv.weight");
            L.conv_out = w.layer(il, "shortconv.out_proj.weight", {E, E});
            if (L.conv_kernel->ne[0] != p.shortconv_l_cache)
                fail("blk.", il, ".shortconv.conv.weight: kernel size ", L.conv_kernel->ne[0], " but l_cache is ",
                     p.shortconv_l_cache);
        } else if (w.layer_opt(il, "ssm_a")) {
            bind_delta_net(w, p, il, L);
        } else {
            fail("block ", il, " is a recurrent layer but has no recurrent weights glia knows");
        }
    } else {
        if (w.layer_opt(il, "attn_qkv.weight")) {
            L.wqkv = w.layer(il, "attn_qkv.weight", {E, nq + nk + nv});
        } else {
            // attn_q may stack an output gate after each head's query (twice the rows).
            Tensor* q = w.layer(il, "attn_q.weight");
            L.q_gated = q->ne[1] == 2 * nq;
            L.wq = w.layer(il, "attn_q.weight", {E, L.q_gated ? 2 * nq : nq});
            L.wk = w.layer(il, "attn_k.weight", {E, nk});
            if (!w.layer_opt(il, "attn_v.weight") && p.k_as_v && hk == hv) L.wv = nullptr;  // V = the K projection
            else L.wv = w.layer(il, "attn_v.weight", {E, nv});
        }
        // Frequency factors apply to the full-attention layers' RoPE.
        if (p.layer_kind[il] == LayerKind::ATTENTION && w.find("rope_freqs.weight")) {
            L.rope_freqs = w.get("rope_freqs.weight", {p.rope.n_dims / 2});
            if (L.rope_freqs->type != DType::F32) fail("rope_freqs.weight must be F32");
        }
        if (w.layer_opt(il, "attn_q.bias")) L.bq = w.layer(il, "attn_q.bias", {nq});
        if (w.layer_opt(il, "attn_k.bias")) L.bk = w.layer(il, "attn_k.bias", {nk});
        if (w.layer_opt(il, "attn_v.bias")) L.bv = w.layer(il, "attn_v.bias", {nv});
        if (w.layer_opt(il, "attn_q_norm.weight")) L.q_norm = w.layer(il, "attn_q_norm.weight", {hk});
        if (w.layer_opt(il, "attn_k_norm.weight")) L.k_norm = w.layer(il, "attn_k_norm.weight", {hk});
        L.wo = w.layer(il, "attn_output.weight", {int64_t(p.n_head) * hv, E});
    }
    if (w.layer_opt(il, "post_attention_norm.weight")) L.post_attn_norm = w.layer(il, "post_attention_norm.weight", {E});
    if (!w.layer_opt(il, "ffn_norm.weight") && L.post_attn_norm && !w.layer_opt(il, "post_ffw_norm.weight")) {
        // Files without ffn_norm whose post_attention_norm is the FFN's input norm (qwen35).
        L.ffn_norm = L.post_attn_norm;
        L.post_attn_norm = nullptr;
    } else {
        L.ffn_norm = w.layer(il, "ffn_norm.weight", {E});
    }
    if (w.layer_opt(il, "ffn_gate_inp.weight")) {
        const int64_t n_exp = p.n_expert, Fe = p.n_ff_expert > 0 ? p.n_ff_expert : F;
        if (n_exp <= 0) fail("blk.", il, ".ffn_gate_inp.weight present but expert_count is missing");
        L.ffn_router = w.layer(il, "ffn_gate_inp.weight", {E, n_exp});
        L.ffn_gate_exps = w.layer(il, "ffn_gate_exps.weight", {E, Fe, n_exp});
        L.ffn_up_exps = w.layer(il, "ffn_up_exps.weight", {E, Fe, n_exp});
        L.ffn_down_exps = w.layer(il, "ffn_down_exps.weight", {Fe, E, n_exp});
    } else if (w.layer_opt(il, "ffn_gate.weight")) {
        L.ffn_gate = w.layer(il, "ffn_gate.weight", {E, F});
        L.ffn_up = w.layer(il, "ffn_up.weight", {E, F});
        L.ffn_down = w.layer(il, "ffn_down.weight", {F, E});
    } else {
        L.ffn_up = w.layer(il, "ffn_up.weight", {E, 2 * F});  // gate and up stacked
        L.ffn_down = w.layer(il, "ffn_down.weight", {F, E});
    }
    if (w.layer_opt(il, "post_ffw_norm.weight")) L.post_ffn_norm = w.layer(il, "post_ffw_norm.weight", {E});
    if (w.layer_opt(il, "layer_output_scale.weight")) {
        // A constant of the file: read once here, applied as a scale.
        const Tensor* s = w.layer(il, "layer_output_scale.weight", {1});
        if (s->type != DType::F32 || s->n_elements() != 1)
            fail("blk.", il, ".layer_output_scale.weight must be one F32");
        L.out_scale = *s->ptr<float>();
    }
    return L;
}

DecoderWeights bind_decoder(WeightSet& w, const ModelProfile& p, const char* norm_name) {
    const int64_t E = p.n_embd, V = p.n_vocab;
    DecoderWeights d;
    d.tok_embd = w.get("token_embd.weight", {E, V});
    d.output_norm = w.get(norm_name, {E});
    d.output = p.tied_output ? d.tok_embd : w.get("output.weight", {E, p.n_vocab_local()});
    for (int il = 0; il < p.n_layer; ++il) d.layers.push_back(bind_layer(w, p, il));
    return d;
}

// Tensor parallelism: a projection along K on each rank gives a part of the sum; the ranks
// add their parts (every rank gets the same bits). Nothing on a model of one rank.
static Tensor* sum_ranks(Graph& g, const ModelProfile& p, const ForwardInputs& in, Tensor* part, const char* name,
                         int il) {
    if (p.tp.world <= 1) return part;
    if (!in.comm || in.comm->world() != p.tp.world)
        fail("rank ", p.tp.rank, " of ", p.tp.world, " runs without its group's communicator");
    g.name(part, std::string(name) + "_part", il);
    return g.name(g.all_reduce(part, in.comm), name, il);
}

// Rows [first, first + n_heads * head_dim) of a projection output [rows, T], as [head_dim, n_heads, T].
static Tensor* heads_view(Graph& g, Tensor* proj, int64_t first, int64_t head_dim, int64_t n_heads) {
    const size_t es = sizeof(float);
    Tensor* v = g.view(proj, head_dim, n_heads, proj->ne[1], head_dim * es, proj->nb[1], first * es);
    v->name = proj->name;
    return v;
}

Tensor* attention_block(Graph& g, const ModelProfile& p, const LayerWeights& L, Tensor* h, const ForwardInputs& in,
                        int il) {
    const int64_t T = h->ne[1], hk = p.head_dim_k_of(il), hv = p.head_dim_v_of(il), nh = p.n_head,
                  nkv = p.n_head_kv[il];
    Tensor *q, *k, *v, *gate = nullptr;
    if (L.wqkv) {
        Tensor* qkv = g.name(g.matmul(L.wqkv, h), "wqkv", il);
        q = heads_view(g, qkv, 0, hk, nh);
        k = heads_view(g, qkv, nh * hk, hk, nkv);
        v = heads_view(g, qkv, nh * hk + nkv * hk, hv, nkv);
    } else {
        q = g.name(g.matmul(L.wq, h), L.q_gated ? "Qcur_full" : "Qcur", il);
        k = g.name(g.matmul(L.wk, h), "Kcur", il);
        v = L.wv ? g.name(g.matmul(L.wv, h), "Vcur", il) : k;  // no attn_v: V is the K projection
        if (L.bq) q = g.name(g.add(q, L.bq), "Qcur", il);
        if (L.bk) k = g.name(g.add(k, L.bk), "Kcur", il);
        if (L.bv) v = g.name(g.add(v, L.bv), "Vcur", il);
        if (L.q_gated) {
            // Per head: hk query rows, then hk gate rows.
            gate = g.view(q, hk, nh, T, 2 * hk * sizeof(float), q->nb[1], hk * sizeof(float));
            q = g.view(q, hk, nh, T, 2 * hk * sizeof(float), q->nb[1], 0);
        } else {
            q = g.reshape(q, hk, nh, T);
        }
        k = g.reshape(k, hk, nkv, T);
        v = g.reshape(v, hv, nkv, T);
    }
    if (L.q_norm) q = g.name(g.rms_norm(q, L.q_norm, p.norm_eps), "Qcur_normed", il);
    if (L.k_norm) k = g.name(g.rms_norm(k, L.k_norm, p.norm_eps), "Kcur_normed", il);
    if (p.v_norm) v = g.name(g.rms_norm(v, nullptr, p.norm_eps), "Vcur_normed", il);

    const bool sliding = p.layer_kind[il] == LayerKind::SLIDING_ATTENTION;
    RopeParams rope = p.rope;
    if (sliding) {
        rope.freq_base = p.rope_base_swa;
        if (p.rope_n_dims_swa > 0) rope.n_dims = p.rope_n_dims_swa;
    }
    if (L.rope_freqs) {
        q = g.name(g.rope_freqs(q, in.pos, L.rope_freqs, rope), "Qcur_pos", il);
        k = g.name(g.rope_freqs(k, in.pos, L.rope_freqs, rope), "Kcur_pos", il);
    } else {
        q = g.name(g.rope(q, in.pos, rope), "Qcur", il);
        k = g.name(g.rope(k, in.pos, rope), "Kcur", il);
    }

    AttnParams ap;
    ap.block_size = in.block_size;
    ap.softcap = p.attn_softcap;
    ap.window = sliding ? p.sliding_window : 0;
    const float scale = p.attn_scale > 0 ? p.attn_scale : 1.0f / std::sqrt(float(hk));
    if (p.q_prescale) {
        q = g.name(g.scale(q, scale), "Qcur", il);
        ap.scale = 1.0f;
    } else {
        ap.scale = scale;
    }
    const LayerState& st = (*in.state)[il];
    Tensor* a = g.name(g.attention(q, k, v, {st.k, st.v, in.pos, in.seq, in.cells, in.pages}, ap), "kqv_out", il);
    if (gate) {
        // Gated attention: each head's output times sigmoid(its gate).
        Tensor* sg = g.reshape(g.name(g.unary(gate, UnaryKind::SIGMOID), "gate_sigmoid", il), hv * nh, T);
        a = g.name(g.mul(a, sg), "attn_gated", il);
    }
    return sum_ranks(g, p, in, g.name(g.matmul(L.wo, a), "attn_out", il), "attn_out", il);
}

Tensor* ffn_block(Graph& g, const ModelProfile& p, const LayerWeights& L, Tensor* h, const ForwardInputs& in,
                  int il) {
    if (L.ffn_router) {
        Tensor* logits = g.name(g.matmul(L.ffn_router, h), "ffn_moe_logits", il);
        Tensor* forced = il < static_cast<int>(in.forced_experts.size()) ? in.forced_experts[il] : nullptr;
        Tensor* ids = forced ? forced : g.name(g.moe_topk(logits, p.n_expert_used), "ffn_moe_topk", il);
        Tensor* w = g.name(g.moe_weights(logits, ids, p.moe_norm_weights),
                           p.moe_norm_weights ? "ffn_moe_weights_norm" : "ffn_moe_weights", il);
        Tensor* moe = g.name(g.moe_experts(h, L.ffn_gate_exps, L.ffn_up_exps, L.ffn_down_exps, ids, w), "ffn_moe_out", il);
        return sum_ranks(g, p, in, moe, "ffn_moe_out", il);
    }
    Tensor *gate, *up;
    if (L.ffn_gate) {
        gate = g.name(g.matmul(L.ffn_gate, h), "ffn_gate", il);
        up = g.name(g.matmul(L.ffn_up, h), "ffn_up", il);
    } else {
        Tensor* gu = g.name(g.matmul(L.ffn_up, h), "ffn_up", il);
        const int64_t F = L.ffn_down->ne[0];
        gate = g.view(gu, F, gu->ne[1], 1, gu->nb[1], gu->nb[1] * gu->ne[1], 0);
        up = g.view(gu, F, gu->ne[1], 1, gu->nb[1], gu->nb[1] * gu->ne[1], F * sizeof(float));
    }
    Tensor* act;
    if (p.ffn_act == Activation::GELU) act = g.name(g.geglu(gate, up), "ffn_geglu", il);
    else if (p.ffn_act == Activation::SITU)
        act = g.name(g.situ(gate, up, p.situ_beta, p.situ_linear_beta), "ffn_situ", il);
    else act = g.name(g.swiglu(gate, up), "ffn_swiglu", il);
    return sum_ranks(g, p, in, g.name(g.matmul(L.ffn_down, act), "ffn_out", il), "ffn_out", il);
}

Tensor* keep_output_rows(Graph& g, const ModelProfile& p, Tensor* t, const ForwardInputs& in, int il) {
    const int64_t T = t->ne[1];
    if (il != p.n_layer - 1) return t;
    if (in.out_ids) {
        Tensor* r = g.get_rows(t, in.out_ids);
        r->name = t->name;
        return g.mark_output_rows(r);
    }
    if (in.all_logits || T == 1) return t;
    Tensor* v = g.view(t, t->ne[0], 1, 1, t->nb[1], t->nb[1], (T - 1) * t->nb[1]);
    v->name = t->name;
    return g.mark_output_rows(v);
}

Tensor* output_head(Graph& g, const ModelProfile& p, Tensor* x, Tensor* norm, Tensor* output,
                    const ForwardInputs& in /* the rows were chosen by keep_output_rows */) {
    g.set_layer(-1);
    x = g.name(g.rms_norm(x, norm, p.norm_eps), "result_norm");
    Tensor* logits = g.name(g.matmul(output, x), "result_output");
    if (p.tp.lm_head_split) {
        // Each rank computed its rows of the vocabulary: stack them in rank order.
        if (!in.comm || in.comm->world() != p.tp.world)
            fail("rank ", p.tp.rank, " of ", p.tp.world, " runs without its group's communicator");
        g.name(logits, "result_output_part");
        logits = g.name(g.all_gather(logits, in.comm), "result_output");
    }
    if (p.final_softcap > 0) logits = g.name(g.softcap(logits, p.final_softcap), "result_output_capped");
    return logits;
}

}  // namespace glia
