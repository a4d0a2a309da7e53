#if GLIA_HAVE_SERVER
#include "server/json_body.h"

#include "server/json_depth.h"

#include <cstdio>
#include <vector>

namespace glia::server {
namespace {

// Where the parser is: the path of the value being read ("messages[2].content").
class Locator final : public json::json_sax_t {
public:
    bool null() override { return value(); }
    bool boolean(bool) override { return value(); }
    bool number_integer(number_integer_t) override { return value(); }
    bool number_unsigned(number_unsigned_t) override { return value(); }
    bool number_float(number_float_t, const string_t&) override { return value(); }
    bool string(string_t&) override { return value(); }
    bool binary(binary_t&) override { return value(); }
    bool start_object(std::size_t) override {
        frames_.push_back({false, "", 0});
        return true;
    }
    bool key(string_t& k) override {
        frames_.back().key = k;
        return true;
    }
    bool end_object() override {
        frames_.pop_back();
        return value();
    }
    bool start_array(std::size_t) override {
        frames_.push_back({true, "", 0});
        return true;
    }
    bool end_array() override {
        frames_.pop_back();
        return value();
    }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
        error_at = position;
        reason = e.what();
        return false;
    }

    std::string path() const {
        std::string p;
        for (const Frame& f : frames_) {
            if (f.array) p += "[" + std::to_string(f.index) + "]";
            else if (!f.key.empty()) p += (p.empty() ? "" : ".") + f.key;
        }
        return p;
    }
    size_t error_at = 0;
    std::string reason;

private:
    struct Frame {
        bool array;
        std::string key;
        size_t index;
    };
    bool value() {
        if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
        return true;
    }
    std::vector<Frame> frames_;  // as deep as the parse got (parse_body_object bounds it first)
};

// "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error while
// parsing value - invalid literal; last read: 'x'" -> "syntax error while parsing value -
// invalid literal" (what was read is the client's bytes, said by the offset instead).
std::string short_reason(const std::string& what) {
    std::string r = what;
    if (const size_t col = r.find("column "); col != std::string::npos)
        if (const size_t colon = r.find(": ", col); colon != std::string::npos) r = r.substr(colon + 2);
    if (const size_t last = r.find("; last read"); last != std::string::npos) r = r.substr(0, last);
    return r;
}

}  // namespace

size_t invalid_utf8_offset(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        size_t n;
        unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF) n = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            n = 3;
            if (c == 0xE0) lo = 0xA0;       // overlong
            else if (c == 0xED) hi = 0x9F;  // surrogates
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 4;
            if (c == 0xF0) lo = 0x90;       // overlong
            else if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
        } else {
            return i;
        }
        for (size_t k = 1; k < n; ++k) {
            if (i + k >= s.size()) return i;
            const unsigned char b = static_cast<unsigned char>(s[i + k]);
            if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return i;
        }
        i += n;
    }
    return std::string_view::npos;
}

json parse_body_object(const std::string& body, int max_depth) {
    check_json_depth(body, "", max_depth);
    Locator where;
    if (!json::sax_parse(body, &where)) {
        const std::string field = where.path();
        const std::string in = field.empty() ? "the request body" : "'" + field + "'";
        const size_t bad = invalid_utf8_offset(body);
        if (bad != std::string_view::npos && bad < where.error_at) {
            char byte[8];
            std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(body[bad]));
            throw_api(400, in + " is not valid UTF-8: byte " + byte + " at offset " + std::to_string(bad) +
                               " of the body (JSON text must be UTF-8)", field, "invalid_utf8");
        }
        const size_t at = where.error_at > 0 ? where.error_at - 1 : 0;  // the position is one past the byte
        throw_api(400, "the request body is not valid JSON: " + short_reason(where.reason) + " at byte offset " +
                           std::to_string(at) + (field.empty() ? "" : " (in '" + field + "')"),
                  field, "invalid_json");
    }
    json b = json::parse(body, nullptr, false);
    if (!b.is_object()) throw_api(400, "the request body must be a JSON object, not " + std::string(b.type_name()), "", "invalid_json");
    return b;
}

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
