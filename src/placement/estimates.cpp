#include "placement/estimates.h"

#include <algorithm>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/profile.h"
#include "placement/placement.h"

namespace glia {

uint64_t ModelBytes::total_weights() const {
    uint64_t n = embeddings + output;
    for (int il = 0; il < n_layer; ++il) n += layer_weights[il] + layer_experts[il];
    return n;
}

bool ModelBytes::has_experts() const {
    return std::any_of(layer_experts.begin(), layer_experts.end(), [](uint64_t b) { return b > 0; });
}

ModelBytes measure_model(const ModelProfile& p, const gguf::File& f, const CacheTypes& cache,
                         HostCopyBytesFn host_copies) {
    check_cache_types(p, cache);
    ModelBytes m;
    m.n_layer = p.n_layer;
    m.layer_weights.assign(p.n_layer, 0);
    m.layer_experts.assign(p.n_layer, 0);
    m.layer_repacked.assign(p.n_layer, 0);
    m.layer_experts_repacked.assign(p.n_layer, 0);
    m.kv_per_token.assign(p.n_layer, 0);
    m.state_per_seq.assign(p.n_layer, 0);
    // A product weight is a stack of [K, N] matrices along its third and fourth dimensions.
    auto copies = [&](const gguf::TensorInfo& t, bool expert) -> uint64_t {
        if (!host_copies || t.n_dims < 2) return 0;
        return host_copies(t.type, t.ne[0], t.ne[1], expert) * uint64_t(t.ne[2] * t.ne[3]);
    };
    for (const gguf::TensorInfo& t : f.tensors()) {
        const TensorSite s = tensor_site(t.name);
        switch (s.role) {
            case SiteRole::EMBEDDINGS:
                m.embeddings += t.nbytes;
                if (p.tied_output) m.embeddings_repacked += copies(t, false);
                break;
            case SiteRole::OUTPUT:
                m.output += t.nbytes;
                if (t.name.find("token_embd") == std::string::npos) m.output_repacked += copies(t, false);  // lookups keep none
                break;
            case SiteRole::LAYER:
            case SiteRole::EXPERT:
                if (s.layer >= p.n_layer)
                    fail(f.path(), ": tensor '", t.name, "' names block ", s.layer, " but the model has ", p.n_layer,
                         " blocks");
                (s.role == SiteRole::EXPERT ? m.layer_experts : m.layer_weights)[s.layer] += t.nbytes;
                if (s.role == SiteRole::EXPERT) m.layer_experts_repacked[s.layer] += copies(t, true);
                else if (t.name.find("token_embd") == std::string::npos) m.layer_repacked[s.layer] += copies(t, false);
                break;
        }
    }
    m.tied_output = p.tied_output;

    // State per layer, as the runtime allocates it (runtime/kv_cache.h, recurrent_state.h).
    for (int il = 0; il < p.n_layer; ++il) {
        const int kv_heads = il < static_cast<int>(p.n_head_kv.size()) ? p.n_head_kv[il] : 0;
        const bool recurrent = p.layer_kind[il] == LayerKind::RECURRENT;
        if (!recurrent && kv_heads > 0)
            m.kv_per_token[il] = cache_row_bytes(cache.k, int64_t(kv_heads) * p.head_dim_k) +
                                 cache_row_bytes(cache.v, int64_t(kv_heads) * p.head_dim_v);
        if (recurrent && p.shortconv_l_cache > 1)
            m.state_per_seq[il] = uint64_t(p.shortconv_l_cache - 1) * p.n_embd * sizeof(float);
    }

    // One layer's activations per token, F32: the residual and its norm, q, k, v and the
    // attention output, the projection back, and the FFN's gate, up, product and down
    // rows (for MoE: those of every expert used, plus the router's scores), then the 8-bit
    // copy of the widest matmul inputs. An upper bound: the arena reuses dead tensors.
    const uint64_t E = uint64_t(p.n_embd);
    const uint64_t q = uint64_t(p.n_head) * std::max(p.head_dim_k, p.head_dim_v);
    const uint64_t kv = uint64_t(p.n_head_kv_max()) * (p.head_dim_k + p.head_dim_v);
    uint64_t ff = 0;
    for (int x : p.n_ff) ff = std::max<uint64_t>(ff, uint64_t(std::max(x, 0)));
    const uint64_t ff_exp = uint64_t(std::max(p.n_expert_used, 0)) * uint64_t(std::max(p.n_ff_expert, 0));
    const uint64_t attn = 4 * E + 2 * q + kv;
    const uint64_t dense = 3 * ff + E;
    const uint64_t experts = ff_exp > 0 ? 3 * ff_exp + E + uint64_t(p.n_expert) : 0;
    m.layer_act_per_token = (attn + std::max(dense, experts)) * sizeof(float) + std::max({E, ff, ff_exp});
    m.expert_act_per_token = experts * sizeof(float) + ff_exp;
    m.embd_per_token = E * sizeof(float);
    m.logits_per_row = uint64_t(std::max(p.n_vocab, 0)) * sizeof(float);
    return m;
}

}  // namespace glia
