#include "runtime/ngram_draft.h"

#include <algorithm>

#include "core/error.h"

namespace glia {

NgramDraft::NgramDraft(int n_min, int n_max) : n_min_(n_min), n_max_(n_max) {
    if (n_min < 1 || n_max < n_min) fail("prompt lookup: n-gram sizes ", n_min, "..", n_max, " are not a range of at least 1");
    last_.resize(static_cast<size_t>(n_max - n_min + 1));
}

void NgramDraft::reset() {
    indexed_ = 0;
    for (auto& m : last_) m.clear();
}

uint64_t NgramDraft::hash(const int32_t* t, int n) {
    uint64_t h = 0xcbf29ce484222325ull ^ static_cast<uint64_t>(n);
    for (int i = 0; i < n; ++i) {
        h ^= static_cast<uint32_t>(t[i]);
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h;
}

// Indexes every n-gram that ends at or before position size - 2: one that has a token
// after it inside the text, and is not the text's own end.
void NgramDraft::index(const std::vector<int32_t>& text) {
    if (text.size() < indexed_) reset();  // a different text
    const size_t end = text.size() > 0 ? text.size() - 1 : 0;  // exclusive: n-grams end before it
    for (size_t stop = std::max<size_t>(indexed_, 1); stop <= end; ++stop)
        for (int n = n_min_; n <= n_max_; ++n)
            if (stop >= static_cast<size_t>(n)) {
                const size_t start = stop - static_cast<size_t>(n);
                last_[size_t(n - n_min_)][hash(text.data() + start, n)] = static_cast<int>(start);
            }
    indexed_ = std::max(indexed_, end + 1);
}

std::vector<int32_t> NgramDraft::draft(const std::vector<int32_t>& text, int max) {
    std::vector<int32_t> out;
    index(text);
    if (max <= 0) return out;
    const int L = static_cast<int>(text.size());
    for (int n = std::min(n_max_, L - 1); n >= n_min_; --n) {
        const int32_t* suffix = text.data() + (L - n);
        const auto& m = last_[size_t(n - n_min_)];
        auto it = m.find(hash(suffix, n));
        if (it == m.end()) continue;
        const int start = it->second;
        if (!std::equal(suffix, suffix + n, text.data() + start)) continue;  // a hash collision
        for (int j = start + n; j < L && static_cast<int>(out.size()) < max; ++j) out.push_back(text[j]);
        return out;
    }
    return out;
}

}  // namespace glia
