// BPE tokenizers: byte-level BPE (tokenizer.ggml.model = "gpt2") and the
// SentencePiece-style BPE of gemma-4 (tokenizer.ggml.model = "gemma4").
//
// Byte-level BPE, as GPT-2 and its descendants (Llama 3, Qwen, DeepSeek ...) do it:
//  1. the pre-tokenizer (tokenizer.ggml.pre) splits the text into words with regexes;
//  2. each word's bytes are shown as GPT-2's printable code points (bytes_to_unicode);
//  3. the word is split into characters, and adjacent pairs are merged lowest merge rank
//     first (tokenizer.ggml.merges, rank = position; equal ranks: leftmost first);
//  4. every final symbol is a token; one that is not (a merge list that does not cover
//     the vocabulary) falls back to its single-byte tokens, and is dropped if none exist,
//     as in the reference.
// gemma-4 differs in the details only: spaces become U+2581, the pre-tokenizer splits at
// newlines only, words stay raw UTF-8 and unknown bytes use <0xNN> tokens.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"

namespace glia::tok {

class BpeVocab final : public Vocab {
public:
    // Reads tokenizer.ggml.pre and tokenizer.ggml.merges; the base class reads the rest
    // (Vocab::from_gguf calls load()). gemma4: the "gemma4" tokenizer model.
    // An unknown tokenizer.ggml.pre gives the default pre-tokenizer and a warning on
    // stderr (once per name). Throws when merges are missing or the build has no PCRE2.
    BpeVocab(const gguf::File& f, bool gemma4);
    ~BpeVocab() override;

    const PreTokenizerConfig& pre_tokenizer() const { return pre_; }
    // Rank of the merge "left right", or -1.
    int merge_rank(std::string_view left, std::string_view right) const;
    size_t n_merges() const { return n_merges_; }
    // The words the pre-tokenizer makes of `text` (after the same clean-up tokenize does,
    // before the byte-level mapping).
    std::vector<std::string> pre_tokenize(std::string_view text) const;

protected:
    void tokenize_text(std::string_view text, std::vector<int32_t>& out) const override;
    std::string make_piece(int32_t id) const override;
    void after_load(const gguf::File& f) override;

private:
    // Merge ranks keyed by their GGUF text "left right": one arena for the texts and an
    // open-addressing table, so that loading hundreds of thousands of merges is a few
    // allocations and a lookup builds no string.
    class MergeTable {
    public:
        void reserve(size_t n, size_t text_bytes);
        // Keeps the first rank of a duplicate key.
        void insert(std::string_view key, int32_t rank);
        // Rank of the key left + ' ' + right, or -1.
        int32_t find(std::string_view left, std::string_view right) const;

    private:
        struct Slot {
            uint32_t off = 0, len = 0;
            uint32_t hash = 0;
            int32_t rank = -1;  // -1: empty
        };
        void grow();
        std::string arena_;
        std::vector<Slot> slots_;
        size_t used_ = 0;
    };

    std::string prepare(std::string_view text) const;  // valid UTF-8, spaces escaped if asked
    void encode_word(std::string_view word, std::vector<int32_t>& out) const;

    PreTokenizerConfig pre_;
    std::unique_ptr<PreTokenizer> splitter_;
    MergeTable ranks_;
    size_t n_merges_ = 0;
};

}  // namespace glia::tok
