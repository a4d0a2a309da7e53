// Unigram tokenizer (see ugm.h for the algorithm).
#include "tokenizer/ugm.h"

#include <cfloat>
#include <cstring>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/spm.h"

namespace glia::tok {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";        // U+2581, the escaped space
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr double kUnknownPenalty = 10.0;

size_t utf8_len(uint8_t lead) {
    static constexpr size_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[lead >> 4];
}

// Length of the well-formed UTF-8 character at the front of `s` (lead byte and the right
// number of continuation bytes), or 0.
size_t valid_char_len(std::string_view s) {
    const auto b0 = static_cast<uint8_t>(s[0]);
    size_t n = 0;
    if (b0 < 0x80) return 1;
    if ((b0 & 0xE0) == 0xC0) n = 2;
    else if ((b0 & 0xF0) == 0xE0) n = 3;
    else if ((b0 & 0xF8) == 0xF0) n = 4;
    else return 0;
    if (s.size() < n) return 0;
    for (size_t i = 1; i < n; ++i)
        if ((static_cast<uint8_t>(s[i]) & 0xC0) != 0x80) return 0;
    return n;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// PrefixSet

void PrefixSet::build(std::vector<std::pair<std::string_view, int32_t>> entries) {
    // Sorting a few hundred thousand texts is mostly cache misses in the byte compares:
    // compare the first 8 bytes as one big-endian integer (zero-padded, which keeps the
    // lexicographic order), and the texts only where those tie.
    struct Keyed {
        uint64_t key;
        uint32_t order;  // among equal texts the later entry is kept
    };
    std::vector<Keyed> keyed(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
        uint64_t k = 0;
        const std::string_view t = entries[i].first;
        for (size_t b = 0; b < 8; ++b) k = (k << 8) | (b < t.size() ? static_cast<uint8_t>(t[b]) : 0u);
        keyed[i] = {k, static_cast<uint32_t>(i)};
    }
    std::sort(keyed.begin(), keyed.end(), [&](const Keyed& a, const Keyed& b) {
        if (a.key != b.key) return a.key < b.key;
        if (int c = entries[a.order].first.compare(entries[b.order].first)) return c < 0;
        return a.order < b.order;
    });
    items_.clear();
    items_.reserve(entries.size());
    for (const Keyed& k : keyed) {
        const auto& e = entries[k.order];
        if (e.first.empty()) continue;
        if (!items_.empty() && items_.back().first == e.first) items_.back() = e;
        else items_.push_back(e);
    }
}

size_t PrefixSet::longest_prefix(std::string_view text) const {
    size_t best = 0;
    for_each_prefix(text, [&](size_t len, int32_t) { best = len; });
    return best;
}

// ---------------------------------------------------------------------------------------
// CharsMap

void CharsMap::load(std::string blob, const std::string& where) {
    where_ = where;
    units_.clear();
    targets_.clear();
    if (blob.empty()) return;
    if (blob.size() < 4) fail(where, ": ", blob.size(), " bytes, too short for its size header");
    const uint32_t array_bytes = static_cast<uint32_t>(static_cast<uint8_t>(blob[0])) |
                                 static_cast<uint32_t>(static_cast<uint8_t>(blob[1])) << 8 |
                                 static_cast<uint32_t>(static_cast<uint8_t>(blob[2])) << 16 |
                                 static_cast<uint32_t>(static_cast<uint8_t>(blob[3])) << 24;
    if (array_bytes == 0 || array_bytes % 4 != 0 || uint64_t(array_bytes) + 4 >= blob.size())
        fail(where, ": its double array claims ", array_bytes, " bytes, which does not fit the ", blob.size(),
             " bytes of the map (with at least one target after it)");
    units_.resize(array_bytes / 4);
    for (size_t i = 0; i < units_.size(); ++i) {
        const auto* p = reinterpret_cast<const uint8_t*>(blob.data() + 4 + 4 * i);
        units_[i] = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    }
    targets_ = blob.substr(4 + array_bytes);
}

uint32_t CharsMap::unit(size_t index) const {
    if (index >= units_.size())
        fail(where_, ": the double array points at unit ", index, " of ", units_.size(), " (a corrupt map)");
    return units_[index];
}

size_t CharsMap::match(std::string_view text, std::string_view& target) const {
    if (units_.empty()) return 0;
    // Each unit packs: bits 0-7 the label (with bit 31, so that a "no label" unit never
    // matches a byte), bit 8 "has a leaf", bits 10-30 the offset to the children (shifted
    // left by 8 more when bit 9 is set). A leaf's unit holds the target's offset.
    auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
    size_t node = offset(unit(0));
    size_t best_len = 0;
    uint32_t best_value = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<uint8_t>(text[i]);
        if (c == 0) break;
        node ^= c;
        const uint32_t u = unit(node);
        if ((u & ((1u << 31) | 0xFFu)) != c) break;
        const bool has_leaf = (u >> 8) & 1;
        node ^= offset(u);
        if (has_leaf) {
            best_len = i + 1;
            best_value = unit(node) & ((1u << 31) - 1);
        }
    }
    if (best_len == 0) return 0;
    if (best_value >= targets_.size())
        fail(where_, ": a rule points at target offset ", best_value, " of ", targets_.size(), " (a corrupt map)");
    const char* t = targets_.data() + best_value;
    target = std::string_view(t, strnlen(t, targets_.size() - best_value));
    return best_len;
}

// ---------------------------------------------------------------------------------------
// UgmVocab

UgmVocab::UgmVocab() {
    kind_ = Kind::UGM;
    bos_ = -1;
    eos_ = 1;
    unk_ = 2;
    pad_ = 0;
    add_bos_ = false;
    add_eos_ = true;
    add_space_prefix_ = false;
}

void UgmVocab::after_load(const gguf::File& f) {
    if (const gguf::Value* v = f.find("tokenizer.ggml.remove_extra_whitespaces")) {
        if (v->type != gguf::ValueType::BOOL)
            fail(f.path(), ": key 'tokenizer.ggml.remove_extra_whitespaces': expected a bool, found ",
                 gguf::value_type_name(v->type));
        remove_extra_whitespaces_ = v->u != 0;
    }
    static const char* kKey = "tokenizer.ggml.precompiled_charsmap";
    const gguf::Value* m = f.find(kKey);
    if (!m) return;  // no normalization rules: the text is only whitespace-escaped
    if (!m->is_array() || (m->elem_type != gguf::ValueType::UINT8 && m->elem_type != gguf::ValueType::INT8))
        fail(f.path(), ": key '", kKey, "': expected an array of bytes, found ",
             m->is_array() ? cat("an array of ", gguf::value_type_name(m->elem_type)) : gguf::value_type_name(m->type));
    std::string blob(m->arr.size(), '\0');
    for (size_t i = 0; i < m->arr.size(); ++i)
        blob[i] = static_cast<char>(m->elem_type == gguf::ValueType::UINT8 ? m->arr[i].u : uint64_t(m->arr[i].i));
    charsmap_.load(std::move(blob), cat(f.path(), ": key '", kKey, "'"));
}

void UgmVocab::finish_load() {
    std::vector<std::pair<std::string_view, int32_t>> pieces, user;
    float min_score = FLT_MAX;
    for (int32_t id = 0; id < n_tokens(); ++id) {
        const uint32_t a = attrs_[id];
        if (a & attr::NORMAL) min_score = std::min(min_score, scores_[id]);
        if (a & (attr::NORMAL | attr::USER_DEFINED | attr::UNUSED)) pieces.emplace_back(pieces_[id], id);
        if (a & attr::USER_DEFINED) user.emplace_back(pieces_[id], id);
    }
    pieces_set_.build(std::move(pieces));
    user_defined_set_.build(std::move(user));
    unknown_score_ = double(min_score) - kUnknownPenalty;
}

std::string UgmVocab::normalize(std::string_view text) const {
    std::string out;
    out.reserve(text.size() * 3);
    const bool merge_spaces = remove_extra_whitespaces_;
    bool prefix_done = false;  // the add_space_prefix space is written
    bool in_word = false;
    std::string_view target;
    for (size_t off = 0; off < text.size();) {
        const std::string_view rest = text.substr(off);
        std::string_view piece;
        size_t consumed;
        if (size_t n = user_defined_set_.longest_prefix(rest); n > 0) {
            piece = rest.substr(0, n);  // user-defined text is not normalized
            consumed = n;
        } else if (size_t m = charsmap_.match(rest, target); m > 0) {
            piece = target;
            consumed = m;
        } else if (size_t c = valid_char_len(rest); c > 0) {
            piece = rest.substr(0, c);
            consumed = c;
        } else {
            piece = kReplacement;
            consumed = 1;
        }
        for (char ch : piece) {
            if (ch != ' ') {
                if (!in_word) {
                    in_word = true;
                    // One space before every word when merging; else only the prefix space.
                    if ((add_space_prefix_ && !prefix_done) || merge_spaces) {
                        out += kSpace;
                        prefix_done = true;
                    }
                }
                out += ch;
            } else {
                in_word = false;
                if (!merge_spaces) out += kSpace;
            }
        }
        off += consumed;
    }
    return out;
}

void UgmVocab::tokenize_text(std::string_view text, std::vector<int32_t>& out) const {
    const std::string s = normalize(text);
    const size_t n = s.size();
    if (n == 0) return;
    // best[i]: the best segmentation of s[0, i): its score, its last token and where that
    // token starts.
    struct Best {
        int32_t token;
        size_t start;
        double score;
    };
    std::vector<Best> best(n + 1, {unk_, 0, -DBL_MAX});
    best[0] = {unk_, 0, 0.0};
    for (size_t off = 0; off < n;) {
        const size_t char_len = std::min(utf8_len(static_cast<uint8_t>(s[off])), n - off);
        const double here = best[off].score;
        bool char_covered = false;
        pieces_set_.for_each_prefix(std::string_view(s).substr(off), [&](size_t len, int32_t id) {
            if (len == char_len) char_covered = true;
            const double score = here + ((attrs_[id] & attr::USER_DEFINED) ? 0.0 : double(scores_[id]));
            if (score > best[off + len].score) best[off + len] = {id, off, score};
        });
        if (!char_covered) {
            const double score = here + unknown_score_;
            if (score > best[off + char_len].score) best[off + char_len] = {unk_, off, score};
        }
        off += char_len;
    }
    // Walk back from the end; a run of unknown tokens becomes one.
    const size_t first = out.size();
    bool prev_unknown = false;
    for (size_t at = n;;) {
        const Best& b = best[at];
        const bool unknown = b.token == unk_;
        if (unknown && unk_ < 0)
            fail("Unigram vocabulary: '", s.substr(b.start, at - b.start),
                 "' matches no token and the vocabulary has no unknown token");
        if (!(prev_unknown && unknown)) out.push_back(b.token);
        if (b.start == 0) break;
        prev_unknown = unknown;
        at = b.start;
    }
    std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
}

std::string UgmVocab::make_piece(int32_t id) const { return sentencepiece_piece(attrs_[id], pieces_[id]); }

}  // namespace glia::tok
