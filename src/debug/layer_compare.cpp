#include "debug/layer_compare.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace glia {

NodeSums parse_node_sums(const std::string& text, const std::string& prefix) {
    NodeSums r;
    std::istringstream in(text);
    std::string line, current;
    while (std::getline(in, line)) {
        if (line.rfind(prefix, 0) == 0) {
            const std::string rest = line.substr(prefix.size());
            const size_t b = rest.find_first_not_of(' ');
            const size_t e = rest.find(" = ");
            current = (b == std::string::npos || e == std::string::npos || e < b) ? "" : rest.substr(b, e - b);
        } else if (!current.empty()) {
            const size_t at = line.find("sum = ");
            if (at == std::string::npos) continue;
            const double s = std::strtod(line.c_str() + at + 6, nullptr);
            if (!r.sums.count(current)) r.order.push_back(current);
            r.sums[current].push_back(s);
            current.clear();
        }
    }
    return r;
}

static bool is_layer_node(const std::string& name) {
    const size_t dash = name.rfind('-');
    if (dash == std::string::npos || dash + 1 >= name.size()) return false;
    for (size_t i = dash + 1; i < name.size(); ++i)
        if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
    return true;
}

std::vector<NodeDiff> compare_node_sums(const NodeSums& ours, const NodeSums& ref, double rel, double abs_tol) {
    std::vector<NodeDiff> out;
    for (const auto& name : ours.order) {
        auto it = ref.sums.find(name);
        if (it == ref.sums.end() || !is_layer_node(name)) continue;
        NodeDiff d;
        d.name = name;
        d.ours = ours.last(name);
        d.ref = it->second.back();
        d.diverges = true;
        for (double o : ours.sums.at(name))
            for (double r : it->second)
                if (d.diverges && std::fabs(o - r) <= rel * std::max(1.0, std::fabs(r)) + abs_tol) {
                    d.ours = o;
                    d.ref = r;
                    d.diverges = false;
                }
        out.push_back(d);
    }
    return out;
}

}  // namespace glia
