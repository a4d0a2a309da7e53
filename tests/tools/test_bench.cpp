// glia bench: the table and the JSON records; batched generation (--parallel).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "cli_util.h"

namespace glia::test {
namespace {

TEST(Bench, JsonRecords) {
    std::string out;
    const std::string model = shared_path("models/tiny-llama-q4_k_m.gguf");
    ASSERT_EQ(0, run_command(cat(glia_binary(), " bench ", model, " -p 16 -n 4 -r 2 -t 2 --json"), &out)) << out;
    const auto j = nlohmann::json::parse(out);
    ASSERT_TRUE(j.is_array());
    ASSERT_EQ(j.size(), 2u);
    EXPECT_EQ(j[0]["test"], "pp16");
    EXPECT_EQ(j[1]["test"], "tg4");
    for (const auto& r : j) {
        EXPECT_EQ(r["n_threads"], 2);
        EXPECT_EQ(r["model_bytes"], 654080);  // the tensor bytes of the file
        EXPECT_EQ(r["model_n_params"], 1049856);
        EXPECT_EQ(r["samples_ts"].size(), 2u);
        EXPECT_GT(r["median_ts"].get<double>(), 0.0);
        EXPECT_GT(r["avg_ts"].get<double>(), 0.0);
        EXPECT_GE(r["stddev_ts"].get<double>(), 0.0);
    }
}

TEST(Bench, MarkdownTableAndErrors) {
    std::string out;
    const std::string model = shared_path("models/stories260K-q8_0.gguf");
    ASSERT_EQ(0, run_command(cat(glia_binary(), " bench ", model, " -p 8 -n 2 -r 1 -t 1,2"), &out)) << out;
    EXPECT_NE(out.find("| model"), std::string::npos) << out;
    EXPECT_NE(out.find("pp8 |"), std::string::npos) << out;
    EXPECT_NE(out.find("tg2 |"), std::string::npos) << out;
    EXPECT_NE(out.find("Q8_0"), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2 + 4) << out;  // header, rule, 2 tests x 2 thread counts
    EXPECT_NE(0, run_glia(cat("bench ", model, " -p 8,x"), &out));
    EXPECT_NE(out.find("comma-separated"), std::string::npos) << out;
    EXPECT_NE(0, run_glia("bench /nonexistent.gguf", &out));
    EXPECT_NE(out.find("does not exist"), std::string::npos) << out;
}

// -d: each test again after that many tokens are in the cache, named as the reference names it.
TEST(Bench, DepthRecords) {
    std::string out;
    const std::string model = shared_path("models/stories260K.gguf");
    ASSERT_EQ(0, run_command(cat(glia_binary(), " bench ", model, " -p 8 -n 2 -d 0,40 -r 1 -t 1 --json"), &out)) << out;
    const auto j = nlohmann::json::parse(out);
    ASSERT_TRUE(j.is_array());
    ASSERT_EQ(j.size(), 4u) << out;
    const char* names[] = {"pp8", "tg2", "pp8 @ d40", "tg2 @ d40"};
    const int depths[] = {0, 0, 40, 40};
    for (size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(j[i]["test"], names[i]) << j[i].dump();
        EXPECT_EQ(j[i]["n_depth"], depths[i]) << j[i].dump();
        EXPECT_GT(j[i]["median_ts"].get<double>(), 0.0);
    }
    EXPECT_NE(0, run_glia(cat("bench ", model, " -d 8,-1"), &out));
    EXPECT_NE(out.find("-d"), std::string::npos) << out;
    EXPECT_NE(0, run_glia(cat("bench ", model, " --parallel 2 -d 8"), &out));
    EXPECT_NE(out.find("does not apply with --parallel"), std::string::npos) << out;
}

bool positive_finite(const nlohmann::json& v) {
    return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0;
}

TEST(Bench, BatchedJson) {
    std::string out;
    const std::string model = shared_path("models/stories260K.gguf");
    ASSERT_EQ(0, run_command(cat(glia_binary(), " bench ", model, " --parallel 1,4 --pp 16 --tg 8 -r 1 --json"), &out))
        << out;
    const auto j = nlohmann::json::parse(out);
    ASSERT_TRUE(j.is_array());
    ASSERT_EQ(j.size(), 2u) << out;
    EXPECT_EQ(j[0]["n_parallel"], 1);
    EXPECT_EQ(j[1]["n_parallel"], 4);
    for (const auto& r : j) {
        EXPECT_EQ(r["test"], "batched");
        EXPECT_EQ(r["n_prompt"], 16);
        EXPECT_EQ(r["n_gen"], 8);
        EXPECT_EQ(r["repetitions"], 1);
        EXPECT_GE(r["n_threads"].get<int>(), 1);
        EXPECT_GT(r["model_bytes"].get<uint64_t>(), 0u);
        EXPECT_TRUE(positive_finite(r["prompt_ts"])) << r.dump();
        EXPECT_TRUE(positive_finite(r["gen_ts_median"])) << r.dump();
        EXPECT_TRUE(positive_finite(r["gen_ts_avg"])) << r.dump();
        ASSERT_TRUE(r["gen_ts_stddev"].is_number()) << r.dump();
        EXPECT_EQ(r["gen_ts_stddev"].get<double>(), 0.0);  // one repetition
        EXPECT_EQ(r["samples_prompt_ts"].size(), 1u);
        EXPECT_EQ(r["samples_gen_ts"].size(), 1u);
        EXPECT_EQ(r["alone_same"], -1);  // not asked for
    }
}

// --check-alone: each sequence of the batch again alone; on this float model the batched
// path must give every sequence its solo greedy tokens (DESIGN.md principle 6).
TEST(Bench, BatchedCheckAlone) {
    std::string out;
    const std::string model = shared_path("models/stories260K.gguf");
    ASSERT_EQ(0, run_command(cat(glia_binary(), " bench ", model,
                                 " --parallel 3 --pp 12 --tg 6 -r 1 -t 2 --check-alone --json 2>&1"),
                             &out))
        << out;
    EXPECT_NE(out.find("--parallel 3: 3 of 3 sequences equal to the same prompt alone"), std::string::npos) << out;
    const auto j = nlohmann::json::parse(out.substr(out.find('[')));
    ASSERT_EQ(j.size(), 1u) << out;
    EXPECT_EQ(j[0]["alone_same"], 3) << out;
    EXPECT_NE(0, run_glia(cat("bench ", model, " -p 8 -n 4 --check-alone"), &out));
    EXPECT_NE(out.find("--check-alone needs --parallel"), std::string::npos) << out;
}

// The same on a quantized model, whose products have a one-token and a packed path: the
// batch must still change no one's greedy tokens (issue 14).
TEST(Bench, BatchedCheckAloneQuantized) {
    std::string out;
    const std::string model = shared_path("models/tiny-llama-q4_k_m.gguf");
    ASSERT_EQ(0, run_command(cat(glia_binary(), " bench ", model,
                                 " --parallel 16 --pp 24 --tg 32 -r 1 -t 2 --check-alone --no-warmup --json 2>&1"),
                             &out))
        << out;
    const auto j = nlohmann::json::parse(out.substr(out.find('[')));
    ASSERT_EQ(j.size(), 1u) << out;
    EXPECT_EQ(j[0]["alone_same"], 16) << out;
}

TEST(Bench, BatchedTableAndErrors) {
    std::string out;
    const std::string model = shared_path("models/stories260K.gguf");
    ASSERT_EQ(0, run_command(cat(glia_binary(), " bench ", model, " --parallel 2 --pp 8 --tg 4 -r 2 -t 1"), &out))
        << out;
    EXPECT_NE(out.find("| parallel |"), std::string::npos) << out;
    EXPECT_NE(out.find("generation t/s"), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2 + 1) << out;  // header, rule, one row

    for (const char* bad : {"--parallel 0", "--parallel 1,0", "--parallel 2,x", "--parallel -1", "--parallel ''"}) {
        EXPECT_NE(0, run_glia(cat("bench ", model, " ", bad), &out)) << bad;
        EXPECT_NE(out.find("--parallel"), std::string::npos) << bad << ": " << out;
    }
    EXPECT_NE(0, run_glia(cat("bench ", model, " --parallel 2 --tg 1"), &out));
    EXPECT_NE(out.find("--tg"), std::string::npos) << out;
    EXPECT_NE(0, run_glia(cat("bench ", model, " --parallel 2 --pp 0"), &out));
    EXPECT_NE(out.find("--pp"), std::string::npos) << out;
    EXPECT_NE(0, run_glia(cat("bench ", model, " --parallel 2 -p 8"), &out));
    EXPECT_NE(out.find("--pp"), std::string::npos) << out;
    EXPECT_NE(0, run_glia(cat("bench ", model, " --pp 8"), &out));
    EXPECT_NE(out.find("--parallel"), std::string::npos) << out;
}

}  // namespace
}  // namespace glia::test
