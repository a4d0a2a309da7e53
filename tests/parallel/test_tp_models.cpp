// Tensor parallelism on the golden models: the model split into N CPU ranks (threads of
// this process, summing through the in-process communicator) gives the same greedy tokens
// as one rank, and `glia eval -tp N` passes the goldens' rules (tests/golden).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "golden_compare.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "cli_util.h"
#include "test_util.h"

namespace glia {
namespace {

struct Case {
    std::string stem;
    int tp;
};

std::vector<Case> cases() {
    return {{"stories260K", 2},       {"stories260K", 4},       {"stories260K-q8_0", 2}, {"stories260K-q4_0", 2},
            {"tiny-llama-f32", 2},    {"tiny-llama-f16", 2},    {"tiny-llama-f16", 4},   {"tiny-llama-q8_0", 2},
            {"tiny-llama-q8_0", 4},   {"tiny-llama-q4_0", 2},   {"tiny-qwen2-f16", 2},   {"tiny-qwen2-q8_0", 2},
            {"tiny-qwen3-f16", 2},    {"tiny-qwen3-f16", 4},    {"tiny-qwen3-q8_0", 2},  {"tiny-qwen3moe-f16", 2},
            {"tiny-qwen3moe-f16", 4}, {"tiny-qwen3moe-q8_0", 2}, {"tiny-phi3-f16", 2},   {"tiny-gemma-f16", 2},
            {"tiny-gemma2-f16", 2},   {"tiny-gemma3-f16", 2},   {"tiny-gemma3-q8_0", 2}};
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
    std::string s = info.param.stem + "_tp" + std::to_string(info.param.tp);
    for (char& c : s)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return s;
}

nlohmann::json golden(const std::string& stem, const std::string& prompt) {
    return nlohmann::json::parse(test::read_text(test::shared_dir() + "/golden/" + stem + "/" + prompt + ".json"));
}

struct GreedyRun {
    std::vector<int32_t> tokens;
    std::vector<float> gaps;          // top-1 minus top-2 before each token
    std::vector<std::vector<float>> logits;
};

GreedyRun greedy(const Model& m, int tp, const std::vector<int32_t>& prompt, int n) {
    SessionOptions so;
    so.n_ctx = static_cast<int>(prompt.size()) + n + 16;
    so.n_threads = 2;
    so.tp = tp;
    Session s(m, so);
    GreedyRun r;
    std::vector<float> l = s.decode(prompt, false);
    for (int i = 0; i < n; ++i) {
        const int32_t t = argmax(l.data(), s.n_vocab());
        float second = -INFINITY;
        for (int v = 0; v < s.n_vocab(); ++v)
            if (v != t) second = std::max(second, l[size_t(v)]);
        r.tokens.push_back(t);
        r.gaps.push_back(l[size_t(t)] - second);
        r.logits.push_back(l);
        if (i + 1 < n) l = s.decode({t}, false);
    }
    return r;
}

class TensorParallel : public testing::TestWithParam<Case> {};

// Greedy tokens of N ranks equal one rank's, step for step. The ranks add the K-split
// products in another order than one rank does (a few float ulps), which the F16 KV cache
// and the 8-bit activation blocks can round the other way: measured up to 0.01 on the
// float files and 0.2 on quantized ones. So the logits must stay within the goldens'
// bound for the file, and a token may differ only after a near-tie (gap below tau).
TEST_P(TensorParallel, SameGreedyTokensAsOneRank) {
    const Case& c = GetParam();
    auto m = Model::load(test::shared_dir() + "/models/" + c.stem + ".gguf");
    const auto tol = test::tolerance_for(c.stem);
    for (const char* prompt : {"p2_story40", "p3_punct_digits", "p5_long300"}) {
        const std::vector<int32_t> toks = golden(c.stem, prompt)["prompt_tokens"].get<std::vector<int32_t>>();
        const GreedyRun one = greedy(*m, 1, toks, 48), many = greedy(*m, c.tp, toks, 48);
        double max_diff = 0;
        int same = 0;
        for (size_t i = 0; i < one.tokens.size(); ++i) {
            if (i > 0 && one.tokens[i - 1] != many.tokens[i - 1]) break;  // diverged: different contexts
            for (size_t v = 0; v < one.logits[i].size(); ++v)
                max_diff = std::max(max_diff, double(std::fabs(one.logits[i][v] - many.logits[i][v])));
            if (one.tokens[i] != many.tokens[i]) {
                EXPECT_LT(one.gaps[i], tol.tau) << c.stem << " " << prompt << ": step " << i << " differs at gap "
                                             << one.gaps[i];
                break;
            }
            ++same;
        }
        // MoE: an expert chosen the other way at a router near-tie moves the logits by the
        // routing jump (../shared/README.md "MoE routing"; measured 2.5 on qwen3moe Q8_0, p5),
        // so for MoE files the bound is checked with the recorded routing (the eval test).
        if (m->profile().n_expert == 0) {
            EXPECT_LT(max_diff, tol.bound) << c.stem << " tp " << c.tp << " " << prompt;
        }
        std::printf("[tp] %-20s tp %d %-16s same tokens %2d/48, max |logit diff| %.2e\n", c.stem.c_str(), c.tp, prompt,
                    same, max_diff);
    }
}

// `glia eval -tp N` against the reference (MoE with the recorded routing, as tests/golden).
TEST_P(TensorParallel, EvalPassesTheGoldenRules) {
    const Case& c = GetParam();
    const test::ScratchDir scratch("tp");
    for (const char* prompt : {"p1_short", "p5_long300"}) {
        const std::string gdir = test::shared_dir() + "/golden/" + c.stem + "/";
        const nlohmann::json g = golden(c.stem, prompt);
        const std::string tmp = scratch.file(c.stem + "_" + std::to_string(c.tp) + "_" + prompt);
        std::ofstream(tmp + ".txt", std::ios::binary) << g["prompt"].get<std::string>();
        const bool forced = g.contains("moe_selected_experts");
        const std::string cmd = test::glia_binary() + " eval " + test::shared_dir() + "/models/" + c.stem + ".gguf -f " +
                                tmp + ".txt -n 48 -t 2 -tp " + std::to_string(c.tp) + " --json-out " + tmp +
                                ".json --logits-out " + tmp + ".bin" +
                                (forced ? " --force-routing " + gdir + prompt + ".json" : std::string()) + " 2>&1";
        std::string out;
        ASSERT_EQ(test::run_command(cmd, &out), 0) << cmd << "\n" << out;
        const nlohmann::json ours = nlohmann::json::parse(test::read_text(tmp + ".json"));
        auto floats = [](const std::string& path) {
            const auto b = test::read_bytes(path);
            std::vector<float> v(b.size() / 4);
            std::memcpy(v.data(), b.data(), v.size() * 4);
            return v;
        };
        const auto tol = test::tolerance_for(c.stem);
        const auto r = test::compare_golden(g, ours, floats(gdir + prompt + ".logits.bin"), floats(tmp + ".bin"), tol,
                                            forced);
        std::printf("[tp golden] %-20s tp %d %-12s %s\n", c.stem.c_str(), c.tp, prompt, r.summary().c_str());
        std::string msg;
        for (const auto& f : r.failures) msg += "  " + f + "\n";
        EXPECT_TRUE(r.ok) << c.stem << " -tp " << c.tp << " / " << prompt << ":\n" << msg;
    }
}

INSTANTIATE_TEST_SUITE_P(Golden, TensorParallel, testing::ValuesIn(cases()), case_name);

}  // namespace
}  // namespace glia
