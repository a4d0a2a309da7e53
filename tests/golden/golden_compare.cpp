#include "golden_compare.h"

#include <cmath>
#include <set>
#include <sstream>

namespace glia::test {

Tolerance tolerance_for(const std::string& stem) {
    const bool stories = stem.rfind("stories260K", 0) == 0;
    auto ends = [&](const std::string& suf) {
        return stem.size() >= suf.size() && stem.compare(stem.size() - suf.size(), suf.size(), suf) == 0;
    };
    if (stem == "stories260K" || ends("-f32") || ends("-f16")) {
        if (stem.find("kimi-k3") != std::string::npos) return {0.02, 0.09};  // README: measured 0.055
        return {0.02, 0.05};
    }
    if (ends("-bf16")) return {0.15, 0.2};
    if (stories) return {0.25, 0.4};
    if (stem.find("qwen35") != std::string::npos) return {1.8, 2.25};  // README: gated delta net, quantized
    return {1.0, 1.0};
}

std::string CompareResult::summary() const {
    std::ostringstream os;
    os << "last max-abs " << last_max_abs << " (id " << last_max_at << "), top-10 max-abs " << top10_max_abs
       << ", argmax " << (argmax_checked - argmax_mismatch) << "/" << argmax_checked << " (" << argmax_exempt
       << " near-ties exempt), greedy " << greedy_checked << "/" << greedy_total << " compared";
    return os.str();
}

CompareResult compare_golden(const nlohmann::json& g, const nlohmann::json& o, const std::vector<float>& gl,
                             const std::vector<float>& ol, const Tolerance& tol, bool forced_routing) {
    CompareResult r;
    auto failure = [&](const std::string& s) {
        r.ok = false;
        if (r.failures.size() < 12) r.failures.push_back(s);
    };
    // MoE near-tie exemptions listed by the golden.
    std::set<int> exempt_pos, exempt_steps;
    bool skip_last = false;
    int first_exempt_step = 1 << 30;
    if (!forced_routing && g.contains("moe_router_near_ties")) {
        const auto& nt = g["moe_router_near_ties"];
        for (int p : nt.value("prompt_positions", std::vector<int>{})) exempt_pos.insert(p);
        for (int s : nt.value("greedy_steps", std::vector<int>{})) first_exempt_step = std::min(first_exempt_step, s);
        const int n_prompt = g["n_prompt_tokens"];
        if (exempt_pos.count(n_prompt - 1)) skip_last = true;
        if (nt.contains("upstream_prompt_positions") && !nt["upstream_prompt_positions"].empty()) {
            const int first = nt["upstream_prompt_positions"][0];
            for (int p = first; p < n_prompt; ++p) exempt_pos.insert(p);
            skip_last = true;
            first_exempt_step = 0;
        }
    }

    // 1. Tokens identical.
    if (g["prompt_tokens"] != o["prompt_tokens"]) {
        failure("prompt tokens differ: golden " + g["prompt_tokens"].dump() + ", ours " + o["prompt_tokens"].dump());
        return r;
    }
    // 2. Last-position logits.
    if (gl.size() != ol.size()) {
        failure("logit counts differ: golden " + std::to_string(gl.size()) + ", ours " + std::to_string(ol.size()));
        return r;
    }
    for (size_t i = 0; i < gl.size(); ++i) {
        const double d = std::fabs(double(gl[i]) - double(ol[i]));
        if (!(d <= r.last_max_abs)) { r.last_max_abs = std::isnan(d) ? INFINITY : d; r.last_max_at = int(i); }
    }
    if (!skip_last && !(r.last_max_abs <= tol.bound)) {
        std::ostringstream os;
        os << "last-position logits differ by " << r.last_max_abs << " at id " << r.last_max_at << " (golden "
           << gl[r.last_max_at] << ", ours " << ol[r.last_max_at] << "), bound " << tol.bound;
        failure(os.str());
    }
    // 3. Argmax at every prompt position where the golden gap >= tau; top-10 agreement.
    const auto& gids = g["prompt_top_ids"];
    const auto& glog = g["prompt_top_logits"];
    const auto& oids = o["prompt_top_ids"];
    const auto& olog = o["prompt_top_logits"];
    for (size_t p = 0; p < gids.size(); ++p) {
        for (size_t a = 0; a < gids[p].size(); ++a)
            for (size_t b = 0; b < oids[p].size(); ++b)
                if (gids[p][a] == oids[p][b])
                    r.top10_max_abs = std::max(r.top10_max_abs, std::fabs(double(glog[p][a]) - double(olog[p][b])));
        const double gap = double(glog[p][0]) - double(glog[p][1]);
        if (gap < tol.tau || exempt_pos.count(int(p))) { ++r.argmax_exempt; continue; }
        ++r.argmax_checked;
        if (gids[p][0] != oids[p][0]) {
            ++r.argmax_mismatch;
            std::ostringstream os;
            os << "position " << p << ": argmax " << oids[p][0] << ", golden " << gids[p][0] << " (golden gap " << gap
               << ")";
            failure(os.str());
        }
    }
    // 4. Greedy tokens up to the first near-tie.
    const auto& gt = g["greedy"]["tokens"];
    const auto& ot = o["greedy"]["tokens"];
    const auto& gaps = g["greedy"]["top1_minus_top2"];
    r.greedy_total = int(gt.size());
    for (size_t s = 0; s < gt.size(); ++s) {
        if (double(gaps[s]) < tol.tau || int(s) >= first_exempt_step) break;
        if (s >= ot.size() || gt[s] != ot[s]) {
            std::ostringstream os;
            os << "greedy step " << s << ": token " << (s < ot.size() ? ot[s].dump() : "none") << ", golden " << gt[s]
               << " (golden gap " << double(gaps[s]) << ")";
            failure(os.str());
            break;
        }
        ++r.greedy_checked;
    }
    return r;
}

}  // namespace glia::test
