// Unicode helpers for the tokenizers: UTF-8 decoding the way the reference does it,
// GPT-2's byte <-> code point mapping, and the few character properties the
// tokenizers need. General categories come from PCRE2 (when built with it); the
// lowercase and NFD tables are generated (gen_unicode_tables.py).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace glia::tok::unicode {

// Bytes in the UTF-8 sequence that `lead` starts (1 for continuation / invalid bytes),
// from its high nibble only, as the reference does.
inline size_t utf8_len(uint8_t lead) {
    static constexpr uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[lead >> 4];
}

void append_utf8(std::string& out, uint32_t cp);
std::string to_utf8(uint32_t cp);

// Code points of `text`. An invalid or truncated sequence gives U+FFFD and consumes one
// byte (the reference's rule). Surrogates and values above U+10FFFF, which a lenient
// decoder lets through, also become U+FFFD so that the result is valid Unicode.
std::vector<uint32_t> decode(std::string_view text);

// `text` with every invalid sequence replaced as decode() does. Returns `text` unchanged
// (no copy) through `out` == text when it is already valid; `changed` tells which.
std::string sanitize_utf8(std::string_view text, bool* changed = nullptr);

// GPT-2 byte-level BPE: each byte is shown as one printable code point (printable
// Latin-1 bytes as themselves, the other 68 as U+0100 upward).
const std::string& byte_to_utf8(uint8_t b);
// The byte for a code point of that mapping, or -1.
int utf8_to_byte(uint32_t cp);
// Every byte of `text` replaced by its code point's UTF-8.
std::string bytes_to_gpt2(std::string_view text);

// Simple (one-to-one) lowercase mapping; cp itself when there is none.
uint32_t to_lower(uint32_t cp);
// First code point of the canonical decomposition (NFD) of cp; cp itself when it does
// not decompose. Hangul syllables give their leading consonant jamo.
uint32_t nfd_first(uint32_t cp);

// Whitespace as the reference tokenizers define it: U+0009..U+000D, U+0020, U+0085,
// U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool is_whitespace(uint32_t cp);

// General-category flags of a code point (Unicode categories via PCRE2).
enum Flag : uint8_t {
    LETTER = 1, NUMBER = 2, MARK = 4, PUNCTUATION = 8, SYMBOL = 16, SEPARATOR = 32,
    CONTROL = 64,  // Cc, Cf, Co, Cs (not Cn: unassigned code points have no flag)
};
// Without PCRE2 only ASCII is classified; other code points get LETTER.
uint8_t flags(uint32_t cp);

// Whether this build has PCRE2 (the BPE pre-tokenizers need it).
bool have_pcre2();

}  // namespace glia::tok::unicode
