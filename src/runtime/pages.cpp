#include "runtime/pages.h"

#include "core/error.h"

namespace glia {

PageTable::PageTable(int n_cells, int block_size, int n_slots) : block_size_(block_size) {
    if (n_cells <= 0) fail("context size must be positive, got ", n_cells);
    if (block_size <= 0) fail("KV block size must be positive, got ", block_size);
    if (n_slots <= 0) fail("number of sequences must be positive, got ", n_slots);
    n_pages_ = (n_cells + block_size - 1) / block_size;
    tables_.resize(n_slots);
    for (int b = n_pages_ - 1; b >= 0; --b) free_.push_back(b);
    table_mem_.assign(static_cast<size_t>(n_pages_) * n_slots, -1);
    table_ = Tensor::make(DType::I32, n_pages_, n_slots);
    table_.role = TensorRole::INPUT;
    table_.data = table_mem_.data();
    table_.name = "kv_pages";
}

bool PageTable::can_reserve(int slot, int n_tokens) const {
    const int need = (n_tokens + block_size_ - 1) / block_size_ - static_cast<int>(tables_.at(slot).size());
    return need <= static_cast<int>(free_.size());
}

bool PageTable::reserve(int slot, int n_tokens) {
    if (!can_reserve(slot, n_tokens)) return false;
    auto& t = tables_[slot];
    while (static_cast<int>(t.size()) * block_size_ < n_tokens) {
        table_mem_[static_cast<size_t>(slot) * n_pages_ + t.size()] = free_.back();
        t.push_back(free_.back());
        free_.pop_back();
    }
    return true;
}

void PageTable::release(int slot) {
    auto& t = tables_.at(slot);
    for (size_t i = 0; i < t.size(); ++i) {
        free_.push_back(t[i]);
        table_mem_[static_cast<size_t>(slot) * n_pages_ + i] = -1;
    }
    t.clear();
}

}  // namespace glia
