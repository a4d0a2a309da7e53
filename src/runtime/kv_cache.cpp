#include "runtime/kv_cache.h"

#include "core/error.h"

namespace glia {

KVCache::KVCache(const std::vector<int>& kv_dims_k, const std::vector<int>& kv_dims_v, int n_ctx)
    : n_ctx_(n_ctx), dims_k_(kv_dims_k), dims_v_(kv_dims_v) {
    if (n_ctx <= 0) fail("context size must be positive, got ", n_ctx);
    k_.resize(dims_k_.size());
    v_.resize(dims_v_.size());
    for (size_t il = 0; il < dims_k_.size(); ++il) {
        k_[il].resize(static_cast<size_t>(n_ctx) * dims_k_[il]);
        v_[il].resize(static_cast<size_t>(n_ctx) * dims_v_[il]);
    }
}

size_t KVCache::bytes() const {
    size_t n = 0;
    for (size_t il = 0; il < k_.size(); ++il) n += (k_[il].size() + v_[il].size()) * sizeof(uint16_t);
    return n;
}

}  // namespace glia
