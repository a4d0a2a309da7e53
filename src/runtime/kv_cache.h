// Key/value cache for one sequence: per attention layer, one F16 row of
// n_kv_head * head_dim values per position. Layers without attention (recurrent
// layers, declared by zero KV heads) hold nothing.
#pragma once
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace glia {

class KVCache {
public:
    // kv_dims_k[il] / kv_dims_v[il]: n_kv_head * head_dim of layer il (0 = no cache).
    KVCache(const std::vector<int>& kv_dims_k, const std::vector<int>& kv_dims_v, int n_ctx);

    int n_ctx() const { return n_ctx_; }
    int n_layer() const { return static_cast<int>(k_.size()); }
    int k_dim(int il) const { return dims_k_[il]; }
    int v_dim(int il) const { return dims_v_[il]; }
    uint16_t* k_row(int il, int pos) { return k_[il].data() + static_cast<size_t>(pos) * dims_k_[il]; }
    uint16_t* v_row(int il, int pos) { return v_[il].data() + static_cast<size_t>(pos) * dims_v_[il]; }
    const uint16_t* k_row(int il, int pos) const { return k_[il].data() + static_cast<size_t>(pos) * dims_k_[il]; }
    const uint16_t* v_row(int il, int pos) const { return v_[il].data() + static_cast<size_t>(pos) * dims_v_[il]; }
    size_t bytes() const;

private:
    int n_ctx_;
    std::vector<int> dims_k_, dims_v_;
    std::vector<std::vector<uint16_t>> k_, v_;
};

}  // namespace glia
