// kimi-k3: a hybrid of KDA (Kimi delta attention: a delta rule with one decay per key
// channel, separate causal convs on q, k and v) and multi-head latent attention in
// absorbed form (the cache holds the latent and the rope part, 320 values a token here),
// with a latent mixture of experts (sigmoid router with a selection bias, routed experts
// in a narrow space, a shared expert), the situ activation, and cross-layer residual
// mixing: every attn_res.block_size-th block saves its input stream, and each mixer and
// FFN input (and the final output) is a softmax-weighted mix of the saved streams and the
// current one. Which block is KDA and which MLA the file says (zero KV heads: KDA).
#include <cmath>

#include "core/error.h"
#include "model/blocks.h"

namespace glia {
namespace {

struct KimiLayer {
    Tensor *attn_norm = nullptr, *attn_res = nullptr, *ffn_norm = nullptr, *ffn_res = nullptr;
    Tensor *wq = nullptr, *wo = nullptr;
    // KDA
    Tensor *wk = nullptr, *wv = nullptr, *conv_q = nullptr, *conv_k = nullptr, *conv_v = nullptr;
    Tensor *f_a = nullptr, *f_b = nullptr, *beta = nullptr, *a = nullptr, *dt_bias = nullptr, *g = nullptr,
           *norm = nullptr;
    // MLA
    Tensor *kv_a = nullptr, *kv_a_norm = nullptr, *k_b = nullptr, *v_b = nullptr, *gate = nullptr;
    // FFN: dense, or the latent MoE with a shared expert
    Tensor *ffn_gate = nullptr, *ffn_up = nullptr, *ffn_down = nullptr;
    Tensor *router = nullptr, *router_bias = nullptr, *routed_down = nullptr, *routed_norm = nullptr,
           *routed_up = nullptr;
    Tensor *gate_exps = nullptr, *up_exps = nullptr, *down_exps = nullptr;
    Tensor *gate_sh = nullptr, *up_sh = nullptr, *down_sh = nullptr;
};

// A conv kernel of `taps` x `channels` values, F32, stored 2-, 3- or 4-D (single dims of 1).
Tensor* conv_kernel(WeightSet& w, int il, const char* name, int64_t taps, int64_t channels) {
    Tensor* t = w.layer(il, name);
    if (t->type != DType::F32 || t->ne[0] != taps || t->n_elements() != taps * channels)
        fail("blk.", il, ".", name, ": ", t->shape_str(), " ", dtype_name(t->type), " is not an F32 kernel of ", taps,
             " taps over ", channels, " channels");
    return t;
}

class KimiK3 : public Architecture {
public:
    KimiK3(WeightSet& w, const ModelProfile& p) : p_(p) {
        const int64_t E = p.n_embd, V = p.n_vocab, H = p.n_head;
        tok_embd_ = w.get("token_embd.weight", {E, V});
        output_norm_ = w.get("output_norm.weight", {E});
        output_ = p.tied_output ? tok_embd_ : w.get("output.weight", {E, V});
        if (p.attn_res_block_size > 0) output_res_ = w.get("output_res_score.weight", {E});
        for (int il = 0; il < p.n_layer; ++il) {
            KimiLayer L;
            L.attn_norm = w.layer(il, "attn_norm.weight", {E});
            L.ffn_norm = w.layer(il, "ffn_norm.weight", {E});
            if (p.attn_res_block_size > 0) {
                L.attn_res = w.layer(il, "attn_res_score.weight", {E});
                L.ffn_res = w.layer(il, "ffn_res_score.weight", {E});
            }
            if (p.layer_kind[il] == LayerKind::RECURRENT) {
                const int64_t D = p.kda_head_dim, C = H * D, K = p.ssm_conv_kernel;
                if (D <= 0) fail("blk.", il, " is a KDA block but ", p.arch, ".kda.head_dim is missing");
                L.wq = w.layer(il, "attn_q.weight", {E, C});
                L.wk = w.layer(il, "attn_k.weight", {E, C});
                L.wv = w.layer(il, "attn_v.weight", {E, C});
                L.conv_q = conv_kernel(w, il, "ssm_conv1d_q.weight", K, C);
                L.conv_k = conv_kernel(w, il, "ssm_conv1d_k.weight", K, C);
                L.conv_v = conv_kernel(w, il, "ssm_conv1d_v.weight", K, C);
                const int64_t rank = w.layer(il, "ssm_f_a.weight")->ne[1];
                L.f_a = w.layer(il, "ssm_f_a.weight", {E, rank});
                L.f_b = w.layer(il, "ssm_f_b.weight", {rank, C});
                L.beta = w.layer(il, "ssm_beta.weight", {E, H});
                L.a = w.layer(il, "ssm_a", {H});
                L.dt_bias = w.layer(il, "ssm_dt.bias", {C});
                L.g = w.layer(il, "ssm_g.weight", {E, C});
                L.norm = w.layer(il, "ssm_norm.weight", {D});
                L.wo = w.layer(il, "attn_output.weight", {C, E});
            } else {
                const int64_t dk = p.mla_head_dim_k, dr = p.mla_rope_dims, R = p.mla_kv_lora_rank;
                const int64_t dv = p.mla_head_dim_v;
                if (R <= 0) fail("blk.", il, ": attention blocks of ", p.arch, " need attention.kv_lora_rank");
                if (p.n_head_kv[il] != 1)
                    fail("blk.", il, ": latent attention caches one KV head, not ", p.n_head_kv[il]);
                L.wq = w.layer(il, "attn_q.weight", {E, H * dk});
                L.kv_a = w.layer(il, "attn_kv_a_mqa.weight", {E, R + dr});
                L.kv_a_norm = w.layer(il, "attn_kv_a_norm.weight", {R});
                L.k_b = w.layer(il, "attn_k_b.weight", {dk - dr, R, H});
                L.v_b = w.layer(il, "attn_v_b.weight", {R, dv, H});
                L.gate = w.layer(il, "attn_gate.weight", {E, H * dv});
                L.wo = w.layer(il, "attn_output.weight", {H * dv, E});
            }
            if (w.layer_opt(il, "ffn_gate_inp.weight")) {
                const int64_t n_exp = p.n_expert, F = p.n_ff_expert;
                const int64_t Lt = p.n_expert_latent > 0 ? p.n_expert_latent : E;  // routed experts' width
                if (n_exp <= 0 || F <= 0)
                    fail("blk.", il, ": experts but no expert_count / expert_feed_forward_length");
                L.router = w.layer(il, "ffn_gate_inp.weight", {E, n_exp});
                if (w.layer_opt(il, "exp_probs_b.bias")) L.router_bias = w.layer(il, "exp_probs_b.bias", {n_exp});
                if (Lt != E) {
                    L.routed_down = w.layer(il, "ffn_routed_down.weight", {E, Lt});
                    L.routed_norm = w.layer(il, "ffn_routed_norm.weight", {Lt});
                    L.routed_up = w.layer(il, "ffn_routed_up.weight", {Lt, E});
                }
                L.gate_exps = w.layer(il, "ffn_gate_exps.weight", {Lt, F, n_exp});
                L.up_exps = w.layer(il, "ffn_up_exps.weight", {Lt, F, n_exp});
                L.down_exps = w.layer(il, "ffn_down_exps.weight", {F, Lt, n_exp});
                if (p.n_expert_shared > 0) {
                    const int64_t Fs = int64_t(p.n_ff[il]) * p.n_expert_shared;
                    L.gate_sh = w.layer(il, "ffn_gate_shexp.weight", {E, Fs});
                    L.up_sh = w.layer(il, "ffn_up_shexp.weight", {E, Fs});
                    L.down_sh = w.layer(il, "ffn_down_shexp.weight", {Fs, E});
                }
            } else {
                const int64_t F = p.n_ff[il];
                L.ffn_gate = w.layer(il, "ffn_gate.weight", {E, F});
                L.ffn_up = w.layer(il, "ffn_up.weight", {E, F});
                L.ffn_down = w.layer(il, "ffn_down.weight", {F, E});
            }
            layers_.push_back(L);
        }
    }

    Tensor* forward(Graph& g, const ForwardInputs& in) const override {
        const int64_t E = p_.n_embd, T = in.tokens->ne[0];
        const int bs = p_.attn_res_block_size;
        Tensor* x = g.name(g.get_rows(tok_embd_, in.tokens), "inp_embd");
        Tensor* saved = nullptr;  // [E, n, T]: the saved streams
        for (int il = 0; il < p_.n_layer; ++il) {
            g.set_layer(il);
            const KimiLayer& L = layers_[il];
            const bool save = bs > 0 && il % bs == 0;
            Tensor* a = L.attn_res ? g.res_mix(saved, x, L.attn_res, p_.norm_eps) : x;
            if (save) {
                Tensor* col = g.reshape(x, E, 1, T);
                saved = saved ? g.concat(saved, col, 1) : col;
            }
            Tensor* h = g.name(g.rms_norm(a, L.attn_norm, p_.norm_eps), "attn_norm", il);
            Tensor* m = p_.layer_kind[il] == LayerKind::RECURRENT ? kda(g, L, h, in, il) : mla(g, L, h, in, il);
            // A saving block restarts the stream from its mixer's output.
            Tensor* s = g.name(save ? m : g.add(x, m), "prefix_sum_attn", il);
            Tensor* f = L.ffn_res ? g.res_mix(saved, s, L.ffn_res, p_.norm_eps) : s;
            h = g.name(g.rms_norm(f, L.ffn_norm, p_.norm_eps), "ffn_norm", il);
            x = g.name(g.add(s, ffn(g, L, h, in, il)), "l_out", il);
        }
        g.set_layer(-1);
        if (output_res_) x = g.res_mix(saved, x, output_res_, p_.norm_eps);
        x = keep_output_rows(g, p_, x, in, p_.n_layer - 1);
        return output_head(g, p_, x, output_norm_, output_, in);
    }

private:
    Tensor* kda(Graph& g, const KimiLayer& L, Tensor* h, const ForwardInputs& in, int il) const {
        const int64_t T = h->ne[1], H = p_.n_head, D = p_.kda_head_dim, C = H * D, K = p_.ssm_conv_kernel;
        // The state row of a slot: q, k and v conv taps, then the heads' matrices.
        Tensor* st = (*in.state)[il].conv;
        const int64_t taps = (K - 1) * C, n_slots = st->ne[1];
        auto state_part = [&](int64_t first, int64_t n) {
            return g.view(st, n, n_slots, 1, st->nb[1], st->nb[1] * n_slots, first * sizeof(float));
        };
        auto branch = [&](Tensor* w, Tensor* kernel, int j, const char* name) {
            Tensor* y = g.matmul(w, h);
            Tensor* c = g.shortconv(y, g.reshape(kernel, K, C), state_part(j * taps, taps), in.seq);
            return g.reshape(g.name(g.unary(c, UnaryKind::SILU), name, il), D, H, T);
        };
        const float inv_sqrt_d = 1.0f / std::sqrt(float(D));
        Tensor* q = branch(L.wq, L.conv_q, 0, "kda_q_conv");
        Tensor* k = branch(L.wk, L.conv_k, 1, "kda_k_conv");
        Tensor* v = branch(L.wv, L.conv_v, 2, "kda_v_conv");
        // L2 norm per head, x / sqrt(sum x^2 + eps), as an RMS norm with eps / D, / sqrt(D).
        const float l2_eps = p_.norm_eps / float(D);
        q = g.scale(g.rms_norm(q, nullptr, l2_eps), inv_sqrt_d);
        k = g.scale(g.rms_norm(k, nullptr, l2_eps), inv_sqrt_d);
        // Log-decay per head and key channel.
        Tensor* f = g.reshape(g.add(g.matmul(L.f_b, g.matmul(L.f_a, h)), L.dt_bias), D, H, T);
        Tensor* a = g.reshape(L.a, 1, H, 1);  // -exp(A_log) per head
        Tensor* decay;
        if (p_.kda_gate_bounded) {
            Tensor* z = g.scale(g.mul_bcast(f, a), -1.0f);  // exp(A_log) * f
            decay = g.scale(g.unary(z, UnaryKind::SIGMOID), p_.kda_gate_lower_bound);
        } else {
            decay = g.mul_bcast(g.unary(f, UnaryKind::SOFTPLUS), a);
        }
        g.name(decay, "kda_g1", il);
        Tensor* beta = g.name(g.unary(g.reshape(g.matmul(L.beta, h), 1, H, T), UnaryKind::SIGMOID), "kda_beta", il);
        Tensor* o = g.name(g.delta_net(q, k, v, decay, beta, state_part(3 * taps, H * D * D), in.seq, inv_sqrt_d),
                           "attn_output", il);
        o = g.name(g.rms_norm(o, L.norm, p_.norm_eps), "kda_normed", il);
        Tensor* gate = g.unary(g.name(g.reshape(g.matmul(L.g, h), D, H, T), "kda_g2", il), UnaryKind::SIGMOID);
        o = g.reshape(g.mul(o, gate), C, T);
        return g.name(g.matmul(L.wo, o), "kda_out", il);
    }

    // Absorbed MLA: q_nope is mapped into the latent space by attn_k_b, so q.k is a dot of
    // [q_latent, q_rope] with the cached [latent, k_rope]; the heads' outputs in the latent
    // space are mapped out by attn_v_b.
    Tensor* mla(Graph& g, const KimiLayer& L, Tensor* h, const ForwardInputs& in, int il) const {
        const int64_t T = h->ne[1], H = p_.n_head, dk = p_.mla_head_dim_k, dr = p_.mla_rope_dims, dn = dk - dr;
        const int64_t R = p_.mla_kv_lora_rank, dv = p_.mla_head_dim_v;
        const size_t fs = sizeof(float);
        Tensor* qf = g.matmul(L.wq, h);
        Tensor* q_nope = g.view(qf, dn, H, T, dk * fs, qf->nb[1], 0);
        Tensor* q_pe = g.view(qf, dr, H, T, dk * fs, qf->nb[1], dn * fs);
        Tensor* q = g.concat(g.matmul_heads(L.k_b, q_nope), q_pe, 0);  // [R + dr, H, T]
        Tensor* c = g.matmul(L.kv_a, h);                               // [R + dr, T]
        Tensor* kv = g.rms_norm(g.view(c, R, T, 1, c->nb[1], c->nb[1] * T, 0), L.kv_a_norm, p_.norm_eps);
        Tensor* k_pe = g.view(c, dr, 1, T, dr * fs, c->nb[1], R * fs);
        Tensor* k = g.concat(g.reshape(kv, R, 1, T), k_pe, 0);        // [R + dr, 1, T]
        Tensor* v = g.reshape(kv, R, 1, T);
        const LayerState& st = (*in.state)[il];
        Tensor* v_pages = g.view(st.k, R, st.k->ne[1], 1, st.k->nb[1], st.k->nb[1] * st.k->ne[1], 0);
        AttnParams ap;
        ap.block_size = in.block_size;
        ap.scale = 1.0f / std::sqrt(float(dk));
        Tensor* att = g.name(g.attention(q, k, v, {st.k, v_pages, in.pos, in.seq, in.cells, in.pages}, ap), "kqv", il);
        Tensor* o = g.name(g.reshape(g.matmul_heads(L.v_b, g.reshape(att, R, H, T)), dv * H, T), "kqv_out", il);
        o = g.name(g.mul(o, g.unary(g.matmul(L.gate, h), UnaryKind::SIGMOID)), "mla_gated", il);
        return g.name(g.matmul(L.wo, o), "mla_out", il);
    }

    Tensor* situ_ffn(Graph& g, Tensor* gate_w, Tensor* up_w, Tensor* down_w, Tensor* h) const {
        Tensor* gate = g.matmul(gate_w, h);
        Tensor* up = g.matmul(up_w, h);
        Tensor* act = p_.ffn_act == Activation::SITU ? g.situ(gate, up, p_.situ_beta, p_.situ_linear_beta)
                                                     : g.swiglu(gate, up);
        return g.matmul(down_w, act);
    }

    Tensor* ffn(Graph& g, const KimiLayer& L, Tensor* h, const ForwardInputs& in, int il) const {
        if (!L.router) return g.name(situ_ffn(g, L.ffn_gate, L.ffn_up, L.ffn_down, h), "ffn_out", il);
        Tensor* logits = g.name(g.matmul(L.router, h), "ffn_moe_logits", il);
        Tensor* probs = g.name(g.unary(logits, UnaryKind::SIGMOID), "ffn_moe_probs", il);
        Tensor* select = L.router_bias ? g.name(g.add(probs, L.router_bias), "ffn_moe_probs_biased", il) : probs;
        Tensor* forced = il < static_cast<int>(in.forced_experts.size()) ? in.forced_experts[il] : nullptr;
        // Top-k of the selection scores (MOE_TOPK's softmax keeps their order).
        Tensor* ids = forced ? forced : g.name(g.moe_topk(select, p_.n_expert_used), "ffn_moe_topk", il);
        Tensor* w = g.name(g.moe_gather_weights(probs, ids, p_.moe_norm_weights), "ffn_moe_weights_norm", il);
        if (p_.moe_weights_scale != 1.0f) w = g.name(g.scale(w, p_.moe_weights_scale), "ffn_moe_weights_scaled", il);
        Tensor* xr = L.routed_down ? g.matmul(L.routed_down, h) : h;
        GluParams act;
        act.kind = p_.ffn_act == Activation::SITU ? GluKind::SITU : GluKind::SWIGLU;
        act.beta = p_.situ_beta;
        act.linear_beta = p_.situ_linear_beta;
        Tensor* r = g.name(g.moe_experts_glu(xr, L.gate_exps, L.up_exps, L.down_exps, ids, w, act), "ffn_moe_out", il);
        if (L.routed_up) r = g.matmul(L.routed_up, g.rms_norm(r, L.routed_norm, p_.norm_eps));
        if (L.gate_sh) r = g.add(r, g.name(situ_ffn(g, L.gate_sh, L.up_sh, L.down_sh, h), "ffn_shexp", il));
        return g.name(r, "ffn_out", il);
    }

    const ModelProfile& p_;
    Tensor *tok_embd_ = nullptr, *output_norm_ = nullptr, *output_ = nullptr, *output_res_ = nullptr;
    std::vector<KimiLayer> layers_;
};

}  // namespace

std::unique_ptr<Architecture> make_kimi_k3(WeightSet& w, const ModelProfile& p) {
    return std::make_unique<KimiK3>(w, p);
}

}  // namespace glia
