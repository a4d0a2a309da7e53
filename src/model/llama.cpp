// The llama family and its close relatives (qwen2, qwen3, qwen3moe, phi3): pre-norm
// blocks of attention and a gated FFN, each added to the residual stream. What differs
// between them (biases, QK-norm, experts, fused projections) is read from the file.
#include "model/blocks.h"

namespace glia {
namespace {

class Llama : public Architecture {
public:
    Llama(WeightSet& w, const ModelProfile& p)
        : p_(p), w_(bind_decoder(w, p)) {}

    Tensor* forward(Graph& g, const ForwardInputs& in) const override {
        Tensor* x = g.name(g.get_rows(w_.tok_embd, in.tokens), "embd");
        for (int il = 0; il < p_.n_layer; ++il) {
            g.set_layer(il);
            const LayerWeights& L = w_.layers[il];
            Tensor* h = g.name(g.rms_norm(x, L.attn_norm, p_.norm_eps), "attn_norm", il);
            Tensor* a = keep_output_rows(g, p_, attention_block(g, p_, L, h, in, il), in, il);
            x = g.name(g.add(a, keep_output_rows(g, p_, x, in, il)), "ffn_inp", il);
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

std::unique_ptr<Architecture> make_llama(WeightSet& w, const ModelProfile& p) {
    return std::make_unique<Llama>(w, p);
}

}  // namespace glia
