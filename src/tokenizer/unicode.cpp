#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <mutex>

#if GLIA_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

namespace glia::tok::unicode {

namespace {

struct NfdRange {
    uint32_t first, last, nfd;
};
struct LowerRun {
    uint32_t first, last;
    int32_t stride, delta;
};
#include "tokenizer/unicode_tables.inc"

// One code point at text[off]; advances off. -1 when the sequence is invalid (the caller
// substitutes U+FFFD and moves one byte on).
int64_t decode_one(std::string_view text, size_t& off) {
    const auto b = [&](size_t i) { return static_cast<uint8_t>(text[off + i]); };
    const size_t left = text.size() - off;
    const uint8_t c0 = b(0);
    if (!(c0 & 0x80)) {
        off += 1;
        return c0;
    }
    if (!(c0 & 0x40)) return -1;  // stray continuation byte
    auto cont = [&](size_t i) { return i < left && (b(i) & 0xC0) == 0x80; };
    if (!(c0 & 0x20)) {
        if (!cont(1)) return -1;
        const int64_t cp = ((c0 & 0x1F) << 6) | (b(1) & 0x3F);
        off += 2;
        return cp;
    }
    if (!(c0 & 0x10)) {
        if (!cont(1) || !cont(2)) return -1;
        const int64_t cp = ((c0 & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
        off += 3;
        return cp;
    }
    if (!(c0 & 0x08)) {
        if (!cont(1) || !cont(2) || !cont(3)) return -1;
        const int64_t cp = ((c0 & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
        off += 4;
        return cp;
    }
    return -1;
}

size_t encoded_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

uint32_t valid_or_replacement(int64_t cp) {
    if (cp < 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return 0xFFFD;
    return static_cast<uint32_t>(cp);
}

struct ByteTables {
    std::array<std::string, 256> to_utf8;
    std::array<int16_t, 324> from_cp;  // code points 0..323 cover the whole mapping
    ByteTables() {
        from_cp.fill(-1);
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
            to_utf8[b] = to_utf8_impl(cp);
            from_cp[cp] = static_cast<int16_t>(b);
        }
    }
    static std::string to_utf8_impl(uint32_t cp) {
        std::string s;
        append_utf8(s, cp);
        return s;
    }
};

const ByteTables& byte_tables() {
    static const ByteTables t;
    return t;
}

}  // namespace

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

std::string to_utf8(uint32_t cp) {
    std::string s;
    append_utf8(s, cp);
    return s;
}

std::vector<uint32_t> decode(std::string_view text) {
    std::vector<uint32_t> cps;
    cps.reserve(text.size());
    for (size_t off = 0; off < text.size();) {
        const int64_t cp = decode_one(text, off);
        if (cp < 0) ++off;
        cps.push_back(valid_or_replacement(cp));
    }
    return cps;
}

std::string sanitize_utf8(std::string_view text, bool* changed) {
    // Fast path: scan; only rebuild when something needs replacing or re-encoding.
    size_t off = 0;
    while (off < text.size()) {
        const size_t start = off;
        const int64_t cp = decode_one(text, off);
        if (cp < 0 || valid_or_replacement(cp) != cp || off - start != encoded_len(static_cast<uint32_t>(cp))) {
            off = start;
            break;
        }
    }
    if (off == text.size()) {
        if (changed) *changed = false;
        return std::string(text);
    }
    std::string out(text.substr(0, off));
    out.reserve(text.size() + 8);
    while (off < text.size()) {
        const int64_t cp = decode_one(text, off);
        if (cp < 0) ++off;
        append_utf8(out, valid_or_replacement(cp));
    }
    if (changed) *changed = true;
    return out;
}

const std::string& byte_to_utf8(uint8_t b) { return byte_tables().to_utf8[b]; }

int utf8_to_byte(uint32_t cp) {
    const auto& t = byte_tables();
    return cp < t.from_cp.size() ? t.from_cp[cp] : -1;
}

std::string bytes_to_gpt2(std::string_view text) {
    const auto& t = byte_tables();
    std::string out;
    out.reserve(text.size() * 2);
    for (char c : text) out += t.to_utf8[static_cast<uint8_t>(c)];
    return out;
}

uint32_t to_lower(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    // Runs are sorted by first code point.
    const auto* end = kLower + sizeof kLower / sizeof *kLower;
    const auto* it = std::upper_bound(kLower, end, cp, [](uint32_t c, const LowerRun& r) { return c < r.first; });
    if (it == kLower) return cp;
    --it;
    if (cp > it->last) return cp;
    if (it->stride > 1 && (cp - it->first) % static_cast<uint32_t>(it->stride) != 0) return cp;
    return static_cast<uint32_t>(static_cast<int64_t>(cp) + it->delta);
}

uint32_t nfd_first(uint32_t cp) {
    if (cp >= 0xAC00 && cp <= 0xD7A3) return 0x1100 + (cp - 0xAC00) / 588;  // Hangul: L + V (+ T)
    const auto* end = kNfdFirst + sizeof kNfdFirst / sizeof *kNfdFirst;
    const auto* it = std::upper_bound(kNfdFirst, end, cp, [](uint32_t c, const NfdRange& r) { return c < r.first; });
    if (it == kNfdFirst) return cp;
    --it;
    return cp <= it->last ? it->nfd : cp;
}

bool is_whitespace(uint32_t cp) {
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    switch (cp) {
        case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
            return true;
        default:
            return cp >= 0x2000 && cp <= 0x200A;
    }
}

namespace {

uint8_t ascii_flags(uint32_t c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return LETTER;
    if (c >= '0' && c <= '9') return NUMBER;
    if (c < 0x20 || c == 0x7F) return CONTROL;
    if (c == ' ') return SEPARATOR;
    if (c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '`' || c == '|' || c == '~')
        return SYMBOL;
    return PUNCTUATION;
}

#if GLIA_HAVE_PCRE2
// One anchored pattern whose capture groups name the category.
class CategoryMatcher {
public:
    CategoryMatcher() {
        static const char* pat = "(\\p{L})|(\\p{N})|(\\p{M})|(\\p{P})|(\\p{S})|(\\p{Z})|([\\p{Cc}\\p{Cf}\\p{Co}])";
        int err = 0;
        PCRE2_SIZE erroff = 0;
        code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat), PCRE2_ZERO_TERMINATED,
                              PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &erroff, nullptr);
        if (code_) pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
    }
    ~CategoryMatcher() {
        if (code_) pcre2_code_free(code_);
    }
    uint8_t classify(uint32_t cp) const {
        if (!code_) return LETTER;
        if (cp >= 0xD800 && cp < 0xE000) return CONTROL;  // Cs (cannot be encoded for PCRE2)
        const std::string s = to_utf8(cp);
        pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
        const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, PCRE2_NO_UTF_CHECK, md,
                                   nullptr);
        uint8_t f = 0;
        if (rc > 1) {
            static constexpr uint8_t by_group[] = {0, LETTER, NUMBER, MARK, PUNCTUATION, SYMBOL, SEPARATOR, CONTROL};
            f = by_group[rc - 1];  // rc - 1 is the highest group set; only one group can match
        }
        pcre2_match_data_free(md);
        return f;
    }

private:
    pcre2_code* code_ = nullptr;
};
#endif

}  // namespace

uint8_t flags(uint32_t cp) {
    if (cp < 0x80) return ascii_flags(cp);
#if GLIA_HAVE_PCRE2
    static const CategoryMatcher matcher;
    // The Basic Multilingual Plane is classified once, on first use; the rest per call.
    static std::array<uint8_t, 0x10000> bmp;
    static std::once_flag once;
    std::call_once(once, [] {
        for (uint32_t c = 0; c < 0x10000; ++c) bmp[c] = c < 0x80 ? ascii_flags(c) : matcher.classify(c);
    });
    return cp < 0x10000 ? bmp[cp] : matcher.classify(cp);
#else
    return LETTER;
#endif
}

bool have_pcre2() {
#if GLIA_HAVE_PCRE2
    return true;
#else
    return false;
#endif
}

}  // namespace glia::tok::unicode
