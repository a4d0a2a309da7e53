// SentencePiece tokenizer (BPE-style merging by piece score).
//
// Algorithm (public: SentencePiece's bpe_model, as llama.cpp runs it on GGUF vocabs):
//  1. split the text into UTF-8 characters (a truncated sequence at the end is kept short);
//  2. queue every adjacent pair whose concatenation is a vocabulary token, keyed by that
//     token's score (highest first; equal scores: leftmost first);
//  3. pop pairs; skip a pair whose sides changed since it was queued; merge it, then queue
//     the new pairs with its left and right neighbours;
//  4. emit each final symbol's token, or its bytes as byte tokens when it is not a token
//     (only single characters can be in that case: merged symbols are tokens by
//     construction).
#include "tokenizer/spm.h"

#include <queue>

#include "core/error.h"

namespace glia::tok {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

size_t utf8_len(uint8_t lead) {
    static constexpr size_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[lead >> 4];
}

struct Symbol {
    int prev, next;
    size_t off, n;  // bytes text[off, off + n); n == 0 once merged into its left neighbour
};

struct Bigram {
    int left, right;
    float score;
    size_t size;
};

struct BigramOrder {  // priority_queue puts the "largest" on top
    bool operator()(const Bigram& l, const Bigram& r) const {
        return l.score < r.score || (l.score == r.score && l.left > r.left);
    }
};

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

SpmVocab::SpmVocab() {
    kind_ = Kind::SPM;
    bos_ = 1;
    eos_ = 2;
    unk_ = 0;
    add_bos_ = true;
    add_eos_ = false;
    add_space_prefix_ = true;
}

int32_t SpmVocab::byte_token(uint8_t b) const {
    static const char hex[] = "0123456789ABCDEF";
    const char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    if (int32_t id = find_token(std::string_view(name, 6)); id >= 0) return id;
    const char raw = static_cast<char>(b);
    if (int32_t id = find_token(std::string_view(&raw, 1)); id >= 0) return id;
    if (unk_ >= 0) return unk_;
    fail("SPM vocabulary has no token for byte 0x", hex[b >> 4], hex[b & 15], " (no <0x", hex[b >> 4], hex[b & 15],
         "> token) and no unknown token");
}

void SpmVocab::merge(const std::string& text, std::vector<int32_t>& out) const {
    if (text.empty()) return;
    std::vector<Symbol> sym;
    sym.reserve(text.size());
    for (size_t off = 0; off < text.size();) {
        const size_t n = std::min(utf8_len(static_cast<uint8_t>(text[off])), text.size() - off);
        const int idx = static_cast<int>(sym.size());
        sym.push_back({idx - 1, off + n == text.size() ? -1 : idx + 1, off, n});
        off += n;
    }

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_add = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const std::string_view s(text.data() + sym[left].off, sym[left].n + sym[right].n);
        const int32_t id = find_token(s);
        if (id < 0) return;
        queue.push({left, right, scores_[id], s.size()});
    };
    for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const Bigram bg = queue.top();
        queue.pop();
        Symbol& l = sym[bg.left];
        Symbol& r = sym[bg.right];
        if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;  // stale
        l.n += r.n;
        r.n = 0;
        l.next = r.next;
        if (r.next >= 0) sym[r.next].prev = bg.left;
        try_add(l.prev, bg.left);
        try_add(bg.left, l.next);
    }

    for (int i = 0; i != -1; i = sym[i].next) {
        const std::string_view s(text.data() + sym[i].off, sym[i].n);
        if (int32_t id = find_token(s); id >= 0) {
            out.push_back(id);
        } else {
            for (char c : s) out.push_back(byte_token(static_cast<uint8_t>(c)));
        }
    }
}

void SpmVocab::tokenize_text(std::string_view text, std::vector<int32_t>& out) const {
    std::string escaped;
    escaped.reserve(text.size() + text.size() / 2);
    for (char c : text) {
        if (c == ' ') escaped += kSpace;
        else escaped += c;
    }
    merge(escaped, out);
}

void SpmVocab::encode(std::string_view text, const std::vector<Fragment>& frags, std::vector<int32_t>& out) const {
    bool prev_special = true;  // the start of the text counts as "after a special token"
    std::string run;
    for (const Fragment& fr : frags) {
        if (fr.token >= 0) {
            out.push_back(fr.token);
            prev_special = true;
            continue;
        }
        run.clear();
        if (add_space_prefix_ && prev_special) run = ' ';
        run.append(text.substr(fr.off, fr.len));
        tokenize_text(run, out);
        prev_special = false;
    }
}

std::string sentencepiece_piece(uint32_t a, const std::string& t) {
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
        // "<0xNN>": the hex digits at offset 3 (parsed leniently, like strtol).
        int v = 0;
        for (size_t i = 3; i < 5 && i < t.size() && hex_digit(t[i]) >= 0; ++i) v = v * 16 + hex_digit(t[i]);
        return std::string(1, static_cast<char>(v));
    }
    return {};  // unused / undefined tokens render as nothing
}

std::string SpmVocab::make_piece(int32_t id) const { return sentencepiece_piece(attrs_[id], pieces_[id]); }

}  // namespace glia::tok
