#include "graph/graph.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace glia {

const char* op_name(Op op) {
    static const char* names[] = {"NONE", "GET_ROWS", "RMS_NORM", "ADD", "MUL", "SCALE",
                                  "MATMUL", "ROPE", "ATTENTION", "SWIGLU", "GEGLU", "SOFTCAP", "MOE", "SHORTCONV"};
    static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(Op::COUNT));
    return names[static_cast<size_t>(op)];
}

static bool same_shape(const Tensor* a, const Tensor* b) {
    for (int d = 0; d < 4; ++d)
        if (a->ne[d] != b->ne[d]) return false;
    return true;
}

uint8_t* Arena::reserve(size_t bytes) {
    if (bytes <= mem_.size()) return mem_.data();
    // Grow by at least half again so a slowly rising plan does not remap every step.
    size_t cap = std::max(bytes, mem_.size() + mem_.size() / 2);
    mem_ = HugeBuffer();  // release first: the old contents are not kept
    mem_ = HugeBuffer(cap);
    return mem_.data();
}

Tensor* Graph::alloc(Tensor t) {
    const size_t n = t.nbytes();
    // Default-initialised (not zero-filled); 64-byte alignment for SIMD loads.
    std::unique_ptr<uint8_t[]> buf(new uint8_t[n + 64]);
    auto addr = reinterpret_cast<uintptr_t>(buf.get());
    t.data = reinterpret_cast<void*>((addr + 63) & ~uintptr_t(63));
    buffers_.push_back(std::move(buf));
    tensors_.push_back(std::move(t));
    return &tensors_.back();
}

Tensor* Graph::new_tensor(DType type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, const std::string& name) {
    Tensor t = Tensor::make(type, ne0, ne1, ne2, ne3);
    t.name = name;
    return alloc(std::move(t));
}

Tensor* Graph::out_tensor(DType type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    tensors_.push_back(Tensor::make(type, ne0, ne1, ne2, ne3));
    Tensor* t = &tensors_.back();
    placed_[t] = {t, 0};
    return t;
}

// A view `v` of `t` starting `offset` bytes in: points into t's memory now, or, when t is a
// node output not yet placed, is resolved by plan().
Tensor* Graph::alias(Tensor* t, Tensor v, size_t offset) {
    tensors_.push_back(std::move(v));
    Tensor* r = &tensors_.back();
    if (auto it = placed_.find(t); it != placed_.end()) {
        placed_[r] = {it->second.root, it->second.offset + offset};
    } else {
        r->data = static_cast<uint8_t*>(t->data) + offset;
    }
    return r;
}

Tensor* Graph::reshape(Tensor* t, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    if (!t->is_contiguous()) fail("reshape of non-contiguous tensor '", t->name, "'");
    if (ne0 * ne1 * ne2 * ne3 != t->n_elements())
        fail("reshape of '", t->name, "' ", t->shape_str(), " to a different element count");
    Tensor v = Tensor::make(t->type, ne0, ne1, ne2, ne3);
    v.name = t->name;
    return alias(t, std::move(v), 0);
}

Tensor* Graph::view(Tensor* t, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset) {
    Tensor v = Tensor::make(t->type, ne0, ne1, ne2);
    v.nb[1] = nb1;
    v.nb[2] = nb2;
    v.nb[3] = nb2 * ne2;
    v.name = t->name + " (view)";
    if (offset + v.nbytes() > t->nbytes()) fail("view of '", t->name, "' out of bounds");
    return alias(t, std::move(v), offset);
}

void Graph::plan(Arena& arena) {
    if (placed_.empty()) return;
    const int n_nodes = static_cast<int>(nodes_.size());
    // Last node reading each placed root (the graph output lives to the end).
    std::unordered_map<const Tensor*, int> last;
    auto root_of = [&](const Tensor* t) -> Tensor* {
        auto it = placed_.find(t);
        return it == placed_.end() ? nullptr : it->second.root;
    };
    for (int i = 0; i < n_nodes; ++i) {
        const Node& n = nodes_[i];
        for (const Tensor* s : n.src)
            if (Tensor* r = s ? root_of(s) : nullptr) last[r] = i;
        if (Tensor* r = n.extra ? root_of(n.extra) : nullptr) last[r] = i;
    }
    if (Tensor* r = output_ ? root_of(output_) : nullptr) last[r] = n_nodes;

    // Greedy first-fit over a free list ordered by offset; a node's output is placed
    // before its inputs' memory is released, so an op never writes over what it reads.
    struct Block { size_t off, size; };
    std::vector<Block> free_list;
    std::unordered_map<const Tensor*, size_t> offset_of;
    std::vector<std::vector<const Tensor*>> release(n_nodes + 1);
    size_t top = 0;
    auto take = [&](size_t size) {
        for (size_t b = 0; b < free_list.size(); ++b) {
            if (free_list[b].size < size) continue;
            const size_t off = free_list[b].off;
            free_list[b].off += size;
            free_list[b].size -= size;
            if (free_list[b].size == 0) free_list.erase(free_list.begin() + b);
            return off;
        }
        // Grow the top, absorbing a free block that ends there.
        if (!free_list.empty() && free_list.back().off + free_list.back().size == top) {
            const size_t off = free_list.back().off;
            free_list.pop_back();
            top = off + size;
            return off;
        }
        const size_t off = top;
        top += size;
        return off;
    };
    auto give = [&](size_t off, size_t size) {
        auto it = std::lower_bound(free_list.begin(), free_list.end(), off,
                                   [](const Block& b, size_t o) { return b.off < o; });
        it = free_list.insert(it, Block{off, size});
        auto next = it + 1;
        if (next != free_list.end() && it->off + it->size == next->off) {
            it->size += next->size;
            free_list.erase(next);
        }
        if (it != free_list.begin()) {
            auto prev = it - 1;
            if (prev->off + prev->size == it->off) {
                prev->size += it->size;
                free_list.erase(it);
            }
        }
    };
    auto padded = [](const Tensor* t) { return (t->nbytes() + 63) & ~size_t(63); };
    for (int i = 0; i < n_nodes; ++i) {
        const Tensor* out = nodes_[i].out;
        if (placed_.count(out) && !offset_of.count(out)) {
            offset_of[out] = take(padded(out));
            auto it = last.find(out);
            release[it == last.end() ? i : it->second].push_back(out);
        }
        for (const Tensor* r : release[i]) give(offset_of[r], padded(r));
    }
    planned_bytes_ = top;
    uint8_t* base = arena.reserve(top);
    for (auto& [t, p] : placed_) {
        auto it = offset_of.find(p.root);
        if (it == offset_of.end()) fail("graph: tensor '", t->name, "' is read but no node computes it");
        const_cast<Tensor*>(t)->data = base + it->second + p.offset;
    }
}

Tensor* Graph::add_node(Node n) {
    nodes_.push_back(n);
    return n.out;
}

Tensor* Graph::name(Tensor* t, const std::string& base, int layer) {
    t->name = layer >= 0 ? base + "-" + std::to_string(layer) : base;
    return t;
}

Tensor* Graph::get_rows(Tensor* table, Tensor* ids) {
    if (ids->type != DType::I32) fail("get_rows: ids must be I32");
    Node n;
    n.op = Op::GET_ROWS;
    n.src = {table, ids};
    n.out = out_tensor(DType::F32, table->ne[0], ids->ne[0]);
    return add_node(n);
}

Tensor* Graph::rms_norm(Tensor* x, Tensor* w, float eps) {
    if (w && w->ne[0] != x->ne[0])
        fail("rms_norm: weight '", w->name, "' has ", w->ne[0], " values for rows of ", x->ne[0]);
    Node n;
    n.op = Op::RMS_NORM;
    n.src = {x, w};
    n.f0 = eps;
    n.out = out_tensor(DType::F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3]);
    return add_node(n);
}


Tensor* Graph::add(Tensor* a, Tensor* b) {
    if (!same_shape(a, b) && !(b->n_rows() == 1 && b->ne[0] == a->ne[0]))
        fail("add: shapes ", a->shape_str(), " and ", b->shape_str(), " do not broadcast");
    Node n;
    n.op = Op::ADD;
    n.src = {a, b};
    n.out = out_tensor(DType::F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
    return add_node(n);
}

Tensor* Graph::mul(Tensor* a, Tensor* b) {
    if (!same_shape(a, b) && !(b->n_rows() == 1 && b->ne[0] == a->ne[0]))
        fail("mul: shapes ", a->shape_str(), " and ", b->shape_str(), " do not broadcast");
    Node n;
    n.op = Op::MUL;
    n.src = {a, b};
    n.out = out_tensor(DType::F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
    return add_node(n);
}

Tensor* Graph::scale(Tensor* a, float s) {
    Node n;
    n.op = Op::SCALE;
    n.src = {a};
    n.f0 = s;
    n.out = out_tensor(DType::F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
    return add_node(n);
}

Tensor* Graph::matmul(Tensor* w, Tensor* x) {
    if (w->ne[0] != x->ne[0])
        fail("matmul: '", w->name, "' ", w->shape_str(), " expects rows of ", w->ne[0], ", input '", x->name,
             "' has ", x->ne[0]);
    if (!x->is_contiguous()) fail("matmul: input '", x->name, "' must be contiguous");
    Node n;
    n.op = Op::MATMUL;
    n.src = {w, x};
    n.out = out_tensor(DType::F32, w->ne[1], x->n_rows());
    return add_node(n);
}

Tensor* Graph::rope(Tensor* x, Tensor* pos, const RopeParams& p) {
    if (pos->ne[0] != x->ne[2]) fail("rope: ", pos->ne[0], " positions for ", x->ne[2], " tokens");
    if (p.n_dims > x->ne[0] || p.n_dims % 2) fail("rope: n_dims ", p.n_dims, " invalid for head size ", x->ne[0]);
    Node n;
    n.op = Op::ROPE;
    n.src = {x, pos};
    n.rope = p;
    n.out = out_tensor(DType::F32, x->ne[0], x->ne[1], x->ne[2]);
    return add_node(n);
}

Tensor* Graph::attention(Tensor* q, Tensor* k, Tensor* v, KVCache* cache, Tensor* pos, Tensor* seq,
                         const AttnParams& p) {
    // q [hd, n_head, T], k [hd, n_kv, T], v [hd_v, n_kv, T]
    if (q->ne[2] != k->ne[2] || k->ne[2] != v->ne[2] || pos->ne[0] != q->ne[2])
        fail("attention: token counts differ (q ", q->shape_str(), ", k ", k->shape_str(), ", v ", v->shape_str(), ")");
    if (q->ne[0] != k->ne[0]) fail("attention: q and k head sizes differ");
    if (k->ne[1] != v->ne[1] || q->ne[1] % k->ne[1]) fail("attention: head counts incompatible");
    Node n;
    n.op = Op::ATTENTION;
    n.src = {q, k, v, pos};
    n.attn = p;
    n.cache = cache;
    n.extra = seq;
    n.out = out_tensor(DType::F32, v->ne[0] * q->ne[1], q->ne[2]);
    return add_node(n);
}

Node Graph::glu_node(Op op, Tensor* gate, Tensor* up) {
    if (!same_shape(gate, up)) fail(op_name(op), ": gate ", gate->shape_str(), " and up ", up->shape_str(), " differ");
    if (gate->ne[2] != 1 || gate->ne[3] != 1) fail(op_name(op), ": expects 2-D inputs");
    Node n;
    n.op = op;
    n.src = {gate, up};
    n.out = out_tensor(DType::F32, gate->ne[0], gate->ne[1]);
    return n;
}

Tensor* Graph::swiglu(Tensor* gate, Tensor* up) { return add_node(glu_node(Op::SWIGLU, gate, up)); }
Tensor* Graph::geglu(Tensor* gate, Tensor* up) { return add_node(glu_node(Op::GEGLU, gate, up)); }

Tensor* Graph::softcap(Tensor* x, float cap) {
    if (!(cap > 0)) fail("softcap: cap must be positive");
    Node n;
    n.op = Op::SOFTCAP;
    n.src = {x};
    n.f0 = cap;
    n.out = out_tensor(DType::F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3]);
    return add_node(n);
}

Tensor* Graph::moe(Tensor* x, Tensor* router, Tensor* gate_exps, Tensor* up_exps, Tensor* down_exps, int n_used,
                   bool norm_weights, const int32_t* forced) {
    const int64_t E = x->ne[0], n_exp = router->ne[1], F = gate_exps->ne[1];
    if (router->ne[0] != E) fail("moe: router '", router->name, "' expects rows of ", router->ne[0]);
    if (gate_exps->ne[0] != E || up_exps->ne[0] != E || up_exps->ne[1] != F || down_exps->ne[0] != F ||
        down_exps->ne[1] != E || gate_exps->ne[2] != n_exp || up_exps->ne[2] != n_exp || down_exps->ne[2] != n_exp)
        fail("moe: expert tensors ", gate_exps->shape_str(), ", ", up_exps->shape_str(), ", ", down_exps->shape_str(),
             " do not fit ", n_exp, " experts of width ", E);
    if (n_used <= 0 || n_used > n_exp) fail("moe: ", n_used, " experts used of ", n_exp);
    if (!x->is_contiguous()) fail("moe: input must be contiguous");
    Node n;
    n.op = Op::MOE;
    n.src = {x, router, gate_exps, up_exps};
    n.extra = down_exps;
    n.i0 = n_used;
    n.b0 = norm_weights;
    n.forced = forced;
    n.out = out_tensor(DType::F32, E, x->ne[1]);
    return add_node(n);
}

Tensor* Graph::shortconv(Tensor* bx, Tensor* w, RecurrentState* state, Tensor* seq, int layer) {
    if (w->ne[1] != bx->ne[0]) fail("shortconv: kernel '", w->name, "' has ", w->ne[1], " channels, input ", bx->ne[0]);
    if (w->type != DType::F32) fail("shortconv: kernel '", w->name, "' must be F32");
    if (!state) fail("shortconv: no recurrent state for layer ", layer);
    Node n;
    n.op = Op::SHORTCONV;
    n.src = {bx, w, seq};
    n.state = state;
    n.i0 = layer;
    n.out = out_tensor(DType::F32, bx->ne[0], bx->ne[1]);
    return add_node(n);
}

}  // namespace glia
