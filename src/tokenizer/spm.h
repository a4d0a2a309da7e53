// SentencePiece (tokenizer.ggml.model = "llama"): score-driven merging of UTF-8
// characters, with byte-token fallback, as the reference implementation does it.
#pragma once
#include <array>

#include "tokenizer/vocab.h"

namespace glia::tok {

// The text of a token of a SentencePiece vocabulary (SPM and Unigram): special and
// user-defined tokens as written, U+2581 as a space in normal tokens, "<0xNN>" byte tokens
// as the byte, unused/undefined tokens as nothing.
std::string sentencepiece_piece(uint32_t attrs, const std::string& text);

class SpmVocab final : public Vocab {
public:
    // Defaults of the reference for SPM: BOS 1, EOS 2, UNK 0, add BOS, no EOS, space prefix.
    SpmVocab();

protected:
    // Escapes spaces to U+2581, then merges. The leading space is added by encode().
    void tokenize_text(std::string_view text, std::vector<int32_t>& out) const override;
    std::string make_piece(int32_t id) const override;
    // A plain-text fragment at the start or right after a special token gets a leading
    // space when add_space_prefix is set.
    void encode(std::string_view text, const std::vector<Fragment>& frags,
                std::vector<int32_t>& out) const override;

private:
    // The token for one byte: "<0xNN>", else the byte itself as a token, else UNK.
    int32_t byte_token(uint8_t b) const;
    void merge(const std::string& text, std::vector<int32_t>& out) const;
};

}  // namespace glia::tok
