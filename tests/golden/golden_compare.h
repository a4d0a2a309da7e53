// The golden comparison, implemented once for every family (rules of the text-generation
// issue and ../shared/README.md "Tolerances").
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glia::test {

struct Tolerance {
    double tau;    // near-tie threshold: argmax / greedy checks apply where the gap >= tau
    double bound;  // max-abs bound on the last-position logits
};

// Tolerance for a model file stem (e.g. "tiny-llama-q4_k_m", "stories260K").
Tolerance tolerance_for(const std::string& stem);

struct CompareResult {
    bool ok = true;
    std::vector<std::string> failures;  // human-readable, first ones first
    double last_max_abs = 0;            // last-position logits
    int last_max_at = -1;
    double top10_max_abs = 0;           // over ids in both top-10 lists, every position
    int argmax_checked = 0, argmax_mismatch = 0, argmax_exempt = 0;
    int greedy_checked = 0;             // steps compared before the first near-tie
    int greedy_total = 0;
    std::string summary() const;
};

// golden/ours: the parsed JSON records; golden_logits/our_logits: last-position logits.
// forced_routing: ours ran with the golden's recorded MoE routing (glia eval
// --force-routing), so the router near-tie exemptions do not apply.
CompareResult compare_golden(const nlohmann::json& golden, const nlohmann::json& ours,
                             const std::vector<float>& golden_logits, const std::vector<float>& our_logits,
                             const Tolerance& tol, bool forced_routing = false);

}  // namespace glia::test
