// Placement's own queries (where a tensor lives), tensor roles by name, --gpu-mem parsing.
#include "placement/placement.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace glia {
namespace {

bool starts_with(const std::string& s, std::string_view p) { return s.compare(0, p.size(), p) == 0; }

// name[pos..] is `stem` followed by '.' or the end of the name.
bool component_is(const std::string& name, size_t pos, std::string_view stem) {
    if (name.compare(pos, stem.size(), stem) != 0) return false;
    const size_t end = pos + stem.size();
    return end == name.size() || name[end] == '.';
}

}  // namespace

TensorSite tensor_site(const std::string& name) {
    TensorSite site;
    if (starts_with(name, "token_embd.")) {
        site.role = SiteRole::EMBEDDINGS;
        return site;
    }
    // "token_embd_norm.weight" (lfm2's final norm), output*, rope_freqs ... stay OUTPUT.
    if (!starts_with(name, "blk.")) return site;
    size_t pos = 4;
    long long il = 0;
    while (pos < name.size() && std::isdigit(static_cast<unsigned char>(name[pos])) && il < 100000000)
        il = il * 10 + (name[pos++] - '0');
    if (pos == 4 || pos >= name.size() || name[pos] != '.') return site;  // not "blk.N."
    site.layer = static_cast<int>(il);
    ++pos;
    site.role = SiteRole::LAYER;
    for (std::string_view stem : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps", "ffn_gate_up_exps"})
        if (component_is(name, pos, stem)) site.role = SiteRole::EXPERT;
    return site;
}

Placement Placement::all_cpu(int n_layer) {
    Placement p;
    p.devices.push_back(DeviceSpec{Device::CPU, 0, "cpu", 0});
    p.layer.assign(static_cast<size_t>(std::max(n_layer, 0)), 0);
    p.usage.resize(1);
    return p;
}

int Placement::device_of_tensor(const std::string& name) const {
    const TensorSite s = tensor_site(name);
    switch (s.role) {
        case SiteRole::EMBEDDINGS: return embeddings;
        case SiteRole::OUTPUT: return output;
        case SiteRole::LAYER:
        case SiteRole::EXPERT:
            if (s.layer < 0 || s.layer >= static_cast<int>(layer.size()))
                fail("tensor '", name, "': block ", s.layer, " is outside the placement's ", layer.size(), " layers");
            if (s.role == SiteRole::EXPERT && experts_on_host) return 0;
            return layer[static_cast<size_t>(s.layer)];
    }
    return 0;
}

int Placement::n_gpu_layers() const {
    int n = 0;
    for (int d : layer) n += d != 0;
    return n;
}

std::vector<size_t> parse_memory_list(const std::string& list) {
    std::vector<size_t> out;
    size_t start = 0;
    while (true) {
        const size_t comma = list.find(',', start);
        std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.pop_back();
        while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.erase(item.begin());
        const std::string where = cat("--gpu-mem '", list, "': item ", out.size() + 1, " '", item, "'");
        if (item.empty()) fail(where, ": empty (give sizes like 24G,24G)");
        char* end = nullptr;
        const double v = std::strtod(item.c_str(), &end);
        if (end == item.c_str() || !std::isfinite(v) || v <= 0) fail(where, ": not a positive size (e.g. 24G, 8000M)");
        std::string unit(end);
        for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        if (unit.size() == 3 && unit.substr(1) == "IB") unit = unit.substr(0, 1);
        else if (unit.size() == 2 && unit[1] == 'B') unit = unit.substr(0, 1);
        double scale = 1;
        if (unit == "K") scale = 1024.0;
        else if (unit == "M") scale = 1024.0 * 1024;
        else if (unit == "G") scale = 1024.0 * 1024 * 1024;
        else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
        else if (!unit.empty() && unit != "B") fail(where, ": unknown unit '", end, "' (K, M, G or T)");
        const double bytes = v * scale;
        if (bytes < 1 || bytes > 1e18) fail(where, ": ", bytes, " bytes is out of range");
        out.push_back(static_cast<size_t>(bytes));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

}  // namespace glia
