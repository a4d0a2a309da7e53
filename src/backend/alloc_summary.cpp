#include "backend/alloc_summary.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

namespace glia {

std::string purpose_group(const std::string& purpose) {
    std::string out;
    for (size_t i = 0; i < purpose.size();) {
        // A run of digits between dots (or at the ends) is a layer or expert number.
        const bool at_field = i == 0 || purpose[i - 1] == '.';
        size_t j = i;
        while (j < purpose.size() && std::isdigit(static_cast<unsigned char>(purpose[j]))) ++j;
        if (at_field && j > i && (j == purpose.size() || purpose[j] == '.')) {
            out += '*';
            i = j;
            continue;
        }
        out += purpose[i++];
    }
    return out;
}

std::string alloc_summary(const std::string& device, const std::vector<AllocRecord>& live, size_t free_bytes,
                          size_t total_bytes, size_t max_groups) {
    constexpr double kMiB = 1.0 / (1024.0 * 1024.0);
    struct Sum { size_t bytes = 0, count = 0; };
    std::map<int, Sum> by_kind;
    std::map<std::pair<int, std::string>, Sum> by_group;
    size_t all = 0;
    for (const AllocRecord& r : live) {
        Sum& k = by_kind[int(r.kind)];
        k.bytes += r.bytes;
        ++k.count;
        Sum& g = by_group[{int(r.kind), purpose_group(r.purpose)}];
        g.bytes += r.bytes;
        ++g.count;
        all += r.bytes;
    }
    std::string s;
    char line[256];
    std::snprintf(line, sizeof line, "glia alloc: %s after load: %.1f MiB in %zu allocations\n", device.c_str(),
                  double(all) * kMiB, live.size());
    s += line;
    for (const auto& [kind, sum] : by_kind) {
        std::snprintf(line, sizeof line, "glia alloc:   %-11s %10.1f MiB  %6zu allocations\n",
                      memory_kind_name(MemoryKind(kind)), double(sum.bytes) * kMiB, sum.count);
        s += line;
    }
    std::vector<std::pair<std::pair<int, std::string>, Sum>> groups(by_group.begin(), by_group.end());
    std::stable_sort(groups.begin(), groups.end(),
                     [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
    for (size_t i = 0; i < groups.size() && i < max_groups; ++i) {
        const auto& [key, sum] = groups[i];
        std::snprintf(line, sizeof line, "glia alloc:     %-11s %10.1f MiB  x%-5zu %s\n",
                      memory_kind_name(MemoryKind(key.first)), double(sum.bytes) * kMiB, sum.count,
                      key.second.c_str());
        s += line;
    }
    if (groups.size() > max_groups) {
        size_t rest = 0, n = 0;
        for (size_t i = max_groups; i < groups.size(); ++i) rest += groups[i].second.bytes, n += groups[i].second.count;
        std::snprintf(line, sizeof line, "glia alloc:     (%zu more groups) %.1f MiB in %zu allocations\n",
                      groups.size() - max_groups, double(rest) * kMiB, n);
        s += line;
    }
    if (total_bytes) {
        std::snprintf(line, sizeof line, "glia alloc:   device: %.1f MiB free of %.1f MiB\n", double(free_bytes) * kMiB,
                      double(total_bytes) * kMiB);
        s += line;
    }
    return s;
}

}  // namespace glia
