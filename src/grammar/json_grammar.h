// A grammar of JSON values (what a JSON schema compiles to) and its incremental matcher.
//
// The grammar is a graph of nodes: objects (known properties, which are required, what
// other keys may hold), arrays (items, min/max count), strings (min/max length in code
// points), numbers, integers, literal sets (enum, const, true/false/null) and anyOf.
// Nodes refer to each other by id, so recursive schemas ($ref) are cycles, not copies.
//
// The matcher reads the output byte by byte. Its state is a small set of stacks of frames
// (a pushdown automaton): one frame per value being read, innermost on top; anyOf forks
// the stack, one per alternative, and the copies that reject a byte die. It accepts only
// text that parses as JSON and validates against the grammar: UTF-8 checked (no lone
// surrogate escapes), an object's known keys in their fixed order (the required ones,
// then any of the optional ones in order, then other keys where allowed; so the state of
// an object is a position in its list, and an object may have any number of keys), no
// duplicate keys (other keys through a Bloom filter), counts, lengths, bounds and
// patterns. Whitespace between tokens
// is one space, or one newline and then spaces and tabs, kMaxWhitespace bytes at most (a
// model cannot pad between tokens); numbers are at most kMaxNumber bytes, integers kMaxIntegerDigits digits;
// values nest at most kMaxDepth deep.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/regex.h"

namespace glia::grammar {

enum class Kind : uint8_t { OBJECT, ARRAY, STRING, NUMBER, INTEGER, LITERALS, ANY_OF, SEQUENCE };

struct Node {
    Kind kind = Kind::LITERALS;
    // OBJECT: known keys (their text between the quotes, escaped as JSON) in the order
    // they are written, each key's value node; the first `required` keys are required (a
    // count past the keys: all of them), the others optional. The output writes the
    // required keys in order, then any of the optional ones in order, then other keys:
    // `additional` is the node of any other key's value (-1: no other keys). Other keys
    // are written without escapes. `key_trie` indexes the keys (Grammar::add/set build it).
    std::vector<std::string> keys;
    std::vector<int> values;
    int required = 0;
    int additional = -1;
    struct KeyTrieNode {
        int end = -1;   // the key whose text ends here
        int last = -1;  // the highest key index below here
        std::vector<std::pair<uint8_t, int>> next;
    };
    std::vector<KeyTrieNode> key_trie;
    // ARRAY: item i is prefix[i] (prefixItems), later ones `items` (-1: none past the
    // prefix)
    int items = -1;
    std::vector<int> prefix;
    int min_items = 0, max_items = -1;  // -1: no limit
    // STRING (code points; an escape is one), and the pattern its text matches (none:
    // any text)
    int min_length = 0, max_length = -1;
    std::shared_ptr<const Regex> pattern;
    // NUMBER / INTEGER bounds. A bounded number has no exponent, at most kMaxBoundedDigits
    // digits before and after its point, and is compared as the double it reads as.
    bool has_min = false, has_max = false, min_exclusive = false, max_exclusive = false;
    double minimum = 0, maximum = 0;
    // LITERALS: the JSON texts allowed, exactly (compact: no whitespace inside)
    std::vector<std::string> literals;
    // ANY_OF: the alternatives; SEQUENCE: the items, one after the other (a tool call's
    // markers are LITERALS of raw text around a JSON value)
    std::vector<int> alternatives;
};

inline constexpr int kMaxLiterals = 64;      // values of one LITERALS node (a longer enum is an anyOf of them)
inline constexpr int kMaxBoundedDigits = 15; // digits of a bounded number's integer part, and of its fraction
inline constexpr int kMaxDepth = 128;        // frames of one stack: values (and a key) nested in the output
inline constexpr int kMaxLeaves = 4096;      // alternatives one anyOf expands to
inline constexpr int kMaxWhitespace = 16;    // bytes of one whitespace run: " ", or "\n" and indentation
inline constexpr int kMaxNumber = 32;        // bytes of one number
inline constexpr int kMaxIntegerDigits = 15; // bytes of an integer (sign included): exact in a double, as JavaScript reads it
inline constexpr int kMaxStacks = 64;        // anyOf alternatives alive at once

class Grammar {
public:
    int add(Node n);                 // returns the node's id
    void set(int id, Node n);        // replaces a node (one added as a placeholder)
    Node& node(int id) { return nodes_.at(id); }
    const Node& node(int id) const { return nodes_[id]; }
    int size() const { return static_cast<int>(nodes_.size()); }
    void set_root(int id) { root_ = id; }
    int root() const { return root_; }

    // Shared building blocks (created on first use).
    int any_value();   // any JSON value
    int any_object();  // an object with any keys
    int string(int min_length = 0, int max_length = -1);
    int literals(std::vector<std::string> texts);  // more than kMaxLiterals: an anyOf of groups

    // Checks the graph (ids in range, limits, anyOf not empty, no anyOf cycle that
    // reads nothing); throws glia::Error naming the problem.
    void validate() const;

private:
    std::vector<Node> nodes_;
    int root_ = -1;
    int any_ = -1, any_object_ = -1;
};

// One value being read. POD: stacks are copied for forks and for every vocabulary
// trie node a mask visits.
struct Frame {
    int32_t node = -1;
    uint8_t key = 0;      // 1: an object key (node is the object's), 0: a value
    uint8_t phase = 0;
    uint8_t u8_need = 0;  // string/key: UTF-8 continuation bytes still due
    uint8_t u8_lo = 0x80, u8_hi = 0xBF;  // range of the next continuation byte
    uint8_t flag = 0;     // key: other keys still possible; literal: may end here
    uint16_t ws = 0;      // current whitespace run
    int32_t count = 0;    // array items, string code points, literal or key byte offset, number bytes
    int32_t current = -1; // object: key index whose value comes next (-1: another key)
    // object: the position in its key list (keys before it were written or skipped; past
    // the last one after another key); key: its key-trie node + 1 (0: no known key);
    // literals: candidates
    uint64_t mask = 0;
    // Other keys (not known to the schema) cannot repeat either: the object keeps a
    // 64-bit Bloom filter of their hashes (a false positive only refuses a key the model
    // then writes differently), the key frame hashes its bytes.
    uint64_t bloom = 0;   // object: other keys seen; key: running hash
    bool operator==(const Frame&) const = default;
};
using Stack = std::vector<Frame>;

// A set of stacks with reusable storage (a mask steps millions of them).
struct State {
    std::vector<Stack> stacks;
    size_t n = 0;  // stacks[0, n) are live
    void clear() { n = 0; }
    size_t add(const Stack& s);  // copy in, returns its index
};

// Reads `c` in every stack of `in`, writing the survivors to `out` (deduplicated).
void step(const Grammar& g, const State& in, uint8_t c, State& out);
// The text so far is one whole value (the output may end here).
bool accepting(const Grammar& g, const State& s);
// A whole value and nothing can follow.
bool complete(const State& s);
// A string frame (or an other-key frame) is reading plain characters on top of the only
// stack: any run of plain text (no quote, backslash or control byte, whole UTF-8) of at
// most `room` code points is accepted (-1: any length). False when that is not the case.
bool plain_text_run(const Grammar& g, const State& s, int& room);

class Matcher {
public:
    explicit Matcher(std::shared_ptr<const Grammar> g);
    // False (state unchanged) when the bytes are not a continuation the grammar allows.
    bool feed(std::string_view bytes);
    bool accepting() const { return grammar::accepting(*g_, state_); }
    bool complete() const { return grammar::complete(state_); }
    bool dead() const { return state_.n == 0; }
    const State& state() const { return state_; }
    const Grammar& grammar() const { return *g_; }

private:
    std::shared_ptr<const Grammar> g_;
    State state_, tmp_;
};

}  // namespace glia::grammar
