#include "quant/mix.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <numeric>

#include "core/error.h"
#include "gguf/gguf.h"

namespace glia::quant {
namespace {

struct MixEntry {
    FileType ft;
    const char* name;
    DType base;
    const char* desc;
};

constexpr MixEntry kMixes[] = {
    {FileType::ALL_F32, "F32", DType::F32, "all F32"},
    {FileType::MOSTLY_F16, "F16", DType::F16, "F16"},
    {FileType::MOSTLY_BF16, "BF16", DType::BF16, "BF16"},
    {FileType::Q4_0, "Q4_0", DType::Q4_0, "Q4_0"},
    {FileType::Q4_1, "Q4_1", DType::Q4_1, "Q4_1"},
    {FileType::Q5_0, "Q5_0", DType::Q5_0, "Q5_0"},
    {FileType::Q5_1, "Q5_1", DType::Q5_1, "Q5_1"},
    {FileType::Q8_0, "Q8_0", DType::Q8_0, "Q8_0"},
    {FileType::Q2_K, "Q2_K", DType::Q2_K, "Q2_K - Medium"},
    {FileType::Q3_K_S, "Q3_K_S", DType::Q3_K, "Q3_K - Small"},
    {FileType::Q3_K_M, "Q3_K_M", DType::Q3_K, "Q3_K - Medium"},
    {FileType::Q3_K_L, "Q3_K_L", DType::Q3_K, "Q3_K - Large"},
    {FileType::Q4_K_S, "Q4_K_S", DType::Q4_K, "Q4_K - Small"},
    {FileType::Q4_K_M, "Q4_K_M", DType::Q4_K, "Q4_K - Medium"},
    {FileType::Q5_K_S, "Q5_K_S", DType::Q5_K, "Q5_K - Small"},
    {FileType::Q5_K_M, "Q5_K_M", DType::Q5_K, "Q5_K - Medium"},
    {FileType::Q6_K, "Q6_K", DType::Q6_K, "Q6_K"},
    {FileType::IQ4_NL, "IQ4_NL", DType::IQ4_NL, "IQ4_NL - 4.5 bpw"},
    {FileType::IQ4_XS, "IQ4_XS", DType::IQ4_XS, "IQ4_XS - 4.25 bpw"},
};

const MixEntry* find_mix(uint32_t ft) {
    for (const auto& m : kMixes)
        if (static_cast<uint32_t>(m.ft) == ft) return &m;
    return nullptr;
}

std::string upper(std::string_view s) {
    std::string u(s);
    for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return u;
}

bool contains(const std::string& s, const char* sub) { return s.find(sub) != std::string::npos; }

// The reference's broad tensor categories, tested in its order.
enum class Cat { TOKEN_EMBD, ATTN_Q, ATTN_V, ATTN_K, ATTN_QKV, ATTN_KV_B, ATTN_OUTPUT, FFN_UP, FFN_GATE, FFN_DOWN, OUTPUT, OTHER };

Cat category(const std::string& n) {
    if (n == "output.weight") return Cat::OUTPUT;
    if (n == "token_embd.weight" || n == "per_layer_token_embd.weight") return Cat::TOKEN_EMBD;
    if (contains(n, "attn_qkv.weight")) return Cat::ATTN_QKV;
    if (contains(n, "attn_kv_b.weight")) return Cat::ATTN_KV_B;
    if (contains(n, "attn_v.weight")) return Cat::ATTN_V;
    if (contains(n, "attn_k.weight")) return Cat::ATTN_K;
    if (contains(n, "attn_q.weight")) return Cat::ATTN_Q;
    if (contains(n, "attn_output.weight")) return Cat::ATTN_OUTPUT;
    if (contains(n, "ffn_up")) return Cat::FFN_UP;
    if (contains(n, "ffn_gate")) return Cat::FFN_GATE;
    if (contains(n, "ffn_down")) return Cat::FFN_DOWN;
    return Cat::OTHER;
}

bool is_attn_v_like(Cat c) { return c == Cat::ATTN_V || c == Cat::ATTN_QKV || c == Cat::ATTN_KV_B; }

// Layers that get more bits in the *_M mixes: the first and last eighth, and every third
// layer in between.
bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// "blk.N." -> N; -1 when the name is not a block tensor.
int block_index(const std::string& name) {
    int layer = -1;
    if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
    return layer;
}

bool is_quantized(DType t) {
    return t != DType::F32 && t != DType::F16 && t != DType::BF16;
}

}  // namespace

bool file_type_from_name(std::string_view name, FileType& out) {
    std::string u = upper(name);
    if (u == "Q3_K") u = "Q3_K_M";
    if (u == "Q4_K") u = "Q4_K_M";
    if (u == "Q5_K") u = "Q5_K_M";
    for (const auto& m : kMixes)
        if (u == m.name) { out = m.ft; return true; }
    return false;
}

std::string file_type_name(uint32_t ft) {
    const MixEntry* m = find_mix(ft);
    return m ? m->name : cat("unknown(", ft, ")");
}

std::string file_type_description(uint32_t ft) {
    const MixEntry* m = find_mix(ft);
    return m ? m->desc : cat("unknown file type ", ft);
}

std::string file_type_names() {
    std::string s;
    for (const auto& m : kMixes) s += (s.empty() ? "" : ", ") + std::string(m.name);
    return s + " (Q3_K, Q4_K, Q5_K mean the _M mixes)";
}

DType base_type(FileType ft) {
    const MixEntry* m = find_mix(static_cast<uint32_t>(ft));
    if (!m) fail("unknown file type ", static_cast<uint32_t>(ft));
    return m->base;
}

ModelFacts model_facts(std::string arch, int n_layer, int n_head, int n_head_kv, int n_expert,
                       const std::vector<std::string>& tensor_names) {
    ModelFacts f;
    f.arch = std::move(arch);
    f.n_layer = n_layer;
    f.n_head = n_head;
    f.n_head_kv = n_head_kv;
    f.n_expert = n_expert;
    for (const auto& n : tensor_names) {
        const Cat c = category(n);
        if (is_attn_v_like(c)) ++f.n_attention_wv;
        if (c == Cat::OUTPUT) f.has_output = true;
    }
    return f;
}

ModelFacts model_facts(const gguf::File& file) {
    const std::string arch = file.get_or<std::string>("general.architecture", "");
    int n_layer = 0, n_head = 0, n_head_kv = 0, n_expert = 0;
    if (!arch.empty()) {
        n_layer = file.get_or<int>(arch + ".block_count", 0);
        if (n_layer > 0) {
            if (auto h = file.per_layer_opt<int>(arch + ".attention.head_count", n_layer)) n_head = h->values[0];
            if (auto h = file.per_layer_opt<int>(arch + ".attention.head_count_kv", n_layer)) n_head_kv = h->values[0];
            else n_head_kv = n_head;  // the reference's default: no GQA
        }
        n_expert = file.get_or<int>(arch + ".expert_count", 0);
    }
    std::vector<std::string> names;
    for (const auto& t : file.tensors()) names.push_back(t.name);
    return model_facts(arch, n_layer, n_head, n_head_kv, n_expert, names);
}

std::vector<size_t> reference_order(const std::vector<std::string>& names) {
    std::vector<size_t> idx(names.size());
    std::iota(idx.begin(), idx.end(), size_t(0));
    std::vector<int> layer(names.size());
    for (size_t i = 0; i < names.size(); ++i) layer[i] = block_index(names[i]);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
        if (layer[a] != layer[b]) return layer[a] < layer[b];
        return names[a] < names[b];
    });
    return idx;
}

bool allows_quantization(const std::string& name, int n_dims) {
    if (n_dims < 2) return false;
    if (name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) return false;
    static const char* const kNever[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
        "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight",
        "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
        "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
        "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
        ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
        ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    for (const char* s : kNever)
        if (contains(name, s)) return false;
    // Positional embeddings and token types (BERT-style models).
    if (name == "position_embd.weight" || name == "token_types.weight") return false;
    return true;
}

MixPlanner::MixPlanner(FileType ft, ModelFacts facts, bool pure) : ft_(ft), m_(std::move(facts)), pure_(pure) {
    base_type(ft);  // validates
}

DType MixPlanner::choose(const std::string& name, DType cur, int n_dims, int64_t ne0) {
    if (!allows_quantization(name, n_dims)) return cur;
    DType t = base_type(ft_);
    if (!is_quantized(t)) return t;
    if (!pure_) t = mix_rule(name, t, ne0);
    return fallback(t, ne0);
}

DType MixPlanner::fallback(DType t, int64_t ne0) {
    const int64_t bs = dtype_info(t).block_size;
    if (ne0 % bs == 0) return t;
    ++n_fallback_;
    DType r;
    switch (t) {
        case DType::IQ4_XS: r = DType::IQ4_NL; break;
        case DType::Q2_K:
        case DType::Q3_K: r = DType::Q4_0; break;
        case DType::Q4_K: r = DType::Q5_0; break;
        case DType::Q5_K: r = DType::Q5_1; break;
        case DType::Q6_K: r = DType::Q8_0; break;
        default: r = DType::F16; break;  // a 32-wide type: nothing smaller fits
    }
    if (ne0 % dtype_info(r).block_size != 0) r = DType::F16;
    return r;
}

DType MixPlanner::mix_rule(const std::string& name, DType t, int64_t ne0) {
    using F = FileType;
    const F ft = ft_;
    const bool falcon = m_.arch == "falcon";
    const Cat c = category(name);
    // The layer of an FFN tensor: its position among its kind for dense models, the
    // "blk.N." of its name when there are experts (their tensors are not consecutive).
    auto layer_of = [&](int counter) {
        if (m_.n_expert > 1) {
            const int l = block_index(name);
            if (l < 0) fail("cannot tell the layer of tensor '", name, "' (expected a name 'blk.N....')");
            if (l >= m_.n_layer) fail("tensor '", name, "' names layer ", l, " but the model has ", m_.n_layer);
            return l;
        }
        return counter;
    };

    // The output projection (or the token embeddings when they double as it): Q6_K, or
    // Q8_0 when the row does not fit the base type's blocks (or the mix is Q8_0 already).
    if (c == Cat::OUTPUT || (!m_.has_output && c == Cat::TOKEN_EMBD)) {
        if (falcon || ne0 % dtype_info(t).block_size != 0) return DType::Q8_0;
        return t == DType::Q8_0 ? t : DType::Q6_K;
    }
    if (c == Cat::TOKEN_EMBD) return t;
    if (is_attn_v_like(c)) {
        const int i = i_attention_wv_, n = m_.n_attention_wv;
        if (ft == F::Q2_K) t = m_.n_gqa() >= 4 ? DType::Q4_K : DType::Q3_K;
        else if (ft == F::Q3_K_M) t = i < 2 ? DType::Q5_K : DType::Q4_K;
        else if (ft == F::Q3_K_L) t = DType::Q5_K;
        else if ((ft == F::IQ4_NL || ft == F::IQ4_XS) && m_.n_gqa() >= 4) t = DType::Q5_K;
        else if ((ft == F::Q4_K_M || ft == F::Q5_K_M) && use_more_bits(i, n)) t = DType::Q6_K;
        else if (ft == F::Q4_K_S && i < 4) t = DType::Q5_K;
        if (m_.is_70b() && (t == DType::Q3_K || t == DType::Q4_K)) t = DType::Q5_K;
        if (m_.n_expert == 8) t = DType::Q8_0;
        ++i_attention_wv_;
        return t;
    }
    if (c == Cat::ATTN_K) {
        if (m_.n_expert == 8) t = DType::Q8_0;
        return t;
    }
    if (c == Cat::FFN_DOWN) {
        const int i = layer_of(i_ffn_down_), n = m_.n_layer;
        if (ft == F::Q2_K) t = DType::Q3_K;
        else if (ft == F::Q3_K_M)
            t = i < n / 16 ? DType::Q5_K : (!falcon || use_more_bits(i, n)) ? DType::Q4_K : DType::Q3_K;
        else if (ft == F::Q3_K_L) t = falcon ? DType::Q4_K : DType::Q5_K;
        else if (ft == F::Q4_K_M) {
            if (falcon) t = i < n / 16 ? DType::Q6_K : use_more_bits(i, n) ? DType::Q5_K : DType::Q4_K;
            else if (use_more_bits(i, n)) t = DType::Q6_K;
        } else if (i < n / 8 && (ft == F::IQ4_NL || ft == F::IQ4_XS)) t = DType::Q5_K;
        else if (ft == F::Q5_K_M && use_more_bits(i, n)) t = DType::Q6_K;
        else if (ft == F::Q4_K_S && !falcon && i < n / 8) t = DType::Q5_K;
        ++i_ffn_down_;
        return t;
    }
    if (c == Cat::ATTN_OUTPUT) {
        if (!falcon) {
            if (m_.n_expert == 8) {
                if (ft == F::Q2_K || ft == F::Q3_K_S || ft == F::Q3_K_M || ft == F::IQ4_NL ||
                    ft == F::Q4_K_S || ft == F::Q4_K_M || ft == F::IQ4_XS)
                    t = DType::Q5_K;
            } else {
                if (ft == F::Q2_K) t = DType::Q3_K;
                else if (ft == F::Q3_K_M) t = DType::Q4_K;
                else if (ft == F::Q3_K_L) t = DType::Q5_K;
            }
        } else if (ft == F::Q3_K_L) {
            t = DType::Q4_K;
        }
        return t;
    }
    if (c == Cat::FFN_GATE) { layer_of(i_ffn_gate_); ++i_ffn_gate_; return t; }
    if (c == Cat::FFN_UP) { layer_of(i_ffn_up_); ++i_ffn_up_; return t; }
    return t;
}

}  // namespace glia::quant
