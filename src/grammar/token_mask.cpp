#include "grammar/token_mask.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/vocab.h"

namespace glia::grammar {

int TokenMask::count() const {
    int n = 0;
    for (uint64_t w : bits) n += __builtin_popcountll(w);
    return n;
}

namespace {

// Code points of a plain-text token, or -1 when it is not plain text: a quote, a
// backslash, a control byte, or anything but whole, valid UTF-8 sequences.
int plain_length(const std::string& s) {
    Frame f;
    int n = 0;
    for (unsigned char c : s) {
        if (f.u8_need) {
            if (c < f.u8_lo || c > f.u8_hi) return -1;
            --f.u8_need;
            f.u8_lo = 0x80;
            f.u8_hi = 0xBF;
            continue;
        }
        if (c < 0x20 || c == '"' || c == '\\') return -1;
        ++n;
        if (c < 0x80) continue;
        f.u8_lo = 0x80;
        f.u8_hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) f.u8_need = 1;
        else if (c == 0xE0) f.u8_need = 2, f.u8_lo = 0xA0;
        else if (c == 0xED) f.u8_need = 2, f.u8_hi = 0x9F;
        else if (c >= 0xE1 && c <= 0xEF) f.u8_need = 2;
        else if (c == 0xF0) f.u8_need = 3, f.u8_lo = 0x90;
        else if (c == 0xF4) f.u8_need = 3, f.u8_hi = 0x8F;
        else if (c >= 0xF1 && c <= 0xF3) f.u8_need = 3;
        else return -1;
    }
    return f.u8_need ? -1 : n;
}

}  // namespace

void TokenIndex::Trie::build(const std::vector<std::string>& bytes, std::vector<int32_t> ids) {
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return bytes[a] < bytes[b] || (bytes[a] == bytes[b] && a < b); });
    order = std::move(ids);
    nodes.clear();
    edge_byte.clear();
    edge_child.clear();
    max_depth = 0;
    // Node for the tokens order[lo, hi), which share their first `depth` bytes.
    auto make = [&](auto& self, size_t lo, size_t hi, int depth) -> uint32_t {
        const uint32_t id = static_cast<uint32_t>(nodes.size());
        nodes.emplace_back();
        max_depth = std::max(max_depth, depth);
        size_t i = lo;
        while (i < hi && bytes[order[i]].size() == size_t(depth)) ++i;
        nodes[id].tok_begin = static_cast<uint32_t>(lo);
        nodes[id].n_toks = static_cast<uint32_t>(i - lo);
        struct Group {
            uint8_t b;
            size_t lo, hi;
        };
        std::vector<Group> groups;
        while (i < hi) {
            const uint8_t b = static_cast<uint8_t>(bytes[order[i]][depth]);
            size_t j = i;
            while (j < hi && static_cast<uint8_t>(bytes[order[j]][depth]) == b) ++j;
            groups.push_back({b, i, j});
            i = j;
        }
        const uint32_t e0 = static_cast<uint32_t>(edge_byte.size());
        nodes[id].edge_begin = e0;
        nodes[id].n_edges = static_cast<uint32_t>(groups.size());
        edge_byte.resize(e0 + groups.size());
        edge_child.resize(e0 + groups.size());
        for (size_t k = 0; k < groups.size(); ++k) {
            edge_byte[e0 + k] = groups[k].b;
            const uint32_t child = self(self, groups[k].lo, groups[k].hi, depth + 1);
            edge_child[e0 + k] = child;
        }
        return id;
    };
    make(make, 0, order.size(), 0);
}

TokenIndex::TokenIndex(const tok::Vocab& v) : n_vocab_(v.n_tokens()) {
    bytes_.resize(n_vocab_);
    std::vector<int32_t> normal, special;
    std::vector<std::pair<int32_t, int32_t>> plain;  // (code points, id)
    for (int32_t id = 0; id < n_vocab_; ++id) {
        const uint32_t a = v.token_attr(id);
        if ((a & (tok::attr::CONTROL | tok::attr::USER_DEFINED)) && !v.is_eog(id)) {
            bytes_[id] = v.token_to_piece(id, true);
            if (!bytes_[id].empty()) specials_.push_back(id);
            continue;
        }
        if (!(a & (tok::attr::NORMAL | tok::attr::BYTE)) || (a & tok::attr::CONTROL)) continue;
        std::string s = v.token_to_piece(id, false);
        if (s.empty()) continue;
        bytes_[id] = std::move(s);
        normal.push_back(id);
        const int n = plain_length(bytes_[id]);
        if (n >= 0) plain.emplace_back(n, id);
        else special.push_back(id);
    }
    std::sort(plain.begin(), plain.end());
    for (auto& [n, id] : plain) {
        plain_.push_back(id);
        plain_len_.push_back(n);
    }
    eog_ = v.eog_ids();
    all_.build(bytes_, std::move(normal));
    special_.build(bytes_, std::move(special));
}

bool TokenIndex::is_eog(int id) const { return std::binary_search(eog_.begin(), eog_.end(), id); }

void TokenIndex::walk(const Trie& t, const Grammar& g, const State& s, TokenMask& out) const {
    if (t.nodes.empty()) return;
    // One state per depth, reused across calls (their stacks keep their storage).
    thread_local std::vector<State> level;
    if (level.size() < size_t(t.max_depth) + 2) level.resize(t.max_depth + 2);
    level[0].clear();
    for (size_t i = 0; i < s.n; ++i) level[0].add(s.stacks[i]);
    // Depth-first over (node, next edge) pairs, without recursion.
    struct Pos {
        uint32_t node, edge;
    };
    thread_local std::vector<Pos> path;
    path.assign(1, Pos{0, 0});
    while (!path.empty()) {
        Pos& p = path.back();
        const auto& nr = t.nodes[p.node];
        if (p.edge == nr.n_edges) {
            path.pop_back();
            continue;
        }
        const uint32_t e = nr.edge_begin + p.edge++;
        const size_t d = path.size() - 1;
        step(g, level[d], t.edge_byte[e], level[d + 1]);
        if (level[d + 1].n == 0) continue;
        const uint32_t child = t.edge_child[e];
        const auto& cr = t.nodes[child];
        for (uint32_t k = 0; k < cr.n_toks; ++k) out.set(t.order[cr.tok_begin + k]);
        if (cr.n_edges) path.push_back(Pos{child, 0});
    }
}

void TokenIndex::mask(const Matcher& m, TokenMask& out) const {
    out.reset(n_vocab_);
    const State& s = m.state();
    const Grammar& g = m.grammar();
    int room = 0;
    if (plain_text_run(g, s, room)) {
        const size_t n = room < 0 ? plain_.size()
                                  : static_cast<size_t>(std::upper_bound(plain_len_.begin(), plain_len_.end(), room) -
                                                        plain_len_.begin());
        for (size_t i = 0; i < n; ++i) out.set(plain_[i]);
        walk(special_, g, s, out);
    } else {
        walk(all_, g, s, out);
    }
    bool raw_text = false;
    for (size_t i = 0; i < s.n && !raw_text; ++i)
        raw_text = !s.stacks[i].empty() && !s.stacks[i].back().key && g.node(s.stacks[i].back().node).kind == Kind::LITERALS;
    if (raw_text) {
        thread_local State a, b;
        for (int32_t id : specials_) {
            a.clear();
            for (size_t i = 0; i < s.n; ++i) a.add(s.stacks[i]);
            for (char c : bytes_[id]) {
                step(g, a, static_cast<uint8_t>(c), b);
                std::swap(a, b);
                if (a.n == 0) break;
            }
            if (a.n) out.set(id);
        }
    }
    if (m.accepting())
        for (int32_t id : eog_)
            if (id >= 0 && id < n_vocab_) out.set(id);
}

}  // namespace glia::grammar
