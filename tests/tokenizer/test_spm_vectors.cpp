// SentencePiece round trips on llama.cpp's test texts (the vectors themselves are checked
// for every vocabulary in test_vocab_vectors.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "tok_test_util.h"
#include "test_util.h"

namespace {

using glia::test::read_vocab_cases;
using glia::test::shared_path;

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

namespace {

// Random text (valid and stray-continuation UTF-8, NULs, control characters,
// special-token text) never crashes, and round-trips through the byte fallback.
// Left out: a literal U+2581, which comes back as a space (SentencePiece cannot tell
// them apart), and invalid lead bytes, which swallow the bytes after them into one
// symbol exactly as in the reference (see LeadByteSwallowsFollowingBytes).
TEST(SpmVectors, RandomTextRoundTrip) {
    auto file = glia::gguf::File::open(shared_path("vocab/ggml-vocab-llama-spm.gguf"));
    auto vocab = glia::tok::Vocab::from_gguf(*file);
    uint64_t state = 12345;
    auto next = [&] {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<uint32_t>(state >> 33);
    };
    auto put_utf8 = [](std::string& s, uint32_t cp) {
        if (cp < 0x80) s += static_cast<char>(cp);
        else if (cp < 0x800) s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 63));
        else if (cp < 0x10000)
            s += static_cast<char>(0xE0 | (cp >> 12)), s += static_cast<char>(0x80 | ((cp >> 6) & 63)),
                s += static_cast<char>(0x80 | (cp & 63));
        else
            s += static_cast<char>(0xF0 | (cp >> 18)), s += static_cast<char>(0x80 | ((cp >> 12) & 63)),
                s += static_cast<char>(0x80 | ((cp >> 6) & 63)), s += static_cast<char>(0x80 | (cp & 63));
    };
    const char* snippets[] = {"<s>", "</s>", "<unk>", " ", "  ", "\xC3\xA9", "llama", "\n", " the"};
    for (int iter = 0; iter < 500; ++iter) {
        std::string x;
        const int n = static_cast<int>(next() % 40);
        for (int k = 0; k < n; ++k) {
            switch (next() % 5) {
                case 0: x += snippets[next() % (sizeof snippets / sizeof *snippets)]; break;
                case 1: x += static_cast<char>(next() & 0x7F); break;
                case 2: x += static_cast<char>(0x80 + next() % 64); break;  // stray continuation byte
                default: {
                    uint32_t cp = next() % 0x110000;
                    if ((cp >= 0xD800 && cp < 0xE000) || cp == 0x2581) cp = 0x4E2D;
                    put_utf8(x, cp);
                }
            }
        }
        const auto ids = vocab->tokenize(x, false, false);
        EXPECT_EQ(vocab->detokenize(ids), x.empty() ? "" : " " + x) << "iteration " << iter;
        // With special parsing: valid ids, and "<s>" / "</s>" become tokens.
        const auto sp = vocab->tokenize(x, true, true);
        for (int32_t id : sp) ASSERT_TRUE(id >= 0 && id < vocab->n_tokens());
        if (x.find("</s>") != std::string::npos) {
            EXPECT_NE(std::find(sp.begin(), sp.end(), vocab->eos()), sp.end());
        }
    }
}

}  // namespace

namespace {

TEST(SpmVectors, LeadByteSwallowsFollowingBytes) {
    // 0xFA announces a 4-byte sequence, so "\xFA" and the 3 bytes of the first escaped
    // space form one symbol, which is not a token: all four come out as byte tokens.
    auto file = glia::gguf::File::open(shared_path("vocab/ggml-vocab-llama-spm.gguf"));
    auto vocab = glia::tok::Vocab::from_gguf(*file);
    const auto ids = vocab->tokenize("\xFA  V", false, false);
    ASSERT_GE(ids.size(), 5u);
    const std::vector<int32_t> head(ids.begin() + 1, ids.begin() + 5);  // after "\u2581"
    EXPECT_EQ(head, std::vector<int32_t>({3 + 0xFA, 3 + 0xE2, 3 + 0x96, 3 + 0x81}));
    EXPECT_EQ(vocab->detokenize(ids), " \xFA\xE2\x96\x81 V");
}

}  // namespace
