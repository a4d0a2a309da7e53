// BPE and WordPiece building blocks: pre-tokenizer regex splitting, GPT-2's byte mapping,
// byte-level decoding of pieces, merges by rank on a synthetic vocabulary, the unknown
// pre-tokenizer fallback, WordPiece pre-tokenization, and tokenizer speed.
#include <gtest/gtest.h>

#include <deque>

#include <chrono>
#include <functional>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/wpm.h"
#include "tok_test_util.h"
#include "test_util.h"

namespace {

using glia::tok::PreTokenizer;
using glia::tok::pre_tokenizer_config;
using glia::tok::Vocab;
using Words = std::vector<std::string>;
using Ids = std::vector<int32_t>;
namespace uni = glia::tok::unicode;

// BPE needs PCRE2; a build without it skips these tests (the error is tested below).
#define REQUIRE_PCRE2() \
    if (!uni::have_pcre2()) GTEST_SKIP() << "built without PCRE2"

Words split(const char* pre, std::string_view text) {
    const auto cfg = pre_tokenizer_config(pre);
    PreTokenizer p(cfg.regexes);
    return p.split_strings(text);
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const glia::Error& e) {
        return e.what();
    }
    return "(no error)";
}

// ---------------------------------------------------------------------------------------
// Pre-tokenizer splitting

TEST(PreTokenizer, Gpt2) {
    REQUIRE_PCRE2();
    EXPECT_EQ(split("gpt-2", "Hello world"), Words({"Hello", " world"}));
    EXPECT_EQ(split("gpt-2", "I'm 123  x!!"), Words({"I", "'m", " 123", " ", " x", "!!"}));
    // Whitespace before a word goes with the word except for its last space.
    EXPECT_EQ(split("gpt-2", "a   b"), Words({"a", "  ", " b"}));
    EXPECT_EQ(split("gpt-2", "a \n\n b"), Words({"a", " \n\n", " b"}));
    EXPECT_EQ(split("gpt-2", ""), Words({}));
}

TEST(PreTokenizer, Llama3) {
    REQUIRE_PCRE2();
    EXPECT_EQ(split("llama-bpe", "Hello world"), Words({"Hello", " world"}));
    // Digits in runs of at most three; contractions in either case.
    EXPECT_EQ(split("llama-bpe", "1234567 DON'T"), Words({"123", "456", "7", " DON", "'T"}));
    EXPECT_EQ(split("llama3", "a\n\n\tb"), Words({"a", "\n\n", "\tb"}));
    EXPECT_EQ(split("llama3", "x  \n"), Words({"x", "  \n"}));
    EXPECT_EQ(split("llama3", "(hi)"), Words({"(hi", ")"}));
}

TEST(PreTokenizer, Qwen2AndQwen35) {
    REQUIRE_PCRE2();
    EXPECT_EQ(split("qwen2", "ab 12"), Words({"ab", " ", "1", "2"}));
    // qwen35 lets combining marks continue a word: "e" + U+0301.
    EXPECT_EQ(split("qwen2", "ne\xCC\x81t"), Words({"ne", "\xCC\x81t"}));
    EXPECT_EQ(split("qwen35", "ne\xCC\x81t"), Words({"ne\xCC\x81t"}));
}

TEST(PreTokenizer, DeepseekLlm) {
    REQUIRE_PCRE2();
    // Its regexes apply in turn; CJK runs and digit runs are words of their own.
    EXPECT_EQ(split("deepseek-llm", "Hello, 世界 42\n"), Words({"Hello", ",", " ", "世界", " ", "42", "\n"}));
    // "\s+$" only at the very end of a piece: '$' does not match before a final newline.
    EXPECT_EQ(split("deepseek-llm", "a  "), Words({"a", "  "}));
}

TEST(PreTokenizer, Gemma4SplitsOnlyAtNewlines) {
    REQUIRE_PCRE2();
    EXPECT_EQ(split("gemma4", "a b\n\nc"), Words({"a b", "\n\n", "c"}));
}

TEST(PreTokenizer, UnicodeCategories) {
    REQUIRE_PCRE2();
    // Letters and numbers beyond ASCII: Cyrillic letters, Arabic-Indic digits, a Han run.
    EXPECT_EQ(split("gpt-2", "Привет ١٢٣ 中文"), Words({"Привет", " ١٢٣", " 中文"}));
    // U+00A0 is whitespace: not part of " ?\p{L}+", and "\s+(?!\S)" cannot end before "b".
    EXPECT_EQ(split("gpt-2", "a\xC2\xA0" "b"), Words({"a", "\xC2\xA0", "b"}));
    EXPECT_EQ(split("gpt-2", "a\xC2\xA0\xC2\xA0" "b"), Words({"a", "\xC2\xA0", "\xC2\xA0", "b"}));
}

TEST(PreTokenizer, EmptyMatchesSplit) {
    REQUIRE_PCRE2();
    // superbpe groups digits in threes from the right with a zero-width look-ahead.
    EXPECT_EQ(split("superbpe", "1234567"), Words({"1", "234", "567"}));
}

TEST(PreTokenizer, WhitespaceRewrite) {
    const std::string ws = R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
    EXPECT_EQ(PreTokenizer::rewrite_whitespace("a"), "a");
    // \s outside a class, \S outside a class, \s inside a negated class, an escaped
    // backslash followed by 's', and a ']' first in a class.
    EXPECT_EQ(PreTokenizer::rewrite_whitespace(R"(\s+(?!\S)|[^\s\p{L}]|\\s|[]\s])"),
              "[" + ws + "]+(?![^" + ws + "])|[^" + ws + R"(\p{L}]|\\s|[])" + ws + "]");
}

TEST(PreTokenizer, UnknownNameFallsBack) {
    const auto c = pre_tokenizer_config("no-such-pre");
    EXPECT_FALSE(c.known);
    EXPECT_EQ(c.type, "default");
    EXPECT_EQ(c.regexes, pre_tokenizer_config("default").regexes);
    EXPECT_TRUE(pre_tokenizer_config("qwen35").known);
    EXPECT_TRUE(pre_tokenizer_config("llama-bpe").ignore_merges);
    EXPECT_FALSE(pre_tokenizer_config("gemma4").byte_encode);
}

TEST(PreTokenizer, EveryNamedConfigCompiles) {
    REQUIRE_PCRE2();
    for (const char* pre : {"default", "llama3", "dbrx", "chatglm-bpe", "deepseek-llm", "deepseek-coder", "deepseek-v3",
                            "falcon", "starcoder", "gpt-2", "roberta-bpe", "qwen2", "qwen35", "poro-chat", "viking",
                            "tekken", "chameleon", "gpt-4o", "kimi-k2", "superbpe", "bailingmoe", "seed-coder",
                            "gemma4"}) {
        const auto c = pre_tokenizer_config(pre);
        EXPECT_TRUE(c.known) << pre;
        EXPECT_NO_THROW({
            PreTokenizer p(c.regexes);
            p.split("Hello, World! 12345 \xE4\xB8\xAD\xE6\x96\x87 \n\n  x");
        }) << pre;
    }
}

TEST(PreTokenizer, PiecesCoverTheText) {
    REQUIRE_PCRE2();
    const std::string text = "  It's 2024-01-01\t\tok?\r\n\xF0\x9F\xA6\x99 émoji  \n";
    for (const char* pre : {"gpt-2", "llama3", "qwen2", "deepseek-llm", "deepseek-v3", "gpt-4o", "falcon", "default"}) {
        std::string joined;
        for (const auto& w : split(pre, text)) {
            EXPECT_FALSE(w.empty()) << pre;
            joined += w;
        }
        EXPECT_EQ(joined, text) << pre;
    }
}

// ---------------------------------------------------------------------------------------
// Unicode helpers

TEST(Unicode, Gpt2ByteMapping) {
    EXPECT_EQ(uni::byte_to_utf8('A'), "A");
    EXPECT_EQ(uni::byte_to_utf8(' '), "\xC4\xA0");   // U+0120 'Ġ'
    EXPECT_EQ(uni::byte_to_utf8('\n'), "\xC4\x8A");  // U+010A 'Ċ'
    EXPECT_EQ(uni::byte_to_utf8(0xAD), "\xC5\x83");  // the soft hyphen is not printable: U+0143
    for (int b = 0; b < 256; ++b) {
        const auto cps = uni::decode(uni::byte_to_utf8(static_cast<uint8_t>(b)));
        ASSERT_EQ(cps.size(), 1u);
        EXPECT_EQ(uni::utf8_to_byte(cps[0]), b);
    }
    EXPECT_EQ(uni::utf8_to_byte(0x4E2D), -1);
}

TEST(Unicode, DecodeLikeTheReference) {
    // Invalid bytes become U+FFFD one byte at a time; a truncated sequence too.
    EXPECT_EQ(uni::decode("a\xFF" "b"), std::vector<uint32_t>({'a', 0xFFFD, 'b'}));
    EXPECT_EQ(uni::decode("\xE4\xB8"), std::vector<uint32_t>({0xFFFD, 0xFFFD}));
    EXPECT_EQ(uni::sanitize_utf8("ok \xC3\xA9"), "ok \xC3\xA9");
    bool changed = true;
    EXPECT_EQ(uni::sanitize_utf8("\x80x", &changed), "\xEF\xBF\xBDx");
    EXPECT_TRUE(changed);
    EXPECT_EQ(uni::sanitize_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD");  // a surrogate
}

TEST(Unicode, LowerAndNfd) {
    EXPECT_EQ(uni::to_lower('A'), uint32_t('a'));
    EXPECT_EQ(uni::to_lower(0xC9), 0xE9u);     // É
    EXPECT_EQ(uni::to_lower(0x100), 0x101u);   // Ā (stride-2 run)
    EXPECT_EQ(uni::to_lower(0x101), 0x101u);
    EXPECT_EQ(uni::to_lower(0x416), 0x436u);   // Ж
    EXPECT_EQ(uni::to_lower(0x130), uint32_t('i'));
    EXPECT_EQ(uni::nfd_first(0xE9), uint32_t('e'));
    EXPECT_EQ(uni::nfd_first(0x1E9B), 0x17Fu);  // ẛ -> ſ + dot
    EXPECT_EQ(uni::nfd_first(0xD55C), 0x1112u);  // 한 -> ᄒ
    EXPECT_EQ(uni::nfd_first('x'), uint32_t('x'));
}

TEST(Unicode, Categories) {
    EXPECT_EQ(uni::flags('a'), uni::LETTER);
    EXPECT_EQ(uni::flags('$'), uni::SYMBOL);
    EXPECT_EQ(uni::flags('!'), uni::PUNCTUATION);
    EXPECT_EQ(uni::flags('\n'), uni::CONTROL);
    REQUIRE_PCRE2();
    EXPECT_EQ(uni::flags(0x416), uni::LETTER);
    EXPECT_EQ(uni::flags(0x301), uni::MARK);
    EXPECT_EQ(uni::flags(0x3002), uni::PUNCTUATION);  // 。
    EXPECT_EQ(uni::flags(0x20AC), uni::SYMBOL);       // €
    EXPECT_EQ(uni::flags(0x200B), uni::CONTROL);      // zero-width space (Cf)
    EXPECT_EQ(uni::flags(0x1D7D8), uni::NUMBER);      // mathematical double-struck zero
    EXPECT_EQ(uni::flags(0x378), 0);                  // unassigned
}

// ---------------------------------------------------------------------------------------
// BPE on a synthetic vocabulary

// A byte-level vocabulary: the 256 byte symbols, then merged tokens, with merges.
std::unique_ptr<glia::gguf::File> byte_level_file(const std::vector<std::string>& extra,
                                                  const std::vector<std::string>& merges, const char* pre) {
    using glia::gguf::Value;
    using glia::gguf::ValueType;
    glia::gguf::Writer w;
    w.set_str("general.architecture", "gpt2");
    w.set_str("tokenizer.ggml.model", "gpt2");
    if (pre) w.set_str("tokenizer.ggml.pre", pre);
    Value t, ty, m;
    t.type = ty.type = m.type = ValueType::ARRAY;
    t.elem_type = m.elem_type = ValueType::STRING;
    ty.elem_type = ValueType::INT32;
    std::deque<std::string> keep;  // Value::s is a view: the texts must outlive w.set()
    auto add = [&](const std::string& s, int type) {
        keep.push_back(s);
        Value a; a.type = ValueType::STRING; a.s = keep.back(); t.arr.push_back(a);
        Value c; c.type = ValueType::INT32; c.i = type; ty.arr.push_back(c);
    };
    for (int b = 0; b < 256; ++b) add(uni::byte_to_utf8(static_cast<uint8_t>(b)), 1);
    for (const auto& e : extra) add(e, 1);
    add("<|endoftext|>", 3);
    for (const auto& s : merges) {
        Value a; a.type = ValueType::STRING; a.s = s; m.arr.push_back(a);
    }
    w.set("tokenizer.ggml.tokens", t);
    w.set("tokenizer.ggml.token_type", ty);
    w.set("tokenizer.ggml.merges", m);
    return glia::gguf::File::from_memory(w.to_bytes(), "bpe.gguf");
}

const std::string G = "\xC4\xA0";  // 'Ġ', the byte-level space

TEST(Bpe, MergesByRank) {
    REQUIRE_PCRE2();
    // ids: 256 "ab", 257 "bc", 258 "abc", 259 "Ġab", 260 <|endoftext|>
    auto f = byte_level_file({"ab", "bc", "abc", G + "ab"}, {"b c", "a b", "ab c", G + " ab"}, "gpt-2");
    auto v = Vocab::from_gguf(*f);
    ASSERT_EQ(v->kind(), glia::tok::Kind::BPE);
    // "b c" has the lower rank, so "abc" becomes a + bc, and "ab c" never applies.
    EXPECT_EQ(v->tokenize("abc", false, false), Ids({'a', 257}));
    EXPECT_EQ(v->tokenize("abab", false, false), Ids({256, 256}));
    auto* bpe = dynamic_cast<const glia::tok::BpeVocab*>(v.get());
    ASSERT_NE(bpe, nullptr);
    EXPECT_EQ(bpe->merge_rank("b", "c"), 0);
    EXPECT_EQ(bpe->merge_rank("ab", "c"), 2);
    EXPECT_EQ(bpe->merge_rank("a", "bc"), -1);
    EXPECT_EQ(bpe->merge_rank("c", "a"), -1);
    EXPECT_EQ(bpe->n_merges(), 4u);
    // " ab": 'Ġ' 'a' 'b' -> "a b" (rank 1) -> "Ġ ab" (rank 3).
    EXPECT_EQ(v->tokenize(" ab", false, false), Ids({259}));
    // Pieces decode the byte-level code points back to bytes.
    EXPECT_EQ(v->token_to_piece(259), " ab");
    EXPECT_EQ(v->token_to_piece(10), "\n");
    EXPECT_EQ(v->detokenize(v->tokenize("x\xC3\xA9 \xF0\x9F\xA6\x99", false, false)), "x\xC3\xA9 \xF0\x9F\xA6\x99");
    // Special tokens: control text only with parse_special.
    EXPECT_EQ(v->tokenize("a<|endoftext|>", false, true), Ids({'a', 260}));
    EXPECT_EQ(v->token_to_piece(260, false), "");
    EXPECT_EQ(v->token_to_piece(260, true), "<|endoftext|>");
    // Defaults of a byte-level vocabulary: BOS = EOS = 11, no BOS added (gpt-2).
    EXPECT_FALSE(v->add_bos());
}

TEST(Bpe, UnknownPreTokenizerWarnsAndFallsBack) {
    REQUIRE_PCRE2();
    auto f = byte_level_file({}, {}, "made-up-pre");
    ::testing::internal::CaptureStderr();
    auto v = Vocab::from_gguf(*f);
    auto v2 = Vocab::from_gguf(*f);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("unknown pre-tokenizer 'made-up-pre'"), std::string::npos) << err;
    EXPECT_EQ(err.find("made-up-pre", err.find("made-up-pre") + 1), std::string::npos) << "warned twice: " << err;
    auto* bpe = dynamic_cast<const glia::tok::BpeVocab*>(v.get());
    ASSERT_NE(bpe, nullptr);
    EXPECT_EQ(bpe->pre_tokenizer().type, "default");
    EXPECT_EQ(v->tokenize("hi", false, false), Ids({'h', 'i'}));
}

TEST(Bpe, MissingMergesIsAnError) {
    glia::gguf::Writer w;
    w.set_str("tokenizer.ggml.model", "gpt2");
    glia::gguf::Value t;
    t.type = glia::gguf::ValueType::ARRAY;
    t.elem_type = glia::gguf::ValueType::STRING;
    glia::gguf::Value a;
    a.type = glia::gguf::ValueType::STRING;
    a.s = "a";
    t.arr.push_back(a);
    w.set("tokenizer.ggml.tokens", t);
    auto f = glia::gguf::File::from_memory(w.to_bytes(), "nomerges.gguf");
    const std::string err = error_of([&] { Vocab::from_gguf(*f); });
    if (!uni::have_pcre2()) {
        EXPECT_NE(err.find("built without PCRE2"), std::string::npos) << err;
    } else {
        EXPECT_NE(err.find("tokenizer.ggml.merges"), std::string::npos) << err;
    }
}

// ---------------------------------------------------------------------------------------
// Real vocabularies: byte-level decoding and speed

TEST(Bpe, ByteLevelPiecesOfRealVocab) {
    REQUIRE_PCRE2();
    auto f = glia::gguf::File::open(glia::test::shared_path("vocab/ggml-vocab-qwen2.gguf"));
    auto v = Vocab::from_gguf(*f);
    // Every byte round-trips, and a multi-byte character split over byte tokens joins up.
    for (const std::string text : {"Hello world", "  spaces\n\n\ttabs", "中文 \xF0\x9F\xA6\x99 émoji", "\x01\x7F"}) {
        EXPECT_EQ(v->detokenize(v->tokenize(text, false, false)), text);
    }
    const int32_t nl = v->find_token("\xC4\x8A");  // 'Ċ'
    ASSERT_GE(nl, 0);
    EXPECT_EQ(v->token_to_piece(nl), "\n");
    EXPECT_EQ(v->raw_piece(nl), "\xC4\x8A");
    // Control tokens render only when asked.
    const int32_t im_end = v->find_token("<|im_end|>");
    ASSERT_GE(im_end, 0);
    EXPECT_EQ(v->token_to_piece(im_end, false), "");
    EXPECT_EQ(v->token_to_piece(im_end, true), "<|im_end|>");
    EXPECT_EQ(v->tokenize("a<|im_end|>", false, true).back(), im_end);
    EXPECT_TRUE(v->is_eog(im_end));
}

TEST(Bpe, Gemma4Pieces) {
    REQUIRE_PCRE2();
    auto f = glia::gguf::File::open(glia::test::shared_path("vocab/ggml-vocab-gemma-4.gguf"));
    auto v = Vocab::from_gguf(*f);
    EXPECT_TRUE(v->add_bos());  // always, as the reference does for gemma-4
    EXPECT_EQ(v->bos(), 2);
    for (const std::string text : {"Hello world", " two  spaces\n\n", "\xF0\x9F\xA6\x99 \x01"})
        EXPECT_EQ(v->detokenize(v->tokenize(text, false, false)), text);
    EXPECT_EQ(v->tokenize("hi", true, false).front(), 2);
}

// Random text (invalid UTF-8, NULs, control characters, special-token text, long
// whitespace runs) never crashes and round-trips: byte-level vocabularies have a token for
// every byte, gemma-4 has <0xNN> tokens. Invalid UTF-8 comes back as U+FFFD, as in the
// reference (which decodes the text to code points before splitting it).
TEST(Bpe, RandomTextRoundTrip) {
    REQUIRE_PCRE2();
    uint64_t state = 777;
    auto next = [&] {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<uint32_t>(state >> 33);
    };
    const char* snippets[] = {"<|endoftext|>", "<|im_end|>", "<bos>", " ", "   ", "\n\n", "\t", "don't", "123456",
                              "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\xA6\x99", "\r\n", "\xC2\xA0"};
    for (const char* name : {"qwen2", "llama-bpe", "gpt-2", "deepseek-llm", "gemma-4"}) {
        auto f = glia::gguf::File::open(glia::test::shared_path(std::string("vocab/ggml-vocab-") + name + ".gguf"));
        auto v = Vocab::from_gguf(*f);
        for (int iter = 0; iter < 150; ++iter) {
            std::string x;
            const int n = static_cast<int>(next() % 40);
            for (int k = 0; k < n; ++k) {
                switch (next() % 5) {
                    case 0: x += snippets[next() % (sizeof snippets / sizeof *snippets)]; break;
                    case 1: x += static_cast<char>(next() & 0x7F); break;
                    case 2: x += static_cast<char>(0x80 + next() % 128); break;  // stray or invalid byte
                    default: {
                        uint32_t cp = next() % 0x30000;
                        if ((cp >= 0xD800 && cp < 0xE000) || cp == 0x2581) cp = 0x4E2D;
                        uni::append_utf8(x, cp);
                    }
                }
            }
            const auto ids = v->tokenize(x, false, false);
            for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < v->n_tokens()) << name;
            EXPECT_EQ(v->detokenize(ids), uni::sanitize_utf8(x)) << name << " iteration " << iter;
            const auto sp = v->tokenize(x, true, true);
            for (int32_t id : sp) ASSERT_TRUE(id >= 0 && id < v->n_tokens()) << name;
        }
    }
}

TEST(Bpe, InvalidUtf8BecomesReplacementCharacter) {
    REQUIRE_PCRE2();
    auto f = glia::gguf::File::open(glia::test::shared_path("vocab/ggml-vocab-qwen2.gguf"));
    auto v = Vocab::from_gguf(*f);
    EXPECT_EQ(v->tokenize("a\xFF" "b", false, false), v->tokenize("a\xEF\xBF\xBD" "b", false, false));
}

TEST(Bpe, LoadAndTokenizeSpeed) {
    REQUIRE_PCRE2();
    auto f = glia::gguf::File::open(glia::test::shared_path("vocab/ggml-vocab-qwen2.gguf"));
    auto t0 = std::chrono::steady_clock::now();
    auto v = Vocab::from_gguf(*f);
    const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const auto cases = glia::test::read_vocab_cases(glia::test::shared_path("vocab/ggml-vocab-qwen2.gguf.inp"),
                                                    glia::test::shared_path("vocab/ggml-vocab-qwen2.gguf.out"));
    std::string text;
    while (text.size() < 10 * 1024)
        for (const auto& c : cases) text += c.text + "\n";
    text.resize(10 * 1024);
    // Cut at a character boundary.
    while (!text.empty() && (static_cast<uint8_t>(text.back()) & 0xC0) == 0x80) text.pop_back();
    if (!text.empty() && static_cast<uint8_t>(text.back()) >= 0xC0) text.pop_back();
    t0 = std::chrono::steady_clock::now();
    const auto ids = v->tokenize(text, false, false);
    const double tok_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[          ] qwen2: load %.1f ms, tokenize 10 KB in %.2f ms (%zu tokens)\n", load_ms, tok_ms,
                ids.size());
    EXPECT_EQ(v->detokenize(ids), text);
    EXPECT_LT(tok_ms, 100.0);
#ifdef NDEBUG
    EXPECT_LT(load_ms, 2000.0);
#endif
}

// ---------------------------------------------------------------------------------------
// WordPiece

TEST(Wpm, PreTokenize) {
    using glia::tok::WpmVocab;
    EXPECT_EQ(WpmVocab::pre_tokenize("Hello, World!"), Words({"hello", ",", "world", "!"}));
    EXPECT_EQ(WpmVocab::pre_tokenize("  Ça  va\t"), Words({"ca", "va"}));
    EXPECT_EQ(WpmVocab::pre_tokenize("a$b"), Words({"a", "$", "b"}));  // ASCII symbols split
    EXPECT_EQ(WpmVocab::pre_tokenize("中文"), Words({"中", "文"}));     // CJK one by one
    EXPECT_EQ(WpmVocab::pre_tokenize(""), Words({}));
    if (!uni::have_pcre2()) return;
    EXPECT_EQ(WpmVocab::pre_tokenize("e\xCC\x81t\xC3\xA9"), Words({"ete"}));  // marks dropped
    EXPECT_EQ(WpmVocab::pre_tokenize("a\xE2\x80\x8B" "b"), Words({"ab"}));   // Cf dropped
    EXPECT_EQ(WpmVocab::pre_tokenize("x\xE2\x80\x94y"), Words({"x", "\xE2\x80\x94", "y"}));  // em dash
}

TEST(Wpm, GreedyLongestMatchAndUnk) {
    auto f = glia::gguf::File::open(glia::test::shared_path("vocab/ggml-vocab-bert-bge.gguf"));
    auto v = Vocab::from_gguf(*f);
    ASSERT_EQ(v->kind(), glia::tok::Kind::WPM);
    const int32_t hello = v->find_token("\xE2\x96\x81hello");
    ASSERT_GE(hello, 0);
    EXPECT_EQ(v->tokenize("Hello", false, false), Ids({hello}));
    // With add_special: [CLS] ... [SEP].
    EXPECT_EQ(v->tokenize("Hello", true, false), Ids({101, hello, 102}));
    EXPECT_EQ(v->token_to_piece(hello), " hello");
    // A word with a character the vocabulary lacks is [UNK] as a whole.
    EXPECT_EQ(v->tokenize("\xF0\x9F\xA6\x99", false, false), Ids({100}));
}

}  // namespace
