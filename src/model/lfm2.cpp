// lfm2: a hybrid of short-convolution recurrent blocks and attention blocks (which ones
// is declared by zero KV heads in the per-layer head_count_kv array). The conv block:
// in_proj -> B, C, X; y = C * causal_conv(B * X); out_proj.
#include "model/blocks.h"

namespace glia {
namespace {

class Lfm2 : public Architecture {
public:
    Lfm2(WeightSet& w, const ModelProfile& p) : p_(p) {
        const int64_t E = p.n_embd, V = p.n_vocab;
        tok_embd_ = w.get("token_embd.weight", {E, V});
        output_norm_ = w.get("token_embd_norm.weight", {E});  // lfm2's final norm
        output_ = p.tied_output ? tok_embd_ : w.get("output.weight", {E, V});
        for (int il = 0; il < p.n_layer; ++il) layers_.push_back(bind_layer(w, p, il));
    }

    Tensor* forward(Graph& g, const ForwardInputs& in) const override {
        const int64_t E = p_.n_embd, T = in.tokens->ne[0];
        Tensor* x = g.name(g.get_rows(tok_embd_, in.tokens), "embd");
        for (int il = 0; il < p_.n_layer; ++il) {
            const LayerWeights& L = layers_[il];
            Tensor* h = g.name(g.rms_norm(x, L.attn_norm, p_.norm_eps), "attn_norm", il);
            Tensor* a;
            if (L.conv_in) {
                Tensor* bcx = g.name(g.matmul(L.conv_in, h), "shortconv_in", il);  // [3E, T]: B, C, X
                auto part = [&](int k) { return g.view(bcx, E, T, 1, bcx->nb[1], bcx->nb[1] * T, k * E * sizeof(float)); };
                Tensor* bx = g.name(g.mul(part(0), part(2)), "bx", il);
                Tensor* conv = g.name(g.shortconv(bx, L.conv_kernel, in.state, in.seq, il), "conv", il);
                Tensor* y = g.name(g.mul(part(1), conv), "y", il);
                a = g.name(g.matmul(L.conv_out, y), "shortconv_out", il);
            } else {
                a = attention_block(g, p_, L, h, in, il);
            }
            x = g.name(g.add(keep_output_rows(g, p_, a, in, il), keep_output_rows(g, p_, x, in, il)), "ffn_inp", il);
            h = g.name(g.rms_norm(x, L.ffn_norm, p_.norm_eps), "ffn_norm", il);
            x = g.name(g.add(ffn_block(g, p_, L, h, in, il), x), "l_out", il);
        }
        return output_head(g, p_, x, output_norm_, output_, in);
    }

private:
    const ModelProfile& p_;
    Tensor *tok_embd_, *output_norm_, *output_;
    std::vector<LayerWeights> layers_;
};

}  // namespace

std::unique_ptr<Architecture> make_lfm2(WeightSet& w, const ModelProfile& p) {
    return std::make_unique<Lfm2>(w, p);
}

}  // namespace glia
