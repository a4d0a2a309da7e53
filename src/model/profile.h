// ModelProfile: everything about a model that is derived from its GGUF metadata and
// tensor list. Graph builders read only this (never the architecture name for special
// cases the file could tell).
#pragma once
#include <string>
#include <vector>

#include "graph/graph.h"

namespace glia::gguf { class File; }

namespace glia {

enum class LayerKind { ATTENTION, SLIDING_ATTENTION, RECURRENT };
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
    std::vector<LayerKind> layer_kind;
    // Any layer without KV heads (a recurrent layer) means the model cannot be split
    // across devices by layers.
    bool uniform_offload_required = false;

    int n_head_kv_max() const;
};

// Derives the profile; throws glia::Error naming the key that is missing or invalid.
ModelProfile derive_profile(const gguf::File& f);

}  // namespace glia
