// The llama family: pre-norm RMSNorm, RoPE, grouped-query attention, SwiGLU FFN.
#include <cmath>

#include "model/model.h"

namespace glia {
namespace {

class Llama : public Architecture {
public:
    Llama(WeightSet& w, const ModelProfile& p) : p_(p) {
        const int64_t E = p.n_embd, V = p.n_vocab;
        tok_embd_ = w.get("token_embd.weight", {E, V});
        output_norm_ = w.get("output_norm.weight", {E});
        output_ = p.tied_output ? tok_embd_ : w.get("output.weight", {E, V});
        for (int il = 0; il < p.n_layer; ++il) {
            const int64_t q = int64_t(p.n_head) * p.head_dim_k, k = int64_t(p.n_head_kv[il]) * p.head_dim_k,
                          v = int64_t(p.n_head_kv[il]) * p.head_dim_v, ff = p.n_ff[il];
            LayerWeights L;
            L.attn_norm = w.layer(il, "attn_norm.weight", {E});
            L.wq = w.layer(il, "attn_q.weight", {E, q});
            L.wk = w.layer(il, "attn_k.weight", {E, k});
            L.wv = w.layer(il, "attn_v.weight", {E, v});
            L.wo = w.layer(il, "attn_output.weight", {int64_t(p.n_head) * p.head_dim_v, E});
            L.ffn_norm = w.layer(il, "ffn_norm.weight", {E});
            L.ffn_gate = w.layer(il, "ffn_gate.weight", {E, ff});
            L.ffn_up = w.layer(il, "ffn_up.weight", {E, ff});
            L.ffn_down = w.layer(il, "ffn_down.weight", {ff, E});
            layers_.push_back(L);
        }
    }

    Tensor* forward(Graph& g, const ForwardInputs& in) const override {
        const ModelProfile& p = p_;
        const int64_t T = in.tokens->ne[0];
        AttnParams ap;
        ap.scale = 1.0f / std::sqrt(float(p.head_dim_k));

        Tensor* x = g.name(g.get_rows(tok_embd_, in.tokens), "embd");
        for (int il = 0; il < p.n_layer; ++il) {
            const LayerWeights& L = layers_[il];
            Tensor* h = g.name(g.rms_norm(x, L.attn_norm, p.norm_eps), "attn_norm", il);
            Tensor* q = g.reshape(g.name(g.matmul(L.wq, h), "Qcur", il), p.head_dim_k, p.n_head, T);
            Tensor* k = g.reshape(g.name(g.matmul(L.wk, h), "Kcur", il), p.head_dim_k, p.n_head_kv[il], T);
            Tensor* v = g.reshape(g.name(g.matmul(L.wv, h), "Vcur", il), p.head_dim_v, p.n_head_kv[il], T);
            q = g.name(g.rope(q, in.pos, p.rope), "Qcur", il);
            k = g.name(g.rope(k, in.pos, p.rope), "Kcur", il);
            ap.layer = il;
            Tensor* a = g.name(g.attention(q, k, v, in.cache, in.pos, ap), "kqv_out", il);
            x = g.name(g.add(g.name(g.matmul(L.wo, a), "attn_out", il), x), "ffn_inp", il);

            h = g.name(g.rms_norm(x, L.ffn_norm, p.norm_eps), "ffn_norm", il);
            Tensor* gate = g.name(g.matmul(L.ffn_gate, h), "ffn_gate", il);
            Tensor* up = g.name(g.matmul(L.ffn_up, h), "ffn_up", il);
            Tensor* ff = g.name(g.matmul(L.ffn_down, g.name(g.swiglu(gate, up), "ffn_swiglu", il)), "ffn_out", il);
            x = g.name(g.add(ff, x), "l_out", il);
        }
        if (!in.all_logits && T > 1) x = g.view(x, x->ne[0], 1, 1, x->nb[1], x->nb[1], (T - 1) * x->nb[1]);
        x = g.name(g.rms_norm(x, output_norm_, p.norm_eps), "result_norm");
        return g.name(g.matmul(output_, x), "result_output");
    }

private:
    const ModelProfile& p_;
    Tensor *tok_embd_, *output_norm_, *output_;
    std::vector<LayerWeights> layers_;
};

}  // namespace

std::unique_ptr<Architecture> make_llama(WeightSet& w, const ModelProfile& p) {
    return std::make_unique<Llama>(w, p);
}

}  // namespace glia
