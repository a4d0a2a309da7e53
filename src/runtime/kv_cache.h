// Paged key/value cache shared by all sequences. Every attention layer stores one F16
// row of n_kv_head * head_dim values per (sequence, position); rows live in fixed-size
// blocks, and each sequence has a block table mapping its positions to blocks. Layers
// without attention (recurrent layers, declared by zero KV heads) hold nothing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/huge_buffer.h"

namespace glia {

class KVCache {
public:
    // kv_dims_k[il] / kv_dims_v[il]: n_kv_head * head_dim of layer il (0 = no cache).
    // n_cells: total token capacity (rounded up to whole blocks); n_seq: sequence slots.
    KVCache(const std::vector<int>& kv_dims_k, const std::vector<int>& kv_dims_v, int n_cells, int block_size = 16,
            int n_seq = 1);

    int n_layer() const { return static_cast<int>(dims_k_.size()); }
    int n_seq() const { return static_cast<int>(tables_.size()); }
    int block_size() const { return block_size_; }
    int capacity() const { return n_blocks_ * block_size_; }   // tokens, all sequences together
    int capacity(int seq) const { return static_cast<int>(tables_[seq].size()) * block_size_; }
    int blocks_total() const { return n_blocks_; }
    int blocks_used() const { return n_blocks_ - static_cast<int>(free_.size()); }
    int k_dim(int il) const { return dims_k_[il]; }
    int v_dim(int il) const { return dims_v_[il]; }

    // Makes sequence `seq` able to hold positions [0, n_tokens). False (nothing changed)
    // when there are not enough free blocks.
    bool reserve(int seq, int n_tokens);
    bool can_reserve(int seq, int n_tokens) const;
    // Returns every block of `seq` to the pool.
    void release(int seq);

    uint16_t* k_row(int il, int seq, int pos) { return k_[il] + cell(seq, pos) * dims_k_[il]; }
    uint16_t* v_row(int il, int seq, int pos) { return v_[il] + cell(seq, pos) * dims_v_[il]; }
    size_t bytes() const;

private:
    size_t cell(int seq, int pos) const {
        return static_cast<size_t>(tables_[seq][pos / block_size_]) * block_size_ + pos % block_size_;
    }
    int block_size_, n_blocks_;
    std::vector<int> dims_k_, dims_v_;
    HugeBuffer mem_;                          // every layer's K and V (huge pages)
    std::vector<uint16_t*> k_, v_;            // per layer, into mem_
    std::vector<std::vector<int>> tables_;  // per sequence: block ids
    std::vector<int> free_;                  // free block ids (stack)
};

}  // namespace glia
