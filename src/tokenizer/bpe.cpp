// BPE tokenizers (see bpe.h for the algorithm).
#include "tokenizer/bpe.h"

#include <cstdio>
#include <cstring>
#include <mutex>
#include <queue>
#include <set>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/unicode.h"

namespace glia::tok {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// FNV-1a, fed piecewise so that "left" + ' ' + "right" hashes like the joined string.
struct Fnv {
    uint64_t h = 1469598103934665603ull;
    void add(std::string_view s) {
        for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    }
};

// Once per pre-tokenizer name (per process): a model file loaded again says nothing new.
void warn_unknown_pre_once(const std::string& pre, const std::string& path) {
    static std::mutex mu;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> lock(mu);
    if (!warned.insert(pre).second) return;
    if (pre.empty())
        std::fprintf(stderr,
                     "warning: %s: no pre-tokenizer named (key 'tokenizer.ggml.pre' is missing); using the default "
                     "splitting, so tokens may differ from the model's own tokenizer\n",
                     path.c_str());
    else
        std::fprintf(stderr,
                     "warning: %s: unknown pre-tokenizer '%s' (key 'tokenizer.ggml.pre'); using the default splitting, "
                     "so tokens may differ from the model's own tokenizer\n",
                     path.c_str(), pre.c_str());
}

struct Symbol {
    int prev, next;
    uint32_t off, n;  // word[off, off + n); n == 0 once merged into its left neighbour
};

struct Bigram {
    int left, right;
    int32_t rank;
    uint32_t size;
};

struct BigramOrder {  // priority_queue puts the "largest" on top: lowest rank, then leftmost
    bool operator()(const Bigram& l, const Bigram& r) const {
        return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
    }
};

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Merge table

void BpeVocab::MergeTable::reserve(size_t n, size_t text_bytes) {
    arena_.reserve(text_bytes);
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    slots_.assign(cap, Slot{});
    used_ = 0;
}

void BpeVocab::MergeTable::grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(16, old.size() * 2), Slot{});
    const size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
        if (s.rank < 0) continue;
        size_t i = s.hash & mask;
        while (slots_[i].rank >= 0) i = (i + 1) & mask;
        slots_[i] = s;
    }
}

void BpeVocab::MergeTable::insert(std::string_view key, int32_t rank) {
    if (slots_.empty() || 2 * (used_ + 1) > slots_.size()) grow();
    Fnv f;
    f.add(key);
    const uint32_t h = static_cast<uint32_t>(f.h ^ (f.h >> 32));
    const size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    for (; slots_[i].rank >= 0; i = (i + 1) & mask) {
        const Slot& s = slots_[i];
        if (s.hash == h && std::string_view(arena_).substr(s.off, s.len) == key) return;  // duplicate: first wins
    }
    slots_[i] = {static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), h, rank};
    arena_.append(key);
    ++used_;
}

int32_t BpeVocab::MergeTable::find(std::string_view left, std::string_view right) const {
    if (slots_.empty()) return -1;
    Fnv f;
    f.add(left);
    f.add(" ");
    f.add(right);
    const uint32_t h = static_cast<uint32_t>(f.h ^ (f.h >> 32));
    const size_t mask = slots_.size() - 1;
    const size_t len = left.size() + 1 + right.size();
    for (size_t i = h & mask; slots_[i].rank >= 0; i = (i + 1) & mask) {
        const Slot& s = slots_[i];
        if (s.hash != h || s.len != len) continue;
        const char* k = arena_.data() + s.off;
        if (std::memcmp(k, left.data(), left.size()) == 0 && k[left.size()] == ' ' &&
            std::memcmp(k + left.size() + 1, right.data(), right.size()) == 0)
            return s.rank;
    }
    return -1;
}

// ---------------------------------------------------------------------------------------
// Loading

BpeVocab::BpeVocab(const gguf::File& f, bool gemma4) {
    kind_ = Kind::BPE;
    add_space_prefix_ = false;
    add_bos_ = false;
    add_eos_ = false;
    if (gemma4) {
        bos_ = eos_ = unk_ = -1;  // the file names them
    } else {
        bos_ = eos_ = 11;  // the reference's defaults for BPE vocabularies
        unk_ = -1;
    }

    std::string pre_name;
    if (gemma4) {
        pre_name = "gemma4";  // whatever the file says: gemma4's tokenizer has one pre-tokenizer
    } else if (const gguf::Value* pv = f.find("tokenizer.ggml.pre")) {
        if (pv->type != gguf::ValueType::STRING)
            fail(f.path(), ": key 'tokenizer.ggml.pre': expected a string, found ", gguf::value_type_name(pv->type));
        pre_name = std::string(pv->s);
    }
    pre_ = pre_tokenizer_config(pre_name);
    if (!pre_.known || pre_name.empty()) warn_unknown_pre_once(pre_name, f.path());
    add_bos_ = pre_.add_bos;
    add_sep_ = pre_.add_sep;
    if (pre_.no_bos) bos_ = -1;

    try {
        splitter_ = std::make_unique<PreTokenizer>(pre_.regexes);
    } catch (const Error& e) {
        fail(f.path(), ": ", e.what());
    }

    const gguf::Value* mv = f.find("tokenizer.ggml.merges");
    if (!mv) fail(f.path(), ": key 'tokenizer.ggml.merges' is missing (a BPE vocabulary needs its merges)");
    if (!mv->is_array())
        fail(f.path(), ": key 'tokenizer.ggml.merges': expected an array of strings, found ",
             gguf::value_type_name(mv->type));
    n_merges_ = mv->arr.size();
    if (n_merges_ > static_cast<size_t>(INT32_MAX)) fail(f.path(), ": key 'tokenizer.ggml.merges' has too many entries");
    size_t text_bytes = 0;
    for (const gguf::Value& m : mv->arr) text_bytes += m.s.size();
    ranks_.reserve(n_merges_, text_bytes);
    for (size_t i = 0; i < n_merges_; ++i) {
        const gguf::Value& m = mv->arr[i];
        if (m.type != gguf::ValueType::STRING)
            fail(f.path(), ": key 'tokenizer.ggml.merges'[", i, "]: expected a string, found ",
                 gguf::value_type_name(m.type));
        // "left right", split at the first space after the first byte (a left side may be
        // a lone space). An entry without such a space can never apply.
        if (m.s.size() < 2 || m.s.find(' ', 1) == std::string_view::npos) continue;
        ranks_.insert(m.s, static_cast<int32_t>(i));  // a duplicate keeps its first rank
    }
}

BpeVocab::~BpeVocab() = default;

void BpeVocab::after_load(const gguf::File&) {
    if (pre_.type == "gemma4") add_bos_ = true;  // the reference always adds BOS for gemma-4
}

int BpeVocab::merge_rank(std::string_view left, std::string_view right) const {
    // The stored left side never holds a space after its first byte (that is where the
    // entry was split), so such a pair is not a merge even if the joined text is.
    if (left.empty() || right.empty() || left.find(' ', 1) != std::string_view::npos) return -1;
    return ranks_.find(left, right);
}

std::string BpeVocab::prepare(std::string_view text) const {
    std::string s = unicode::sanitize_utf8(text);
    if (!pre_.escape_spaces) return s;
    std::string e;
    e.reserve(s.size() + s.size() / 2);
    for (char c : s) {
        if (c == ' ') e += kSpace;
        else e += c;
    }
    return e;
}

std::vector<std::string> BpeVocab::pre_tokenize(std::string_view text) const {
    return splitter_->split_strings(prepare(text));
}

void BpeVocab::tokenize_text(std::string_view text, std::vector<int32_t>& out) const {
    const std::string s = prepare(text);
    std::string word;
    for (const PreTokenizer::Span& sp : splitter_->split(s)) {
        const std::string_view w(s.data() + sp.off, sp.len);
        if (pre_.byte_encode) {
            word = unicode::bytes_to_gpt2(w);
            encode_word(word, out);
        } else {
            encode_word(w, out);
        }
    }
}

void BpeVocab::encode_word(std::string_view word, std::vector<int32_t>& out) const {
    if (word.empty()) return;
    if (pre_.ignore_merges) {
        if (int32_t id = find_token(word); id >= 0) {
            out.push_back(id);
            return;
        }
    }
    if (pre_.newline_words_whole && word.find_first_not_of('\n') == std::string_view::npos) {
        if (int32_t id = find_token(word); id >= 0) {
            out.push_back(id);
            return;
        }
    }

    std::vector<Symbol> sym;
    sym.reserve(word.size());
    for (size_t off = 0; off < word.size();) {
        const size_t n = std::min(unicode::utf8_len(static_cast<uint8_t>(word[off])), word.size() - off);
        const int idx = static_cast<int>(sym.size());
        sym.push_back({idx - 1, off + n == word.size() ? -1 : idx + 1, static_cast<uint32_t>(off),
                       static_cast<uint32_t>(n)});
        off += n;
    }

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_add = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const Symbol& l = sym[left];
        const Symbol& r = sym[right];
        const int32_t rank = merge_rank(word.substr(l.off, l.n), word.substr(r.off, r.n));
        if (rank < 0) return;
        queue.push({left, right, rank, l.n + r.n});
    };
    for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const Bigram bg = queue.top();
        queue.pop();
        Symbol& l = sym[bg.left];
        Symbol& r = sym[bg.right];
        if (l.n == 0 || r.n == 0 || l.n + r.n != bg.size) continue;  // stale: a side has changed
        l.n += r.n;
        r.n = 0;
        l.next = r.next;
        if (r.next >= 0) sym[r.next].prev = bg.left;
        try_add(l.prev, bg.left);
        try_add(bg.left, l.next);
    }

    for (int i = 0; i != -1; i = sym[i].next) {
        const std::string_view s = word.substr(sym[i].off, sym[i].n);
        if (int32_t id = find_token(s); id >= 0) {
            out.push_back(id);
            continue;
        }
        // Not a token: its bytes one by one, as tokens of their own. Byte-level: the
        // one-byte string (only ASCII-range code points can match, as in the reference);
        // otherwise the <0xNN> byte token. Bytes without a token are dropped.
        static const char hex[] = "0123456789ABCDEF";
        for (char c : s) {
            const uint8_t b = static_cast<uint8_t>(c);
            int32_t id;
            if (pre_.byte_encode) {
                id = find_token(std::string_view(&c, 1));
            } else {
                const char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
                id = find_token(std::string_view(name, 6));
            }
            if (id >= 0) out.push_back(id);
        }
    }
}

std::string BpeVocab::make_piece(int32_t id) const {
    const uint32_t a = attrs_[id];
    const std::string& t = pieces_[id];
    if (a & (attr::UNKNOWN | attr::CONTROL | attr::USER_DEFINED)) return t;
    if (a & attr::NORMAL) {
        std::string s;
        s.reserve(t.size());
        if (pre_.escape_spaces) {
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
        // Byte-level: each code point is one byte. A code point outside the mapping is
        // shown the way the reference shows it.
        for (uint32_t cp : unicode::decode(t)) {
            const int b = unicode::utf8_to_byte(cp);
            if (b >= 0) {
                s += static_cast<char>(b);
            } else {
                static const char hex[] = "0123456789abcdef";
                s += "[UNK_BYTE_0x";
                for (unsigned char c : unicode::to_utf8(cp)) {
                    s += hex[c >> 4];
                    s += hex[c & 15];
                }
                s += t;
                s += ']';
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
