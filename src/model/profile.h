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

// Tensor parallelism: the profile of rank `rank` of `world` (model/shard.h). Its head,
// KV-head and FFN counts are that rank's share; the graph sums partial results with
// ALL_REDUCE and, when the LM head is split by rows, gathers the logits.
struct TensorParallel {
    int rank = 0;
    int world = 1;
    bool lm_head_split = false;  // this rank's LM head holds n_vocab / world rows
};
enum class Activation { SILU, GELU, SITU };
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
    // Sliding-window layers may have their own head sizes and RoPE dims (*_swa keys).
    int head_dim_k_swa = 0;
    int head_dim_v_swa = 0;
    int rope_n_dims_swa = 0;
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
    float attn_scale = 0.0f;        // softmax scale of q.k (0: 1/sqrt(head_dim))
    bool v_norm = false;            // V RMS-normalised per head (no weight) before the cache
    bool k_as_v = false;            // a block without attn_v uses the raw K projection as V
    // Recurrent short-convolution layers (lfm2).
    int shortconv_l_cache = 0;
    // Any layer without KV heads (a recurrent layer) means the model cannot be split
    // across devices by layers.
    bool uniform_offload_required = false;

    // Gated delta net (linear attention) blocks.
    int ssm_conv_kernel = 0;        // causal conv taps
    int ssm_d_state = 0;            // key / query head size
    int ssm_n_group = 0;            // key / query heads
    int ssm_dt_rank = 0;            // value heads
    int ssm_d_inner = 0;            // value heads x value head size
    // Kimi delta attention (KDA) blocks: per-channel decay, separate q/k/v convs.
    int kda_head_dim = 0;
    bool kda_gate_bounded = false;  // decay = lower_bound * sigmoid(...) (else softplus(...) * ssm_a)
    float kda_gate_lower_bound = 0.0f;
    // Multi-head latent attention: the cache holds [kv_lora_rank latent, rope part] per
    // token; V is the latent (the first kv_lora_rank values of the K cache row).
    int mla_kv_lora_rank = 0;
    int mla_head_dim_k = 0;         // q.k head size (nope + rope part)
    int mla_head_dim_v = 0;         // per-head output of attn_v_b
    int mla_rope_dims = 0;          // rope part of q and of the cached key
    // MoE extras.
    int n_expert_shared = 0;
    int n_layer_dense_lead = 0;     // leading blocks with a dense FFN
    int n_expert_latent = 0;        // routed experts' width (0: n_embd)
    bool moe_sigmoid = false;       // sigmoid router (expert_gating_func 2), selection bias
    float moe_weights_scale = 1.0f;
    float situ_beta = 0.0f, situ_linear_beta = 0.0f;
    // Cross-layer residual mixing: every block_size-th block saves its input stream.
    int attn_res_block_size = 0;
    // Floats of recurrent state per sequence of a recurrent layer (conv taps and state
    // matrices together; 0: none).
    int64_t recurrent_state_floats = 0;

    TensorParallel tp;              // world 1: the whole model

    int n_head_kv_max() const;
    // Rows of this rank's LM head (n_vocab unless the head is split).
    int n_vocab_local() const { return tp.lm_head_split ? n_vocab / tp.world : n_vocab; }
    bool sliding(int il) const { return layer_kind[il] == LayerKind::SLIDING_ATTENTION; }
    int head_dim_k_of(int il) const { return sliding(il) && head_dim_k_swa > 0 ? head_dim_k_swa : head_dim_k; }
    int head_dim_v_of(int il) const { return sliding(il) && head_dim_v_swa > 0 ? head_dim_v_swa : head_dim_v; }
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
