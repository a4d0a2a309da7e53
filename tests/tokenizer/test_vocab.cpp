// Vocabulary loading and SPM rules on small synthetic vocabularies, and the clear errors
// for tokenizer models that are not implemented.
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "tokenizer/unicode.h"
#include "tok_test_util.h"
#include "test_util.h"

namespace {

using glia::test::byte_tokens;
using glia::test::make_vocab_file;
using glia::test::SyntheticToken;
using glia::tok::Vocab;
using Ids = std::vector<int32_t>;

const std::string U = "\xE2\x96\x81";  // U+2581

// ids: 0 <unk>, 1 <s>, 2 </s>, then the extra tokens from 3, then (optionally) bytes.
std::vector<SyntheticToken> base(const std::vector<SyntheticToken>& extra, bool bytes = true) {
    std::vector<SyntheticToken> t = {{"<unk>", 0, 2}, {"<s>", 0, 3}, {"</s>", 0, 3}};
    t.insert(t.end(), extra.begin(), extra.end());
    if (bytes) {
        auto b = byte_tokens();
        t.insert(t.end(), b.begin(), b.end());
    }
    return t;
}

void no_prefix(glia::gguf::Writer& w) { w.set_bool("tokenizer.ggml.add_space_prefix", false); }

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const glia::Error& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(Vocab, SpmDefaults) {
    auto f = make_vocab_file(base({{"a", -1, 1}}));
    auto v = Vocab::from_gguf(*f);
    EXPECT_EQ(v->kind(), glia::tok::Kind::SPM);
    EXPECT_STREQ(glia::tok::kind_name(v->kind()), "SPM");
    EXPECT_EQ(v->bos(), 1);
    EXPECT_EQ(v->eos(), 2);
    EXPECT_EQ(v->unk(), 0);
    EXPECT_EQ(v->eot(), -1);
    EXPECT_TRUE(v->add_bos());
    EXPECT_FALSE(v->add_eos());
    EXPECT_TRUE(v->add_space_prefix());
    EXPECT_EQ(v->eog_ids(), Ids({2}));
    EXPECT_TRUE(v->is_control(1));
    EXPECT_FALSE(v->is_control(3));
    EXPECT_EQ(v->tokenize("", true, false), Ids({1}));
    EXPECT_EQ(v->tokenize("", false, false), Ids({}));
}

TEST(Vocab, SpecialIdsOutOfRangeMeanNone) {
    auto f = make_vocab_file(base({{"a", -1, 1}}), [](glia::gguf::Writer& w) {
        w.set_u32("tokenizer.ggml.bos_token_id", 0xFFFFFFFFu);
        w.set_u32("tokenizer.ggml.eos_token_id", 3);
        w.set_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
        w.set_u32("tokenizer.ggml.eot_token_id", 100000);
        w.set_bool("tokenizer.ggml.add_eos_token", true);
    });
    auto v = Vocab::from_gguf(*f);
    EXPECT_EQ(v->bos(), 1);  // the SPM default stays, like the reference
    EXPECT_EQ(v->eos(), 3);
    EXPECT_EQ(v->pad(), -1);
    EXPECT_EQ(v->eot(), -1);
    EXPECT_TRUE(v->is_eog(3));
    // 2 is not the EOS any more; it still ends generation, because its text "</s>" is an
    // end-of-generation name (special_names.cpp).
    EXPECT_TRUE(v->is_eog(2));
    EXPECT_EQ(v->eog_ids(), Ids({2, 3}));
    EXPECT_EQ(v->tokenize("", true, false), Ids({1, 3}));
}

TEST(Vocab, MergeHighestScoreFirst) {
    // "abc": ab (score 1) and bc (score 2) compete; bc wins.
    auto f = make_vocab_file(base({{"a", -5, 1}, {"b", -5, 1}, {"c", -5, 1}, {"ab", 1, 1}, {"bc", 2, 1}}), no_prefix);
    auto v = Vocab::from_gguf(*f);
    EXPECT_EQ(v->tokenize("abc", false, false), Ids({3, 7}));
}

TEST(Vocab, MergeTieGoesLeft) {
    auto f = make_vocab_file(base({{"a", -5, 1}, {"b", -5, 1}, {"c", -5, 1}, {"ab", 1, 1}, {"bc", 1, 1}}), no_prefix);
    auto v = Vocab::from_gguf(*f);
    EXPECT_EQ(v->tokenize("abc", false, false), Ids({6, 5}));
    EXPECT_EQ(v->tokenize("bcab", false, false), Ids({7, 6}));
}

TEST(Vocab, MergeChainsAndSpaces) {
    // ids: 3 ▁, 4 h, 5 i, 6 ▁h, 7 ▁hi, 8 hi
    auto f = make_vocab_file(base({{U, -1, 1}, {"h", -2, 1}, {"i", -2, 1}, {U + "h", -3, 1}, {U + "hi", -1, 1},
                                   {"hi", -0.5f, 1}}));
    auto v = Vocab::from_gguf(*f);
    // hi merges first (score -0.5); then ▁ + hi = ▁hi.
    EXPECT_EQ(v->tokenize("hi", false, false), Ids({7}));
    EXPECT_EQ(v->tokenize("hi hi", false, false), Ids({7, 7}));
    EXPECT_EQ(v->tokenize(" hi", false, false), Ids({3, 7}));
    EXPECT_EQ(v->tokenize("hi", true, false), Ids({1, 7}));
    EXPECT_EQ(v->token_to_piece(7), " hi");
    EXPECT_EQ(v->detokenize({1, 7, 7}), " hi hi");
    EXPECT_EQ(v->detokenize({1, 7, 7}, true), "<s> hi hi");
}

TEST(Vocab, ByteFallback) {
    auto f = make_vocab_file(base({{"a", -1, 1}}), no_prefix);
    auto v = Vocab::from_gguf(*f);
    // "é" = C3 A9 is not a token: its bytes become <0xC3> <0xA9> (ids 4 + byte).
    EXPECT_EQ(v->tokenize("a\xC3\xA9", false, false), Ids({3, 4 + 0xC3, 4 + 0xA9}));
    EXPECT_EQ(v->token_to_piece(4 + 0xC3), "\xC3");
    EXPECT_EQ(v->detokenize(v->tokenize("a\xC3\xA9", false, false)), "a\xC3\xA9");
    // A truncated UTF-8 sequence at the end is one short symbol, then bytes.
    EXPECT_EQ(v->tokenize("\xE2\x96", false, false), Ids({4 + 0xE2, 4 + 0x96}));
}

TEST(Vocab, NoByteTokensMeansUnk) {
    auto f = make_vocab_file(base({{"a", -1, 1}}, /*bytes=*/false), no_prefix);
    auto v = Vocab::from_gguf(*f);
    EXPECT_EQ(v->tokenize("a\xC3\xA9" "a", false, false), Ids({3, 0, 0, 3}));
    EXPECT_EQ(v->token_to_piece(0), "<unk>");
    EXPECT_EQ(v->token_to_piece(0, false), "");
}

TEST(Vocab, ParseSpecial) {
    // ids: 3 ▁, 4 a, 5 ▁a
    auto f = make_vocab_file(base({{U, -1, 1}, {"a", -1, 1}, {U + "a", 0, 1}, {"<", -1, 1}, {"s", -1, 1},
                                   {">", -1, 1}, {"/", -1, 1}}));
    auto v = Vocab::from_gguf(*f);
    // Text after a special token gets the SentencePiece space prefix too.
    EXPECT_EQ(v->tokenize("<s>a", false, true), Ids({1, 5}));
    EXPECT_EQ(v->tokenize("a</s>a", true, true), Ids({1, 5, 2, 5}));
    EXPECT_EQ(v->tokenize("a</s>", false, true), Ids({5, 2}));
    EXPECT_EQ(v->tokenize("</s></s>", false, true), Ids({2, 2}));
    // Without parse_special the text is plain text.
    EXPECT_EQ(v->tokenize("<s>", false, false), Ids({3, 6, 7, 8}));
    EXPECT_EQ(v->tokenize("<unk>", false, true), Ids({0}));
}

TEST(Vocab, UserDefinedTokensAlwaysSplit) {
    // A user-defined token is split out even without parse_special (like the reference).
    auto f = make_vocab_file(base({{U, -1, 1}, {"a", -1, 1}, {U + "a", 0, 1}, {"<x>", 0, 4}}));
    auto v = Vocab::from_gguf(*f);
    EXPECT_EQ(v->tokenize("a<x>a", false, false), Ids({5, 6, 5}));
    EXPECT_EQ(v->token_to_piece(6, false), "<x>");  // user-defined renders even without render_special
}

TEST(Vocab, LongestSpecialFirst) {
    auto f = make_vocab_file(base({{"a", -1, 1}, {"<a>", 0, 3}, {"<a><a>", 0, 3}}), no_prefix);
    auto v = Vocab::from_gguf(*f);
    EXPECT_EQ(v->tokenize("<a><a><a>", false, true), Ids({5, 4}));
}

TEST(Vocab, Phi3StripsAfterSpecialTokens) {
    // Name-based rule of the reference: for phi-3 models, whitespace right of a special
    // token is dropped (except after <unk>, <s>, <|endoftext|>).
    auto f = make_vocab_file(base({{U, -1, 1}, {"a", -1, 1}, {U + "a", 0, 1}, {"<|end|>", 0, 3}}),
                             [](glia::gguf::Writer& w) { w.set_str("general.name", "Phi-3 mini"); });
    auto v = Vocab::from_gguf(*f);
    EXPECT_EQ(v->tokenize("a<|end|> \n a", false, true), Ids({5, 6, 5}));
    EXPECT_EQ(v->tokenize("<s> a", false, true), Ids({1, 3, 5}));
    EXPECT_EQ(v->eot(), 6);
    EXPECT_TRUE(v->is_eog(6));
}

TEST(Vocab, EotDetectedByText) {
    // "<|im_end|>" stored as a normal token becomes control, EOT and end-of-generation.
    auto f = make_vocab_file(base({{"a", -1, 1}, {"<|im_end|>", 0, 1}, {"<|eom_id|>", 0, 1}}));
    auto v = Vocab::from_gguf(*f);
    EXPECT_EQ(v->eot(), 4);
    EXPECT_EQ(v->eom(), 5);
    EXPECT_TRUE(v->is_control(4));
    EXPECT_EQ(v->eog_ids(), Ids({2, 4, 5}));
    EXPECT_EQ(v->token_to_piece(4, false), "");
    EXPECT_EQ(v->token_to_piece(4, true), "<|im_end|>");
}

TEST(Vocab, PieceRules) {
    auto f = make_vocab_file(base({{U + "x" + U, 0, 1}, {"", 0, 1}, {"zz", 0, 5}, {"qq", 0, 0}}));
    auto v = Vocab::from_gguf(*f);
    EXPECT_EQ(v->token_to_piece(3), " x ");
    EXPECT_EQ(v->raw_piece(4), "[EMPTY_4]");
    EXPECT_EQ(v->token_to_piece(5), "");  // unused
    EXPECT_EQ(v->token_to_piece(6), "");  // undefined
    EXPECT_EQ(v->token_to_piece(7 + 0x41), "A");
    EXPECT_EQ(v->token_to_piece(7 + 0x00), std::string(1, '\0'));
    EXPECT_EQ(v->find_token("<0xFF>"), 7 + 0xFF);
    EXPECT_EQ(v->find_token("nope"), -1);
    EXPECT_NE(error_of([&] { v->token_to_piece(v->n_tokens()); }).find("out of range"), std::string::npos);
    EXPECT_NE(error_of([&] { v->token_to_piece(-1); }).find("out of range"), std::string::npos);
}

TEST(Vocab, BadMetadataErrors) {
    auto no_model = [] {
        glia::gguf::Writer w;
        w.set_str("general.architecture", "llama");
        auto f = glia::gguf::File::from_memory(w.to_bytes(), "empty.gguf");
        Vocab::from_gguf(*f);
    };
    EXPECT_NE(error_of(no_model).find("tokenizer.ggml.model"), std::string::npos) << error_of(no_model);
    auto no_tokens = [] {
        glia::gguf::Writer w;
        w.set_str("tokenizer.ggml.model", "llama");
        auto f = glia::gguf::File::from_memory(w.to_bytes(), "notokens.gguf");
        Vocab::from_gguf(*f);
    };
    EXPECT_NE(error_of(no_tokens).find("tokenizer.ggml.tokens"), std::string::npos) << error_of(no_tokens);
    auto bad_scores = [] {
        auto f = make_vocab_file(base({{"a", -1, 1}}), [](glia::gguf::Writer& w) {
            glia::gguf::Value s;
            s.type = glia::gguf::ValueType::ARRAY;
            s.elem_type = glia::gguf::ValueType::FLOAT32;
            w.set("tokenizer.ggml.scores", s);
        });
        Vocab::from_gguf(*f);
    };
    EXPECT_NE(error_of(bad_scores).find("tokenizer.ggml.scores"), std::string::npos) << error_of(bad_scores);
    auto unknown = [] {
        auto f = make_vocab_file(base({{"a", -1, 1}}), nullptr, "klingon");
        Vocab::from_gguf(*f);
    };
    EXPECT_NE(error_of(unknown).find("unknown tokenizer model 'klingon'"), std::string::npos) << error_of(unknown);
}

// Tokenizer models that are not implemented give a clear error naming the model.
TEST(Vocab, NotSupportedYet) {
    for (const char* model : {"rwkv", "plamo2"}) {
        auto f = make_vocab_file(base({{"a", -1, 1}}), nullptr, model);
        const std::string err = error_of([&] { Vocab::from_gguf(*f); });
        EXPECT_NE(err.find(std::string("tokenizer model '") + model + "' not supported yet"), std::string::npos)
            << model << ": " << err;
    }
}

// Each shared vocabulary loads as its tokenizer kind.
TEST(Vocab, SharedVocabKinds) {
    const std::pair<const char*, glia::tok::Kind> files[] = {
        {"gpt-2", glia::tok::Kind::BPE},        {"llama-bpe", glia::tok::Kind::BPE}, {"qwen2", glia::tok::Kind::BPE},
        {"qwen35", glia::tok::Kind::BPE},       {"deepseek-llm", glia::tok::Kind::BPE},
        {"bert-bge", glia::tok::Kind::WPM},     {"gemma-4", glia::tok::Kind::BPE},
        {"llama-spm", glia::tok::Kind::SPM},    {"phi-3", glia::tok::Kind::SPM},
    };
    for (const auto& [name, kind] : files) {
        if (kind == glia::tok::Kind::BPE && !glia::tok::unicode::have_pcre2()) continue;
        auto f = glia::gguf::File::open(glia::test::shared_path(std::string("vocab/ggml-vocab-") + name + ".gguf"));
        auto v = Vocab::from_gguf(*f);
        EXPECT_EQ(v->kind(), kind) << name;
    }
}

}  // namespace
