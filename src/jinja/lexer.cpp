#include "jinja/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "jinja/error.h"
#include "jinja/value.h"

namespace glia::jinja {

std::string normalize_source(std::string_view src, bool keep_trailing_newline) {
    // Jinja2 splits the source with str.splitlines() and joins with "\n": every Python
    // line boundary (\r\n, \r, \v, \f, \x1c-\x1e, U+0085, U+2028, U+2029) becomes "\n".
    std::string out;
    out.reserve(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
        const unsigned char c = static_cast<unsigned char>(src[i]);
        if (c == '\r') {
            if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
            out += '\n';
        } else if (c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E) {
            out += '\n';
        } else if (c == 0xC2 && i + 1 < src.size() && static_cast<unsigned char>(src[i + 1]) == 0x85) {
            out += '\n';
            ++i;
        } else if (c == 0xE2 && i + 2 < src.size() && static_cast<unsigned char>(src[i + 1]) == 0x80 &&
                   (static_cast<unsigned char>(src[i + 2]) == 0xA8 || static_cast<unsigned char>(src[i + 2]) == 0xA9)) {
            out += '\n';
            i += 2;
        } else {
            out += static_cast<char>(c);
        }
    }
    if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Python's "unicode-escape" decoding of a string literal body (Jinja2 unescapes literals
// that way): \n \t \\ \' \" \xHH \uXXXX \UXXXXXXXX \ooo ...; unknown escapes stay as is.
std::string unescape(std::string_view s, int line) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\' || i + 1 >= s.size()) { out += s[i]; continue; }
        const char e = s[++i];
        auto hex = [&](int n) -> uint32_t {
            uint32_t v = 0;
            for (int k = 1; k <= n; ++k) {
                const char c = i + k < s.size() ? s[i + k] : '\0';
                if (!std::isxdigit(static_cast<unsigned char>(c)))
                    throw Error(ErrorKind::Syntax, "truncated \\x/\\u escape in a string literal", line);
                v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10));
            }
            i += static_cast<size_t>(n);
            return v;
        };
        switch (e) {
            case '\n': break;
            case '\\': out += '\\'; break;
            case '\'': out += '\''; break;
            case '"': out += '"'; break;
            case 'a': out += '\a'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'v': out += '\v'; break;
            case 'x': utf8_append(out, hex(2)); break;
            case 'u': utf8_append(out, hex(4)); break;
            case 'U': utf8_append(out, hex(8)); break;
            default:
                if (e >= '0' && e <= '7') {
                    uint32_t v = static_cast<uint32_t>(e - '0');
                    for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
                        v = v * 8 + static_cast<uint32_t>(s[++i] - '0');
                    utf8_append(out, v);
                } else {
                    out += '\\';
                    out += e;
                }
        }
    }
    return out;
}

class Lexer {
public:
    Lexer(std::string_view src, const LexOptions& o) : s_(src), o_(o) {}

    std::vector<Token> run() {
        bool line_starting = true;
        while (p_ < s_.size()) {
            const size_t t = find_tag(p_);
            if (t == std::string_view::npos) {
                emit_text(p_, s_.size(), std::string(s_.substr(p_)));
                break;
            }
            const char kind = s_[t + 1];
            size_t after = t + 2;
            char sign = 0;
            if (after < s_.size() && (s_[after] == '-' || s_[after] == '+')) sign = s_[after++];
            size_t raw_end = kind == '%' ? match_raw_begin(after) : 0;

            std::string text(s_.substr(p_, t - p_));
            strip_text(text, sign, kind != '{', line_starting);
            emit_text(p_, t, std::move(text));
            p_ = after;

            if (raw_end) {
                p_ = raw_end;
                line_starting = s_[p_ - 1] == '\n';
                line_starting = lex_raw_body(line_starting);
            } else if (kind == '#') {
                line_starting = lex_comment(t, sign);
            } else {
                line_starting = lex_tag(kind == '{');
            }
        }
        push(Tok::Eof, "", line_);
        return std::move(out_);
    }

private:
    [[noreturn]] void fail(const std::string& msg, int line) const { throw Error(ErrorKind::Syntax, msg, line); }

    void push(Tok k, std::string text, int line) {
        Token tok;
        tok.kind = k;
        tok.text = std::move(text);
        tok.line = line;
        out_.push_back(std::move(tok));
    }

    // Advances the line counter over s_[from, to).
    void count_lines(size_t from, size_t to) {
        for (size_t i = from; i < to; ++i) line_ += s_[i] == '\n';
    }

    void emit_text(size_t from, size_t to, std::string text) {
        const int line = line_;
        count_lines(from, to);
        if (!text.empty()) push(Tok::Text, std::move(text), line);
    }

    size_t find_tag(size_t from) const {
        for (size_t i = s_.find('{', from); i != std::string_view::npos; i = s_.find('{', i + 1))
            if (i + 1 < s_.size() && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
        return std::string_view::npos;
    }

    // Whitespace control on the text before a tag: '-' strips all whitespace; otherwise
    // lstrip_blocks removes the spaces/tabs between the line start and a block/comment
    // tag ('+' disables it).
    void strip_text(std::string& text, char sign, bool block_or_comment, bool line_starting) const {
        if (sign == '-') {
            size_t e = text.size();
            while (e > 0 && is_space(text[e - 1])) --e;
            text.resize(e);
        } else if (sign != '+' && o_.lstrip_blocks && block_or_comment) {
            const size_t nl = text.rfind('\n');
            const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
            if (l_pos > 0 || line_starting) {
                bool blank = true;
                for (size_t i = l_pos; i < text.size(); ++i)
                    if (text[i] != ' ' && text[i] != '\t') { blank = false; break; }
                if (blank) text.resize(l_pos);
            }
        }
    }

    // `{%[-+]? raw [-]%}`: returns the position after the tag, or 0.
    size_t match_raw_begin(size_t p) const {
        while (p < s_.size() && is_space(s_[p])) ++p;
        if (s_.substr(p, 3) != "raw") return 0;
        p += 3;
        if (p < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p])) || s_[p] == '_')) return 0;
        while (p < s_.size() && is_space(s_[p])) ++p;
        if (s_.substr(p, 3) == "-%}") {
            p += 3;
            while (p < s_.size() && is_space(s_[p])) ++p;
            return p;
        }
        if (s_.substr(p, 2) == "%}") return p + 2;
        return 0;
    }

    // The end of a block tag or comment at p: "+%}" keeps what follows, "-%}" strips the
    // whitespace after it, "%}" drops one newline with trim_blocks. Returns the position
    // after it, or 0 if there is no end tag at p.
    size_t match_block_end(size_t p, char close) const {
        const char end[3] = {close, '}', 0};
        if (p >= s_.size()) return 0;
        if (s_[p] == '+' && s_.substr(p + 1, 2) == end) return p + 3;
        if (s_[p] == '-' && s_.substr(p + 1, 2) == end) {
            p += 3;
            while (p < s_.size() && is_space(s_[p])) ++p;
            return p;
        }
        if (s_.substr(p, 2) == end) {
            p += 2;
            if (o_.trim_blocks && p < s_.size() && s_[p] == '\n') ++p;
            return p;
        }
        return 0;
    }

    bool lex_comment(size_t tag_start, char /*sign*/) {
        const size_t body = p_;
        for (size_t j = s_.find("#}", body); j != std::string_view::npos; j = s_.find("#}", j + 1)) {
            size_t end_from = j;
            if (j > body && (s_[j - 1] == '-' || s_[j - 1] == '+')) end_from = j - 1;
            const size_t e = match_block_end(end_from, '#');
            if (!e) continue;
            count_lines(p_, e);
            p_ = e;
            return s_[e - 1] == '\n';
        }
        count_lines(tag_start, tag_start);
        fail("missing end of comment tag", line_);
    }

    bool lex_raw_body(bool line_starting) {
        // Find "{%[-+]? endraw %}".
        for (size_t j = s_.find("{%", p_); j != std::string_view::npos; j = s_.find("{%", j + 1)) {
            size_t q = j + 2;
            char sign = 0;
            if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) sign = s_[q++];
            while (q < s_.size() && is_space(s_[q])) ++q;
            if (s_.substr(q, 6) != "endraw") continue;
            q += 6;
            while (q < s_.size() && is_space(s_[q])) ++q;
            if (q >= s_.size()) continue;
            const size_t e = match_block_end(q, '%');
            if (!e) continue;
            std::string text(s_.substr(p_, j - p_));
            strip_text(text, sign, true, line_starting);
            emit_text(p_, j, std::move(text));
            count_lines(j, e);
            p_ = e;
            return s_[e - 1] == '\n';
        }
        fail("missing end of raw directive", line_);
    }

    // Expression tokens up to the closing }} or %}. Returns whether the consumed end
    // ends with a newline (Jinja2's "line starting" state for lstrip_blocks).
    bool lex_tag(bool variable) {
        const int start_line = line_;
        push(variable ? Tok::VarBegin : Tok::BlockBegin, "", line_);
        std::vector<char> stack;
        for (;;) {
            if (p_ >= s_.size())
                fail(variable ? "unexpected end of template: missing '}}'" : "unexpected end of template: missing '%}'", start_line);
            if (stack.empty()) {
                const size_t e = match_block_end(p_, variable ? '}' : '%');
                // "+}}" is not a variable end: only "-}}" and "}}" are.
                if (e && !(variable && s_[p_] == '+')) {
                    push(variable ? Tok::VarEnd : Tok::BlockEnd, "", line_);
                    if (variable && s_[p_] == '}') {
                        p_ += 2;  // no trim_blocks after }}
                        return false;
                    }
                    count_lines(p_, e);
                    p_ = e;
                    return s_[e - 1] == '\n';
                }
            }
            const char c = s_[p_];
            if (is_space(c)) {
                line_ += c == '\n';
                ++p_;
                continue;
            }
            if (std::isdigit(static_cast<unsigned char>(c))) { number(); continue; }
            if (std::isalpha(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80) {
                const size_t b = p_;
                while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '_' ||
                                          static_cast<unsigned char>(s_[p_]) >= 0x80))
                    ++p_;
                push(Tok::Name, std::string(s_.substr(b, p_ - b)), line_);
                continue;
            }
            if (c == '\'' || c == '"') { string(c); continue; }
            static const char* const ops2[] = {"//", "**", "==", "!=", ">=", "<="};
            bool done = false;
            for (const char* op : ops2)
                if (s_.substr(p_, 2) == op) {
                    push(Tok::Op, op, line_);
                    p_ += 2;
                    done = true;
                    break;
                }
            if (done) continue;
            if (std::string_view("+-/*%~[](){}<>=.:|,;").find(c) != std::string_view::npos) {
                if (c == '(' || c == '[' || c == '{') stack.push_back(c);
                else if (c == ')' || c == ']' || c == '}') {
                    const char open = c == ')' ? '(' : c == ']' ? '[' : '{';
                    if (stack.empty()) fail(std::string("unexpected '") + c + "'", line_);
                    if (stack.back() != open)
                        fail(std::string("unexpected '") + c + "', expected '" +
                                 (stack.back() == '(' ? ")" : stack.back() == '[' ? "]" : "}") + "'",
                             line_);
                    stack.pop_back();
                }
                push(Tok::Op, std::string(1, c), line_);
                ++p_;
                continue;
            }
            fail(std::string("unexpected character '") + c + "'", line_);
        }
    }

    void number() {
        const size_t b = p_;
        auto digits = [&] {
            while (p_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[p_])) ||
                                      (s_[p_] == '_' && p_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_ + 1])))))
                ++p_;
        };
        const bool after_dot = b > 0 && s_[b - 1] == '.';
        // Prefixed integers.
        if (s_[p_] == '0' && p_ + 1 < s_.size() && std::strchr("bBoOxX", s_[p_ + 1]) && s_[p_ + 1] != '\0') {
            const char k = static_cast<char>(std::tolower(s_[p_ + 1]));
            const int base = k == 'b' ? 2 : k == 'o' ? 8 : 16;
            size_t q = p_ + 2;
            int64_t v = 0;
            bool any = false;
            while (q < s_.size()) {
                const char c = static_cast<char>(std::tolower(s_[q]));
                int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
                if (c == '_') { ++q; continue; }
                if (d < 0 || d >= base) break;
                v = v * base + d;
                any = true;
                ++q;
            }
            if (any) {
                Token t;
                t.kind = Tok::Int;
                t.text = std::string(s_.substr(p_, q - p_));
                t.ival = v;
                t.line = line_;
                out_.push_back(std::move(t));
                p_ = q;
                return;
            }
        }
        digits();
        bool is_float = false;
        if (!after_dot) {
            const size_t save = p_;
            if (p_ + 1 < s_.size() && s_[p_] == '.' && std::isdigit(static_cast<unsigned char>(s_[p_ + 1]))) {
                ++p_;
                digits();
                is_float = true;
            }
            if (p_ < s_.size() && (s_[p_] == 'e' || s_[p_] == 'E')) {
                size_t q = p_ + 1;
                if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) ++q;
                if (q < s_.size() && std::isdigit(static_cast<unsigned char>(s_[q]))) {
                    p_ = q;
                    digits();
                    is_float = true;
                }
            }
            if (!is_float) p_ = save;
        }
        std::string text;
        for (size_t i = b; i < p_; ++i)
            if (s_[i] != '_') text += s_[i];
        Token t;
        t.line = line_;
        t.text = text;
        if (is_float) {
            t.kind = Tok::Float;
            t.fval = std::strtod(text.c_str(), nullptr);
        } else {
            t.kind = Tok::Int;
            errno = 0;
            t.ival = std::strtoll(text.c_str(), nullptr, 10);
            if (errno == ERANGE) {
                t.kind = Tok::Float;
                t.fval = std::strtod(text.c_str(), nullptr);
            }
        }
        out_.push_back(std::move(t));
    }

    void string(char q) {
        const int line = line_;
        size_t i = p_ + 1;
        while (i < s_.size() && s_[i] != q) {
            if (s_[i] == '\\') ++i;
            ++i;
        }
        if (i >= s_.size()) fail("unterminated string literal", line);
        std::string_view body = s_.substr(p_ + 1, i - p_ - 1);
        count_lines(p_, i);
        p_ = i + 1;
        push(Tok::String, unescape(body, line), line);
    }

    std::string_view s_;
    LexOptions o_;
    size_t p_ = 0;
    int line_ = 1;
    std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexOptions& opt) {
    return Lexer(source, opt).run();
}

}  // namespace glia::jinja
