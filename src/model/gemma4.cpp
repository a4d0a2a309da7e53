// gemma4: gemma-style blocks (embeddings x sqrt(n_embd), QK-norm, post-norms, GELU-gated
// FFN, final soft-capping) with sliding-window and full-attention blocks of different
// head sizes and RoPE, V RMS-normalised (and taken from K where a block has no attn_v),
// RoPE frequency factors on the full-attention blocks, and a per-block constant scaling
// the residual stream. The file says which block is which (sliding_window_pattern).
#include "model/blocks.h"

namespace glia {
namespace {

class Gemma4 : public Architecture {
public:
    Gemma4(WeightSet& w, const ModelProfile& p)
        : p_(p), w_(bind_decoder(w, p)) {}

    Tensor* forward(Graph& g, const ForwardInputs& in) const override {
        Tensor* x = g.name(g.scale(g.get_rows(w_.tok_embd, in.tokens), p_.embed_scale), "inp_scaled");
        for (int il = 0; il < p_.n_layer; ++il) {
            g.set_layer(il);
            const LayerWeights& L = w_.layers[il];
            Tensor* h = g.name(g.rms_norm(x, L.attn_norm, p_.norm_eps), "attn_norm", il);
            Tensor* a = attention_block(g, p_, L, h, in, il);
            if (L.post_attn_norm) a = g.name(g.rms_norm(a, L.post_attn_norm, p_.norm_eps), "attn_post_norm", il);
            x = g.name(g.add(a, x), "attn_out", il);
            h = g.name(g.rms_norm(x, L.ffn_norm, p_.norm_eps), "ffn_norm", il);
            Tensor* f = ffn_block(g, p_, L, h, in, il);
            if (L.post_ffn_norm) f = g.name(g.rms_norm(f, L.post_ffn_norm, p_.norm_eps), "ffn_post_norm", il);
            x = g.name(g.add(f, x), "l_out", il);
            if (L.out_scale != 0.0f) x = g.name(g.scale(x, L.out_scale), "l_out", il);
        }
        // As the reference, every token runs through the last block; the rows wanted are
        // picked before the head.
        x = keep_output_rows(g, p_, x, in, p_.n_layer - 1);
        return output_head(g, p_, x, w_.output_norm, w_.output, in);
    }

private:
    const ModelProfile& p_;
    DecoderWeights w_;
};

}  // namespace

std::unique_ptr<Architecture> make_gemma4(WeightSet& w, const ModelProfile& p) {
    return std::make_unique<Gemma4>(w, p);
}

}  // namespace glia
