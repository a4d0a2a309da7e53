// WordPiece tokenizer (see wpm.h).
#include "tokenizer/wpm.h"

#include <algorithm>

#include "gguf/gguf.h"
#include "tokenizer/unicode.h"

namespace glia::tok {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581

// CJK ideograph blocks, as BERT defines them (the last range starts at 0x2B920 in the
// reference tokenizers, not 0x2B820).
bool is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

WpmVocab::WpmVocab() {
    kind_ = Kind::WPM;
    bos_ = 101;
    eos_ = -1;
    unk_ = 100;
    sep_ = 102;
    pad_ = 0;
    mask_ = 103;
    add_bos_ = true;
    add_eos_ = false;
    add_sep_ = true;
    add_space_prefix_ = false;
}

void WpmVocab::after_load(const gguf::File& f) {
    read_special_id(f, "tokenizer.ggml.cls_token_id", bos_);  // [CLS] is the BOS of BERT
    max_token_len_ = 0;
    for (const std::string& p : pieces_) max_token_len_ = std::max(max_token_len_, p.size());
}

std::vector<std::string> WpmVocab::pre_tokenize(std::string_view text) {
    std::vector<std::string> words(1);
    for (uint32_t cp : unicode::decode(text)) {
        cp = unicode::nfd_first(cp);
        if (unicode::is_whitespace(cp)) {
            if (!words.back().empty()) words.emplace_back();
            continue;
        }
        if (cp == 0 || cp == 0xFFFD) continue;
        const uint8_t fl = unicode::flags(cp);
        if (fl & (unicode::CONTROL | unicode::MARK)) continue;
        const uint32_t lower = unicode::to_lower(cp);
        if ((fl & unicode::PUNCTUATION) || (cp < 0x7F && (fl & unicode::SYMBOL)) || is_cjk(cp)) {
            if (!words.back().empty()) words.emplace_back();
            unicode::append_utf8(words.back(), lower);  // a word of its own
            words.emplace_back();
        } else {
            unicode::append_utf8(words.back(), lower);
        }
    }
    if (words.back().empty()) words.pop_back();
    return words;
}

void WpmVocab::tokenize_text(std::string_view text, std::vector<int32_t>& out) const {
    std::string w;
    for (const std::string& word : pre_tokenize(text)) {
        w.assign(kSpace);
        w += word;
        const size_t n = w.size();
        const size_t first = out.size();
        for (size_t i = 0; i < n;) {
            bool found = false;
            for (size_t j = std::min(n, i + max_token_len_ + 1); j > i; --j) {
                if (int32_t id = find_token(std::string_view(w).substr(i, j - i)); id >= 0) {
                    out.push_back(id);
                    i = j;
                    found = true;
                    break;
                }
            }
            if (!found) {
                out.resize(first);  // the word cannot be cut: it is unknown as a whole
                break;
            }
        }
        if (out.size() == first && unk_ >= 0) out.push_back(unk_);
    }
}

std::string WpmVocab::make_piece(int32_t id) const {
    const uint32_t a = attrs_[id];
    const std::string& t = pieces_[id];
    if (a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED)) return t;
    if (a & attr::NORMAL) {
        std::string s;
        s.reserve(t.size());
        for (size_t i = 0; i < t.size();) {
            if (t.compare(i, kSpace.size(), kSpace) == 0) {
                s += ' ';
                i += kSpace.size();
            } else {
                s += t[i++];
            }
        }
        return s;
    }
    if (a & attr::BYTE) {
        int v = 0;
        for (size_t i = 3; i < 5 && i < t.size() && hex_digit(t[i]) >= 0; ++i) v = v * 16 + hex_digit(t[i]);
        return std::string(1, static_cast<char>(v));
    }
    return {};
}

}  // namespace glia::tok
