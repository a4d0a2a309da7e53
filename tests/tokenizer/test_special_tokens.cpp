// Which tokens are control tokens: the text table (special_names.cpp), what the file
// declares (EOS/EOT/EOM/padding ids, its chat template's end-of-turn marker), the two
// conventions, the record of every override, and how such tokens render.
#include <gtest/gtest.h>

#include <set>

#include "tokenizer/special_names.h"
#include "tokenizer/unicode.h"
#include "tok_test_util.h"
#include "test_util.h"

namespace {

using glia::test::byte_tokens;
using glia::test::make_vocab_file;
using glia::test::shared_path;
using glia::test::SyntheticToken;
using glia::tok::Vocab;
using Ids = std::vector<int32_t>;
namespace role = glia::tok::role;

std::vector<SyntheticToken> with_bytes(std::vector<SyntheticToken> t) {
    auto b = byte_tokens();
    t.insert(t.end(), b.begin(), b.end());
    return t;
}

const glia::tok::TypeOverride* override_of(const Vocab& v, int32_t id) {
    for (const auto& o : v.type_overrides())
        if (o.id == id) return &o;
    return nullptr;
}

TEST(SpecialNames, TableIsConsistent) {
    std::set<std::string_view> seen;
    for (const auto& f : glia::tok::name_facts()) {
        EXPECT_TRUE(seen.insert(f.text).second) << "'" << f.text << "' appears twice";
        EXPECT_NE(f.roles, 0u) << f.text;
        EXPECT_FALSE(f.origin.empty()) << f.text;
        EXPECT_EQ(glia::tok::find_name(f.text), &f) << f.text;
        for (uint32_t bit = 1; bit <= role::RENDER; bit <<= 1)
            if (f.roles & bit) {
                EXPECT_STRNE(glia::tok::role_name(bit), "?");
            }
    }
    EXPECT_EQ(glia::tok::find_name("<|im_start|>"), nullptr);
    EXPECT_EQ(glia::tok::find_name(""), nullptr);
    EXPECT_EQ(glia::tok::find_name("hello"), nullptr);
}

// ids: 0 <unk>, 1 <s>, 2 "<|stop|>" (user-defined, declared EOS), 3 "<|pad|>" (user-defined,
// declared padding), 4 "<|tool|>" (user-defined, undeclared), 5 "<|done|>" (user-defined,
// ends each message in the chat template), 6 "x".
std::unique_ptr<glia::gguf::File> declared_file() {
    return make_vocab_file(with_bytes({{"<unk>", 0, 2},
                                       {"<s>", 0, 3},
                                       {"<|stop|>", 0, 4},
                                       {"<|pad|>", 0, 4},
                                       {"<|tool|>", 0, 4},
                                       {"<|done|>", 0, 4},
                                       {"x", -1, 1}}),
                           [](glia::gguf::Writer& w) {
                               w.set_u32("tokenizer.ggml.eos_token_id", 2);
                               w.set_u32("tokenizer.ggml.padding_token_id", 3);
                               w.set_bool("tokenizer.ggml.add_space_prefix", false);
                               w.set_str("tokenizer.chat_template",
                                         "{% for m in messages %}<|tool|>{{ m['content'] }}<|done|>\n{% endfor %}");
                           });
}

TEST(SpecialTokens, FileDeclaredTokensBecomeControl) {
    auto f = declared_file();
    auto v = Vocab::from_gguf(*f);
    EXPECT_TRUE(v->is_control(2));  // eos_token_id
    EXPECT_TRUE(v->is_control(3));  // padding_token_id
    EXPECT_TRUE(v->is_control(5));  // the template's end of a message
    EXPECT_FALSE(v->is_control(4)); // before the content: not an end marker, stays user-defined
    EXPECT_TRUE(v->is_eog(2));
    EXPECT_TRUE(v->is_eog(5));
    EXPECT_FALSE(v->is_eog(3));
    EXPECT_FALSE(v->is_eog(4));

    // Plain text never produces them; special-token parsing does; user-defined still split.
    EXPECT_EQ(v->tokenize("x<|stop|>", false, true), Ids({6, 2}));
    const Ids plain = v->tokenize("x<|stop|><|done|><|pad|>", false, false);
    for (int32_t id : {2, 3, 5}) EXPECT_EQ(std::count(plain.begin(), plain.end(), id), 0) << id;
    EXPECT_EQ(v->tokenize("<|tool|>x", false, false), Ids({4, 6}));

    ASSERT_NE(override_of(*v, 2), nullptr);
    EXPECT_EQ(override_of(*v, 2)->file_type, glia::tok::TokenType::USER_DEFINED);
    EXPECT_NE(override_of(*v, 2)->reason.find("eos_token_id"), std::string::npos) << override_of(*v, 2)->reason;
    ASSERT_NE(override_of(*v, 3), nullptr);
    EXPECT_NE(override_of(*v, 3)->reason.find("padding_token_id"), std::string::npos);
    ASSERT_NE(override_of(*v, 5), nullptr);
    EXPECT_NE(override_of(*v, 5)->reason.find("chat template"), std::string::npos);
    EXPECT_EQ(override_of(*v, 4), nullptr);
    EXPECT_EQ(v->type_overrides().size(), 3u);

    // Rendering: user-defined text always, control text only when asked.
    EXPECT_EQ(v->token_to_piece(4, false), "<|tool|>");
    EXPECT_EQ(v->token_to_piece(5, false), "");
    EXPECT_EQ(v->token_to_piece(5, true), "<|done|>");
    EXPECT_EQ(v->detokenize({4, 6, 5}), "<|tool|>x");
}

// A NORMAL token that the file names as padding is ordinary text reused: it keeps rendering.
TEST(SpecialTokens, NormalPaddingTokenStaysText) {
    auto f = make_vocab_file(with_bytes({{"<unk>", 0, 2}, {"<s>", 0, 3}, {"</s>", 0, 3}, {"!", -1, 1}}),
                             [](glia::gguf::Writer& w) { w.set_u32("tokenizer.ggml.padding_token_id", 3); });
    auto v = Vocab::from_gguf(*f);
    EXPECT_EQ(v->pad(), 3);
    EXPECT_FALSE(v->is_control(3));
    EXPECT_EQ(v->token_to_piece(3, false), "!");
    EXPECT_TRUE(v->type_overrides().empty());
}

// The text table: an end-of-generation name is control whatever the file's type, and the
// record says so.
TEST(SpecialTokens, TableNamesBecomeControl) {
    auto f = make_vocab_file(with_bytes({{"<unk>", 0, 2},
                                         {"<s>", 0, 3},
                                         {"</s>", 0, 3},
                                         {"<|im_end|>", 0, 1},
                                         {"<turn|>", 0, 4},
                                         {"<|channel|>", 0, 3}}));
    auto v = Vocab::from_gguf(*f);
    EXPECT_EQ(v->eot(), 3);  // found by text
    EXPECT_TRUE(v->is_control(3));
    EXPECT_TRUE(v->is_control(4));
    EXPECT_TRUE(v->is_eog(3));
    EXPECT_TRUE(v->is_eog(4));
    EXPECT_FALSE(v->is_control(5));  // always rendered (o200k_harmony)
    EXPECT_EQ(v->token_to_piece(5, false), "<|channel|>");
    ASSERT_NE(override_of(*v, 3), nullptr);
    EXPECT_EQ(override_of(*v, 3)->file_type, glia::tok::TokenType::NORMAL);
    EXPECT_NE(override_of(*v, 3)->reason.find("text table"), std::string::npos);
    ASSERT_NE(override_of(*v, 5), nullptr);
    EXPECT_EQ(override_of(*v, 5)->attrs, glia::tok::attr::USER_DEFINED);
    EXPECT_EQ(override_of(*v, 2), nullptr);  // "</s>" was control already
}

TEST(SpecialTokens, HarmonyEndIsNotEndOfGeneration) {
    auto f = make_vocab_file(
        with_bytes({{"<unk>", 0, 2}, {"<s>", 0, 3}, {"</s>", 0, 3}, {"<|return|>", 0, 3}, {"<|call|>", 0, 3},
                    {"<|end|>", 0, 3}}));
    auto v = Vocab::from_gguf(*f);
    EXPECT_TRUE(v->is_eog(3));
    EXPECT_TRUE(v->is_eog(4));
    EXPECT_FALSE(v->is_eog(5));
    EXPECT_EQ(v->token_attr(5), glia::tok::attr::USER_DEFINED);
    EXPECT_EQ(v->token_to_piece(5, false), "<|end|>");
    EXPECT_EQ(v->eot(), 5);  // still the end-of-turn id by text, as the reference keeps it
}

TEST(SpecialTokens, ToolResponseMakesSlashSText) {
    auto f = make_vocab_file(with_bytes({{"<unk>", 0, 2}, {"<s>", 0, 3}, {"</s>", 0, 3}, {"<eos>", 0, 3},
                                         {"<|tool_response>", 0, 4}}),
                             [](glia::gguf::Writer& w) { w.set_u32("tokenizer.ggml.eos_token_id", 3); });
    auto v = Vocab::from_gguf(*f);
    EXPECT_TRUE(v->is_eog(4));
    EXPECT_TRUE(v->is_control(4));
    EXPECT_FALSE(v->is_eog(2));
    EXPECT_EQ(v->token_attr(2), glia::tok::attr::NORMAL);
    ASSERT_NE(override_of(*v, 2), nullptr);
    EXPECT_NE(override_of(*v, 2)->reason.find("<|tool_response>"), std::string::npos);
}

// The cases of issue "tokenizer parity" on the real vocabularies.
TEST(SpecialTokens, RealVocabularies) {
    if (!glia::tok::unicode::have_pcre2()) GTEST_SKIP() << "built without PCRE2";
    {
        auto f = glia::gguf::File::open(shared_path("vocab/ggml-vocab-qwen2.gguf"));
        auto v = Vocab::from_gguf(*f);
        EXPECT_EQ(v->token_type(128247), glia::tok::TokenType::NORMAL);
        EXPECT_TRUE(v->is_control(128247));
        EXPECT_EQ(v->tokenize("</s>", false, true), Ids({128247}));
        EXPECT_EQ(v->detokenize(v->tokenize("</s>", false, false)), "</s>");
        EXPECT_NE(v->tokenize("</s>", false, false), Ids({128247}));
    }
    {
        auto f = glia::gguf::File::open(shared_path("vocab/ggml-vocab-phi-3.gguf"));
        auto v = Vocab::from_gguf(*f);
        EXPECT_EQ(v->token_type(2), glia::tok::TokenType::USER_DEFINED);
        EXPECT_TRUE(v->is_control(2));
        const Ids plain = v->tokenize("a </s> b", false, false);
        EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
        EXPECT_EQ(v->tokenize("</s>", false, true), Ids({2}));
    }
    {
        auto f = glia::gguf::File::open(shared_path("vocab/ggml-vocab-gemma-4.gguf"));
        auto v = Vocab::from_gguf(*f);
        const int32_t tr = v->find_token("<|tool_response>");
        ASSERT_GE(tr, 0);
        EXPECT_TRUE(v->is_control(tr));
        EXPECT_TRUE(v->is_eog(tr));
        EXPECT_NE(v->tokenize("<|tool_response>", false, false), Ids({tr}));
        EXPECT_EQ(v->tokenize("<|tool_response>", false, true), Ids({tr}));
        // Its pair "<tool_response|>" stays user-defined, as in the reference: one token,
        // printed as text by the detokenizer.
        const int32_t tc = v->find_token("<tool_response|>");
        ASSERT_GE(tc, 0);
        EXPECT_FALSE(v->is_control(tc));
        EXPECT_EQ(v->tokenize("<tool_response|>", false, false), Ids({tc}));
        EXPECT_EQ(v->token_to_piece(tc, false), "<tool_response|>");
        EXPECT_EQ(v->token_to_piece(tr, false), "");
    }
}

}  // namespace
