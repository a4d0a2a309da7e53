// Generation with and without speculation, for the identity tests: n tokens (end of
// generation ignored, as in the goldens), the second way through runtime/speculative.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/speculative.h"
#include "test_util.h"

namespace glia::test {

inline SessionOptions spec_session(int n_ctx) {
    SessionOptions so;
    so.n_ctx = n_ctx;
    so.n_threads = 2;
    return so;
}

inline SamplerParams greedy_params() {
    SamplerParams sp;
    sp.temperature = 0;
    return sp;
}

// One token a step, as glia run does without speculation.
inline std::vector<int32_t> generate_plain(const Model& m, const std::vector<int32_t>& prompt, int n, int n_ctx,
                                           const SamplerParams& sp = greedy_params()) {
    Session s(m, spec_session(n_ctx));
    Sampler sampler(sp);
    std::vector<int32_t> text = prompt;
    std::vector<float> l = s.decode(prompt, false);
    for (int i = 0; i < n; ++i) {
        text.push_back(sampler.sample(l.data(), s.n_vocab(), text));
        if (i + 1 < n) l = s.decode({text.back()}, false);
    }
    return {text.begin() + static_cast<long>(prompt.size()), text.end()};
}

inline std::vector<int32_t> generate_speculative(const Model& m, const std::vector<int32_t>& prompt, int n, int n_ctx,
                                                 SpecOptions o, SpecStats* stats = nullptr,
                                                 const SamplerParams& sp = greedy_params()) {
    Session s(m, spec_session(n_ctx));
    Sampler sampler(sp);
    o.draft_session = spec_session(n_ctx);
    Speculator spec(s, sampler, o);
    std::vector<int32_t> text = prompt;
    std::vector<float> l = s.decode(prompt, false);
    text.push_back(sampler.sample(l.data(), s.n_vocab(), text));
    while (static_cast<int>(text.size() - prompt.size()) < n) {
        const int left = n - static_cast<int>(text.size() - prompt.size());
        const std::vector<int32_t> next = spec.step(text, left);
        EXPECT_GE(next.size(), 1u);
        EXPECT_LE(static_cast<int>(next.size()), left);
        text.insert(text.end(), next.begin(), next.end());
    }
    if (stats) *stats = spec.stats();
    return {text.begin() + static_cast<long>(prompt.size()), text.end()};
}

// The goldens' prompts for a model (token ids as the reference tokenized them); the
// 2,000-token one only when asked (it dominates the time on 2 cores).
inline std::vector<std::pair<std::string, std::vector<int32_t>>> golden_prompts(const std::string& stem,
                                                                              bool with_long = false) {
    std::vector<std::pair<std::string, std::vector<int32_t>>> out;
    for (const char* id : {"p1_short", "p2_story40", "p3_punct_digits", "p4_single_token", "p5_long300", "p6_long2k"}) {
        if (!with_long && std::string(id) == "p6_long2k") continue;
        const auto j = nlohmann::json::parse(read_text(shared_path("golden/" + stem + "/" + id + ".json")));
        out.emplace_back(id, j["prompt_tokens"].get<std::vector<int32_t>>());
    }
    return out;
}

}  // namespace glia::test
