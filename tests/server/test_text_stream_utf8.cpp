// A model's text arrives token by token, and a byte-fallback vocabulary spells a
// character it has no piece for as one token per byte. The text stream holds the bytes
// of a character until it is complete: no delta ever ends inside a character (a client
// decoding each delta alone would show U+FFFD), and the whole text is the bytes joined.
// Only bytes that stay invalid at the very end go out as they are.
#include <gtest/gtest.h>

#include "gguf/gguf.h"
#include "server/text_stream.h"
#include "test_util.h"
#include "tokenizer/vocab.h"

namespace {

using glia::server::TextStream;

// Whole, valid UTF-8 (no truncated or stray sequence).
bool valid_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (len == 0 || i + len > s.size()) return false;
        for (size_t k = 1; k < len; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
        i += len;
    }
    return true;
}

TEST(TextStreamUtf8, ByteFallbackTokensNeverSplitACharacter) {
    auto file = glia::gguf::File::open(glia::test::shared_path("models/stories260K.gguf"));
    auto vocab = glia::tok::Vocab::from_gguf(*file);
    const std::string text = "Sue said: caf\xC3\xA9 \xE2\x82\xAC""5, \xE6\x97\xA5\xE6\x9C\xAC and \xF0\x9F\x99\x82!";
    const std::vector<int32_t> ids = vocab->tokenize(text, false, false);
    std::string joined;
    int partial_pieces = 0;
    for (int32_t id : ids) {
        const std::string p = vocab->token_to_piece(id, false);
        partial_pieces += !valid_utf8(p);
        joined += p;
    }
    ASSERT_GT(partial_pieces, 3) << "the vocabulary spells these characters byte by byte";
    for (const std::vector<std::string>& stops : {std::vector<std::string>{}, std::vector<std::string>{"\xE6\x9C\xAC and"},
                                                  std::vector<std::string>{"never there \xE2\x82\xAC"}}) {
        TextStream t(stops);
        std::string streamed;
        bool stopped = false;
        for (int32_t id : ids) {
            stopped = t.append(vocab->token_to_piece(id, false));
            const std::string d = t.take(stopped);
            EXPECT_TRUE(valid_utf8(d)) << "a delta ends inside a character";
            streamed += d;
            if (stopped) break;
        }
        if (!stopped) streamed += t.take(true);
        EXPECT_EQ(streamed, t.text());
        EXPECT_TRUE(valid_utf8(t.text()));
        if (stops.size() == 1 && stops[0][0] == '\xE6') EXPECT_EQ(streamed, joined.substr(0, joined.find(stops[0])));
        else EXPECT_EQ(streamed, joined);
    }
}

// Bytes that never complete a character: held while more may come, sent at the end.
TEST(TextStreamUtf8, InvalidBytesGoOutOnlyAtTheEnd) {
    TextStream t;
    t.append("ok \xE2\x82");
    EXPECT_EQ(t.take(), "ok ");
    t.append("!");  // the character is broken: what was held goes out with what follows
    EXPECT_EQ(t.take(), "\xE2\x82!");
    t.append("\xF0\x9F\x99");
    EXPECT_EQ(t.take(), "");
    EXPECT_EQ(t.take(true), "\xF0\x9F\x99");
}

}  // namespace
