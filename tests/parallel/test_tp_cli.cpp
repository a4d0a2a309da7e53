// The CLI's several-device options: glia plan -tp (text, JSON, refusal with exit 3),
// glia run -tp on CPU ranks, and the honest refusals of what has not been run.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace glia {
namespace {

std::string model(const std::string& stem) { return test::shared_dir() + "/models/" + stem + ".gguf"; }

int glia(const std::string& args, std::string* out) {
    return test::run_command(test::glia_binary() + " " + args + " 2>&1", out);
}

TEST(TpCli, PlanShowsEachRanksShareAndBytes) {
    std::string out;
    ASSERT_EQ(glia("plan " + model("tiny-llama-f16") + " -tp 2 -c 1024 --json", &out), 0) << out;
    const auto j = nlohmann::json::parse(out);
    const auto& tp = j["tensor_parallel"];
    EXPECT_EQ(tp["world"], 2);
    ASSERT_EQ(tp["ranks"].size(), 2u);
    EXPECT_EQ(tp["ranks"][1]["n_head"], 2);
    EXPECT_EQ(tp["ranks"][1]["n_head_kv"], 1);
    EXPECT_EQ(tp["ranks"][1]["vocab_rows"], 256);
    EXPECT_EQ(tp["ranks"][0]["kv"], 2 * 64 * 2 * 2 * 1024);  // 1 KV head x (K + V) x F16 x 2 layers
    ASSERT_EQ(glia("plan " + model("tiny-llama-f16") + " -tp 2", &out), 0) << out;
    EXPECT_NE(out.find("heads 4 -> 2 per rank, KV heads 2 -> 1"), std::string::npos) << out;
    EXPECT_NE(out.find("cpu rank 1"), std::string::npos) << out;
}

TEST(TpCli, PlanRefusalsExitWith3) {
    std::string out;
    EXPECT_EQ(glia("plan " + model("tiny-llama-q4_k_m") + " -tp 2", &out), 3) << out;
    EXPECT_NE(out.find("blk.0.attn_output.weight"), std::string::npos) << out;
    EXPECT_EQ(glia("plan " + model("tiny-llama-f16") + " -tp 3", &out), 3) << out;
    EXPECT_NE(out.find("use -tp 2, 4"), std::string::npos) << out;
    EXPECT_EQ(glia("plan " + model("tiny-lfm2-f16") + " -tp 2", &out), 3) << out;
    EXPECT_NE(out.find("recurrent layers"), std::string::npos) << out;
}

TEST(TpCli, RunOnCpuRanksAndHonestRefusals) {
    std::string one, two;
    ASSERT_EQ(glia("run " + model("stories260K") + " -p 'Once upon a time' -n 24 --temp 0 -t 2", &one), 0) << one;
    ASSERT_EQ(glia("run " + model("stories260K") + " -p 'Once upon a time' -n 24 --temp 0 -t 2 -tp 2", &two), 0) << two;
    EXPECT_EQ(one.substr(0, one.find("glia:")), two.substr(0, two.find("glia:")));
    std::string out;
    EXPECT_NE(glia("run " + model("stories260K") + " -p hi -tp 2 -ngl 99", &out), 0);
    EXPECT_NE(out.find("not run yet"), std::string::npos) << out;
    EXPECT_NE(glia("run " + model("stories260K") + " -p hi -sm tensor", &out), 0);
    EXPECT_NE(out.find("not available in this version"), std::string::npos) << out;
    EXPECT_NE(glia("run " + model("stories260K") + " -p hi --rank 1 --world 2 --coordinator 127.0.0.1:29500", &out), 0);
    EXPECT_NE(out.find("not available in this version"), std::string::npos) << out;
    EXPECT_NE(glia("run " + model("stories260K") + " -p hi --rank 1 --world 2", &out), 0);
    EXPECT_NE(out.find("go together"), std::string::npos) << out;
    ASSERT_EQ(glia("run --help", &out), 0);
    for (const char* opt : {"-tp, --tensor-parallel", "--devices", "-sm, --split-mode", "--rank", "--coordinator"})
        EXPECT_NE(out.find(opt), std::string::npos) << opt;
}

}  // namespace
}  // namespace glia
