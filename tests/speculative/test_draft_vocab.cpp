// A draft model must share the target's vocabulary: otherwise a clear error naming the
// first token that differs.
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "runtime/speculative.h"
#include "test_util.h"
#include "tokenizer/vocab.h"

using namespace glia;

namespace {

std::unique_ptr<tok::Vocab> vocab_of(const std::string& rel) {
    auto f = gguf::File::open(test::shared_path(rel));
    return tok::Vocab::from_gguf(*f);
}

TEST(DraftVocab, SameVocabularyIsAccepted) {
    auto a = vocab_of("models/stories260K.gguf");
    auto b = vocab_of("models/stories260K-q4_0.gguf");
    EXPECT_EQ(test::error_of([&] { check_draft_vocab(*a, *b, "draft.gguf"); }), "");
}

TEST(DraftVocab, FirstDifferingTokenIsNamed) {
    auto target = vocab_of("models/stories260K.gguf");
    auto draft = vocab_of("vocab/ggml-vocab-llama-spm.gguf");
    int32_t first = -1;
    for (int32_t id = 0; id < std::min(target->n_tokens(), draft->n_tokens()) && first < 0; ++id)
        if (target->raw_piece(id) != draft->raw_piece(id) || target->token_type(id) != draft->token_type(id)) first = id;
    ASSERT_GE(first, 0);
    const std::string err = test::error_of([&] { check_draft_vocab(*target, *draft, "spm.gguf"); });
    EXPECT_NE(err.find("spm.gguf"), std::string::npos) << err;
    EXPECT_NE(err.find("token " + std::to_string(first) + " is"), std::string::npos) << err;
}

}  // namespace
