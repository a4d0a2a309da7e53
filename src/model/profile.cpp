#include "model/profile.h"

#include <algorithm>
#include <sstream>
#include <cmath>

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

// Facts of a family that its files do not state (the reference hard-codes them per
// architecture): RoPE pairing, embedding scale, FFN activation, where the attention
// scale is applied, and the default sliding-window pattern.
struct FamilyFacts {
    const char* arch;
    RopeType rope;
    bool embed_scale_sqrt;  // embeddings x sqrt(n_embd)
    Activation act;
    bool q_prescale;
    int swa_pattern;        // every n-th layer is global, the others sliding (0: no default)
    float swa_rope_base;    // default RoPE base of sliding layers (0: the global base)
};

static const FamilyFacts kFamilies[] = {
    {"llama", RopeType::NORMAL, false, Activation::SILU, false, 0, 0},
    {"qwen2", RopeType::NEOX, false, Activation::SILU, false, 0, 0},
    {"qwen3", RopeType::NEOX, false, Activation::SILU, false, 0, 0},
    {"qwen3moe", RopeType::NEOX, false, Activation::SILU, false, 0, 0},
    {"gemma", RopeType::NEOX, true, Activation::GELU, true, 0, 0},
    {"gemma2", RopeType::NEOX, true, Activation::GELU, true, 2, 0},
    {"gemma3", RopeType::NEOX, true, Activation::GELU, true, 6, 10000.0f},
    {"phi3", RopeType::NEOX, false, Activation::SILU, true, 0, 0},
    {"lfm2", RopeType::NEOX, false, Activation::SILU, false, 0, 0},
};

static const FamilyFacts& family_facts(const std::string& arch) {
    static const FamilyFacts generic{"", RopeType::NEOX, false, Activation::SILU, false, 0, 0};
    for (const auto& f : kFamilies)
        if (arch == f.arch) return f;
    return generic;
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

    const FamilyFacts& fam = family_facts(p.arch);
    p.rope.type = fam.rope;
    p.embed_scale = fam.embed_scale_sqrt ? std::sqrt(float(p.n_embd)) : 1.0f;
    p.ffn_act = fam.act;
    p.q_prescale = fam.q_prescale;
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
    p.n_ff_expert = f.get_or<int>(a + "expert_feed_forward_length", 0);
    p.moe_norm_weights = f.get_or<bool>(a + "expert_weights_norm", true);
    if (p.n_expert > 0 && (p.n_expert_used <= 0 || p.n_expert_used > p.n_expert))
        fail(f.path(), ": ", a, "expert_used_count = ", p.n_expert_used, " is invalid for ", p.n_expert, " experts");

    p.attn_softcap = f.get_or<float>(a + "attn_logit_softcapping", 0.0f);
    p.final_softcap = f.get_or<float>(a + "final_logit_softcapping", 0.0f);
    p.sliding_window = f.get_or<int>(a + "attention.sliding_window", 0);
    p.rope_base_swa = f.get_or<float>(a + "rope.freq_base_swa", fam.swa_rope_base > 0 ? fam.swa_rope_base : p.rope.freq_base);
    p.shortconv_l_cache = f.get_or<int>(a + "shortconv.l_cache", 0);

    p.layer_kind.assign(p.n_layer, LayerKind::ATTENTION);
    if (p.sliding_window > 0) {
        // Every pattern-th layer is global, the others use the window.
        const int pattern = f.get_or<int>(a + "attention.sliding_window_pattern", fam.swa_pattern);
        for (int il = 0; il < p.n_layer; ++il)
            if (pattern > 0 && (il + 1) % pattern != 0) p.layer_kind[il] = LayerKind::SLIDING_ATTENTION;
    }
    for (int il = 0; il < p.n_layer; ++il)
        if (p.n_head_kv[il] == 0) {
            p.layer_kind[il] = LayerKind::RECURRENT;
            p.uniform_offload_required = true;
        }
    return p;
}

}  // namespace glia

namespace glia {

std::vector<std::pair<std::string, std::string>> describe_profile(const ModelProfile& p, const gguf::File& f) {
    std::vector<std::pair<std::string, std::string>> out;
    auto yes = [](bool b) { return std::string(b ? "yes" : "no"); };
    int attn_layer = 0;
    while (attn_layer < p.n_layer && p.layer_kind[attn_layer] == LayerKind::RECURRENT) ++attn_layer;
    auto has = [&](const std::string& name) {
        return f.find_tensor("blk." + std::to_string(attn_layer) + "." + name) != nullptr;
    };
    std::string kinds;
    for (int il = 0; il < p.n_layer; ++il) {
        const char* k = p.layer_kind[il] == LayerKind::ATTENTION ? "A"
                        : p.layer_kind[il] == LayerKind::SLIDING_ATTENTION ? "S" : "R";
        kinds += k;
    }
    out.emplace_back("layer kinds", kinds + "  (A attention, S sliding-window attention, R recurrent)");
    std::string kv;
    for (int il = 0; il < p.n_layer; ++il) kv += (il ? "," : "") + std::to_string(p.n_head_kv[il]);
    out.emplace_back("kv heads", (p.n_head_kv_is_array ? "per-layer array [" + kv + "]" : "scalar " + std::to_string(p.n_head_kv.empty() ? 0 : p.n_head_kv[0])));
    out.emplace_back("uniform_offload_required", p.uniform_offload_required ? "true (recurrent layers: no split by layers across devices)" : "false");
    out.emplace_back("head dims (k/v)", std::to_string(p.head_dim_k) + "/" + std::to_string(p.head_dim_v));
    std::ostringstream rope;
    rope << (p.rope.type == RopeType::NEOX ? "neox" : "normal") << ", " << p.rope.n_dims << " dims, base " << p.rope.freq_base;
    if (p.sliding_window > 0) rope << " (sliding layers: " << p.rope_base_swa << ")";
    if (p.rope.freq_scale != 1.0f) rope << ", linear scale " << p.rope.freq_scale;
    out.emplace_back("rope", rope.str());
    out.emplace_back("qk-norm", yes(has("attn_q_norm.weight")));
    out.emplace_back("qkv biases", yes(has("attn_q.bias")));
    out.emplace_back("fused qkv", yes(has("attn_qkv.weight")));
    out.emplace_back("fused gate+up", yes(!has("ffn_gate.weight") && !has("ffn_gate_inp.weight") && has("ffn_up.weight")));
    out.emplace_back("post-norms", yes(has("post_attention_norm.weight") || has("post_ffw_norm.weight")));
    out.emplace_back("sliding window", p.sliding_window > 0 ? std::to_string(p.sliding_window) + " tokens" : "none");
    std::ostringstream caps;
    caps << "attention " << (p.attn_softcap > 0 ? std::to_string(p.attn_softcap) : "none") << ", final "
         << (p.final_softcap > 0 ? std::to_string(p.final_softcap) : "none");
    out.emplace_back("softcaps", caps.str());
    out.emplace_back("ffn activation", p.ffn_act == Activation::GELU ? "gelu (tanh) gated" : "silu gated");
    if (p.embed_scale != 1.0f) out.emplace_back("embedding scale", std::to_string(p.embed_scale));
    out.emplace_back("attention scale", p.q_prescale ? "q scaled after rope" : "in softmax");
    if (p.n_expert > 0) {
        std::ostringstream m;
        m << p.n_expert << " experts, " << p.n_expert_used << " used, expert ffn " << p.n_ff_expert
          << ", weights " << (p.moe_norm_weights ? "renormalised" : "as routed");
        out.emplace_back("moe", m.str());
    } else {
        out.emplace_back("moe", "no");
    }
    if (p.shortconv_l_cache > 0) out.emplace_back("short conv", "kernel " + std::to_string(p.shortconv_l_cache));
    out.emplace_back("tied output", yes(p.tied_output));
    return out;
}

}  // namespace glia
