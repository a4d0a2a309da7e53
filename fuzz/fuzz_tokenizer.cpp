// libFuzzer target for the tokenizers: SentencePiece (llama-spm, phi-3), byte-level BPE
// with each pre-tokenizer of the shared vocabularies (gpt-2, llama-bpe, qwen2, qwen35,
// deepseek-llm), gemma-4's SentencePiece-style BPE, and WordPiece (bert-bge).
//
// The vocabularies are the small files in $GLIA_SHARED/vocab (every ggml-vocab-*.gguf
// there, or the files named in $FUZZ_VOCABS, colon-separated). The first input byte picks
// the vocabulary and the flags; the rest is the text. For every input:
//  - tokenize never crashes or throws, and every id is inside the vocabulary, with and
//    without BOS/EOS and special-token parsing;
//  - where the vocabulary is lossless, detokenize(tokenize(text)) == text: byte-level and
//    gemma-4 BPE give the text back with invalid UTF-8 as U+FFFD (the reference decodes
//    the text to code points first; gemma-4 gives U+2581 back as a space); SentencePiece
//    gives valid UTF-8 back with its
//    leading space and U+2581 as a space. WordPiece lowercases and splits, so only the
//    first rule holds;
//  - a chat message's content can never produce a control token other than the unknown
//    token (PromptTokenizer, the guard against special-token injection).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

using namespace glia;

namespace {

struct Loaded {
    std::string name;
    std::unique_ptr<gguf::File> file;
    std::unique_ptr<tok::Vocab> vocab;
    std::unique_ptr<tok::PromptTokenizer> prompt;
    bool spm_style = false;  // tokenizer.ggml.model "gemma4": BPE over SentencePiece-style pieces
};
std::vector<Loaded>* g_vocabs;

void load(const std::string& path) {
    Loaded l;
    l.name = path.substr(path.rfind('/') + 1);
    try {
        l.file = gguf::File::open(path);
        l.vocab = tok::Vocab::from_gguf(*l.file);
        l.prompt = std::make_unique<tok::PromptTokenizer>(*l.vocab);
        l.spm_style = l.file->get_or<std::string>("tokenizer.ggml.model", "") == "gemma4";
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz_tokenizer: skipping %s: %s\n", path.c_str(), e.what());
        return;
    }
    g_vocabs->push_back(std::move(l));
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
    return s;
}

[[noreturn]] void die(const Loaded& l, const char* what, const std::string& text, const std::string& got,
                      const std::string& want) {
    std::fprintf(stderr, "fuzz_tokenizer: %s: %s\n  text (%zu bytes)\n  got  (%zu bytes)\n  want (%zu bytes)\n",
                 l.name.c_str(), what, text.size(), got.size(), want.size());
    std::abort();
}

void check_ids(const Loaded& l, const std::vector<int32_t>& ids, const std::string& text) {
    for (int32_t id : ids)
        if (id < 0 || id >= l.vocab->n_tokens()) die(l, "token id outside the vocabulary", text, "", "");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    g_vocabs = new std::vector<Loaded>();
    if (const char* list = std::getenv("FUZZ_VOCABS")) {
        std::string s = list;
        for (size_t b = 0; b <= s.size();) {
            size_t e = s.find(':', b);
            if (e == std::string::npos) e = s.size();
            if (e > b) load(s.substr(b, e - b));
            b = e + 1;
        }
    } else {
        const char* shared = std::getenv("GLIA_SHARED");
        const std::string dir = std::string(shared ? shared : "../shared") + "/vocab";
        std::vector<std::string> names;
        if (DIR* d = opendir(dir.c_str())) {
            while (dirent* e = readdir(d)) {
                const std::string n = e->d_name;
                if (n.size() > 5 && n.compare(n.size() - 5, 5, ".gguf") == 0) names.push_back(n);
            }
            closedir(d);
        }
        std::sort(names.begin(), names.end());
        for (const auto& n : names) load(dir + "/" + n);
    }
    if (g_vocabs->empty()) {
        std::fprintf(stderr, "fuzz_tokenizer: no vocabulary loaded (set GLIA_SHARED or FUZZ_VOCABS)\n");
        std::exit(2);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const Loaded& l = (*g_vocabs)[data[0] % g_vocabs->size()];
    const uint8_t flags = data[0] / static_cast<uint8_t>(g_vocabs->size());
    const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
    const tok::Vocab& v = *l.vocab;

    // Plain text, as the reference's test vectors tokenize it.
    const std::vector<int32_t> ids = v.tokenize(text, false, false);
    check_ids(l, ids, text);
    const std::string back = v.detokenize(ids);
    std::string want;
    bool lossless = false;
    switch (v.kind()) {
        case tok::Kind::BPE:
            want = tok::unicode::sanitize_utf8(text);
            // gemma-4's SentencePiece-style BPE writes spaces as U+2581 (and back).
            if (l.spm_style) want = replace_all(want, "\xE2\x96\x81", " ");
            lossless = true;
            break;
        case tok::Kind::SPM: {
            // Valid UTF-8 only: like the reference, SentencePiece takes a character's length
            // from its lead byte, so an invalid lead byte swallows the "\xE2\x96\x81" of a
            // following space and the space comes back as those bytes (same ids as the
            // reference; text that is not UTF-8 is not text SentencePiece can give back).
            bool invalid = false;
            (void)tok::unicode::sanitize_utf8(text, &invalid);
            want = replace_all(text, "\xE2\x96\x81", " ");
            if (v.add_space_prefix() && !text.empty()) want = " " + want;
            lossless = !invalid;
            break;
        }
        default: break;
    }
    if (lossless && back != want) die(l, "detokenize(tokenize(text)) != text", text, back, want);

    // With BOS/EOS and special-token parsing: valid ids, whatever the text.
    check_ids(l, v.tokenize(text, flags & 1, flags & 2), text);
    (void)v.detokenize(ids, true);

    // A chat message's content: escaped, then tokenized as the server does. No control
    // token may come out of it.
    const std::string prot = l.prompt->protect(text);
    const std::vector<int32_t> pids = l.prompt->tokenize(prot);
    check_ids(l, pids, text);
    for (int32_t id : pids)
        if (v.is_control(id) && id != v.unk())  // unknown text becomes <unk> / [UNK], as plain text does
            die(l, "a message content produced a control token", text, v.raw_piece(id), "");
    return 0;
}
