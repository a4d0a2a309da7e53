// lfm2: a hybrid of short-convolution recurrent blocks and attention blocks (which ones
// is declared by zero KV heads in the per-layer head_count_kv array). The conv block:
// in_proj -> B, C, X; y = C * causal_conv(B * X); out_proj.
#include "model/blocks.h"

namespace glia {
namespace {

class Lfm2 : public Architecture {
public:
    Lfm2(WeightSet& w, const ModelProfile& p)
        : p_(p), w_(bind_decoder(w, p, "token_embd_norm.weight")) {}

    Tensor* forward(Graph& g, const ForwardInputs& in) const override {
        const int64_t E = p_.n_embd, T = in.tokens->ne[0];
        Tensor* x = g.name(g.get_rows(w_.tok_embd, in.tokens), "embd");
        for (int il = 0; il < p_.n_layer; ++il) {
            g.set_layer(il);
            const LayerWeights& L = w_.layers[il];
            Tensor* h = g.name(g.rms_norm(x, L.attn_norm, p_.norm_eps), "attn_norm", il);
            Tensor* a;
            if (L.conv_in) {
                Tensor* bcx = g.name(g.matmul(L.conv_in, h), "shortconv_in", il);  // [3E, T]: B, C, X
                auto part = [&](int k) { return g.view(bcx, E, T, 1, bcx->nb[1], bcx->nb[1] * T, k * E * sizeof(float)); };
                Tensor* bx = g.name(g.mul(part(0), part(2)), "bx", il);
                Tensor* conv = g.name(g.shortconv(bx, L.conv_kernel, (*in.state)[il].conv, in.seq), "conv", il);
                Tensor* y = g.name(g.mul(part(1), conv), "y", il);
                a = g.name(g.matmul(L.conv_out, y), "shortconv_out", il);
            } else {
                a = attention_block(g, p_, L, h, in, il);
            }
            x = g.name(g.add(keep_output_rows(g, p_, a, in, il), keep_output_rows(g, p_, x, in, il)), "ffn_inp", il);
            h = g.name(g.rms_norm(x, L.ffn_norm, p_.norm_eps), "ffn_norm", il);
            x = g.name(g.add(ffn_block(g, p_, L, h, in, il), x), "l_out", il);
        }
        return output_head(g, p_, x, w_.output_norm, w_.output, in);
    }

private:
    const ModelProfile& p_;
    DecoderWeights w_;
};

}  // namespace

std::unique_ptr<Architecture> make_lfm2(WeightSet& w, const ModelProfile& p) {
    return std::make_unique<Lfm2>(w, p);
}

}  // namespace glia
