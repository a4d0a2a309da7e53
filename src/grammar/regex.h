// Regular expressions (a JSON schema's `pattern`, and the `format`s written as patterns)
// as a position automaton small enough to live in one 64-bit word of matcher state.
//
// Supported: literals, escapes (\d \w \s \D \W \S, \n \t \r \f \v \0, \xHH, \uHHHH, an
// escaped punctuation character), classes ([a-z], [^...], escapes inside), '.', groups
// ((...), (?:...), (?<name>...)), alternation, the quantifiers ? * + {m} {m,} {m,n}
// (lazy forms match the same strings), and the anchors ^ at the start and $ at the end.
// A pattern without ^ may begin anywhere in the string and one without $ may end
// anywhere, as the specification says. Lookaround, backreferences, word boundaries and
// anchors elsewhere are refused, as are patterns of more than kMaxRegexPositions
// characters once repetitions are written out (each is one bit of state).
//
// Matching is over code points. A state is a set of positions: bit 0 the start, bit i
// "position i was the last one matched", kRegexDone "a match has ended; anything may
// follow" (unanchored end).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace glia::grammar {

inline constexpr int kMaxRegexPositions = 62;
inline constexpr int kMaxRegexGroupDepth = 32;
inline constexpr uint64_t kRegexDone = 1ull << 63;

struct CharClass {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive
    bool negated = false;
    bool contains(uint32_t cp) const;
    bool meets(uint32_t lo, uint32_t hi) const;  // some code point of [lo, hi] is in the class
};

struct Regex {
    std::vector<CharClass> cls;    // cls[i]: what position i matches (cls[0] unused)
    std::vector<uint64_t> follow;  // follow[0]: the first positions; follow[i]: what may follow i
    uint64_t last = 0;             // positions a match may end on (bit 0: the empty string matches)
    bool anchored_start = false, anchored_end = false;

    uint64_t start() const { return !anchored_end && (last & 1) ? kRegexDone | 1 : 1; }
    uint64_t step(uint64_t state, uint32_t cp) const;            // 0: refused
    bool may_take(uint64_t state, uint32_t lo, uint32_t hi) const;  // some code point of [lo, hi] is taken
    bool accepts(uint64_t state) const { return (state & kRegexDone) || (state & last); }
    bool matches(std::u32string_view s) const;                   // the whole text (tests)
};

// Throws glia::Error saying what is not supported or malformed.
std::shared_ptr<const Regex> compile_regex(std::string_view pattern);

}  // namespace glia::grammar
