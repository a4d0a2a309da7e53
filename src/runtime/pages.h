// The page table of the KV cache, on the host and shared by all layers: cells live in
// fixed-size pages (blocks); each sequence slot maps its positions to pages. The layers'
// K/V storage itself is per-layer tensors on each layer's device (runtime/runner.h).
//
// Pages are reference-counted so that slots can share them, and the table doubles as the
// automatic prefix cache. A page whose cells are all written holds the K/V of a known
// token prefix; once published it is findable by that prefix: a tree of pages, each child
// keyed by (its parent page, its tokens), the root's children by their tokens alone. A
// lookup walks the tree from the root, comparing tokens exactly (the hash only narrows the
// search), so two prefixes never alias. A published page that no slot holds stays cached
// and is evicted least-recently-used, only when a reservation finds no free page left.
//
// A shared page is never written: a slot writes only positions at or past what it shares,
// and only whole pages (every cell written, positions never revisited) are published.
//
// Models with per-slot recurrent state also keep, per page, an optional checkpoint of the
// slot's state after the page's last token (bytes the caller provides); a prefix can only
// end at a page with a checkpoint, the pages before it are shared for their K/V alone.
#pragma once
#include <cstdint>
#include <set>
#include <unordered_map>
#include <utility>
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
    int pages_used() const { return n_held_; }                        // held by at least one slot
    int pages_cached() const { return static_cast<int>(lru_.size()); }  // held by none, kept for reuse
    int pages_available() const { return static_cast<int>(free_.size() + lru_.size()); }

    // Makes `slot` able to hold positions [0, n_tokens), taking free pages first, then
    // evicting the least recently used cached pages. False (nothing changed) when free and
    // cached pages together are too few.
    bool reserve(int slot, int n_tokens);
    bool can_reserve(int slot, int n_tokens) const;
    // Drops the slot's hold on every page: unpublished pages go back to the pool, published
    // ones stay cached.
    void release(int slot);

    // Prefix cache. Shares with empty `slot` the longest run of published pages that
    // covers whole pages of tokens[0, n) (with need_checkpoint: ending at a page that has
    // a checkpoint); returns the number of tokens shared (a multiple of the block size).
    // `ns` keeps computations that differ apart (LoRA adapters at other scales): pages
    // published under one namespace are found only by lookups under the same.
    int share_prefix(int slot, const int32_t* tokens, int n, bool need_checkpoint, uint32_t ns = 0);
    // Publishes the slot's whole pages below n_written, given the tokens at positions
    // [0, n_written). A page whose prefix is already published by another page is
    // replaced in the slot's table by that page (same contents), and its own page freed.
    // `checkpoint` (when not null): the slot's recurrent state after position n_written - 1,
    // kept when n_written ends a page.
    void publish(int slot, const int32_t* tokens, int n_written, const std::vector<uint8_t>* checkpoint,
                 uint32_t ns = 0);
    // The checkpoint of the page holding position pos - 1 of the slot (pos a multiple of
    // the block size; the page shared by share_prefix); nullptr when it has none.
    const std::vector<uint8_t>* checkpoint_before(int slot, int pos) const;
    uint64_t evictions() const { return evictions_; }  // cached pages reclaimed for reservations
    // Drops every cached page no slot holds (tests; a model reload).
    void clear_cache();

    int cell(int slot, int pos) const {
        return tables_[slot][pos / block_size_] * block_size_ + pos % block_size_;
    }
    int page(int slot, int index) const { return tables_[slot][index]; }
    int refs(int page) const { return pages_[page].refs; }
    // The table as the attention kernels read it: I32 [n_pages, n_slots], -1 where unused.
    // Kept up to date by reserve / release / share_prefix / publish.
    Tensor& tensor() { return table_; }

private:
    static constexpr int kUnpublished = -2, kRoot = -1;
    struct Page {
        int refs = 0;
        int parent = kUnpublished;  // kRoot, a page id, or kUnpublished
        uint64_t key = 0;           // hash of (parent, tokens, ns) when published
        uint32_t ns = 0;            // namespace (share_prefix)
        uint64_t stamp = 0;         // last release (LRU order)
        std::vector<int32_t> tokens;
        std::vector<int> children;  // published pages whose parent this is
        std::vector<uint8_t> checkpoint;
        bool has_checkpoint = false;
    };
    int take_page();                 // a free page, evicting when needed (caller checked availability)
    void hold(int page);
    void drop(int page);
    void unpublish(int page);        // removes the page and its subtree from the tree
    int find_child(int parent, const int32_t* tokens, uint32_t ns) const;
    uint64_t key_of(int parent, const int32_t* tokens, uint32_t ns) const;
    void set_entry(int slot, size_t index, int page);

    int block_size_, n_pages_;
    int n_held_ = 0;
    std::vector<std::vector<int>> tables_;  // per slot: page ids
    std::vector<size_t> published_;         // per slot: leading pages already published
    std::vector<Page> pages_;
    std::vector<int> free_;                 // free page ids (stack), not cached
    std::set<std::pair<uint64_t, int>> lru_;  // cached pages no slot holds: (stamp, page)
    std::unordered_multimap<uint64_t, int> index_;  // key -> published page
    uint64_t clock_ = 0;
    uint64_t evictions_ = 0;
    std::vector<int32_t> table_mem_;
    Tensor table_;
};

}  // namespace glia
