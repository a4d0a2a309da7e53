// glia bench: the table and the JSON records.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tools_test_util.h"

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

}  // namespace
}  // namespace glia::test
