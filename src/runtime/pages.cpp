#include "runtime/pages.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace glia {

PageTable::PageTable(int n_cells, int block_size, int n_slots) : block_size_(block_size) {
    if (n_cells <= 0) fail("context size must be positive, got ", n_cells);
    if (block_size <= 0) fail("KV block size must be positive, got ", block_size);
    if (n_slots <= 0) fail("number of sequences must be positive, got ", n_slots);
    n_pages_ = (n_cells + block_size - 1) / block_size;
    tables_.resize(n_slots);
    published_.assign(n_slots, 0);
    pages_.resize(n_pages_);
    for (int b = n_pages_ - 1; b >= 0; --b) free_.push_back(b);
    table_mem_.assign(static_cast<size_t>(n_pages_) * n_slots, -1);
    table_ = Tensor::make(DType::I32, n_pages_, n_slots);
    table_.role = TensorRole::INPUT;
    table_.data = table_mem_.data();
    table_.name = "kv_pages";
}

void PageTable::set_entry(int slot, size_t index, int page) {
    auto& t = tables_[slot];
    if (index == t.size()) t.push_back(page);
    else t[index] = page;
    table_mem_[static_cast<size_t>(slot) * n_pages_ + index] = page;
}

void PageTable::hold(int page) {
    Page& p = pages_[page];
    if (p.refs++ == 0) {
        ++n_held_;
        if (p.parent != kUnpublished) lru_.erase({p.stamp, page});
    }
}

void PageTable::drop(int page) {
    Page& p = pages_[page];
    if (--p.refs > 0) return;
    --n_held_;
    if (p.parent != kUnpublished) {
        p.stamp = ++clock_;
        lru_.insert({p.stamp, page});
    } else {
        free_.push_back(page);
    }
}

uint64_t PageTable::key_of(int parent, const int32_t* tokens, uint32_t ns) const {
    uint64_t h = 0x243F6A8885A308D3ull ^ static_cast<uint64_t>(static_cast<int64_t>(parent) + 2) ^
                 (static_cast<uint64_t>(ns) << 32);
    for (int i = 0; i < block_size_; ++i) {
        h = (h ^ static_cast<uint32_t>(tokens[i])) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    return h;
}

int PageTable::find_child(int parent, const int32_t* tokens, uint32_t ns) const {
    auto [lo, hi] = index_.equal_range(key_of(parent, tokens, ns));
    for (auto it = lo; it != hi; ++it) {
        const Page& p = pages_[it->second];
        if (p.parent == parent && p.ns == ns && std::equal(p.tokens.begin(), p.tokens.end(), tokens)) return it->second;
    }
    return -1;
}

void PageTable::unpublish(int page) {
    Page& p = pages_[page];
    if (p.parent == kUnpublished) return;
    auto [lo, hi] = index_.equal_range(p.key);
    for (auto it = lo; it != hi; ++it)
        if (it->second == page) {
            index_.erase(it);
            break;
        }
    if (p.parent != kRoot) {
        auto& sib = pages_[p.parent].children;
        sib.erase(std::find(sib.begin(), sib.end(), page));
    }
    // Children are unreachable without their parent. A slot holding a page holds its whole
    // prefix, so children of a page no slot holds are held by none either: they are freed.
    std::vector<int> children = std::move(p.children);
    p.children.clear();
    for (int c : children) {
        pages_[c].parent = kRoot;  // detached from this page before its own removal
        unpublish(c);
    }
    if (p.refs == 0) {
        lru_.erase({p.stamp, page});
        free_.push_back(page);
    }
    p.parent = kUnpublished;
    p.has_checkpoint = false;
    p.checkpoint.clear();
    p.checkpoint.shrink_to_fit();
}

int PageTable::take_page() {
    if (free_.empty()) {
        // Evict the least recently used cached page (with what hangs below it).
        const int victim = lru_.begin()->second;
        const size_t before = free_.size();
        unpublish(victim);
        evictions_ += free_.size() - before;
    }
    const int page = free_.back();
    free_.pop_back();
    return page;
}

bool PageTable::can_reserve(int slot, int n_tokens) const {
    const int need = (n_tokens + block_size_ - 1) / block_size_ - static_cast<int>(tables_.at(slot).size());
    return need <= pages_available();
}

bool PageTable::reserve(int slot, int n_tokens) {
    if (!can_reserve(slot, n_tokens)) return false;
    auto& t = tables_[slot];
    while (static_cast<int>(t.size()) * block_size_ < n_tokens) {
        const int page = take_page();
        hold(page);
        set_entry(slot, t.size(), page);
    }
    return true;
}

void PageTable::release(int slot) {
    auto& t = tables_.at(slot);
    // Last page first: the tail of a sequence gets the older stamp, so eviction takes the
    // ends of prefixes before their beginnings.
    for (size_t i = t.size(); i-- > 0;) {
        drop(t[i]);
        table_mem_[static_cast<size_t>(slot) * n_pages_ + i] = -1;
    }
    t.clear();
    published_[slot] = 0;
}

int PageTable::share_prefix(int slot, const int32_t* tokens, int n, bool need_checkpoint, uint32_t ns) {
    if (!tables_.at(slot).empty()) fail("share_prefix: slot ", slot, " already holds pages");
    std::vector<int> run;
    int parent = kRoot;
    for (int i = 0; (i + 1) * block_size_ <= n; ++i) {
        const int c = find_child(parent, tokens + static_cast<size_t>(i) * block_size_, ns);
        if (c < 0) break;
        run.push_back(c);
        parent = c;
    }
    if (need_checkpoint)
        while (!run.empty() && !pages_[run.back()].has_checkpoint) run.pop_back();
    for (size_t i = 0; i < run.size(); ++i) {
        hold(run[i]);
        set_entry(slot, i, run[i]);
    }
    published_[slot] = run.size();
    return static_cast<int>(run.size()) * block_size_;
}

void PageTable::publish(int slot, const int32_t* tokens, int n_written, const std::vector<uint8_t>* checkpoint,
                        uint32_t ns) {
    auto& t = tables_.at(slot);
    const size_t full = std::min(t.size(), static_cast<size_t>(n_written / block_size_));
    size_t& done = published_[slot];
    for (; done < full; ++done) {
        const int parent = done == 0 ? kRoot : t[done - 1];
        if (parent != kRoot && pages_[parent].parent == kUnpublished) return;  // its prefix was evicted
        const int32_t* tok = tokens + done * block_size_;
        const int page = t[done];
        const int existing = find_child(parent, tok, ns);
        if (existing >= 0 && existing != page) {
            // Computed twice (two slots reading the same prefix at once): keep one copy.
            hold(existing);
            set_entry(slot, done, existing);
            drop(page);
        } else if (existing < 0) {
            Page& p = pages_[page];
            p.parent = parent;
            p.tokens.assign(tok, tok + block_size_);
            p.ns = ns;
            p.key = key_of(parent, tok, ns);
            index_.emplace(p.key, page);
            if (parent != kRoot) pages_[parent].children.push_back(page);
        }
    }
    if (checkpoint && n_written % block_size_ == 0 && full > 0 && done == full) {
        Page& p = pages_[t[full - 1]];
        if (!p.has_checkpoint) {
            p.checkpoint = *checkpoint;
            p.has_checkpoint = true;
        }
    }
}

const std::vector<uint8_t>* PageTable::checkpoint_before(int slot, int pos) const {
    const auto& t = tables_.at(slot);
    const int i = pos / block_size_ - 1;
    if (pos % block_size_ != 0 || i < 0 || i >= static_cast<int>(t.size())) return nullptr;
    const Page& p = pages_[t[i]];
    return p.has_checkpoint ? &p.checkpoint : nullptr;
}

void PageTable::clear_cache() {
    while (!lru_.empty()) unpublish(lru_.begin()->second);
}

}  // namespace glia
