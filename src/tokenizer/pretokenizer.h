// BPE pre-tokenizers: the regexes (and flags) that tokenizer.ggml.pre selects, and the
// splitting of text into words with PCRE2 (UTF + UCP, JIT when available).
//
// A pre-tokenizer is a list of regexes applied in turn. Each regex splits every piece
// produced so far into its matches and the runs of text between them (both kept, in
// order: the "isolated" split of the reference), so the pieces always cover the text.
// Each piece is matched on its own: anchors and look-arounds do not see past it.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace glia::tok {

// What a tokenizer.ggml.pre value selects. Names and regexes follow the reference
// implementation (llama.cpp); where it had to approximate a regex that its engine
// could not run, the original regex of the model's tokenizer.json is used instead.
struct PreTokenizerConfig {
    std::string type;                 // canonical name ("llama3", "qwen2", ... "default")
    std::vector<std::string> regexes; // applied in order
    bool known = true;                // false: unknown name, the default regexes are used
    bool byte_encode = true;          // map each word's bytes to GPT-2's code points
    bool escape_spaces = false;       // ' ' -> U+2581 before splitting (SentencePiece-style BPE)
    bool ignore_merges = false;       // a word that is itself a token is not merged
    bool add_bos = false;             // default of the add-BOS flag (the GGUF key overrides)
    bool add_sep = false;             // default of the add-SEP flag
    bool no_bos = false;              // the vocabulary has no BOS token (chatglm)
    bool newline_words_whole = false; // a word of only '\n' that is a token stays whole (gemma4)
};

// The configuration for a tokenizer.ggml.pre value ("" or absent means "default").
PreTokenizerConfig pre_tokenizer_config(std::string_view pre);

// Compiled regexes. Input must be valid UTF-8 (see unicode::sanitize_utf8).
class PreTokenizer {
public:
    // Throws glia::Error when a regex does not compile, or when the library was built
    // without PCRE2 ("built without PCRE2").
    explicit PreTokenizer(const std::vector<std::string>& regexes);
    ~PreTokenizer();
    PreTokenizer(const PreTokenizer&) = delete;
    PreTokenizer& operator=(const PreTokenizer&) = delete;

    struct Span {
        size_t off, len;
    };
    // The words of `text` as byte ranges, in order, covering all of it.
    std::vector<Span> split(std::string_view text) const;
    // The words as strings (for tests and tools).
    std::vector<std::string> split_strings(std::string_view text) const;

    // `\s` / `\S` rewritten to the reference's whitespace set (exposed for tests).
    static std::string rewrite_whitespace(std::string_view regex);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace glia::tok
