// Reading per-node dumps (ours: "glia_debug:", the reference's eval callback:
// "common_debug_cb_eval:") and finding the first node whose values depart.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace glia {

struct NodeSums {
    std::vector<std::string> order;       // names in first-seen order
    std::map<std::string, std::vector<double>> sums;  // every "sum = " printed under each name, in order
    double last(const std::string& name) const { return sums.at(name).back(); }
};

// Parses a dump; `prefix` is the header prefix of each node ("glia_debug:" ...).
NodeSums parse_node_sums(const std::string& text, const std::string& prefix);

struct NodeDiff {
    std::string name;
    double ours = 0, ref = 0;
    bool diverges = false;
};

// Compares per-layer nodes (names ending in -<layer>) present in both dumps, in our
// order. Engines name intermediate steps differently (a reshape, a scale, a rope may all
// carry "Qcur-0"), so a name diverges only when none of our values under it is within
// rel * max(1, |ref|) + abs_tol of any of the reference's values under it.
std::vector<NodeDiff> compare_node_sums(const NodeSums& ours, const NodeSums& ref, double rel = 5e-3,
                                        double abs_tol = 5e-2);

}  // namespace glia
