#include "grammar/regex.h"

#include <algorithm>

#include "core/error.h"

namespace glia::grammar {

namespace {

constexpr uint32_t kMaxCp = 0x10FFFF;

void normalize(std::vector<std::pair<uint32_t, uint32_t>>& r) {
    std::sort(r.begin(), r.end());
    std::vector<std::pair<uint32_t, uint32_t>> out;
    for (const auto& x : r) {
        if (!out.empty() && x.first <= out.back().second + 1) out.back().second = std::max(out.back().second, x.second);
        else out.push_back(x);
    }
    r = std::move(out);
}

std::vector<std::pair<uint32_t, uint32_t>> complement(std::vector<std::pair<uint32_t, uint32_t>> r) {
    normalize(r);
    std::vector<std::pair<uint32_t, uint32_t>> out;
    uint32_t next = 0;
    for (const auto& [a, b] : r) {
        if (a > next) out.emplace_back(next, a - 1);
        next = b + 1;
    }
    if (next <= kMaxCp) out.emplace_back(next, kMaxCp);
    return out;
}

// A pattern tree: SYM (one position), CAT, ALT, OPT (x?), STAR (x*), PLUS (x+).
struct Ast {
    enum T { SYM, CAT, ALT, OPT, STAR, PLUS } t = CAT;
    int cls = -1;
    std::vector<Ast> kids;
};

int positions(const Ast& a) {
    if (a.t == Ast::SYM) return 1;
    int n = 0;
    for (const Ast& k : a.kids) n += positions(k);
    return n;
}

class Parser {
public:
    explicit Parser(std::string_view pattern) {
        // Code points (the pattern is UTF-8 text from a JSON string).
        for (size_t i = 0; i < pattern.size();) {
            const auto c = static_cast<unsigned char>(pattern[i]);
            int n = c < 0x80 ? 0 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : -1;
            if (n < 0 || i + n >= pattern.size() + (n == 0)) fail("the pattern is not valid UTF-8");
            uint32_t cp = n == 0 ? c : c & (0x3F >> n);
            for (int k = 1; k <= n; ++k) cp = cp << 6 | (static_cast<unsigned char>(pattern[i + k]) & 0x3F);
            s_.push_back(cp);
            i += n + 1;
        }
    }

    std::shared_ptr<const Regex> run() {
        auto re = std::make_shared<Regex>();
        re_ = re.get();
        re->cls.emplace_back();  // position 0: the start
        if (!s_.empty() && s_[0] == '^') {
            re->anchored_start = true;
            pos_ = 1;
        }
        // A final '$' that is not escaped (an odd run of backslashes before it escapes it).
        if (!s_.empty() && s_.back() == '$') {
            size_t bs = 0;
            while (bs + 1 < s_.size() && s_[s_.size() - 2 - bs] == '\\') ++bs;
            if (bs % 2 == 0 && s_.size() > pos_) {
                re->anchored_end = true;
                s_.pop_back();
            }
        }
        Ast root = alternation(0);
        if (pos_ != s_.size()) fail("unbalanced ')' at character ", pos_ + 1);
        const int n = positions(root);
        if (n > kMaxRegexPositions)
            fail("the pattern has ", n, " characters once repetitions are written out; at most ", kMaxRegexPositions,
                 " are supported");
        std::vector<int> classes;
        number(root, classes);
        re->follow.assign(re->cls.size(), 0);
        const Info i = glushkov(root);
        re->follow[0] = i.first;
        re->last = i.last | (i.nullable ? 1 : 0);
        return re;
    }

private:
    struct Info {
        bool nullable = true;
        uint64_t first = 0, last = 0;
    };

    bool more() const { return pos_ < s_.size(); }
    uint32_t peek() const { return s_[pos_]; }

    int add_class(CharClass c) {
        normalize(c.ranges);
        classes_.push_back(std::move(c));
        return static_cast<int>(classes_.size()) - 1;
    }
    Ast sym(CharClass c) {
        Ast a;
        a.t = Ast::SYM;
        a.cls = add_class(std::move(c));
        return a;
    }

    Ast alternation(int depth) {
        if (depth > kMaxRegexGroupDepth) fail("groups nest more than ", kMaxRegexGroupDepth, " deep");
        Ast alt;
        alt.t = Ast::ALT;
        alt.kids.push_back(sequence(depth));
        while (more() && peek() == '|') {
            ++pos_;
            alt.kids.push_back(sequence(depth));
        }
        if (alt.kids.size() == 1) return std::move(alt.kids[0]);
        return alt;
    }

    Ast sequence(int depth) {
        Ast cat;
        cat.t = Ast::CAT;
        while (more() && peek() != '|' && peek() != ')') {
            Ast a = atom(depth);
            a = quantified(std::move(a));
            if (positions(a) > kMaxRegexPositions)
                fail("the pattern has more than ", kMaxRegexPositions, " characters once repetitions are written out");
            cat.kids.push_back(std::move(a));
        }
        return cat;
    }

    static bool is_digit(uint32_t c) { return c >= '0' && c <= '9'; }

    int read_int() {
        if (!more() || !is_digit(peek())) return -1;
        long v = 0;
        while (more() && is_digit(peek())) {
            v = v * 10 + (peek() - '0');
            if (v > 1000) fail("a repetition count above 1000");
            ++pos_;
        }
        return static_cast<int>(v);
    }

    // {m}, {m,}, {m,n} at pos_ (which is at '{'); false (pos_ unchanged) when it is not one.
    bool braces(int& lo, int& hi) {
        const size_t save = pos_;
        ++pos_;
        lo = read_int();
        hi = lo;
        if (lo >= 0 && more() && peek() == ',') {
            ++pos_;
            hi = more() && is_digit(peek()) ? read_int() : -1;
        }
        if (lo < 0 || !more() || peek() != '}') {
            pos_ = save;
            return false;
        }
        ++pos_;
        if (hi >= 0 && hi < lo) fail("a repetition {", lo, ",", hi, "} whose maximum is below its minimum");
        return true;
    }

    Ast quantified(Ast a) {
        if (!more()) return a;
        int lo, hi;
        const uint32_t c = peek();
        if (c == '?') lo = 0, hi = 1, ++pos_;
        else if (c == '*') lo = 0, hi = -1, ++pos_;
        else if (c == '+') lo = 1, hi = -1, ++pos_;
        else if (c == '{') {
            if (!braces(lo, hi)) return a;
        } else {
            return a;
        }
        if (more() && peek() == '?') ++pos_;  // lazy: the same strings
        if (more() && (peek() == '?' || peek() == '*' || peek() == '+' || (peek() == '{' && [&] {
                           int l, h;
                           const size_t save = pos_;
                           const bool q = braces(l, h);
                           pos_ = save;
                           return q;
                       }())))
            fail("a quantifier follows another at character ", pos_ + 1);
        const int p = positions(a);
        const long copies = hi < 0 ? std::max(lo, 1) : hi;
        if (p * copies > kMaxRegexPositions)
            fail("the pattern has more than ", kMaxRegexPositions, " characters once repetitions are written out");
        Ast out;
        out.t = Ast::CAT;
        for (int i = 0; i < lo - (hi < 0 && lo > 0 ? 1 : 0); ++i) out.kids.push_back(clone(a));
        if (hi < 0) {
            Ast r;
            r.t = lo == 0 ? Ast::STAR : Ast::PLUS;
            r.kids.push_back(clone(a));
            out.kids.push_back(std::move(r));
        } else {
            for (int i = lo; i < hi; ++i) {
                Ast o;
                o.t = Ast::OPT;
                o.kids.push_back(clone(a));
                out.kids.push_back(std::move(o));
            }
        }
        return out;
    }

    // A copy with classes of its own (each position is one bit).
    Ast clone(const Ast& a) { return a; }

    Ast atom(int depth) {
        const uint32_t c = peek();
        ++pos_;
        switch (c) {
            case '(': {
                if (more() && peek() == '?') {
                    if (pos_ + 1 < s_.size() && s_[pos_ + 1] == ':') {
                        pos_ += 2;
                    } else if (pos_ + 2 < s_.size() && s_[pos_ + 1] == '<' && s_[pos_ + 2] != '=' && s_[pos_ + 2] != '!') {
                        while (more() && peek() != '>') ++pos_;
                        if (!more()) fail("an unterminated group name");
                        ++pos_;
                    } else {
                        fail("lookaround groups are not supported");
                    }
                }
                Ast inner = alternation(depth + 1);
                if (!more() || peek() != ')') fail("a '(' without its ')'");
                ++pos_;
                return inner;
            }
            case '[': return sym(bracket());
            case '.': {
                CharClass cc;
                cc.negated = true;
                cc.ranges = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};
                return sym(std::move(cc));
            }
            case '\\': return sym(escape(false));
            case '^': fail("'^' is supported only at the start of the pattern");
            case '$': fail("'$' is supported only at the end of the pattern");
            case '*':
            case '+':
            case '?': fail("nothing to repeat before '", char(c), "' at character ", pos_);
            case '{': {
                --pos_;
                int l, h;
                if (braces(l, h)) fail("nothing to repeat before '{' at character ", pos_);
                ++pos_;
                break;
            }
            default: break;
        }
        CharClass cc;
        cc.ranges = {{c, c}};
        return sym(std::move(cc));
    }

    uint32_t hex(int n) {
        uint32_t v = 0;
        for (int i = 0; i < n; ++i) {
            if (!more()) fail("a short hexadecimal escape");
            const uint32_t c = peek();
            ++pos_;
            int d = c >= '0' && c <= '9' ? int(c - '0') : c >= 'a' && c <= 'f' ? int(c - 'a' + 10)
                    : c >= 'A' && c <= 'F' ? int(c - 'A' + 10) : -1;
            if (d < 0) fail("a bad hexadecimal escape");
            v = v * 16 + d;
        }
        return v;
    }

    // After a backslash: one class (a single character for most escapes).
    CharClass escape(bool in_class) {
        if (!more()) fail("the pattern ends with a backslash");
        const uint32_t c = peek();
        ++pos_;
        CharClass cc;
        auto one = [&](uint32_t x) {
            cc.ranges = {{x, x}};
            return cc;
        };
        switch (c) {
            case 'd': cc.ranges = {{'0', '9'}}; return cc;
            case 'D': cc.ranges = {{'0', '9'}}; cc.negated = true; return cc;
            case 'w': cc.ranges = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; return cc;
            case 'W': cc.ranges = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; cc.negated = true; return cc;
            case 's':
            case 'S':
                cc.ranges = {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
                             {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
                cc.negated = c == 'S';
                return cc;
            case 'n': return one('\n');
            case 't': return one('\t');
            case 'r': return one('\r');
            case 'f': return one('\f');
            case 'v': return one('\v');
            case '0': return one(0);
            case 'x': return one(hex(2));
            case 'u': return one(hex(4));
            case 'b':
                if (in_class) return one('\b');
                fail("word boundaries (\\b) are not supported");
            case 'B': fail("word boundaries (\\B) are not supported");
            default:
                if (c >= '1' && c <= '9') fail("backreferences are not supported");
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) fail("the escape \\", char(c), " is not supported");
                return one(c);
        }
    }

    // After '[': a class up to its ']'.
    CharClass bracket() {
        CharClass cc;
        if (more() && peek() == '^') {
            cc.negated = true;
            ++pos_;
        }
        bool first = true;
        while (more() && (peek() != ']' || false)) {
            if (peek() == ']' && !first) break;
            first = false;
            // One item: a character (maybe the start of a range) or a shorthand class.
            uint32_t a;
            if (peek() == '\\') {
                ++pos_;
                CharClass e = escape(true);
                const bool single = !e.negated && e.ranges.size() == 1 && e.ranges[0].first == e.ranges[0].second;
                if (!single) {
                    auto r = e.negated ? complement(e.ranges) : e.ranges;
                    cc.ranges.insert(cc.ranges.end(), r.begin(), r.end());
                    continue;
                }
                a = e.ranges[0].first;
            } else {
                a = peek();
                ++pos_;
            }
            uint32_t b = a;
            if (pos_ + 1 < s_.size() && peek() == '-' && s_[pos_ + 1] != ']') {
                ++pos_;
                if (peek() == '\\') {
                    ++pos_;
                    CharClass e = escape(true);
                    if (e.negated || e.ranges.size() != 1 || e.ranges[0].first != e.ranges[0].second)
                        fail("a class range ends with a class");
                    b = e.ranges[0].first;
                } else {
                    b = peek();
                    ++pos_;
                }
                if (b < a) fail("a class range out of order");
            }
            cc.ranges.emplace_back(a, b);
        }
        if (!more()) fail("a '[' without its ']'");
        ++pos_;
        return cc;
    }

    // Positions are numbered left to right; each gets its class.
    void number(Ast& a, std::vector<int>& classes) {
        if (a.t == Ast::SYM) {
            re_->cls.push_back(classes_[a.cls]);
            a.cls = static_cast<int>(re_->cls.size()) - 1;
            return;
        }
        for (Ast& k : a.kids) number(k, classes);
    }

    Info glushkov(const Ast& a) {
        Info r;
        switch (a.t) {
            case Ast::SYM:
                r.nullable = false;
                r.first = r.last = 1ull << a.cls;
                return r;
            case Ast::CAT: {
                uint64_t last = 0;
                bool all_nullable = true;
                for (const Ast& k : a.kids) {
                    const Info i = glushkov(k);
                    for (int p = 1; p < 64; ++p)
                        if (last >> p & 1) re_->follow[p] |= i.first;
                    if (all_nullable) r.first |= i.first;
                    last = i.nullable ? (last | i.last) : i.last;
                    all_nullable = all_nullable && i.nullable;
                }
                r.nullable = all_nullable;
                r.last = last;
                return r;
            }
            case Ast::ALT:
                r.nullable = false;
                for (const Ast& k : a.kids) {
                    const Info i = glushkov(k);
                    r.nullable = r.nullable || i.nullable;
                    r.first |= i.first;
                    r.last |= i.last;
                }
                return r;
            case Ast::OPT:
            case Ast::STAR:
            case Ast::PLUS: {
                r = glushkov(a.kids[0]);
                if (a.t != Ast::OPT)
                    for (int p = 1; p < 64; ++p)
                        if (r.last >> p & 1) re_->follow[p] |= r.first;
                if (a.t != Ast::PLUS) r.nullable = true;
                return r;
            }
        }
        return r;
    }

    std::u32string s_;
    size_t pos_ = 0;
    std::vector<CharClass> classes_;
    Regex* re_ = nullptr;
};

}  // namespace

bool CharClass::contains(uint32_t cp) const {
    bool in = false;
    for (const auto& [a, b] : ranges)
        if (cp >= a && cp <= b) {
            in = true;
            break;
        }
    return in != negated;
}

bool CharClass::meets(uint32_t lo, uint32_t hi) const {
    if (!negated) {
        for (const auto& [a, b] : ranges)
            if (a <= hi && b >= lo) return true;
        return false;
    }
    // Some code point of [lo, hi] outside the (sorted, merged) ranges.
    uint32_t at = lo;
    for (const auto& [a, b] : ranges) {
        if (b < at) continue;
        if (a > at) return true;
        if (b >= hi) return false;
        at = b + 1;
    }
    return at <= hi;
}

uint64_t Regex::step(uint64_t state, uint32_t cp) const {
    if (state & kRegexDone) return state;
    uint64_t next = 0;
    for (size_t s = 0; s < follow.size(); ++s) {
        if (!(state >> s & 1)) continue;
        const uint64_t f = follow[s];
        for (size_t p = 1; p < cls.size(); ++p)
            if ((f >> p & 1) && !(next >> p & 1) && cls[p].contains(cp)) next |= 1ull << p;
    }
    if (!anchored_start) next |= 1;
    if (!anchored_end && (next & last)) return kRegexDone | next;
    return next;
}

bool Regex::may_take(uint64_t state, uint32_t lo, uint32_t hi) const {
    if (state & kRegexDone) return true;
    for (size_t s = 0; s < follow.size(); ++s) {
        if (!(state >> s & 1)) continue;
        for (size_t p = 1; p < cls.size(); ++p)
            if ((follow[s] >> p & 1) && cls[p].meets(lo, hi)) return true;
    }
    return !anchored_start;
}

bool Regex::matches(std::u32string_view s) const {
    uint64_t st = start();
    for (char32_t c : s) {
        st = step(st, c);
        if (!st) return false;
    }
    return accepts(st);
}

std::shared_ptr<const Regex> compile_regex(std::string_view pattern) { return Parser(pattern).run(); }

}  // namespace glia::grammar
