// glia tokenize, end to end.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "temp_path.h"
#include "test_util.h"
#include "tokenizer/unicode.h"

namespace {

using glia::test::glia_binary;
using glia::test::run_command;
using glia::test::shared_path;

std::string q(const std::string& s) { return "'" + s + "'"; }

TEST(CliTokenize, JsonMatchesGolden) {
    const auto golden = nlohmann::json::parse(glia::test::read_text(shared_path("golden/stories260K/p1_short.json")));
    std::string out;
    const std::string cmd = q(glia_binary()) + " tokenize " + q(shared_path("models/stories260K.gguf")) +
                            " \"Once upon a time\" --json";
    ASSERT_EQ(run_command(cmd, &out), 0) << cmd << "\n" << out;
    const auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j.at("ids"), golden.at("prompt_tokens"));
    EXPECT_EQ(j.at("pieces"), golden.at("prompt_token_pieces"));
}

TEST(CliTokenize, FileAndFlags) {
    const std::string prompt_file = glia::test::temp_path("tok_prompt.txt");
    const auto golden = nlohmann::json::parse(glia::test::read_text(shared_path("golden/stories260K/p3_punct_digits.json")));
    {
        FILE* f = std::fopen(prompt_file.c_str(), "wb");
        ASSERT_NE(f, nullptr);
        const std::string p = golden.at("prompt").get<std::string>();
        std::fwrite(p.data(), 1, p.size(), f);
        std::fclose(f);
    }
    const std::string model = q(shared_path("models/stories260K.gguf"));
    std::string out;
    ASSERT_EQ(run_command(q(glia_binary()) + " tokenize " + model + " -f " + q(prompt_file) + " --json", &out), 0) << out;
    EXPECT_EQ(nlohmann::json::parse(out).at("ids"), golden.at("prompt_tokens"));

    // --no-special drops the BOS.
    ASSERT_EQ(run_command(q(glia_binary()) + " tokenize " + model + " -f " + q(prompt_file) + " --json --no-special", &out), 0);
    auto ids = golden.at("prompt_tokens").get<std::vector<int>>();
    ids.erase(ids.begin());
    EXPECT_EQ(nlohmann::json::parse(out).at("ids").get<std::vector<int>>(), ids);

    // --parse-special turns "</s>" into the EOS token.
    ASSERT_EQ(run_command(q(glia_binary()) + " tokenize " + model + " 'Hi</s>' --json --parse-special", &out), 0);
    EXPECT_EQ(nlohmann::json::parse(out).at("ids").back(), 2);
    ASSERT_EQ(run_command(q(glia_binary()) + " tokenize " + model + " 'Hi</s>' --json", &out), 0);
    EXPECT_NE(nlohmann::json::parse(out).at("ids").back(), 2);

    // The readable form: one "id<TAB>'piece'" line per token.
    ASSERT_EQ(run_command(q(glia_binary()) + " tokenize " + model + " 'Once upon a time'", &out), 0);
    EXPECT_NE(out.find("403\t' Once'"), std::string::npos) << out;
    std::remove(prompt_file.c_str());
}

// A byte-level BPE vocabulary: "Hello world" is two GPT-2 tokens.
TEST(CliTokenize, BpeVocab) {
    if (!glia::tok::unicode::have_pcre2()) GTEST_SKIP() << "built without PCRE2";
    std::string out;
    const std::string cmd = q(glia_binary()) + " tokenize " + q(shared_path("vocab/ggml-vocab-gpt-2.gguf")) +
                            " 'Hello world' --json --no-special";
    ASSERT_EQ(run_command(cmd, &out), 0) << cmd << "\n" << out;
    const auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j.at("ids").get<std::vector<int>>(), std::vector<int>({15496, 995}));
    EXPECT_EQ(j.at("pieces").get<std::vector<std::string>>(), std::vector<std::string>({"Hello", " world"}));
}

TEST(CliTokenize, Errors) {
    std::string out;
    // Missing model file.
    EXPECT_NE(run_command(q(glia_binary()) + " tokenize /nonexistent/model.gguf hello 2>&1", &out), 0);
    EXPECT_NE(out.find("not found"), std::string::npos) << out;
    // Not a GGUF file.
    EXPECT_NE(run_command(q(glia_binary()) + " tokenize " + q(shared_path("vocab/ggml-vocab-llama-spm.gguf.inp")) +
                              " hello 2>&1", &out), 0);
    EXPECT_NE(out.find("error"), std::string::npos) << out;
    // Missing prompt file.
    EXPECT_NE(run_command(q(glia_binary()) + " tokenize " + q(shared_path("models/stories260K.gguf")) +
                              " -f /nonexistent/prompt.txt 2>&1", &out), 0);
    EXPECT_NE(out.find("/nonexistent/prompt.txt"), std::string::npos) << out;
    // No text.
    EXPECT_NE(run_command(q(glia_binary()) + " tokenize " + q(shared_path("models/stories260K.gguf")) + " 2>&1", &out), 0);
    EXPECT_NE(out.find("no text"), std::string::npos) << out;
}

}  // namespace
