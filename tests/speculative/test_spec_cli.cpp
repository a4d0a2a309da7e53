// glia run with speculation: the same text as without it, the acceptance in the closing
// line, and clear refusals.
#include <gtest/gtest.h>

#include "backend/registry.h"
#include "cli_util.h"
#include "test_util.h"

using glia::test::run_command;

namespace {

std::string stories(const std::string& file = "stories260K.gguf") {
    return glia::test::shared_path("models/" + file);
}

// stdout of `glia run ARGS` (stderr dropped); the exit code must be 0.
std::string run_text(const std::string& args) {
    std::string out;
    EXPECT_EQ(run_command(glia::test::glia_binary() + " run " + args + " 2>/dev/null", &out), 0) << args;
    return out;
}

TEST(SpecCli, GreedyTextUnchangedAndAcceptanceReported) {
    const std::string base = stories() + " -p 'Once upon a time, there was a little girl' -n 80 --temp 0 -t 2";
    const std::string plain = run_text(base);
    ASSERT_GT(plain.size(), 50u);
    EXPECT_EQ(run_text(base + " --spec-ngram"), plain);
    EXPECT_EQ(run_text(base + " --spec-ngram --spec-ngram-min 2 --draft-max 3 --draft-min 2"), plain);
    EXPECT_EQ(run_text(base + " --model-draft " + stories("stories260K-q4_0.gguf") + " --draft-max 4"), plain);
    std::string all;
    ASSERT_EQ(run_command(glia::test::glia_binary() + " run " + base + " --model-draft " +
                              stories("stories260K-q8_0.gguf") + " 2>&1",
                          &all), 0);
    EXPECT_NE(all.find("| speculative (draft model): drafted "), std::string::npos) << all;
    EXPECT_NE(all.find("tokens a target step"), std::string::npos) << all;
}

// Up to a full context (stopping at its last cell), with and without speculation.
TEST(SpecCli, ContextFullStopsAtTheSameToken) {
    const std::string base = stories() + " -p 'Once upon a time' -n -1 --ignore-eos -c 48 --temp 0 -t 2";
    std::string plain, spec;
    ASSERT_EQ(run_command(glia::test::glia_binary() + " run " + base + " 2>&1", &plain), 0);
    ASSERT_EQ(run_command(glia::test::glia_binary() + " run " + base + " --spec-ngram --draft-max 16 2>&1", &spec), 0);
    EXPECT_NE(plain.find("stopped: context full"), std::string::npos) << plain;
    EXPECT_NE(spec.find("stopped: context full"), std::string::npos) << spec;
    EXPECT_EQ(spec.substr(0, spec.find("\nglia: ")), plain.substr(0, plain.find("\nglia: ")));
}

TEST(SpecCli, SamplingWithTheSameSeedRepeats) {
    const std::string base = stories() + " -p 'Once upon a time' -n 60 --temp 0.9 --seed 11 -t 2";
    const std::string a = run_text(base + " --spec-ngram");
    EXPECT_GT(a.size(), 20u);
    EXPECT_EQ(run_text(base + " --spec-ngram"), a);
    const std::string d = run_text(base + " --model-draft " + stories("stories260K-q4_0.gguf"));
    EXPECT_EQ(run_text(base + " --model-draft " + stories("stories260K-q4_0.gguf")), d);
}

TEST(SpecCli, RefusalsAreOneLineErrors) {
    std::string out;
    EXPECT_NE(run_command(glia::test::glia_binary() + " run " + stories() + " -p hi --spec-ngram --model-draft " +
                              stories() + " 2>&1",
                          &out), 0);
    EXPECT_NE(out.find("not both"), std::string::npos) << out;
    EXPECT_NE(run_command(glia::test::glia_binary() + " run " + stories() + " -p hi --spec-ngram --draft-max 4 "
                              "--draft-min 5 2>&1",
                          &out), 0);
    EXPECT_NE(out.find("--draft-min"), std::string::npos) << out;
    EXPECT_NE(run_command(glia::test::glia_binary() + " run " + stories("tiny-lfm2-q8_0.gguf") +
                              " -p hi --spec-ngram 2>&1",
                          &out), 0);
    EXPECT_NE(out.find("recurrent layers"), std::string::npos) << out;
    EXPECT_NE(run_command(glia::test::glia_binary() + " run " + stories() + " -p hi --model-draft " +
                              glia::test::shared_path("models/tiny-lfm2-q8_0.gguf") + " 2>&1",
                          &out), 0);
    EXPECT_NE(out.find("draft model"), std::string::npos) << out;
}

}  // namespace

// The speculative bench places the target as -ngl asks, like every other command: without
// a GPU here, -ngl is reported as ignored (before, the bench never read it and ran on the CPU
// silently, also on a GPU machine).
TEST(SpecCli, BenchPlacesTheTargetByNgl) {
    std::string out;
    ASSERT_EQ(run_command(glia::test::glia_binary() + " bench " + stories() +
                              " --spec-ngram --text 'Once upon a time' -n 8 -r 1 -t 1 -ngl 99 2>&1",
                          &out),
              0)
        << out;
    EXPECT_NE(out.find("same tokens: yes"), std::string::npos) << out;
    if (glia::cuda_device_count() == 0) {  // glia's own test for "no GPU here"
        EXPECT_NE(out.find("-ngl 99 ignored"), std::string::npos) << out;
    }
}
