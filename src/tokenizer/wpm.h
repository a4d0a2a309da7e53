// WordPiece (tokenizer.ggml.model = "bert"), as BERT's tokenizer does it:
//  1. basic pre-tokenization: accents stripped (each character replaced by the first code
//     point of its canonical decomposition, and combining marks dropped), lowercased,
//     control characters dropped, split at whitespace, and every punctuation character,
//     ASCII symbol and CJK ideograph made a word of its own;
//  2. each word, with the word-start marker U+2581 in front (the GGUF form of WordPiece
//     vocabularies: word starts carry U+2581, continuations are bare, no "##"), is cut
//     greedily into the longest vocabulary tokens from the left; a word that cannot be
//     cut completely becomes one [UNK].
#pragma once
#include "tokenizer/vocab.h"

namespace glia::tok {

class WpmVocab final : public Vocab {
public:
    // Defaults of the reference for WordPiece: [CLS] 101 as BOS, [UNK] 100, [SEP] 102,
    // [PAD] 0, [MASK] 103; add_special adds [CLS] ... [SEP].
    WpmVocab();

    // The words of the basic pre-tokenization (lowercased, accents stripped).
    static std::vector<std::string> pre_tokenize(std::string_view text);

protected:
    void tokenize_text(std::string_view text, std::vector<int32_t>& out) const override;
    std::string make_piece(int32_t id) const override;
    void after_load(const gguf::File& f) override;

private:
    size_t max_token_len_ = 0;
};

}  // namespace glia::tok
