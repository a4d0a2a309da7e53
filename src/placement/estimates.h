// The byte counts a plan is made from: weights per layer (experts apart), the tables
// outside the blocks, KV bytes per token and recurrent state bytes per sequence of each
// layer, and the scratch (activation) estimates. Everything comes from the profile and
// the tensor list; nothing is allocated.
#pragma once
#include <cstdint>
#include <vector>

#include "placement/cache_types.h"
#include "placement/placement.h"

namespace glia::gguf { class File; }

namespace glia {

struct ModelProfile;

struct ModelBytes {
    int n_layer = 0;
    std::vector<uint64_t> layer_weights;   // blk.N.* without expert tensors
    std::vector<uint64_t> layer_experts;   // blk.N.ffn_*_exps.* (moved by --cpu-moe)
    uint64_t embeddings = 0;               // token_embd.weight
    uint64_t output = 0;                   // final norm, LM head and other tensors outside the blocks
    bool tied_output = false;              // the LM head reads token_embd.weight
    // Host copies the CPU derives from product weights placed on it (HostCopyBytesFn): per
    // layer (experts apart), of the tensors outside the blocks, and of token_embd.weight
    // when it is the LM head (tied; a row lookup keeps none).
    std::vector<uint64_t> layer_repacked;
    std::vector<uint64_t> layer_experts_repacked;
    uint64_t output_repacked = 0;
    uint64_t embeddings_repacked = 0;
    // K and V rows of one token in the cache's types (f16: n_head_kv * (head_dim_k + head_dim_v) * 2)
    std::vector<uint64_t> kv_per_token;
    std::vector<uint64_t> state_per_seq;   // recurrent layers: F32 state of one sequence
    // Scratch per token of a step: a layer's live activations (F32, with the 8-bit copies
    // matrix products make of their inputs), the input row, and one row of logits.
    uint64_t layer_act_per_token = 0;
    uint64_t expert_act_per_token = 0;     // the part of layer_act_per_token the experts use
    uint64_t embd_per_token = 0;
    uint64_t logits_per_row = 0;

    uint64_t total_weights() const;
    bool has_experts() const;
};

// Throws Error when a tensor names a block the profile does not have, or when the model's
// heads do not fit the cache types (check_cache_types).
ModelBytes measure_model(const ModelProfile& p, const gguf::File& f, const CacheTypes& cache = {},
                         HostCopyBytesFn host_copies = nullptr);

}  // namespace glia
