#include "tok_test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include "test_util.h"

namespace glia::test {

std::vector<VocabCase> read_vocab_cases(const std::string& inp_path, const std::string& out_path) {
    const std::string inp = read_text(inp_path);
    const std::string out = read_text(out_path);
    static const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> texts;
    for (size_t pos = 0;;) {
        size_t m = inp.find(sep, pos);
        if (m == std::string::npos) {
            if (pos < inp.size()) texts.push_back(inp.substr(pos));
            break;
        }
        texts.push_back(inp.substr(pos, m - pos));
        pos = m + sep.size();
    }
    std::vector<std::string> lines;
    {
        size_t pos = 0;
        while (pos < out.size()) {
            size_t nl = out.find('\n', pos);
            if (nl == std::string::npos) nl = out.size();
            lines.push_back(out.substr(pos, nl - pos));
            pos = nl + 1;
        }
    }
    std::vector<VocabCase> cases;
    for (size_t i = 0; i < texts.size(); ++i) {
        VocabCase c;
        c.text = texts[i];
        if (i < lines.size()) {
            std::istringstream ss(lines[i]);
            long v;
            while (ss >> v) c.ids.push_back(static_cast<int32_t>(v));
        } else {
            c.ids = {-999};  // makes the mismatch visible
        }
        cases.push_back(std::move(c));
    }
    if (lines.size() != texts.size())
        ADD_FAILURE_AT(__FILE__, __LINE__) << out_path << " has " << lines.size() << " lines for " << texts.size() << " texts";
    return cases;
}

std::unique_ptr<gguf::File> make_vocab_file(const std::vector<SyntheticToken>& toks, void (*extra)(gguf::Writer&),
                                            const std::string& model) {
    using gguf::Value;
    using gguf::ValueType;
    gguf::Writer w;
    w.set_str("general.architecture", "llama");
    w.set_str("tokenizer.ggml.model", model);
    Value t, s, ty;
    t.type = s.type = ty.type = ValueType::ARRAY;
    t.elem_type = ValueType::STRING;
    s.elem_type = ValueType::FLOAT32;
    ty.elem_type = ValueType::INT32;
    for (const auto& tok : toks) {
        Value a; a.type = ValueType::STRING; a.s = tok.text; t.arr.push_back(a);
        Value b; b.type = ValueType::FLOAT32; b.f = tok.score; s.arr.push_back(b);
        Value c; c.type = ValueType::INT32; c.i = tok.type; ty.arr.push_back(c);
    }
    w.set("tokenizer.ggml.tokens", t);
    w.set("tokenizer.ggml.scores", s);
    w.set("tokenizer.ggml.token_type", ty);
    if (extra) extra(w);
    return gguf::File::from_memory(w.to_bytes(), "synthetic.gguf");
}

std::vector<SyntheticToken> byte_tokens() {
    std::vector<SyntheticToken> v;
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        v.push_back({name, 0.0f, 6});
    }
    return v;
}

std::string to_hex(const std::string& bytes) {
    static const char hex[] = "0123456789abcdef";
    std::string s;
    for (unsigned char c : bytes) {
        s += hex[c >> 4];
        s += hex[c & 15];
    }
    return s;
}

}  // namespace glia::test
