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
    float attn_scale = 0;   // softmax scale (0: 1/sqrt(head_dim))
    bool v_norm = false;    // V RMS-normalised without weight
    bool k_as_v = false;    // a missing attn_v means V is the K projection
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
    {"gemma4", RopeType::NEOX, true, Activation::GELU, false, 0, 10000.0f, 1.0f, true, true},
    // Multi-section RoPE whose sections all see the same position for text: NEOX pairs.
    {"qwen35", RopeType::NEOX, false, Activation::SILU, false, 0, 0},
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
    p.attn_scale = fam.attn_scale;
    p.v_norm = fam.v_norm;
    p.k_as_v = fam.k_as_v;
    p.head_dim_k_swa = f.get_or<int>(a + "attention.key_length_swa", 0);
    p.head_dim_v_swa = f.get_or<int>(a + "attention.value_length_swa", p.head_dim_k_swa);
    p.rope.n_dims = f.get_or<int>(a + "rope.dimension_count", p.head_dim_k);
    p.rope_n_dims_swa = f.get_or<int>(a + "rope.dimension_count_swa", p.head_dim_k_swa > 0 ? p.head_dim_k_swa : 0);
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
    const std::string pattern_key = a + "attention.sliding_window_pattern";
    const gguf::Value* pat = f.find(pattern_key);
    if (pat && pat->is_array()) {
        // One bool per layer: true marks a sliding-window layer.
        const auto sliding = f.per_layer<bool>(pattern_key, p.n_layer);
        if (p.sliding_window <= 0) fail(f.path(), ": ", pattern_key, " marks sliding layers but ", a,
                                        "attention.sliding_window is missing");
        for (int il = 0; il < p.n_layer; ++il)
            if (sliding.values[il]) p.layer_kind[il] = LayerKind::SLIDING_ATTENTION;
    } else if (p.sliding_window > 0) {
        // Every pattern-th layer is global, the others use the window.
        const int pattern = f.get_or<int>(pattern_key, fam.swa_pattern);
        for (int il = 0; il < p.n_layer; ++il)
            if (pattern > 0 && (il + 1) % pattern != 0) p.layer_kind[il] = LayerKind::SLIDING_ATTENTION;
    }
    for (int il = 0; il < p.n_layer; ++il)
        if (p.n_head_kv[il] == 0) p.layer_kind[il] = LayerKind::RECURRENT;
    // Recurrent layers named by a per-layer bool array (gated delta net hybrids).
    const std::string rec_key = a + "attention.recurrent_layers";
    if (f.has(rec_key)) {
        const auto rec = f.per_layer<bool>(rec_key, p.n_layer);
        for (int il = 0; il < p.n_layer; ++il)
            if (rec.values[il]) p.layer_kind[il] = LayerKind::RECURRENT;
    }

    p.ssm_conv_kernel = f.get_or<int>(a + "ssm.conv_kernel", 0);
    p.kda_head_dim = f.get_or<int>(a + "kda.head_dim", 0);
    p.kda_gate_bounded = f.has(a + "kda.gate_lower_bound");
    p.kda_gate_lower_bound = f.get_or<float>(a + "kda.gate_lower_bound", 0.0f);
    p.mla_kv_lora_rank = f.get_or<int>(a + "attention.kv_lora_rank", 0);
    p.mla_head_dim_k = f.get_or<int>(a + "attention.key_length_mla", 0);
    p.mla_head_dim_v = f.get_or<int>(a + "attention.value_length_mla", 0);
    p.mla_rope_dims = p.mla_kv_lora_rank > 0 ? p.rope.n_dims : 0;
    if (p.mla_kv_lora_rank > 0 &&
        (p.mla_head_dim_k <= p.mla_rope_dims || p.head_dim_k != p.mla_kv_lora_rank + p.mla_rope_dims ||
         p.head_dim_v != p.mla_kv_lora_rank || p.mla_head_dim_v <= 0))
        fail(f.path(), ": the latent attention keys (kv_lora_rank ", p.mla_kv_lora_rank, ", key_length ", p.head_dim_k,
             ", value_length ", p.head_dim_v, ", key_length_mla ", p.mla_head_dim_k, ", value_length_mla ",
             p.mla_head_dim_v, ", rope dims ", p.mla_rope_dims, ") do not fit together");
    p.n_expert_shared = f.get_or<int>(a + "expert_shared_count", 0);
    p.n_layer_dense_lead = f.get_or<int>(a + "leading_dense_block_count", 0);
    p.n_expert_latent = f.get_or<int>(a + "expert_latent_length", 0);
    p.moe_sigmoid = f.get_or<int>(a + "expert_gating_func", 1) == 2;
    p.moe_weights_scale = f.get_or<float>(a + "expert_weights_scale", 1.0f);
    p.situ_beta = f.get_or<float>(a + "activation.situ_beta", 0.0f);
    p.situ_linear_beta = f.get_or<float>(a + "activation.situ_linear_beta", 0.0f);
    if (p.situ_beta > 0) {
        if (!(p.situ_linear_beta > 0)) fail(f.path(), ": ", a, "activation.situ_linear_beta must be positive");
        p.ffn_act = Activation::SITU;
    }
    p.attn_res_block_size = f.get_or<int>(a + "attn_res.block_size", 0);
    p.ssm_d_state = f.get_or<int>(a + "ssm.state_size", 0);
    p.ssm_n_group = f.get_or<int>(a + "ssm.group_count", 0);
    p.ssm_dt_rank = f.get_or<int>(a + "ssm.time_step_rank", 0);
    p.ssm_d_inner = f.get_or<int>(a + "ssm.inner_size", 0);
    if (p.ssm_d_state > 0) {
        // Gated delta net: conv taps over q, k and v channels, one dk x dv matrix per value head.
        if (p.ssm_conv_kernel < 2 || p.ssm_n_group <= 0 || p.ssm_dt_rank <= 0 || p.ssm_d_inner <= 0 ||
            p.ssm_d_inner % p.ssm_dt_rank || p.ssm_dt_rank % p.ssm_n_group)
            fail(f.path(), ": the ", a, "ssm.* keys (conv_kernel ", p.ssm_conv_kernel, ", state_size ", p.ssm_d_state,
                 ", group_count ", p.ssm_n_group, ", time_step_rank ", p.ssm_dt_rank, ", inner_size ", p.ssm_d_inner,
                 ") do not describe a gated delta net");
        const int64_t dv = p.ssm_d_inner / p.ssm_dt_rank;
        const int64_t conv_ch = 2 * int64_t(p.ssm_n_group) * p.ssm_d_state + p.ssm_d_inner;
        p.recurrent_state_floats = (p.ssm_conv_kernel - 1) * conv_ch + int64_t(p.ssm_dt_rank) * p.ssm_d_state * dv;
    } else if (p.kda_head_dim > 0) {
        // KDA: conv taps of q, k and v (n_head x head_dim channels each), one matrix per head.
        if (p.ssm_conv_kernel < 2) fail(f.path(), ": KDA needs ", a, "ssm.conv_kernel of at least 2");
        const int64_t inner = int64_t(p.n_head) * p.kda_head_dim;
        p.recurrent_state_floats = 3 * (p.ssm_conv_kernel - 1) * inner + inner * p.kda_head_dim;
    } else if (p.shortconv_l_cache > 1) {
        p.recurrent_state_floats = int64_t(p.shortconv_l_cache - 1) * p.n_embd;
    }
    // Any recurrent layer: a sequence's state is spread over every layer, so the layers
    // cannot be split across devices.
    for (int il = 0; il < p.n_layer; ++il)
        if (p.layer_kind[il] == LayerKind::RECURRENT) p.uniform_offload_required = true;
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
    out.emplace_back("head dims (k/v)", std::to_string(p.head_dim_k) + "/" + std::to_string(p.head_dim_v) +
                                            (p.head_dim_k_swa > 0 ? " (sliding layers: " + std::to_string(p.head_dim_k_swa) +
                                                                        "/" + std::to_string(p.head_dim_v_swa) + ")"
                                                                  : ""));
    std::ostringstream rope;
    rope << (p.rope.type == RopeType::NEOX ? "neox" : "normal") << ", " << p.rope.n_dims << " dims, base " << p.rope.freq_base;
    if (p.sliding_window > 0)
        rope << " (sliding layers: " << (p.rope_n_dims_swa > 0 ? std::to_string(p.rope_n_dims_swa) + " dims, " : "")
             << "base " << p.rope_base_swa << ")";
    if (f.find_tensor("rope_freqs.weight")) rope << ", frequency factors (rope_freqs)";
    if (p.rope.freq_scale != 1.0f) rope << ", linear scale " << p.rope.freq_scale;
    // The latent attention of these files uses its rope part unrotated (kimi-k3: nope-only).
    out.emplace_back("rope", p.mla_kv_lora_rank > 0 ? "none applied (latent attention)" : rope.str());
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
    out.emplace_back("ffn activation", p.ffn_act == Activation::GELU   ? "gelu (tanh) gated"
                                       : p.ffn_act == Activation::SITU ? "situ (beta " + std::to_string(p.situ_beta) +
                                                                             ", linear beta " +
                                                                             std::to_string(p.situ_linear_beta) + ")"
                                                                       : "silu gated");
    if (p.embed_scale != 1.0f) out.emplace_back("embedding scale", std::to_string(p.embed_scale));
    out.emplace_back("attention scale", p.q_prescale ? "q scaled after rope"
                                        : p.attn_scale > 0 ? "in softmax, " + std::to_string(p.attn_scale)
                                                           : "in softmax");
    if (p.v_norm) out.emplace_back("v norm", "rms, no weight");
    if (p.n_expert > 0) {
        std::ostringstream m;
        m << p.n_expert << " experts, " << p.n_expert_used << " used, expert ffn " << p.n_ff_expert
          << ", weights " << (p.moe_norm_weights ? "renormalised" : "as routed");
        if (p.moe_sigmoid) m << ", sigmoid router";
        if (p.moe_weights_scale != 1.0f) m << ", x" << p.moe_weights_scale;
        if (p.n_expert_shared > 0) m << ", " << p.n_expert_shared << " shared";
        if (p.n_expert_latent > 0) m << ", latent " << p.n_expert_latent;
        if (p.n_layer_dense_lead > 0) m << ", first " << p.n_layer_dense_lead << " dense";
        out.emplace_back("moe", m.str());
    } else {
        out.emplace_back("moe", "no");
    }
    if (p.shortconv_l_cache > 0) out.emplace_back("short conv", "kernel " + std::to_string(p.shortconv_l_cache));
    if (p.ssm_d_state > 0) {
        std::ostringstream d;
        d << p.ssm_dt_rank << " value heads over " << p.ssm_n_group << " key heads of " << p.ssm_d_state
          << ", conv kernel " << p.ssm_conv_kernel;
        out.emplace_back("gated delta net", d.str());
    }
    if (p.kda_head_dim > 0)
        out.emplace_back("kda", std::to_string(p.n_head) + " heads of " + std::to_string(p.kda_head_dim) +
                                    ", per-channel decay" + (p.kda_gate_bounded ? ", bounded sigmoid gate" : ""));
    if (p.mla_kv_lora_rank > 0)
        out.emplace_back("latent attention", "cache " + std::to_string(p.head_dim_k) + " values a token (latent " +
                                                 std::to_string(p.mla_kv_lora_rank) + " + rope part " +
                                                 std::to_string(p.mla_rope_dims) + "), absorbed heads");
    if (p.attn_res_block_size > 0)
        out.emplace_back("residual mixing", "every " + std::to_string(p.attn_res_block_size) + " blocks");
    if (p.recurrent_state_floats > 0)
        out.emplace_back("recurrent state",
                         std::to_string(p.recurrent_state_floats * 4) + " bytes per sequence and layer");
    out.emplace_back("tied output", yes(p.tied_output));
    return out;
}

}  // namespace glia
