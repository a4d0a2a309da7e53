// The page table of the KV cache, on the host and shared by all layers: cells live in
// fixed-size pages (blocks); each sequence slot maps its positions to pages. The layers'
// K/V storage itself is per-layer tensors on each layer's device (runtime/runner.h).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace glia {

class PageTable {
public:
    // n_cells: token capacity of all slots together (rounded up to whole pages).
    PageTable(int n_cells, int block_size, int n_slots);

    int n_slots() const { return static_cast<int>(tables_.size()); }
    int block_size() const { return block_size_; }
    int n_pages() const { return n_pages_; }
    int n_cells() const { return n_pages_ * block_size_; }           // all slots together
    int capacity(int slot) const { return static_cast<int>(tables_[slot].size()) * block_size_; }
    int pages_used() const { return n_pages_ - static_cast<int>(free_.size()); }

    // Makes `slot` able to hold positions [0, n_tokens). False (nothing changed) when there
    // are not enough free pages.
    bool reserve(int slot, int n_tokens);
    bool can_reserve(int slot, int n_tokens) const;
    // Returns every page of `slot` to the pool.
    void release(int slot);

    int cell(int slot, int pos) const {
        return tables_[slot][pos / block_size_] * block_size_ + pos % block_size_;
    }
    // The table as the attention kernels read it: I32 [n_pages, n_slots], -1 where unused.
    // Kept up to date by reserve / release.
    Tensor& tensor() { return table_; }

private:
    int block_size_, n_pages_;
    std::vector<std::vector<int>> tables_;  // per slot: page ids
    std::vector<int> free_;                 // free page ids (stack)
    std::vector<int32_t> table_mem_;
    Tensor table_;
};

}  // namespace glia
