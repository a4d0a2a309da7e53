// llama.cpp's tokenizer test vectors for the SentencePiece vocabularies: no BOS/EOS, no
// special-token parsing, every case must give exactly the expected ids.
#include <gtest/gtest.h>

#include <sstream>

#include "tok_test_util.h"
#include "test_util.h"

namespace {

using glia::test::read_vocab_cases;
using glia::test::shared_path;

std::string ids_str(const std::vector<int32_t>& v) {
    std::ostringstream os;
    for (size_t i = 0; i < v.size(); ++i) os << (i ? " " : "") << v[i];
    return os.str();
}

std::string show(const std::string& s) {
    std::string o;
    for (unsigned char c : s) {
        if (c == '\n') o += "\\n";
        else if (c == '\t') o += "\\t";
        else o += static_cast<char>(c);
    }
    return o;
}

void check_vectors(const std::string& name, size_t expected_cases) {
    const std::string base = "vocab/ggml-vocab-" + name + ".gguf";
    auto file = glia::gguf::File::open(shared_path(base));
    auto vocab = glia::tok::Vocab::from_gguf(*file);
    ASSERT_EQ(vocab->kind(), glia::tok::Kind::SPM);
    auto cases = read_vocab_cases(shared_path(base + ".inp"), shared_path(base + ".out"));
    ASSERT_EQ(cases.size(), expected_cases);
    int failed = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        auto got = vocab->tokenize(cases[i].text, /*add_special=*/false, /*parse_special=*/false);
        if (got != cases[i].ids) {
            ++failed;
            ADD_FAILURE() << name << " case " << i << " text '" << show(cases[i].text) << "'\n  expected: "
                          << ids_str(cases[i].ids) << "\n  got:      " << ids_str(got);
        }
    }
    EXPECT_EQ(failed, 0) << failed << " of " << cases.size() << " cases failed";
}

TEST(SpmVectors, LlamaSpm) { check_vectors("llama-spm", 46); }
TEST(SpmVectors, Phi3) { check_vectors("phi-3", 46); }

// detokenize(tokenize(x)) == x, with the leading space SentencePiece adds (llama-spm has
// byte tokens, so nothing is lost).
TEST(SpmVectors, LlamaSpmRoundTrip) {
    const std::string base = "vocab/ggml-vocab-llama-spm.gguf";
    auto file = glia::gguf::File::open(shared_path(base));
    auto vocab = glia::tok::Vocab::from_gguf(*file);
    auto cases = read_vocab_cases(shared_path(base + ".inp"), shared_path(base + ".out"));
    for (size_t i = 0; i < cases.size(); ++i) {
        const std::string& x = cases[i].text;
        const std::string want = x.empty() ? "" : " " + x;
        EXPECT_EQ(vocab->detokenize(vocab->tokenize(x, false, false)), want) << "case " << i;
        // With BOS added, the BOS renders as nothing unless special tokens are rendered.
        auto with_bos = vocab->tokenize(x, true, false);
        ASSERT_FALSE(with_bos.empty());
        EXPECT_EQ(with_bos.front(), vocab->bos());
        EXPECT_EQ(vocab->detokenize(with_bos), want) << "case " << i;
        EXPECT_EQ(vocab->detokenize(with_bos, true), "<s>" + want) << "case " << i;
    }
}

}  // namespace
