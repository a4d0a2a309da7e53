#include "model/profile.h"

#include <algorithm>

#include "core/error.h"
#include "gguf/gguf.h"

namespace glia {

const char* layer_kind_name(LayerKind k) {
    switch (k) {
        case LayerKind::ATTENTION: return "attention";
        case LayerKind::SLIDING_ATTENTION: return "sliding-attention";
        case LayerKind::RECURRENT: return "recurrent";
    }
    return "?";
}

int ModelProfile::n_head_kv_max() const {
    return n_head_kv.empty() ? 0 : *std::max_element(n_head_kv.begin(), n_head_kv.end());
}

// RoPE pairing is a property of the family (as in the reference): adjacent pairs for
// llama-style checkpoints, split halves for the others.
static RopeType rope_type_for(const std::string& arch) {
    if (arch == "llama") return RopeType::NORMAL;
    return RopeType::NEOX;
}

ModelProfile derive_profile(const gguf::File& f) {
    ModelProfile p;
    p.arch = f.get<std::string>("general.architecture");
    p.name = f.get_or<std::string>("general.name", "");
    const std::string a = p.arch + ".";
    p.n_layer = f.get<int>(a + "block_count");
    if (p.n_layer <= 0 || p.n_layer > 100000) fail(f.path(), ": ", a, "block_count = ", p.n_layer, " is invalid");
    p.n_embd = f.get<int>(a + "embedding_length");
    p.n_head = f.get<int>(a + "attention.head_count");
    if (p.n_embd <= 0 || p.n_head <= 0) fail(f.path(), ": embedding_length and head_count must be positive");
    auto kv = f.per_layer_opt<int>(a + "attention.head_count_kv", p.n_layer);
    if (kv) {
        p.n_head_kv = kv->values;
        p.n_head_kv_is_array = kv->from_array;
    } else {
        p.n_head_kv.assign(p.n_layer, p.n_head);
    }
    for (int il = 0; il < p.n_layer; ++il) {
        const int h = p.n_head_kv[il];
        if (h < 0 || (h > 0 && p.n_head % h != 0))
            fail(f.path(), ": layer ", il, ": ", h, " KV heads do not divide ", p.n_head, " query heads");
    }
    if (auto ff = f.per_layer_opt<int>(a + "feed_forward_length", p.n_layer)) p.n_ff = ff->values;
    else p.n_ff.assign(p.n_layer, 0);
    p.head_dim_k = f.get_or<int>(a + "attention.key_length", p.n_embd / p.n_head);
    p.head_dim_v = f.get_or<int>(a + "attention.value_length", p.head_dim_k);
    p.n_ctx_train = f.get_or<int>(a + "context_length", 0);
    p.norm_eps = f.get_or<float>(a + "attention.layer_norm_rms_epsilon", 1e-5f);

    p.rope.type = rope_type_for(p.arch);
    p.rope.n_dims = f.get_or<int>(a + "rope.dimension_count", p.head_dim_k);
    p.rope.freq_base = f.get_or<float>(a + "rope.freq_base", 10000.0f);
    const float factor = f.get_or<float>(a + "rope.scaling.factor", f.get_or<float>(a + "rope.scale_linear", 1.0f));
    const std::string scaling = f.get_or<std::string>(a + "rope.scaling.type", "none");
    if (scaling == "linear" || (scaling == "none" && factor != 1.0f && f.has(a + "rope.scale_linear")))
        p.rope.freq_scale = 1.0f / factor;
    else if (scaling != "none")
        fail(f.path(), ": RoPE scaling type '", scaling, "' is not supported yet");

    if (const auto* emb = f.find_tensor("token_embd.weight")) p.n_vocab = static_cast<int>(emb->ne[1]);
    else if (const auto* toks = f.find("tokenizer.ggml.tokens")) p.n_vocab = static_cast<int>(toks->arr.size());
    p.tied_output = f.find_tensor("output.weight") == nullptr;

    p.n_expert = f.get_or<int>(a + "expert_count", 0);
    p.n_expert_used = f.get_or<int>(a + "expert_used_count", 0);

    p.layer_kind.assign(p.n_layer, LayerKind::ATTENTION);
    for (int il = 0; il < p.n_layer; ++il)
        if (p.n_head_kv[il] == 0) {
            p.layer_kind[il] = LayerKind::RECURRENT;
            p.uniform_offload_required = true;
        }
    return p;
}

}  // namespace glia
