// The Unigram tokenizer on small synthetic vocabularies (segmentation, whitespace rules,
// unknown characters, defaults, bad character maps) and the real nomic-bert-moe map.
// The reference's vectors for that vocabulary run in test_vocab_vectors.cpp.
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "tokenizer/ugm.h"
#include "tok_test_util.h"
#include "test_util.h"

namespace {

using glia::test::make_vocab_file;
using glia::test::shared_path;
using glia::test::SyntheticToken;
using glia::tok::PrefixSet;
using glia::tok::UgmVocab;
using glia::tok::Vocab;
using Ids = std::vector<int32_t>;

const std::string U = "\xE2\x96\x81";  // U+2581

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const glia::Error& e) {
        return e.what();
    }
    return "(no error)";
}

// ids: 0 <pad>, 1 </s>, 2 <unk>, 3 "▁" (-2), 4 "a" (-3), 5 "b" (-3), 6 "ab" (-4),
// 7 "▁ab" (-10), 8 "<u>" (user-defined, -100: scored 0), 9 "c" (-1).
std::vector<SyntheticToken> toy() {
    return {{"<pad>", 0, 3}, {"</s>", 0, 3}, {"<unk>", 0, 2}, {U, -2, 1},    {"a", -3, 1},
            {"b", -3, 1},    {"ab", -4, 1},  {U + "ab", -10, 1}, {"<u>", -100, 4}, {"c", -1, 1}};
}

std::unique_ptr<Vocab> load(const std::vector<SyntheticToken>& toks, void (*extra)(glia::gguf::Writer&)) {
    auto f = make_vocab_file(toks, extra, "t5");
    return Vocab::from_gguf(*f);
}

void prefix_space(glia::gguf::Writer& w) { w.set_bool("tokenizer.ggml.add_space_prefix", true); }
void merge_spaces(glia::gguf::Writer& w) {
    w.set_bool("tokenizer.ggml.add_space_prefix", true);
    w.set_bool("tokenizer.ggml.remove_extra_whitespaces", true);
}

TEST(PrefixSet, ReportsEveryPrefixShortestFirst) {
    const std::string a = "a", ab = "ab", abc = "abc", abd = "abd", b = "b", hi = "\xC3\xA9", hi2 = "\xC3\xA9t";
    PrefixSet s;
    s.build({{abd, 1}, {a, 2}, {b, 3}, {abc, 4}, {ab, 5}, {hi, 6}, {hi2, 7}, {ab, 8}});
    std::vector<std::pair<size_t, int32_t>> got;
    s.for_each_prefix("abcd", [&](size_t n, int32_t id) { got.emplace_back(n, id); });
    // "ab" appears twice: the later entry (8) wins.
    EXPECT_EQ(got, (std::vector<std::pair<size_t, int32_t>>{{1, 2}, {2, 8}, {3, 4}}));
    EXPECT_EQ(s.longest_prefix("abx"), 2u);
    EXPECT_EQ(s.longest_prefix("x"), 0u);
    EXPECT_EQ(s.longest_prefix(""), 0u);
    EXPECT_EQ(s.longest_prefix("\xC3\xA9tude"), 3u);  // bytes >= 0x80 compare unsigned
    EXPECT_EQ(s.longest_prefix("\xC3"), 0u);
}

TEST(Ugm, Defaults) {
    auto v = load(toy(), nullptr);
    EXPECT_EQ(v->kind(), glia::tok::Kind::UGM);
    EXPECT_STREQ(glia::tok::kind_name(v->kind()), "UGM");
    EXPECT_EQ(v->bos(), -1);
    EXPECT_EQ(v->eos(), 1);
    EXPECT_EQ(v->unk(), 2);
    EXPECT_EQ(v->pad(), 0);
    EXPECT_FALSE(v->add_bos());
    EXPECT_TRUE(v->add_eos());
    EXPECT_FALSE(v->add_space_prefix());
    EXPECT_EQ(v->tokenize("ab", true, false), Ids({6, 1}));  // EOS added, no BOS
}

TEST(Ugm, MostProbableSegmentation) {
    auto v = load(toy(), prefix_space);
    // "▁ab": [▁ab] -10, [▁][a][b] -8, [▁][ab] -6: the last wins.
    EXPECT_EQ(v->tokenize("ab", false, false), Ids({3, 6}));
    EXPECT_EQ(v->tokenize("abc", false, false), Ids({3, 6, 9}));
    // A user-defined token is split out of the text and scores 0.
    EXPECT_EQ(v->tokenize("a<u>b", false, false), Ids({3, 4, 8, 3, 5}));
    EXPECT_EQ(v->detokenize({3, 6, 8}), " ab<u>");
}

TEST(Ugm, UnknownCharactersMergeIntoOneToken) {
    auto v = load(toy(), prefix_space);
    EXPECT_EQ(v->tokenize("xy", false, false), Ids({3, 2}));
    EXPECT_EQ(v->tokenize("axyb", false, false), Ids({3, 4, 2, 5}));
    // Invalid UTF-8 becomes U+FFFD, which no token covers.
    auto* u = dynamic_cast<UgmVocab*>(v.get());
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(u->normalize("a\xFF"), U + "a\xEF\xBF\xBD");
    EXPECT_EQ(v->tokenize("a\xFF", false, false), Ids({3, 4, 2}));
}

TEST(Ugm, WhitespaceRules) {
    auto plain = load(toy(), nullptr);
    auto prefixed = load(toy(), prefix_space);
    auto merged = load(toy(), merge_spaces);
    auto norm = [](const std::unique_ptr<Vocab>& v, std::string_view s) {
        return dynamic_cast<const UgmVocab&>(*v).normalize(s);
    };
    EXPECT_EQ(norm(plain, "a b"), "a" + U + "b");
    EXPECT_EQ(norm(prefixed, "a b"), U + "a" + U + "b");
    // Without merging, every space stays; the prefix space comes before the first word.
    EXPECT_EQ(norm(prefixed, "  a b"), U + U + U + "a" + U + "b");
    // Merging: one space before each word, none at the ends.
    EXPECT_EQ(norm(merged, "  a   b  "), U + "a" + U + "b");
    EXPECT_EQ(norm(merged, "   "), "");
    EXPECT_EQ(merged->tokenize("   ", false, false), Ids({}));
    EXPECT_EQ(merged->tokenize("", true, false), Ids({1}));
}

TEST(Ugm, RealCharacterMap) {
    auto f = glia::gguf::File::open(shared_path("vocab-more/ggml-vocab-nomic-bert-moe.gguf"));
    auto v = Vocab::from_gguf(*f);
    const auto& u = dynamic_cast<const UgmVocab&>(*v);
    // NFKC through the precompiled map: fullwidth letters and a ligature.
    EXPECT_EQ(u.normalize("\xEF\xBC\xA1\xEF\xBC\xA2"), U + "AB");
    EXPECT_EQ(u.normalize("\xEF\xAC\x81x"), U + "fix");
    EXPECT_EQ(u.normalize("  a   b "), U + "a" + U + "b");
    // The mask token keeps its text (user-defined, split out before normalization).
    const int32_t mask = v->find_token("<mask>");
    ASSERT_GE(mask, 0);
    EXPECT_EQ(v->tokenize("a <mask>", false, true).back(), mask);
}

void set_charsmap(glia::gguf::Writer& w, const std::vector<uint8_t>& bytes) {
    glia::gguf::Value m;
    m.type = glia::gguf::ValueType::ARRAY;
    m.elem_type = glia::gguf::ValueType::UINT8;
    for (uint8_t b : bytes) {
        glia::gguf::Value e;
        e.type = glia::gguf::ValueType::UINT8;
        e.u = b;
        m.arr.push_back(e);
    }
    w.set("tokenizer.ggml.precompiled_charsmap", m);
}

TEST(Ugm, BadCharacterMapsAreClearErrors) {
    // Too short for its header.
    std::string err = error_of([] { load(toy(), [](glia::gguf::Writer& w) { set_charsmap(w, {1, 0}); }); });
    EXPECT_NE(err.find("tokenizer.ggml.precompiled_charsmap"), std::string::npos) << err;
    EXPECT_NE(err.find("too short"), std::string::npos) << err;
    // A double array larger than the map.
    err = error_of([] { load(toy(), [](glia::gguf::Writer& w) { set_charsmap(w, {0, 1, 0, 0, 1, 2, 3, 4, 0}); }); });
    EXPECT_NE(err.find("does not fit"), std::string::npos) << err;
    // Not bytes.
    err = error_of([] {
        load(toy(), [](glia::gguf::Writer& w) { w.set_str("tokenizer.ggml.precompiled_charsmap", "x"); });
    });
    EXPECT_NE(err.find("expected an array of bytes"), std::string::npos) << err;
    // A double array whose root points far outside it: loads, and tokenizing says the map
    // is corrupt instead of reading out of bounds.
    auto v = load(toy(), [](glia::gguf::Writer& w) { set_charsmap(w, {4, 0, 0, 0, 0x00, 0xFC, 0xFF, 0x7F, 'x', 0}); });
    err = error_of([&] { v->tokenize("a", false, false); });
    EXPECT_NE(err.find("corrupt"), std::string::npos) << err;
}

}  // namespace
