// ModelProfile: everything about a model that is derived from its GGUF metadata and
// tensor list. Graph builders read only this (never the architecture name for special
// cases the file could tell).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace glia::gguf { class File; }

namespace glia {

enum class LayerKind { ATTENTION, SLIDING_ATTENTION, RECURRENT };
enum class Activation { SILU, GELU };
const char* layer_kind_name(LayerKind k);

struct ModelProfile {
    std::string arch;           // general.architecture
    std::string name;           // general.name
    int n_layer = 0;
    int n_embd = 0;
    int n_head = 0;
    std::vector<int> n_head_kv; // per layer (0: recurrent layer)
    bool n_head_kv_is_array = false;
    std::vector<int> n_ff;      // per layer
    int head_dim_k = 0;
    int head_dim_v = 0;
    int n_vocab = 0;
    int n_ctx_train = 0;
    float norm_eps = 1e-5f;
    RopeParams rope;
    bool tied_output = false;   // no output.weight: the LM head reuses token_embd
    int n_expert = 0;
    int n_expert_used = 0;
    bool moe_norm_weights = true;  // renormalise the selected experts' weights
    int n_ff_expert = 0;
    std::vector<LayerKind> layer_kind;

    // Attention variants.
    int sliding_window = 0;         // tokens a sliding-window layer sees (0: none)
    float rope_base_swa = 10000.0f; // RoPE base of sliding-window layers
    float attn_softcap = 0.0f;      // cap * tanh(score / cap) before softmax (0: off)
    float final_softcap = 0.0f;     // same on the output logits
    // Family facts the metadata does not carry (as the reference hard-codes them).
    float embed_scale = 1.0f;       // input embeddings multiplied by this
    Activation ffn_act = Activation::SILU;
    bool q_prescale = false;        // scale q by 1/sqrt(head_dim) after RoPE, softmax scale 1
    // Recurrent short-convolution layers (lfm2).
    int shortconv_l_cache = 0;
    // Any layer without KV heads (a recurrent layer) means the model cannot be split
    // across devices by layers.
    bool uniform_offload_required = false;

    int n_head_kv_max() const;
};

// Derives the profile; throws glia::Error naming the key that is missing or invalid.
ModelProfile derive_profile(const gguf::File& f);

}  // namespace glia

namespace glia {

// The derived features in display order (name, value), for `glia inspect`: what the
// graph builder will do for this file. Tensor-presence features (QK-norm, biases, fused
// projections, post-norms) are read from block 0's tensors of the first attention layer.
std::vector<std::pair<std::string, std::string>> describe_profile(const ModelProfile& p, const gguf::File& f);

}  // namespace glia
