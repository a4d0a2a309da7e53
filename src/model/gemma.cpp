// The gemma family (gemma, gemma2, gemma3): embeddings scaled by sqrt(n_embd), GELU-gated
// FFN, and (when the file has them) post-attention / post-FFN norms, soft-capping and
// sliding-window layers, all described by the profile.
#include "model/blocks.h"

namespace glia {
namespace {

class Gemma : public Architecture {
public:
    Gemma(WeightSet& w, const ModelProfile& p)
        : p_(p), w_(bind_decoder(w, p)) {}

    Tensor* forward(Graph& g, const ForwardInputs& in) const override {
        Tensor* x = g.name(g.scale(g.get_rows(w_.tok_embd, in.tokens), p_.embed_scale), "inp_scaled");
        for (int il = 0; il < p_.n_layer; ++il) {
            g.set_layer(il);
            const LayerWeights& L = w_.layers[il];
            Tensor* h = g.name(g.rms_norm(x, L.attn_norm, p_.norm_eps), "attn_norm", il);
            Tensor* a = keep_output_rows(g, p_, attention_block(g, p_, L, h, in, il), in, il);
            if (L.post_attn_norm) a = g.name(g.rms_norm(a, L.post_attn_norm, p_.norm_eps), "attn_post_norm", il);
            x = g.name(g.add(a, keep_output_rows(g, p_, x, in, il)), "sa_out", il);
            h = g.name(g.rms_norm(x, L.ffn_norm, p_.norm_eps), "ffn_norm", il);
            Tensor* f = ffn_block(g, p_, L, h, in, il);
            if (L.post_ffn_norm) f = g.name(g.rms_norm(f, L.post_ffn_norm, p_.norm_eps), "ffn_post_norm", il);
            x = g.name(g.add(f, x), "l_out", il);
        }
        return output_head(g, p_, x, w_.output_norm, w_.output, in);
    }

private:
    const ModelProfile& p_;
    DecoderWeights w_;
};

}  // namespace

std::unique_ptr<Architecture> make_gemma(WeightSet& w, const ModelProfile& p) {
    return std::make_unique<Gemma>(w, p);
}

}  // namespace glia
