// Helpers for the tokenizer tests: llama.cpp's vocab test vectors and synthetic vocabs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

namespace glia::test {

struct VocabCase {
    std::string text;
    std::vector<int32_t> ids;
};

// Reads vocab/<name>.inp and .out as test-tokenizer-0 does (see shared/vocab/README.md).
std::vector<VocabCase> read_vocab_cases(const std::string& inp_path, const std::string& out_path);

// A vocabulary-only GGUF in memory. Tokens with types (1 normal, 3 control, ...) and scores.
struct SyntheticToken {
    std::string text;
    float score = 0.0f;
    int32_t type = 1;
};
std::unique_ptr<gguf::File> make_vocab_file(const std::vector<SyntheticToken>& toks,
                                            void (*extra)(gguf::Writer&) = nullptr,
                                            const std::string& model = "llama");
// The 256 byte tokens <0x00>..<0xFF> (type 6, score 0).
std::vector<SyntheticToken> byte_tokens();

std::string to_hex(const std::string& bytes);

}  // namespace glia::test
