#include "dispatch/memory_plan.h"

#include <algorithm>
#include <map>

namespace glia {

size_t plan_offsets(const std::vector<Lifetime>& lives, std::vector<size_t>& offsets) {
    struct Block { size_t off, size; };
    std::vector<Block> free_list;
    size_t top = 0;
    auto take = [&](size_t size) {
        for (size_t b = 0; b < free_list.size(); ++b) {
            if (free_list[b].size < size) continue;
            const size_t off = free_list[b].off;
            free_list[b].off += size;
            free_list[b].size -= size;
            if (free_list[b].size == 0) free_list.erase(free_list.begin() + b);
            return off;
        }
        // Grow the top, absorbing a free block that ends there.
        if (!free_list.empty() && free_list.back().off + free_list.back().size == top) {
            const size_t off = free_list.back().off;
            free_list.pop_back();
            top = off + size;
            return off;
        }
        const size_t off = top;
        top += size;
        return off;
    };
    auto give = [&](size_t off, size_t size) {
        auto it = std::lower_bound(free_list.begin(), free_list.end(), off,
                                   [](const Block& b, size_t o) { return b.off < o; });
        it = free_list.insert(it, Block{off, size});
        auto next = it + 1;
        if (next != free_list.end() && it->off + it->size == next->off) {
            it->size += next->size;
            free_list.erase(next);
        }
        if (it != free_list.begin()) {
            auto prev = it - 1;
            if (prev->off + prev->size == it->off) {
                prev->size += it->size;
                free_list.erase(it);
            }
        }
    };
    offsets.assign(lives.size(), 0);
    // Releases due at each step, by the index of the last reader.
    std::multimap<int, size_t> release;
    size_t next = 0;
    int step_max = 0;
    for (const auto& l : lives) step_max = std::max(step_max, std::max(l.first, l.last));
    for (int step = 0; step <= step_max; ++step) {
        for (; next < lives.size() && lives[next].first == step; ++next) {
            offsets[next] = take(lives[next].bytes);
            release.emplace(lives[next].last, next);
        }
        auto [b, e] = release.equal_range(step);
        for (auto it = b; it != e; ++it) give(offsets[it->second], lives[it->second].bytes);
        release.erase(b, e);
    }
    return top;
}

}  // namespace glia
