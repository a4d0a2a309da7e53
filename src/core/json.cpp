#include "core/json.h"

#include <cmath>
#include <cstdio>

namespace glia::json {

// Length of the valid UTF-8 sequence at s[i], or 0 if invalid.
static size_t utf8_len(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    size_t n;
    uint32_t cp;
    if (c < 0x80) return 1;
    if ((c & 0xe0) == 0xc0) { n = 2; cp = c & 0x1f; }
    else if ((c & 0xf0) == 0xe0) { n = 3; cp = c & 0x0f; }
    else if ((c & 0xf8) == 0xf0) { n = 4; cp = c & 0x07; }
    else return 0;
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
        if ((b(i + k) & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (b(i + k) & 0x3f);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

std::string sanitize_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        size_t n = utf8_len(s, i);
        if (n == 0) { out += "\xef\xbf\xbd"; ++i; }
        else { out.append(s.substr(i, n)); i += n; }
    }
    return out;
}

std::string quote(std::string_view in) {
    const std::string s = sanitize_utf8(in);
    std::string out = "\"";
    for (char ch : s) {
        const unsigned char c = static_cast<unsigned char>(ch);
        switch (ch) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += ch;
                }
        }
    }
    return out + "\"";
}

std::string number(double v, int digits) {
    if (!std::isfinite(v)) return "null";
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    return buf;
}

void Writer::sep() {
    if (after_key_) { after_key_ = false; return; }
    if (!first_.empty()) {
        if (!first_.back()) out_ += ',';
        first_.back() = false;
    }
}

Writer& Writer::begin_object() { sep(); out_ += '{'; first_.push_back(true); return *this; }
Writer& Writer::end_object() { out_ += '}'; first_.pop_back(); return *this; }
Writer& Writer::begin_array() { sep(); out_ += '['; first_.push_back(true); return *this; }
Writer& Writer::end_array() { out_ += ']'; first_.pop_back(); return *this; }
Writer& Writer::key(std::string_view k) { sep(); out_ += quote(k); out_ += ':'; after_key_ = true; return *this; }
Writer& Writer::value(std::string_view s) { sep(); out_ += quote(s); return *this; }
Writer& Writer::value(bool b) { sep(); out_ += b ? "true" : "false"; return *this; }
Writer& Writer::value(int64_t v) { sep(); out_ += std::to_string(v); return *this; }
Writer& Writer::value(uint64_t v) { sep(); out_ += std::to_string(v); return *this; }
Writer& Writer::value(double v, int digits) { sep(); out_ += number(v, digits); return *this; }
Writer& Writer::null() { sep(); out_ += "null"; return *this; }
Writer& Writer::raw(std::string_view j) { sep(); out_ += j; return *this; }

}  // namespace glia::json
