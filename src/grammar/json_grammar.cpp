#include "grammar/json_grammar.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace glia::grammar {

namespace {

// An object's required count within its keys, and the trie of its keys' texts.
void index_keys(Node& n) {
    if (n.kind != Kind::OBJECT) return;
    n.required = std::clamp(n.required, 0, static_cast<int>(n.keys.size()));
    n.key_trie.clear();
    if (n.keys.empty()) return;
    n.key_trie.emplace_back();
    for (size_t i = 0; i < n.keys.size(); ++i) {
        int t = 0;
        n.key_trie[0].last = static_cast<int>(i);
        for (const char ch : n.keys[i]) {
            const uint8_t c = static_cast<uint8_t>(ch);
            int child = -1;
            for (const auto& [b, id] : n.key_trie[t].next)
                if (b == c) child = id;
            if (child < 0) {
                child = static_cast<int>(n.key_trie.size());
                n.key_trie[t].next.emplace_back(c, child);
                n.key_trie.emplace_back();
            }
            t = child;
            n.key_trie[t].last = static_cast<int>(i);
        }
        if (n.key_trie[t].end >= 0) fail("grammar: an object lists the key \"", n.keys[i], "\" twice");
        n.key_trie[t].end = static_cast<int>(i);
    }
}

}  // namespace

int Grammar::add(Node n) {
    index_keys(n);
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size()) - 1;
}

void Grammar::set(int id, Node n) {
    index_keys(n);
    nodes_.at(id) = std::move(n);
}

int Grammar::literals(std::vector<std::string> texts) {
    Node n;
    n.kind = Kind::LITERALS;
    if (texts.size() <= size_t(kMaxLiterals)) {
        n.literals = std::move(texts);
        return add(std::move(n));
    }
    // Groups of kMaxLiterals (a candidate set is one 64-bit word) under one anyOf.
    Node any;
    any.kind = Kind::ANY_OF;
    for (size_t i = 0; i < texts.size(); i += kMaxLiterals) {
        n.literals.assign(texts.begin() + i, texts.begin() + std::min(texts.size(), i + kMaxLiterals));
        any.alternatives.push_back(add(n));
    }
    return add(std::move(any));
}

int Grammar::string(int min_length, int max_length) {
    Node n;
    n.kind = Kind::STRING;
    n.min_length = min_length;
    n.max_length = max_length;
    return add(std::move(n));
}

int Grammar::any_value() {
    if (any_ >= 0) return any_;
    any_ = add(Node{});  // filled below: the alternatives refer to it
    Node arr;
    arr.kind = Kind::ARRAY;
    arr.items = any_;
    const int a = add(std::move(arr));
    const int o = any_object();
    Node num;
    num.kind = Kind::NUMBER;
    const int x = add(std::move(num));
    const int s = string();
    const int l = literals({"true", "false", "null"});
    Node& any = nodes_[any_];
    any.kind = Kind::ANY_OF;
    any.alternatives = {o, a, s, x, l};
    return any_;
}

int Grammar::any_object() {
    if (any_object_ >= 0) return any_object_;
    any_object_ = add(Node{});
    const int v = any_value();
    Node& o = nodes_[any_object_];
    o.kind = Kind::OBJECT;
    o.additional = v;
    return any_object_;
}

void Grammar::validate() const {
    auto check = [&](int id, const char* what) {
        if (id < 0 || id >= size()) fail("grammar: ", what, " refers to node ", id, " of ", size());
    };
    check(root_, "the root");
    for (const Node& n : nodes_) {
        switch (n.kind) {
            case Kind::OBJECT:
                if (n.keys.size() != n.values.size()) fail("grammar: an object has ", n.keys.size(), " keys but ", n.values.size(), " values");
                if (n.required < 0 || n.required > static_cast<int>(n.keys.size()))
                    fail("grammar: an object requires ", n.required, " of its ", n.keys.size(), " keys");
                if (n.keys.empty() != n.key_trie.empty()) fail("grammar: an object's keys are not indexed");
                for (int v : n.values) check(v, "a property");
                if (n.additional >= 0) check(n.additional, "additionalProperties");
                break;
            case Kind::ARRAY:
                if (n.items >= 0) check(n.items, "items");
                else if (n.max_items < 0 || n.max_items > static_cast<int>(n.prefix.size()))
                    fail("grammar: an array without items may hold more than its prefixItems");
                for (int v : n.prefix) check(v, "prefixItems");
                if (n.max_items >= 0 && n.max_items < n.min_items) fail("grammar: maxItems below minItems");
                break;
            case Kind::STRING:
                if (n.max_length >= 0 && n.max_length < n.min_length) fail("grammar: maxLength below minLength");
                break;
            case Kind::LITERALS:
                if (n.literals.empty()) fail("grammar: an empty set of values");
                if (n.literals.size() > size_t(kMaxLiterals)) fail("grammar: more than ", kMaxLiterals, " values in one enum");
                for (const auto& l : n.literals)
                    if (l.empty()) fail("grammar: an empty literal");
                break;
            case Kind::ANY_OF:
            case Kind::SEQUENCE:
                if (n.alternatives.empty()) fail("grammar: anyOf or a sequence without items");
                for (int a : n.alternatives) check(a, "anyOf");
                break;
            default: break;
        }
    }
    // An anyOf that reaches itself through anyOfs alone would expand forever (a
    // depth-first search without recursion: a node is on the path while marked 1).
    std::vector<int> mark(nodes_.size(), 0);
    std::vector<std::pair<int, size_t>> path;  // (anyOf, next alternative)
    for (int i = 0; i < size(); ++i) {
        if (nodes_[i].kind != Kind::ANY_OF || mark[i]) continue;
        mark[i] = 1;
        path.assign(1, {i, 0});
        while (!path.empty()) {
            auto& [id, next] = path.back();
            const auto& alts = nodes_[id].alternatives;
            if (next == alts.size()) {
                mark[id] = 2;
                path.pop_back();
                continue;
            }
            const int a = alts[next++];
            if (nodes_[a].kind != Kind::ANY_OF || mark[a] == 2) continue;
            if (mark[a] == 1) fail("grammar: anyOf refers to itself without reading anything");
            mark[a] = 1;
            path.emplace_back(a, 0);
        }
    }
}

size_t State::add(const Stack& s) {
    if (n < stacks.size()) {
        stacks[n] = s;
    } else {
        Stack copy(s);  // s may live in `stacks`, which push_back can move
        stacks.push_back(std::move(copy));
    }
    return n++;
}

namespace {

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
bool is_hex(uint8_t c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Whitespace inside a container, in the shape the reference's grammars allow: one space,
// or a newline and then spaces and tabs (indentation), kMaxWhitespace bytes at most. A
// model that favours whitespace cannot pad between tokens: no tab without a newline
// before it, one newline per run, no run longer than the bound.
constexpr uint16_t kNewlineSeen = 0x8000;
bool take_ws(Frame& f, uint8_t c) {
    const int n = f.ws & ~kNewlineSeen;
    if (c != ' ' && c != '\t' && c != '\n') return false;
    if (n >= kMaxWhitespace) return false;
    if (n == 0) {
        if (c == '\t') return false;
        if (c == '\n') f.ws |= kNewlineSeen;
    } else if (!(f.ws & kNewlineSeen) || c == '\n') {
        return false;  // after a lone space nothing more; one newline per run
    }
    ++f.ws;
    return true;
}

// The first byte of a UTF-8 sequence: sets how many continuation bytes follow and the
// range of the first one (no overlong forms, no surrogates, nothing past U+10FFFF).
bool utf8_lead(Frame& f, uint8_t c) {
    f.u8_lo = 0x80;
    f.u8_hi = 0xBF;
    if (c < 0x80) f.u8_need = 0;
    else if (c >= 0xC2 && c <= 0xDF) f.u8_need = 1;
    else if (c == 0xE0) f.u8_need = 2, f.u8_lo = 0xA0;
    else if (c == 0xED) f.u8_need = 2, f.u8_hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) f.u8_need = 2;
    else if (c == 0xF0) f.u8_need = 3, f.u8_lo = 0x90;
    else if (c == 0xF4) f.u8_need = 3, f.u8_hi = 0x8F;
    else if (c >= 0xF1 && c <= 0xF3) f.u8_need = 3;
    else return false;
    return true;
}

bool utf8_continue(Frame& f, uint8_t c) {
    if (c < f.u8_lo || c > f.u8_hi) return false;
    --f.u8_need;
    f.u8_lo = 0x80;
    f.u8_hi = 0xBF;
    return true;
}

enum class Act { TAKEN, REJECT, END_TAKEN, END_REFEED, PUSH_VALUE, PUSH_KEY };

constexpr uint8_t kFreeKey = 1, kLiteralMayEnd = 1;

uint64_t low_bits(size_t n) { return n >= 64 ? ~0ull : ((1ull << n) - 1); }

// Literal candidates still matching after `count` bytes, advanced by c.
Act step_literals(const Node& n, Frame& f, uint8_t c) {
    uint64_t next = 0;
    for (size_t i = 0; i < n.literals.size(); ++i)
        if ((f.mask >> i & 1) && n.literals[i].size() > size_t(f.count) && uint8_t(n.literals[i][f.count]) == c)
            next |= 1ull << i;
    if (!next) return (f.flag & kLiteralMayEnd) ? Act::END_REFEED : Act::REJECT;
    f.mask = next;
    ++f.count;
    bool ends = false, longer = false;
    for (size_t i = 0; i < n.literals.size(); ++i) {
        if (!(next >> i & 1)) continue;
        if (n.literals[i].size() == size_t(f.count)) ends = true;
        else longer = true;
    }
    if (ends && !longer) return Act::END_TAKEN;
    f.flag = ends ? kLiteralMayEnd : 0;
    return Act::TAKEN;
}

// Number phases: 0 start, 1 after '-', 2 a leading 0, 3 integer digits, 4 after '.',
// 5 fraction digits, 6 after 'e', 7 after the exponent's sign, 8 exponent digits.
bool number_may_end(const Frame& f) { return f.phase == 2 || f.phase == 3 || f.phase == 5 || f.phase == 8; }

Act step_number(bool integer, Frame& f, uint8_t c) {
    auto to = [&](uint8_t p) {
        if (f.count >= (integer ? kMaxIntegerDigits : kMaxNumber)) return Act::REJECT;
        f.phase = p;
        ++f.count;
        return Act::TAKEN;
    };
    const bool d = is_digit(c);
    switch (f.phase) {
        case 0:
            if (c == '-') return to(1);
            [[fallthrough]];
        case 1:
            if (c == '0') return to(2);
            if (d) return to(3);
            return Act::REJECT;
        case 2:
        case 3:
            if (f.phase == 3 && d) return to(3);
            if (!integer && c == '.') return to(4);
            if (!integer && (c == 'e' || c == 'E')) return to(6);
            return Act::END_REFEED;
        case 4: return d ? to(5) : Act::REJECT;
        case 5:
            if (d) return to(5);
            if (c == 'e' || c == 'E') return to(6);
            return Act::END_REFEED;
        case 6:
            if (c == '+' || c == '-') return to(7);
            return d ? to(8) : Act::REJECT;
        case 7: return d ? to(8) : Act::REJECT;
        case 8: return d ? to(8) : Act::END_REFEED;
    }
    return Act::REJECT;
}

// String phases: 0 before the opening quote, 1 characters, 2 after a backslash,
// 3.. the hex digits of \u (count of digits left in u8_need).
Act step_string(const Node& n, Frame& f, uint8_t c) {
    const bool room = n.max_length < 0 || f.count < n.max_length;
    switch (f.phase) {
        case 0:
            if (c != '"') return Act::REJECT;
            f.phase = 1;
            return Act::TAKEN;
        case 1:
            if (f.u8_need) return utf8_continue(f, c) ? Act::TAKEN : Act::REJECT;
            if (c == '"') return f.count >= n.min_length ? Act::END_TAKEN : Act::REJECT;
            if (!room || c < 0x20) return Act::REJECT;
            if (c == '\\') {
                f.phase = 2;
                return Act::TAKEN;
            }
            if (!utf8_lead(f, c)) return Act::REJECT;
            ++f.count;
            return Act::TAKEN;
        case 2:
            if (c == 'u') {
                f.phase = 3;
                f.u8_need = 4;
                return Act::TAKEN;
            }
            if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
                f.phase = 1;
                ++f.count;
                return Act::TAKEN;
            }
            return Act::REJECT;
        default:
            // No surrogate escapes (\uD...): a lone one is not valid text for JSON parsers.
            if (!is_hex(c) || (f.u8_need == 4 && (c == 'd' || c == 'D'))) return Act::REJECT;
            if (--f.u8_need == 0) {
                f.phase = 1;
                ++f.count;
            }
            return Act::TAKEN;
    }
}

// A string with a pattern: step_string's syntax, and each character (a code point,
// written raw or escaped) steps the pattern's automaton in f.mask. A byte that begins or
// continues a character is taken only when some character it may still become is one the
// pattern takes next. f.bloom: the bits of the character read so far.
Act step_pattern_string(const Node& n, Frame& f, uint8_t c) {
    const Regex& re = *n.pattern;
    Frame t = f;
    const Act a = step_string(n, t, c);
    if (a == Act::REJECT) return a;
    if (a == Act::END_TAKEN) return re.accepts(f.mask) ? a : Act::REJECT;
    uint32_t lo = 0, hi = 0xFFFF;
    bool whole = false;
    switch (f.phase) {
        case 0: f = t; return a;
        case 1:
            if (f.u8_need) {  // a continuation byte
                const uint32_t cp = static_cast<uint32_t>(f.bloom) << 6 | (c & 0x3F);
                t.bloom = cp;
                whole = t.u8_need == 0;
                lo = cp << 6 * t.u8_need;
                hi = lo | ((1u << 6 * t.u8_need) - 1);
            } else if (c != '\\') {  // a whole ASCII character or a lead byte
                const uint32_t bits = t.u8_need ? c & (0x3F >> t.u8_need) : c;
                t.bloom = bits;
                whole = t.u8_need == 0;
                lo = bits << 6 * t.u8_need;
                hi = lo | ((1u << 6 * t.u8_need) - 1);
            }  // a backslash: some escape may follow (any BMP character)
            break;
        case 2:  // after the backslash
            if (c == 'u') {
                t.bloom = 0;
            } else {
                whole = true;
                lo = c == 'b' ? 8 : c == 'f' ? 12 : c == 'n' ? 10 : c == 'r' ? 13 : c == 't' ? 9 : c;
            }
            break;
        default: {  // a hex digit of \u; t.u8_need digits follow it
            const uint32_t d = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
            const uint32_t v = static_cast<uint32_t>(f.bloom) << 4 | d;
            t.bloom = v;
            whole = t.u8_need == 0;
            lo = v << 4 * t.u8_need;
            hi = lo | ((1u << 4 * t.u8_need) - 1);
        }
    }
    if (whole) {
        const uint64_t m = re.step(f.mask, lo);
        if (!m) return Act::REJECT;
        t.mask = m;
        t.bloom = 0;
    } else if (!re.may_take(f.mask, lo, hi)) {
        return Act::REJECT;
    }
    f = t;
    return a;
}

double pow10i(int k) {
    double p = 1;
    for (; k > 0; --k) p *= 10;
    return p;
}

// Some value of [a, b] (magnitudes; negated for a '-') is within the node's bounds.
bool meets_bounds(const Node& n, bool neg, double a, double b) {
    const double lo = neg ? -b : a, hi = neg ? -a : b;
    if (n.has_min && (n.min_exclusive ? hi <= n.minimum : hi < n.minimum)) return false;
    if (n.has_max && (n.max_exclusive ? lo >= n.maximum : lo > n.maximum)) return false;
    return true;
}

// A bounded number's value so far: integer part in f.mask, fraction in f.bloom (f.u8_need
// digits), sign in f.flag.
double bounded_value(const Frame& f) {
    return static_cast<double>(f.mask) + (f.u8_need ? static_cast<double>(f.bloom) / pow10i(f.u8_need) : 0.0);
}

bool bounded_value_ok(const Node& n, const Frame& f) {
    const double v = bounded_value(f);
    return meets_bounds(n, f.flag, v, v);
}

// A number with bounds: step_number's syntax without an exponent, at most
// kMaxBoundedDigits digits before and after the point (f.u8_lo counts those before); a
// byte is taken only when some value it may lead to is within the bounds, and the number
// ends only within them.
Act step_bounded(const Node& n, bool integer, Frame& f, uint8_t c) {
    Frame t = f;
    const Act a = c == 'e' || c == 'E' ? (number_may_end(f) ? Act::END_REFEED : Act::REJECT) : step_number(integer, t, c);
    if (a == Act::REJECT) return a;
    if (a != Act::TAKEN) return bounded_value_ok(n, f) ? a : Act::REJECT;
    if (c == '-') {
        t.flag = 1;
    } else if (t.phase == 2 || t.phase == 3) {
        if (t.u8_lo >= kMaxBoundedDigits) return Act::REJECT;
        t.mask = t.mask * 10 + (c - '0');
        ++t.u8_lo;
    } else if (t.phase == 5) {
        if (t.u8_need >= kMaxBoundedDigits) return Act::REJECT;
        t.bloom = t.bloom * 10 + (c - '0');
        ++t.u8_need;
    }
    const bool neg = t.flag;
    const double m = static_cast<double>(t.mask);
    const int iroom = (integer ? kMaxIntegerDigits - (neg ? 1 : 0) : kMaxBoundedDigits) - t.u8_lo;
    const double tiny = integer ? 1.0 : 1.0 / pow10i(kMaxBoundedDigits);  // the last digit's step
    bool ok = false;
    switch (t.phase) {
        case 1: ok = meets_bounds(n, neg, 0, pow10i(iroom) - tiny); break;
        case 2: ok = meets_bounds(n, neg, 0, integer ? 0 : 1 - tiny); break;
        case 3:
            for (int k = 0; k <= iroom && !ok; ++k) ok = meets_bounds(n, neg, m * pow10i(k), (m + 1) * pow10i(k) - tiny);
            break;
        case 4: ok = meets_bounds(n, neg, m, m + 1 - tiny); break;
        case 5: {
            const double q = pow10i(t.u8_need), v = bounded_value(t);
            ok = meets_bounds(n, neg, v, t.u8_need < kMaxBoundedDigits ? m + (static_cast<double>(t.bloom) + 1) / q - tiny : v);
            break;
        }
        default: break;
    }
    if (!ok) return Act::REJECT;
    f = t;
    return a;
}

// An object key (the opening quote already read). Candidates: known keys whose text
// starts with what was read; kFreeKey: another key (no escapes) is still possible.
uint64_t bloom_bits(uint64_t h) {
    h *= 0x9E3779B97F4A7C15ull;
    return (1ull << (h >> 58)) | (1ull << ((h >> 52) & 63));
}

// `pos`: the object's position in its key list. While required keys are due (pos below
// `required`) only keys[pos] may come; after them any later known key (f.mask walks the
// trie of all keys), or another key where kFreeKey allows it. A key's text that is a
// known key before pos is a repeat or out of order: refused.
Act step_key(const Node& obj, uint64_t pos, uint64_t obj_bloom, Frame& f, uint8_t c) {
    if (pos < uint64_t(obj.required)) {
        const std::string& k = obj.keys[pos];
        if (size_t(f.count) == k.size()) {
            if (c != '"') return Act::REJECT;
            f.current = static_cast<int32_t>(pos);
            return Act::END_TAKEN;
        }
        if (uint8_t(k[f.count]) != c) return Act::REJECT;
        ++f.count;
        return Act::TAKEN;
    }
    int next = -1;  // the trie node after c (every known key: another key must not be one)
    if (f.mask)
        for (const auto& [b, id] : obj.key_trie[f.mask - 1].next)
            if (b == c) next = id;
    const bool known_ok = next >= 0 && uint64_t(obj.key_trie[next].last) >= pos;  // a key allowed here goes on
    // A quote inside a known key's text is escaped (a candidate goes on with it);
    // otherwise it closes the key.
    if (c == '"' && f.u8_need == 0 && !known_ok) {
        const int known = f.mask ? obj.key_trie[f.mask - 1].end : -1;
        if (known >= 0) {
            if (uint64_t(known) < pos) return Act::REJECT;  // written already, or skipped
            f.current = known;
            return Act::END_TAKEN;
        }
        if (!(f.flag & kFreeKey)) return Act::REJECT;
        if ((obj_bloom & bloom_bits(f.bloom)) == bloom_bits(f.bloom)) return Act::REJECT;  // seen (or a false positive)
        f.current = -1;
        return Act::END_TAKEN;
    }
    bool free_ok = f.flag & kFreeKey;
    if (free_ok) {
        if (f.u8_need) free_ok = utf8_continue(f, c);
        else free_ok = c >= 0x20 && c != '\\' && c != '"' && utf8_lead(f, c);
    }
    if (!free_ok) {
        f.flag &= ~kFreeKey;
        f.u8_need = 0;
    }
    if (!free_ok && !known_ok) return Act::REJECT;
    f.mask = next >= 0 ? uint64_t(next) + 1 : 0;  // 0: off the trie, no known key
    f.bloom = (f.bloom ^ c) * 0x100000001B3ull;
    ++f.count;
    return Act::TAKEN;
}

bool more_keys_possible(const Node& n, const Frame& f) { return n.additional >= 0 || f.mask < n.keys.size(); }

// Object phases: 0 before '{', 1 after '{', 2 after a key, 3 after ':', 4 after a value,
// 5 after ','. f.mask: the position in the key list.
Act step_object(const Node& n, Frame& f, uint8_t c) {
    const bool can_close = f.mask >= uint64_t(n.required);
    switch (f.phase) {
        case 0:
            if (c != '{') return Act::REJECT;
            f.phase = 1;
            return Act::TAKEN;
        case 1:
        case 5:
            if (take_ws(f, c)) return Act::TAKEN;
            if (c == '"' && more_keys_possible(n, f)) return Act::PUSH_KEY;
            if (f.phase == 1 && c == '}' && can_close) return Act::END_TAKEN;
            return Act::REJECT;
        case 2:
            if (take_ws(f, c)) return Act::TAKEN;
            if (c != ':') return Act::REJECT;
            f.phase = 3;
            f.ws = 0;
            return Act::TAKEN;
        case 3:
            if (take_ws(f, c)) return Act::TAKEN;
            return Act::PUSH_VALUE;
        case 4:
            if (take_ws(f, c)) return Act::TAKEN;
            if (c == ',' && more_keys_possible(n, f)) {
                f.phase = 5;
                f.ws = 0;
                return Act::TAKEN;
            }
            if (c == '}' && can_close) return Act::END_TAKEN;
            return Act::REJECT;
    }
    return Act::REJECT;
}

// Array phases: 0 before '[', 1 after '[', 2 after an item, 3 after ','.
Act step_array(const Node& n, Frame& f, uint8_t c) {
    switch (f.phase) {
        case 0:
            if (c != '[') return Act::REJECT;
            f.phase = 1;
            return Act::TAKEN;
        case 1:
        case 3:
            if (take_ws(f, c)) return Act::TAKEN;
            if (f.phase == 1 && c == ']') return n.min_items == 0 ? Act::END_TAKEN : Act::REJECT;
            if (n.max_items >= 0 && f.count >= n.max_items) return Act::REJECT;
            return Act::PUSH_VALUE;
        case 2:
            if (take_ws(f, c)) return Act::TAKEN;
            if (c == ',' && (n.max_items < 0 || f.count < n.max_items)) {
                f.phase = 3;
                f.ws = 0;
                return Act::TAKEN;
            }
            if (c == ']' && f.count >= n.min_items) return Act::END_TAKEN;
            return Act::REJECT;
    }
    return Act::REJECT;
}

Frame value_frame(const Grammar& g, int node) {
    Frame f;
    f.node = node;
    const Node& n = g.node(node);
    if (n.kind == Kind::LITERALS) f.mask = low_bits(n.literals.size());
    if (n.kind == Kind::STRING && n.pattern) f.mask = n.pattern->start();
    if (n.kind == Kind::NUMBER || n.kind == Kind::INTEGER) f.u8_lo = 0;  // digits before the point
    return f;
}

// The parent learns that its child (just popped) is done.
void child_done(const Grammar& g, Stack& s, const Frame& child) {
    if (s.empty()) return;
    Frame& p = s.back();
    const Node& n = g.node(p.node);
    p.ws = 0;
    if (n.kind == Kind::OBJECT) {
        if (child.key) {
            p.phase = 2;
            p.current = child.current;
            if (child.current >= 0) {
                p.mask = uint64_t(child.current) + 1;
            } else {  // another key: the known ones are past
                p.mask = n.keys.size();
                p.bloom |= bloom_bits(child.bloom);
            }
        } else {
            p.phase = 4;
        }
    } else if (n.kind == Kind::ARRAY) {
        ++p.count;
        p.phase = 2;
    } else if (n.kind == Kind::SEQUENCE) {
        ++p.count;
    }
}

// A sequence whose last item just ended is done too (and so on up).
void pop_done_sequences(const Grammar& g, Stack& s) {
    while (!s.empty()) {
        const Frame& f = s.back();
        const Node& n = g.node(f.node);
        if (f.key || n.kind != Kind::SEQUENCE || f.count < static_cast<int32_t>(n.alternatives.size())) return;
        const Frame done = f;
        s.pop_back();
        child_done(g, s, done);
    }
}

// The nodes an anyOf stands for (itself when it is not one), each once, at most
// kMaxLeaves; without recursion (validate() ruled out anyOf cycles).
void leaves(const Grammar& g, int node, std::vector<int>& out) {
    out.clear();
    thread_local std::vector<int> todo;
    todo.assign(1, node);
    while (!todo.empty() && out.size() < size_t(kMaxLeaves)) {
        const int id = todo.back();
        todo.pop_back();
        const Node& n = g.node(id);
        if (n.kind == Kind::ANY_OF) {
            for (auto it = n.alternatives.rbegin(); it != n.alternatives.rend(); ++it) todo.push_back(*it);
        } else if (std::find(out.begin(), out.end(), id) == out.end()) {
            out.push_back(id);
        }
    }
}

// Applies c to out.stacks[idx]; forks go to new entries of `out`. False: rejected.
bool run(const Grammar& g, State& out, size_t idx, uint8_t c, std::vector<char>& dead) {
    for (;;) {
        Stack& s = out.stacks[idx];
        if (s.empty()) return false;  // nothing may follow a whole value
        Frame& f = s.back();
        const Node& n = g.node(f.node);
        Act a;
        if (f.key) a = step_key(n, s[s.size() - 2].mask, s[s.size() - 2].bloom, f, c);
        else switch (n.kind) {
                case Kind::OBJECT: a = step_object(n, f, c); break;
                case Kind::ARRAY: a = step_array(n, f, c); break;
                case Kind::STRING: a = n.pattern ? step_pattern_string(n, f, c) : step_string(n, f, c); break;
                case Kind::NUMBER:
                case Kind::INTEGER: {
                    const bool integer = n.kind == Kind::INTEGER;
                    a = n.has_min || n.has_max ? step_bounded(n, integer, f, c) : step_number(integer, f, c);
                    break;
                }
                case Kind::LITERALS: a = step_literals(n, f, c); break;
                case Kind::SEQUENCE:
                    a = f.count < static_cast<int32_t>(n.alternatives.size()) ? Act::PUSH_VALUE : Act::END_REFEED;
                    break;
                default: a = Act::REJECT; break;
            }
        switch (a) {
            case Act::TAKEN: return true;
            case Act::REJECT: return false;
            case Act::END_TAKEN: {
                const Frame child = f;
                s.pop_back();
                child_done(g, s, child);
                pop_done_sequences(g, s);
                return true;
            }
            case Act::END_REFEED: {
                const Frame child = f;
                s.pop_back();
                child_done(g, s, child);
                pop_done_sequences(g, s);
                continue;
            }
            case Act::PUSH_KEY: {
                if (s.size() >= size_t(kMaxDepth)) return false;
                Frame k;
                k.node = f.node;
                k.key = 1;
                k.mask = n.keys.empty() ? 0 : 1;  // the trie's root
                k.flag = n.additional >= 0 && f.mask >= uint64_t(n.required) ? kFreeKey : 0;
                k.bloom = 0xCBF29CE484222325ull;
                s.push_back(k);
                return true;
            }
            case Act::PUSH_VALUE: {
                if (s.size() >= size_t(kMaxDepth)) return false;
                const int child = n.kind == Kind::SEQUENCE ? n.alternatives[f.count]
                                  : n.kind == Kind::OBJECT ? (f.current >= 0 ? n.values[f.current] : n.additional)
                                  : size_t(f.count) < n.prefix.size() ? n.prefix[f.count]
                                                                        : n.items;
                if (child < 0) return false;
                std::vector<int> alts;
                leaves(g, child, alts);
                for (size_t i = 1; i < alts.size(); ++i) {
                    if (out.n >= size_t(kMaxStacks)) break;
                    const size_t j = out.add(out.stacks[idx]);
                    dead.push_back(0);
                    out.stacks[j].push_back(value_frame(g, alts[i]));
                    if (!run(g, out, j, c, dead)) dead[j] = 1;
                }
                out.stacks[idx].push_back(value_frame(g, alts[0]));
                continue;
            }
        }
    }
}

}  // namespace

void step(const Grammar& g, const State& in, uint8_t c, State& out) {
    out.clear();
    thread_local std::vector<char> dead;
    dead.clear();
    for (size_t i = 0; i < in.n; ++i) {
        const size_t j = out.add(in.stacks[i]);
        dead.push_back(0);
        if (!run(g, out, j, c, dead)) dead[j] = 1;
    }
    // Compact: drop the dead and the duplicates (anyOf branches that met again).
    size_t w = 0;
    for (size_t i = 0; i < out.n; ++i) {
        if (dead[i]) continue;
        bool dup = false;
        for (size_t k = 0; k < w && !dup; ++k) dup = out.stacks[k] == out.stacks[i];
        if (dup) continue;
        if (w != i) std::swap(out.stacks[w], out.stacks[i]);
        ++w;
    }
    out.n = w;
}

bool accepting(const Grammar& g, const State& s) {
    for (size_t i = 0; i < s.n; ++i) {
        const Stack& st = s.stacks[i];
        if (st.empty()) return true;
        // Only numbers and literals end without a byte of their own; a root one can end
        // the text.
        if (st.size() != 1) continue;
        const Frame& f = st[0];
        const Kind k = g.node(f.node).kind;
        if ((k == Kind::NUMBER || k == Kind::INTEGER) && number_may_end(f)) {
            const Node& n = g.node(f.node);
            if (!(n.has_min || n.has_max) || bounded_value_ok(n, f)) return true;
        }
        if (k == Kind::LITERALS && (f.flag & kLiteralMayEnd)) return true;
    }
    return false;
}

bool complete(const State& s) {
    if (s.n == 0) return false;
    for (size_t i = 0; i < s.n; ++i)
        if (!s.stacks[i].empty()) return false;
    return true;
}

bool plain_text_run(const Grammar& g, const State& s, int& room) {
    if (s.n != 1 || s.stacks[0].empty()) return false;
    const Frame& f = s.stacks[0].back();
    if (f.u8_need) return false;
    const Node& n = g.node(f.node);
    if (f.key) {
        if (!(f.flag & kFreeKey)) return false;
        room = -1;
        return true;
    }
    if (n.kind != Kind::STRING || f.phase != 1 || n.pattern) return false;
    room = n.max_length < 0 ? -1 : n.max_length - f.count;
    return true;
}

Matcher::Matcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {
    g_->validate();
    std::vector<int> alts;
    leaves(*g_, g_->root(), alts);
    for (int a : alts) {
        Stack st{value_frame(*g_, a)};
        state_.add(st);
    }
}

bool Matcher::feed(std::string_view bytes) {
    State* cur = &state_;
    State* nxt = &tmp_;
    State copy;  // the state before, for a rejection
    copy.n = 0;
    for (size_t i = 0; i < state_.n; ++i) copy.add(state_.stacks[i]);
    for (char ch : bytes) {
        step(*g_, *cur, static_cast<uint8_t>(ch), *nxt);
        std::swap(cur, nxt);
        if (cur->n == 0) {
            state_.clear();
            for (size_t i = 0; i < copy.n; ++i) state_.add(copy.stacks[i]);
            return false;
        }
    }
    if (cur != &state_) std::swap(state_, tmp_);
    return true;
}

}  // namespace glia::grammar
