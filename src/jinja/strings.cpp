#include "jinja/strings.h"

#include <algorithm>

#include "jinja/error.h"
#include "jinja/value.h"

namespace glia::jinja::str {

bool is_space(uint32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_digit(uint32_t c) { return c >= '0' && c <= '9'; }

// Letters with simple case mappings: ASCII, Latin-1, Latin Extended-A (pairs), Greek and
// Cyrillic basic blocks. Other letters count as alphabetic without case.
bool is_upper(uint32_t c) {
    return (c >= 'A' && c <= 'Z') || (c >= 0xC0 && c <= 0xDE && c != 0xD7) ||
           (c >= 0x100 && c <= 0x17F && c % 2 == 0 && c != 0x138) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) ||
           (c >= 0x410 && c <= 0x42F) || (c >= 0x400 && c <= 0x40F);
}

bool is_lower(uint32_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 0xDF && c <= 0xFF && c != 0xF7) ||
           (c >= 0x100 && c <= 0x17F && c % 2 == 1) || (c >= 0x3B1 && c <= 0x3C9) || (c >= 0x430 && c <= 0x45F);
}

bool is_alpha(uint32_t c) {
    if (is_upper(c) || is_lower(c)) return true;
    if (c < 0x80) return false;
    // Everything else outside ASCII that is not punctuation/space: treat CJK, kana,
    // Hangul and other letters as alphabetic.
    return !is_space(c) && !(c >= 0x2000 && c <= 0x206F) && !(c >= 0x3000 && c <= 0x303F) && !(c >= 0xFF00 && c <= 0xFF20) &&
           c != 0xD7 && c != 0xF7 && !(c >= 0xA0 && c <= 0xBF);
}

uint32_t to_upper(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if (c < 0x80) return c;
    if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c >= 0x100 && c <= 0x17F && c % 2 == 1 && c != 0x131 && c != 0x149 && c != 0x17F) return c - 1;
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}

uint32_t to_lower(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
    if (c == 0x178) return 0xFF;
    if (c >= 0x100 && c <= 0x17F && c % 2 == 0 && c != 0x130 && c != 0x138) return c + 1;
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

bool all_of(const std::string& s, const std::function<bool(uint32_t)>& pred) {
    if (s.empty()) return false;
    for (uint32_t c : utf8_decode(s))
        if (!pred(c)) return false;
    return true;
}

bool is_upper_str(const std::string& s) {
    bool cased = false;
    for (uint32_t c : utf8_decode(s)) {
        if (is_lower(c)) return false;
        cased |= is_upper(c);
    }
    return cased;
}

bool is_lower_str(const std::string& s) {
    bool cased = false;
    for (uint32_t c : utf8_decode(s)) {
        if (is_upper(c)) return false;
        cased |= is_lower(c);
    }
    return cased;
}

std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
    const std::vector<uint32_t> cps = utf8_decode(s);
    std::vector<uint32_t> set;
    if (chars) set = utf8_decode(*chars);
    auto strip_it = [&](uint32_t c) {
        if (!chars) return is_space(c);
        for (uint32_t x : set)
            if (x == c) return true;
        return false;
    };
    size_t b = 0, e = cps.size();
    if (left)
        while (b < e && strip_it(cps[b])) ++b;
    if (right)
        while (e > b && strip_it(cps[e - 1])) --e;
    if (b == 0 && e == cps.size()) return s;
    return utf8_encode(std::vector<uint32_t>(cps.begin() + static_cast<long>(b), cps.begin() + static_cast<long>(e)));
}

std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit) {
    std::vector<std::string> out;
    if (sep) {
        if (sep->empty()) throw Error(ErrorKind::Type, "empty separator");
        size_t pos = 0;
        while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
            const size_t f = s.find(*sep, pos);
            if (f == std::string::npos) break;
            out.push_back(s.substr(pos, f - pos));
            pos = f + sep->size();
        }
        out.push_back(s.substr(pos));
        return out;
    }
    const std::vector<uint32_t> cps = utf8_decode(s);
    size_t i = 0;
    const size_t n = cps.size();
    for (;;) {
        while (i < n && is_space(cps[i])) ++i;
        if (i >= n) break;
        if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
            out.push_back(utf8_encode(std::vector<uint32_t>(cps.begin() + static_cast<long>(i), cps.end())));
            break;
        }
        const size_t b = i;
        while (i < n && !is_space(cps[i])) ++i;
        out.push_back(utf8_encode(std::vector<uint32_t>(cps.begin() + static_cast<long>(b), cps.begin() + static_cast<long>(i))));
    }
    return out;
}

std::vector<std::string> rsplit(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit) {
    std::vector<std::string> out;
    if (sep) {
        if (sep->empty()) throw Error(ErrorKind::Type, "empty separator");
        size_t end = s.size();
        while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
            if (end < sep->size()) break;
            const size_t f = s.rfind(*sep, end - sep->size());
            if (f == std::string::npos) break;
            out.push_back(s.substr(f + sep->size(), end - f - sep->size()));
            end = f;
        }
        out.push_back(s.substr(0, end));
        std::reverse(out.begin(), out.end());
        return out;
    }
    const std::vector<uint32_t> cps = utf8_decode(s);
    size_t i = cps.size();
    for (;;) {
        while (i > 0 && is_space(cps[i - 1])) --i;
        if (i == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
            out.push_back(utf8_encode(std::vector<uint32_t>(cps.begin(), cps.begin() + static_cast<long>(i))));
            break;
        }
        const size_t e = i;
        while (i > 0 && !is_space(cps[i - 1])) --i;
        out.push_back(utf8_encode(std::vector<uint32_t>(cps.begin() + static_cast<long>(i), cps.begin() + static_cast<long>(e))));
    }
    std::reverse(out.begin(), out.end());
    return out;
}

std::vector<std::string> splitlines(const std::string& s, bool keepends) {
    std::vector<std::string> out;
    const std::vector<uint32_t> cps = utf8_decode(s);
    size_t b = 0;
    for (size_t i = 0; i < cps.size(); ++i) {
        const uint32_t c = cps[i];
        const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                         c == 0x85 || c == 0x2028 || c == 0x2029;
        if (!brk) continue;
        size_t e = i + 1;
        if (c == '\r' && e < cps.size() && cps[e] == '\n') ++e;
        out.push_back(utf8_encode(std::vector<uint32_t>(cps.begin() + static_cast<long>(b),
                                                        cps.begin() + static_cast<long>(keepends ? e : i))));
        b = e;
        i = e - 1;
    }
    if (b < cps.size()) out.push_back(utf8_encode(std::vector<uint32_t>(cps.begin() + static_cast<long>(b), cps.end())));
    return out;
}

std::string replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
    std::string out;
    if (old.empty()) {
        // Python inserts repl before every code point and at the end.
        const std::vector<uint32_t> cps = utf8_decode(s);
        int64_t n = 0;
        for (uint32_t c : cps) {
            if (count < 0 || n < count) { out += repl; ++n; }
            utf8_append(out, c);
            check_size(static_cast<int64_t>(out.size()), "replace's result");
        }
        if (count < 0 || n < count) out += repl;
        return out;
    }
    size_t pos = 0;
    int64_t n = 0;
    for (;;) {
        if (count >= 0 && n >= count) break;
        const size_t f = s.find(old, pos);
        if (f == std::string::npos) break;
        out.append(s, pos, f - pos);
        out += repl;
        check_size(static_cast<int64_t>(out.size()), "replace's result");
        pos = f + old.size();
        ++n;
    }
    out.append(s, pos, std::string::npos);
    return out;
}

static std::string map_cps(const std::string& s, uint32_t (*f)(uint32_t)) {
    std::string out;
    out.reserve(s.size());
    for (uint32_t c : utf8_decode(s)) utf8_append(out, f(c));
    return out;
}

std::string upper(const std::string& s) { return map_cps(s, to_upper); }
std::string lower(const std::string& s) { return map_cps(s, to_lower); }

std::string swapcase(const std::string& s) {
    std::string out;
    for (uint32_t c : utf8_decode(s)) utf8_append(out, is_upper(c) ? to_lower(c) : is_lower(c) ? to_upper(c) : c);
    return out;
}

std::string title(const std::string& s) {
    std::string out;
    bool prev_cased = false;
    for (uint32_t c : utf8_decode(s)) {
        const bool cased = is_upper(c) || is_lower(c);
        utf8_append(out, cased ? (prev_cased ? to_lower(c) : to_upper(c)) : c);
        prev_cased = cased;
    }
    return out;
}

std::string capitalize(const std::string& s) {
    std::string out;
    bool first = true;
    for (uint32_t c : utf8_decode(s)) {
        utf8_append(out, first ? to_upper(c) : to_lower(c));
        first = false;
    }
    return out;
}

static int64_t cp_index(const std::string& s, size_t byte_pos) {
    int64_t n = 0;
    for (size_t i = 0; i < byte_pos; ++i) n += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
    return n;
}

int64_t find(const std::string& s, const std::string& sub) {
    const size_t f = s.find(sub);
    return f == std::string::npos ? -1 : cp_index(s, f);
}

int64_t rfind(const std::string& s, const std::string& sub) {
    const size_t f = s.rfind(sub);
    return f == std::string::npos ? -1 : cp_index(s, f);
}

int64_t count(const std::string& s, const std::string& sub) {
    if (sub.empty()) return static_cast<int64_t>(utf8_decode(s).size()) + 1;
    int64_t n = 0;
    for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
    return n;
}

std::string zfill(const std::string& s, int64_t width) {
    const int64_t len = static_cast<int64_t>(utf8_decode(s).size());
    if (len >= width) return s;
    check_size(width, "zfill's result");
    const std::string zeros(static_cast<size_t>(width - len), '0');
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) return s.substr(0, 1) + zeros + s.substr(1);
    return zeros + s;
}

std::string pad(const std::string& s, int64_t width, const std::string& fill, char align) {
    const int64_t len = static_cast<int64_t>(utf8_decode(s).size());
    if (len >= width) return s;
    const int64_t n = width - len;
    check_size(n > 0 && static_cast<int64_t>(fill.size()) > kMaxValueSize / n ? kMaxValueSize + 1
                                                                             : n * static_cast<int64_t>(fill.size()) + static_cast<int64_t>(s.size()),
               "the padded string");
    auto rep = [&](int64_t k) {
        std::string r;
        for (int64_t i = 0; i < k; ++i) r += fill;
        return r;
    };
    if (align == '<') return s + rep(n);
    if (align == '>') return rep(n) + s;
    // str.center: the extra space goes right when both n and len are odd... Python puts
    // left = n/2 + (n & width & 1).
    const int64_t left = n / 2 + (n & width & 1);
    return rep(left) + s + rep(n - left);
}

}  // namespace glia::jinja::str
