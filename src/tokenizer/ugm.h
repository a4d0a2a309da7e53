// Unigram (tokenizer.ggml.model = "t5"): SentencePiece's unigram language model, used by
// T5 and by several embedding models (nomic-bert-moe ...).
//
//  1. normalization: at each position, a user-defined token's text is kept as it is;
//     otherwise the longest input prefix found in the precompiled character map
//     (tokenizer.ggml.precompiled_charsmap, SentencePiece's normalization rules: NFKC and
//     the like) is replaced by its target, else one valid UTF-8 character is kept, else one
//     invalid byte becomes U+FFFD. Spaces become U+2581; with remove_extra_whitespaces,
//     runs of spaces collapse to one and leading/trailing spaces go; with add_space_prefix,
//     the text starts with one;
//  2. segmentation: the most probable split (Viterbi over the lattice of vocabulary
//     pieces, summing token scores in double precision; user-defined tokens score 0). A
//     character that no piece covers costs the lowest normal score minus 10 and becomes
//     the unknown token, and consecutive unknown tokens merge into one.
#pragma once
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace glia::tok {

// A set of byte strings that answers "which members are prefixes of this text" without
// building a trie: the members sorted, and a range narrowed one byte at a time.
class PrefixSet {
public:
    // Later entries with the same text replace earlier ones.
    void build(std::vector<std::pair<std::string_view, int32_t>> entries);
    // Calls fn(length, id) for every member that is a prefix of `text`, shortest first.
    template <typename Fn>
    void for_each_prefix(std::string_view text, Fn&& fn) const;
    // Length of the longest member that is a prefix of `text` (0: none).
    size_t longest_prefix(std::string_view text) const;
    bool empty() const { return items_.empty(); }

private:
    std::vector<std::pair<std::string_view, int32_t>> items_;
};

// The precompiled character map: a double array (darts-clone layout, XOR-compressed
// units) over input bytes whose leaves point into a table of NUL-terminated targets.
class CharsMap {
public:
    // `blob` is the key's bytes: a little-endian uint32 size of the double array, the
    // array, then the targets. Throws glia::Error naming `where` when the sizes do not fit.
    void load(std::string blob, const std::string& where);
    bool empty() const { return units_.empty(); }
    // The longest rule for a prefix of `text`: its input length (0: none) and its target.
    size_t match(std::string_view text, std::string_view& target) const;

private:
    uint32_t unit(size_t index) const;  // throws on an index outside the array
    std::vector<uint32_t> units_;
    std::string targets_;
    std::string where_;
};

template <typename Fn>
void PrefixSet::for_each_prefix(std::string_view text, Fn&& fn) const {
    auto first = items_.begin(), last = items_.end();
    for (size_t len = 1; len <= text.size() && first != last; ++len) {
        // [first, last) share text's first len-1 bytes; sorted, the one that is exactly
        // that prefix (already reported) comes first, the rest are ordered by byte len-1.
        if (first->first.size() == len - 1) ++first;
        const auto c = static_cast<unsigned char>(text[len - 1]);
        auto byte = [len](const std::pair<std::string_view, int32_t>& e) {
            return static_cast<unsigned char>(e.first[len - 1]);
        };
        first = std::partition_point(first, last, [&](const auto& e) { return byte(e) < c; });
        last = std::partition_point(first, last, [&](const auto& e) { return byte(e) == c; });
        if (first != last && first->first.size() == len) fn(len, first->second);
    }
}

class UgmVocab final : public Vocab {
public:
    // Defaults of the reference for Unigram: EOS 1, UNK 2, PAD 0, no BOS; add EOS.
    UgmVocab();

    // The normalized text (step 1 above), as the segmentation sees it.
    std::string normalize(std::string_view text) const;

protected:
    void tokenize_text(std::string_view text, std::vector<int32_t>& out) const override;
    std::string make_piece(int32_t id) const override;
    void after_load(const gguf::File& f) override;
    void finish_load() override;

private:
    CharsMap charsmap_;
    PrefixSet pieces_set_;         // normal, user-defined and unused tokens
    PrefixSet user_defined_set_;   // user-defined tokens (kept unnormalized)
    double unknown_score_ = 0;
    bool remove_extra_whitespaces_ = false;
};

}  // namespace glia::tok
