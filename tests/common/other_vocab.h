// A model file whose vocabulary differs from its source's in one token's text, for the
// tests that a draft model must share the target's vocabulary (every tiny model in the
// shared data uses stories260K's 512 tokens, so a real mismatch has to be made).
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace glia::test {

// A copy of `src` (written once per process under `dir`, which the caller removes: a
// ScratchDir) with token `id`'s piece replaced.
inline std::string with_token_renamed(const std::string& src, const std::string& dir, int id,
                                      const std::string& piece) {
    const std::string out = dir + "/glia_other_vocab_" + std::to_string(id) + "_" + std::to_string(getpid()) + ".gguf";
    if (std::filesystem::exists(out)) return out;
    auto f = gguf::File::open(src);
    gguf::Writer w(f->alignment());
    w.copy_kvs(*f);
    const gguf::Value* toks = f->find("tokenizer.ggml.tokens");
    std::vector<std::string> pieces;
    for (const gguf::Value& v : toks->arr) pieces.emplace_back(v.s);
    pieces.at(static_cast<size_t>(id)) = piece;
    std::vector<gguf::Value> items(pieces.size());
    for (size_t i = 0; i < pieces.size(); ++i) {
        items[i].type = gguf::ValueType::STRING;
        items[i].s = pieces[i];
    }
    gguf::Value arr;
    arr.type = gguf::ValueType::ARRAY;
    arr.elem_type = gguf::ValueType::STRING;
    arr.arr = std::move(items);
    w.set("tokenizer.ggml.tokens", arr);
    for (const auto& t : f->tensors())
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.nbytes);
    w.write(out);
    return out;
}

}  // namespace glia::test
