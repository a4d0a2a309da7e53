// The vocabulary as the grammar sees it, and the per-step token mask.
//
// Each token's bytes go into a trie; a mask walks the trie with the matcher's state,
// stepping one byte per trie edge, so tokens that share a prefix share its work and a
// rejected prefix prunes every token below it. Inside a string (the common case: long
// values) the walk would visit nearly the whole vocabulary, so tokens of plain text (no
// quote, backslash or control byte; whole UTF-8) are allowed in bulk from a table sorted
// by length in code points, and only the other tokens are walked, in a second trie.
// Control and user-defined tokens (other than end-of-generation ones) are allowed only
// where raw text is expected (the markers of a tool call, LITERALS) and their text
// matches; end-of-generation tokens are allowed exactly when the text is a whole value.
#pragma once
#include <cstdint>
#include <vector>

#include "grammar/json_grammar.h"

namespace glia::tok {
class Vocab;
}

namespace glia::grammar {

// One bit per token id.
struct TokenMask {
    std::vector<uint64_t> bits;
    void reset(int n) { bits.assign((n + 63) / 64, 0); }
    void set(int id) { bits[id >> 6] |= 1ull << (id & 63); }
    bool test(int id) const { return bits[id >> 6] >> (id & 63) & 1; }
    int count() const;
};

class TokenIndex {
public:
    explicit TokenIndex(const tok::Vocab& v);
    int n_vocab() const { return n_vocab_; }
    const std::string& bytes(int id) const { return bytes_[id]; }
    bool is_eog(int id) const;
    // The tokens the state accepts next (EOG ones when it is a whole value).
    void mask(const Matcher& m, TokenMask& out) const;

private:
    struct Trie {
        struct NodeRec {
            uint32_t edge_begin = 0, n_edges = 0;  // into edge_byte / edge_child
            uint32_t tok_begin = 0, n_toks = 0;    // into order (tokens ending here)
        };
        std::vector<NodeRec> nodes;
        std::vector<uint8_t> edge_byte;
        std::vector<uint32_t> edge_child;
        std::vector<int32_t> order;  // token ids sorted by bytes
        int max_depth = 0;
        void build(const std::vector<std::string>& bytes, std::vector<int32_t> ids);
    };
    void walk(const Trie& t, const Grammar& g, const State& s, TokenMask& out) const;

    int n_vocab_ = 0;
    std::vector<std::string> bytes_;  // each token's text ("" for special tokens)
    std::vector<int32_t> eog_;
    std::vector<int32_t> specials_;   // control and user-defined tokens with a text
    Trie all_, special_;              // every normal token; those that are not plain text
    std::vector<int32_t> plain_;      // plain-text tokens, by code points ascending
    std::vector<int32_t> plain_len_;  // their code points
};

}  // namespace glia::grammar
