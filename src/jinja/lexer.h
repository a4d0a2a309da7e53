// Jinja lexer: splits template source into text and tag tokens, applying whitespace
// control ({%- -%}, {{- -}}, {%+ +%}) and the environment's trim_blocks/lstrip_blocks
// the way Jinja2 does, and tokenizes the expressions inside tags.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace glia::jinja {

struct LexOptions {
    bool trim_blocks = true;             // drop the first newline after a block tag or comment
    bool lstrip_blocks = true;           // drop spaces/tabs before a block tag or comment on its line
    bool keep_trailing_newline = false;  // keep one trailing newline of the source
};

enum class Tok : uint8_t {
    Text,        // literal template text (raw blocks included)
    VarBegin,    // {{
    VarEnd,      // }}
    BlockBegin,  // {%
    BlockEnd,    // %}
    Name,
    String,      // value unescaped
    Int,
    Float,
    Op,          // operator or punctuation: + - * / // % ** ~ == != < > <= >= = . : | , ( ) [ ] { }
    Eof,
};

struct Token {
    Tok kind = Tok::Eof;
    std::string text;  // Text, Name, String value, Op spelling, numeric source
    int line = 1;
    int64_t ival = 0;
    double fval = 0;
};

// Normalises newlines as Jinja2 does (every Python line boundary becomes "\n") and drops
// one trailing newline unless keep_trailing_newline.
std::string normalize_source(std::string_view src, bool keep_trailing_newline);

// Throws jinja::Error (Syntax) with the line on malformed input.
std::vector<Token> tokenize(std::string_view source, const LexOptions& opt = {});

}  // namespace glia::jinja
