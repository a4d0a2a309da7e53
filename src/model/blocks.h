// Building blocks shared by the family graph builders: weight binding by standard
// tensor names, and the attention / feed-forward blocks. Each block follows what the
// file contains (biases, QK-norm, fused projections, experts) and the profile.
#pragma once
#include "model/model.h"

namespace glia {

// Binds the tensors of block il that exist, checking every shape against the profile.
LayerWeights bind_layer(WeightSet& w, const ModelProfile& p, int il);

// The weights every decoder family has: embeddings, final norm (under `norm_name`),
// LM head (the embeddings when tied) and every block.
struct DecoderWeights {
    Tensor *tok_embd = nullptr, *output_norm = nullptr, *output = nullptr;
    std::vector<LayerWeights> layers;
};
DecoderWeights bind_decoder(WeightSet& w, const ModelProfile& p, const char* norm_name = "output_norm.weight");

// Self-attention of block il on the normalised input h [n_embd, T]; returns the output
// projection [n_embd, T].
Tensor* attention_block(Graph& g, const ModelProfile& p, const LayerWeights& L, Tensor* h, const ForwardInputs& in,
                        int il);

// Feed-forward of block il on h: gated dense FFN (SiLU or GELU per profile) or MoE.
Tensor* ffn_block(Graph& g, const ModelProfile& p, const LayerWeights& L, Tensor* h, const ForwardInputs& in,
                  int il);

// In the last block, when only the last token's logits are wanted, keep only its row
// from here on (as the reference does: the rest of the block runs on one token).
Tensor* keep_output_rows(Graph& g, const ModelProfile& p, Tensor* t, const ForwardInputs& in, int il);

// Final norm and LM head.
Tensor* output_head(Graph& g, const ModelProfile& p, Tensor* x, Tensor* norm, Tensor* output,
                    const ForwardInputs& in);

}  // namespace glia
