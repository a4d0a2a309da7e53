#include "runtime/kv_cache.h"

#include "core/error.h"

namespace glia {

KVCache::KVCache(const std::vector<int>& kv_dims_k, const std::vector<int>& kv_dims_v, int n_cells, int block_size,
                 int n_seq)
    : block_size_(block_size), dims_k_(kv_dims_k), dims_v_(kv_dims_v) {
    if (n_cells <= 0) fail("context size must be positive, got ", n_cells);
    if (block_size <= 0) fail("KV block size must be positive, got ", block_size);
    if (n_seq <= 0) fail("number of sequences must be positive, got ", n_seq);
    n_blocks_ = (n_cells + block_size - 1) / block_size;
    const size_t rows = static_cast<size_t>(n_blocks_) * block_size;
    if (dims_k_.size() != dims_v_.size()) fail("KV cache: K and V layer counts differ");
    size_t total = 0;
    for (size_t il = 0; il < dims_k_.size(); ++il) total += rows * (size_t(dims_k_[il]) + size_t(dims_v_[il]));
    mem_ = HugeBuffer(total * sizeof(uint16_t));
    uint16_t* p = reinterpret_cast<uint16_t*>(mem_.data());
    k_.resize(dims_k_.size());
    v_.resize(dims_v_.size());
    for (size_t il = 0; il < dims_k_.size(); ++il) {
        k_[il] = p;
        p += rows * dims_k_[il];
        v_[il] = p;
        p += rows * dims_v_[il];
    }
    tables_.resize(n_seq);
    for (int b = n_blocks_ - 1; b >= 0; --b) free_.push_back(b);
}

bool KVCache::can_reserve(int seq, int n_tokens) const {
    const int need = (n_tokens + block_size_ - 1) / block_size_ - static_cast<int>(tables_.at(seq).size());
    return need <= static_cast<int>(free_.size());
}

bool KVCache::reserve(int seq, int n_tokens) {
    if (!can_reserve(seq, n_tokens)) return false;
    auto& t = tables_[seq];
    while (static_cast<int>(t.size()) * block_size_ < n_tokens) {
        t.push_back(free_.back());
        free_.pop_back();
    }
    return true;
}

void KVCache::release(int seq) {
    for (int b : tables_.at(seq)) free_.push_back(b);
    tables_[seq].clear();
}

size_t KVCache::bytes() const {
    return mem_.size();
}

}  // namespace glia
