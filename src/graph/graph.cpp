#include "graph/graph.h"

#include <cstring>

#include "core/error.h"
#include "parallel/communicator.h"

namespace glia {

namespace {
struct OpNames { const char* upper; const char* cli; };
constexpr OpNames kOpNames[] = {
    {"NONE", "none"},         {"GET_ROWS", "get_rows"},       {"RMS_NORM", "rms_norm"},   {"ADD", "add"},
    {"MUL", "mul"},           {"SCALE", "scale"},             {"MATMUL", "matmul"},       {"ROPE", "rope"},
    {"ATTENTION", "attention"}, {"SWIGLU", "swiglu"},         {"GEGLU", "geglu"},         {"SOFTCAP", "softcap"},
    {"MOE_TOPK", "moe_topk"}, {"MOE_WEIGHTS", "moe_weights"}, {"MOE_EXPERTS", "moe_experts"},
    {"SHORTCONV", "shortconv"}, {"COPY", "copy"},         {"ROPE_FREQS", "rope_freqs"}, {"UNARY", "unary"},
    {"DELTA_NET", "delta_net"}, {"MUL_BCAST", "mul_bcast"}, {"CONCAT", "concat"},
    {"MATMUL_HEADS", "matmul_heads"}, {"RES_MIX", "res_mix"}, {"SITU", "situ"},
    {"MOE_GATHER_WEIGHTS", "moe_gather_weights"}, {"MOE_EXPERTS_GLU", "moe_experts_glu"},
    {"ARGMAX", "argmax"},
    {"ALL_REDUCE", "all_reduce"}, {"ALL_GATHER", "all_gather"},
};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == static_cast<size_t>(Op::COUNT));
}  // namespace

const char* op_name(Op op) { return kOpNames[static_cast<size_t>(op)].upper; }
const char* op_cli_name(Op op) { return kOpNames[static_cast<size_t>(op)].cli; }

bool op_from_cli_name(const std::string& s, Op& op) {
    for (size_t i = 1; i < static_cast<size_t>(Op::COUNT); ++i)
        if (s == kOpNames[i].cli) {
            op = static_cast<Op>(i);
            return true;
        }
    return false;
}

static bool same_shape(const Tensor* a, const Tensor* b) {
    for (int d = 0; d < 4; ++d)
        if (a->ne[d] != b->ne[d]) return false;
    return true;
}

Tensor* Graph::make_tensor(Tensor t) {
    tensors_.push_back(std::move(t));
    return &tensors_.back();
}

Tensor* Graph::new_input(DType type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, const std::string& name) {
    Tensor t = Tensor::make(type, ne0, ne1, ne2, ne3);
    t.name = name;
    t.role = TensorRole::INPUT;
    const size_t n = t.nbytes();
    // Default-initialised (not zero-filled); 64-byte alignment for SIMD loads.
    std::unique_ptr<uint8_t[]> buf(new uint8_t[n + 64]);
    auto addr = reinterpret_cast<uintptr_t>(buf.get());
    t.data = reinterpret_cast<void*>((addr + 63) & ~uintptr_t(63));
    buffers_.push_back(std::move(buf));
    return make_tensor(std::move(t));
}

Tensor* Graph::out_tensor(DType type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    Tensor t = Tensor::make(type, ne0, ne1, ne2, ne3);
    t.role = TensorRole::ACTIVATION;  // memory planned by the dispatcher
    return make_tensor(std::move(t));
}

// A view `v` of `t` starting `offset` bytes in. Its memory is t's: resolved now when t has
// memory (an input, a weight, state), by the dispatcher when t is a node output.
Tensor* Graph::alias(Tensor* t, Tensor v, size_t offset) {
    v.view_src = t;
    v.view_offs = offset;
    v.role = t->role;
    v.device = t->device;
    if (t->data) v.data = static_cast<uint8_t*>(t->data) + offset;
    Tensor* out = make_tensor(std::move(v));
    if (out_rows_.count(t)) out_rows_.insert(out);
    return out;
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

Tensor* Graph::add_node(Node n) {
    n.layer = layer_;
    if (!out_rows_.empty())
        for (Tensor* s : n.src)
            if (s && out_rows_.count(s)) {
                out_rows_.insert(n.out);
                break;
            }
    nodes_.push_back(n);
    return n.out;
}

Tensor* Graph::mark_output_rows(Tensor* t) {
    out_rows_.insert(t);
    return t;
}

Tensor* Graph::add_low_rank(Tensor* y, Tensor* x, const std::vector<LowRank>& deltas) {
    const bool out_rows = out_rows_.count(x) > 0;
    for (size_t i = 0; i < deltas.size(); ++i) {
        const LowRank& d = deltas[i];
        Tensor* s = out_rows ? d.out_scales : d.token_scales;
        if (!s || s->ne[0] != 1 || s->ne[1] != x->n_rows())
            fail("LoRA: ", x->n_rows(), " rows into '", d.a->name, "' but ", s ? s->ne[1] : 0, " row scales");
        Tensor* t = matmul(d.a, x);  // [r, rows]; A is not in the map, so this adds nothing
        t = mul_bcast(t, s);
        if (d.factor != 1.0f) t = scale(t, d.factor);
        y = add(y, matmul(d.b, t));
    }
    return y;
}

Tensor* Graph::name(Tensor* t, const std::string& base, int layer) {
    t->name = layer >= 0 ? base + "-" + std::to_string(layer) : base;
    return t;
}

Tensor* Graph::get_rows(Tensor* table, Tensor* ids) {
    if (ids->type != DType::I32) fail("get_rows: ids must be I32");
    Node n;
    n.op = Op::GET_ROWS;
    n.src[GetRowsArg::TABLE] = table;
    n.src[GetRowsArg::IDS] = ids;
    n.out = out_tensor(DType::F32, table->ne[0], ids->ne[0]);
    return add_node(n);
}

Tensor* Graph::rms_norm(Tensor* x, Tensor* w, float eps) {
    if (w && w->ne[0] != x->ne[0])
        fail("rms_norm: weight '", w->name, "' has ", w->ne[0], " values for rows of ", x->ne[0]);
    Node n;
    n.op = Op::RMS_NORM;
    n.src[NormArg::X] = x;
    n.src[NormArg::W] = w;
    n.params = NormParams{eps};
    n.out = out_tensor(DType::F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3]);
    return add_node(n);
}

Tensor* Graph::add(Tensor* a, Tensor* b) {
    if (!same_shape(a, b) && !(b->n_rows() == 1 && b->ne[0] == a->ne[0]))
        fail("add: shapes ", a->shape_str(), " and ", b->shape_str(), " do not broadcast");
    Node n;
    n.op = Op::ADD;
    n.src[BinaryArg::A] = a;
    n.src[BinaryArg::B] = b;
    n.out = out_tensor(DType::F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
    return add_node(n);
}

Tensor* Graph::mul(Tensor* a, Tensor* b) {
    if (!same_shape(a, b) && !(b->n_rows() == 1 && b->ne[0] == a->ne[0]))
        fail("mul: shapes ", a->shape_str(), " and ", b->shape_str(), " do not broadcast");
    Node n;
    n.op = Op::MUL;
    n.src[BinaryArg::A] = a;
    n.src[BinaryArg::B] = b;
    n.out = out_tensor(DType::F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
    return add_node(n);
}

Tensor* Graph::scale(Tensor* a, float s) {
    Node n;
    n.op = Op::SCALE;
    n.src[BinaryArg::A] = a;
    n.params = ScaleParams{s};
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
    n.src[MatmulArg::W] = w;
    n.src[MatmulArg::X] = x;
    n.out = out_tensor(DType::F32, w->ne[1], x->n_rows());
    Tensor* y = add_node(n);
    if (low_rank_)
        if (auto it = low_rank_->find(w); it != low_rank_->end()) return add_low_rank(y, x, it->second);
    return y;
}

Tensor* Graph::rope(Tensor* x, Tensor* pos, const RopeParams& p) {
    if (pos->ne[0] != x->ne[2]) fail("rope: ", pos->ne[0], " positions for ", x->ne[2], " tokens");
    if (p.n_dims > x->ne[0] || p.n_dims % 2) fail("rope: n_dims ", p.n_dims, " invalid for head size ", x->ne[0]);
    Node n;
    n.op = Op::ROPE;
    n.src[RopeArg::X] = x;
    n.src[RopeArg::POS] = pos;
    n.params = p;
    n.out = out_tensor(DType::F32, x->ne[0], x->ne[1], x->ne[2]);
    return add_node(n);
}

Tensor* Graph::attention(Tensor* q, Tensor* k, Tensor* v, const AttnInputs& in, const AttnParams& p) {
    const int64_t T = q->ne[2];
    if (k->ne[2] != T || v->ne[2] != T || in.pos->ne[0] != T || in.seq->ne[0] != T || in.cells->ne[0] != T)
        fail("attention: token counts differ (q ", q->shape_str(), ", k ", k->shape_str(), ", v ", v->shape_str(), ")");
    if (q->ne[0] != k->ne[0]) fail("attention: q and k head sizes differ");
    if (k->ne[1] != v->ne[1] || q->ne[1] % k->ne[1]) fail("attention: head counts incompatible");
    for (const Tensor* c : {in.k_cache, in.v_cache}) {
        const DType t = c->type;
        if (t != DType::F16 && t != DType::BF16 && t != DType::Q8_0 && t != DType::Q4_0)
            fail("attention: KV pages of type ", dtype_name(t), " (F16, BF16, Q8_0 or Q4_0)");
    }
    // Blocked pages: each head spans whole blocks of 32, or lies inside one.
    auto heads_fit = [](DType t, int64_t hd) {
        return (t != DType::Q8_0 && t != DType::Q4_0) || hd % 32 == 0 || hd == 8 || hd == 16;
    };
    if (!heads_fit(in.k_cache->type, k->ne[0]) || !heads_fit(in.v_cache->type, v->ne[0]))
        fail("attention: heads of ", k->ne[0], "/", v->ne[0], " values do not fit ", dtype_name(in.k_cache->type), "/",
             dtype_name(in.v_cache->type), " pages (blocks of 32)");
    if (in.k_cache->ne[0] != k->ne[0] * k->ne[1] || in.v_cache->ne[0] != v->ne[0] * v->ne[1])
        fail("attention: page rows of ", in.k_cache->ne[0], "/", in.v_cache->ne[0], " values do not match k ",
             k->shape_str(), " and v ", v->shape_str());
    if (p.block_size <= 0 || in.k_cache->ne[1] % p.block_size) fail("attention: pages of ", p.block_size, " cells");
    for (const Tensor* t : {in.pos, in.seq, in.cells, in.pages})
        if (t->type != DType::I32) fail("attention: '", t->name, "' must be I32");
    Node n;
    n.op = Op::ATTENTION;
    n.src[AttnArg::Q] = q;
    n.src[AttnArg::K] = k;
    n.src[AttnArg::V] = v;
    n.src[AttnArg::K_CACHE] = in.k_cache;
    n.src[AttnArg::V_CACHE] = in.v_cache;
    n.src[AttnArg::POS] = in.pos;
    n.src[AttnArg::SEQ] = in.seq;
    n.src[AttnArg::CELLS] = in.cells;
    n.src[AttnArg::PAGES] = in.pages;
    n.writes = (1u << AttnArg::K_CACHE) | (1u << AttnArg::V_CACHE);
    n.params = p;
    n.out = out_tensor(DType::F32, v->ne[0] * q->ne[1], T);
    return add_node(n);
}

Node Graph::glu_node(Op op, Tensor* gate, Tensor* up) {
    if (!same_shape(gate, up)) fail(op_name(op), ": gate ", gate->shape_str(), " and up ", up->shape_str(), " differ");
    if (gate->ne[2] != 1 || gate->ne[3] != 1) fail(op_name(op), ": expects 2-D inputs");
    Node n;
    n.op = op;
    n.src[GluArg::GATE] = gate;
    n.src[GluArg::UP] = up;
    n.out = out_tensor(DType::F32, gate->ne[0], gate->ne[1]);
    return n;
}

Tensor* Graph::swiglu(Tensor* gate, Tensor* up) { return add_node(glu_node(Op::SWIGLU, gate, up)); }
Tensor* Graph::geglu(Tensor* gate, Tensor* up) { return add_node(glu_node(Op::GEGLU, gate, up)); }

Tensor* Graph::softcap(Tensor* x, float cap) {
    if (!(cap > 0)) fail("softcap: cap must be positive");
    Node n;
    n.op = Op::SOFTCAP;
    n.src[0] = x;
    n.params = SoftcapParams{cap};
    n.out = out_tensor(DType::F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3]);
    return add_node(n);
}

Tensor* Graph::argmax(Tensor* x) {
    if (x->type != DType::F32 || x->nb[0] != sizeof(float) || x->ne[2] != 1 || x->ne[3] != 1)
        fail("argmax: needs a matrix of contiguous F32 rows, got ", x->shape_str());
    Node n;
    n.op = Op::ARGMAX;
    n.src[0] = x;
    n.out = out_tensor(DType::I32, x->n_rows());
    return add_node(n);
}

Tensor* Graph::moe_topk(Tensor* logits, int n_used) {
    if (logits->type != DType::F32 || !logits->is_contiguous()) fail("moe_topk: router logits must be contiguous F32");
    if (n_used <= 0 || n_used > logits->ne[0]) fail("moe: ", n_used, " experts used of ", logits->ne[0]);
    Node n;
    n.op = Op::MOE_TOPK;
    n.src[MoeTopkArg::LOGITS] = logits;
    n.params = MoeParams{n_used, false};
    n.out = out_tensor(DType::I32, n_used, logits->ne[1]);
    return add_node(n);
}

Tensor* Graph::moe_weights(Tensor* logits, Tensor* ids, bool norm_weights) {
    if (ids->type != DType::I32 || ids->ne[1] != logits->ne[1]) fail("moe_weights: ids ", ids->shape_str(), " for logits ",
                                                                     logits->shape_str());
    Node n;
    n.op = Op::MOE_WEIGHTS;
    n.src[MoeWeightsArg::LOGITS] = logits;
    n.src[MoeWeightsArg::IDS] = ids;
    n.params = MoeParams{static_cast<int>(ids->ne[0]), norm_weights};
    n.out = out_tensor(DType::F32, ids->ne[0], ids->ne[1]);
    return add_node(n);
}

Tensor* Graph::moe_experts(Tensor* x, Tensor* gate_exps, Tensor* up_exps, Tensor* down_exps, Tensor* ids,
                           Tensor* weights) {
    const int64_t E = x->ne[0], n_exp = gate_exps->ne[2], F = gate_exps->ne[1];
    if (gate_exps->ne[0] != E || up_exps->ne[0] != E || up_exps->ne[1] != F || down_exps->ne[0] != F ||
        down_exps->ne[1] != E || up_exps->ne[2] != n_exp || down_exps->ne[2] != n_exp)
        fail("moe: expert tensors ", gate_exps->shape_str(), ", ", up_exps->shape_str(), ", ", down_exps->shape_str(),
             " do not fit ", n_exp, " experts of width ", E);
    if (!x->is_contiguous()) fail("moe: input must be contiguous");
    if (ids->type != DType::I32 || weights->type != DType::F32 || ids->ne[1] != x->ne[1] ||
        weights->ne[0] != ids->ne[0] || weights->ne[1] != x->ne[1])
        fail("moe: ids ", ids->shape_str(), " / weights ", weights->shape_str(), " do not fit ", x->ne[1], " tokens");
    Node n;
    n.op = Op::MOE_EXPERTS;
    n.src[MoeExpertsArg::X] = x;
    n.src[MoeExpertsArg::GATE] = gate_exps;
    n.src[MoeExpertsArg::UP] = up_exps;
    n.src[MoeExpertsArg::DOWN] = down_exps;
    n.src[MoeExpertsArg::IDS] = ids;
    n.src[MoeExpertsArg::WEIGHTS] = weights;
    n.params = MoeParams{static_cast<int>(ids->ne[0]), false};
    n.out = out_tensor(DType::F32, E, x->ne[1]);
    return add_node(n);
}

Tensor* Graph::shortconv(Tensor* bx, Tensor* w, Tensor* state, Tensor* seq) {
    if (w->ne[1] != bx->ne[0]) fail("shortconv: kernel '", w->name, "' has ", w->ne[1], " channels, input ", bx->ne[0]);
    if (w->type != DType::F32) fail("shortconv: kernel '", w->name, "' must be F32");
    if (!state || state->type != DType::F32 || state->ne[0] != (w->ne[0] - 1) * bx->ne[0])
        fail("shortconv: state ", state ? state->shape_str() : std::string("(none)"), " does not hold ", w->ne[0] - 1,
             " inputs of ", bx->ne[0], " channels");
    if (!seq || seq->type != DType::I32 || seq->ne[0] != bx->ne[1]) fail("shortconv: one I32 slot per token needed");
    Node n;
    n.op = Op::SHORTCONV;
    n.src[ShortconvArg::X] = bx;
    n.src[ShortconvArg::KERNEL] = w;
    n.src[ShortconvArg::STATE] = state;
    n.src[ShortconvArg::SEQ] = seq;
    n.writes = 1u << ShortconvArg::STATE;
    n.out = out_tensor(DType::F32, bx->ne[0], bx->ne[1]);
    return add_node(n);
}

Tensor* Graph::rope_freqs(Tensor* x, Tensor* pos, Tensor* freqs, const RopeParams& p) {
    if (pos->ne[0] != x->ne[2]) fail("rope: ", pos->ne[0], " positions for ", x->ne[2], " tokens");
    if (p.n_dims > x->ne[0] || p.n_dims % 2) fail("rope: n_dims ", p.n_dims, " invalid for head size ", x->ne[0]);
    if (!freqs || freqs->type != DType::F32 || freqs->ne[0] != p.n_dims / 2 || freqs->n_rows() != 1)
        fail("rope: frequency factors ", freqs ? "'" + freqs->name + "' " + freqs->shape_str() : std::string("(none)"),
             " do not give one F32 value per rotated pair (", p.n_dims / 2, ")");
    Node n;
    n.op = Op::ROPE_FREQS;
    n.src[RopeFreqsArg::X] = x;
    n.src[RopeFreqsArg::POS] = pos;
    n.src[RopeFreqsArg::FREQS] = freqs;
    n.params = p;
    n.out = out_tensor(DType::F32, x->ne[0], x->ne[1], x->ne[2]);
    return add_node(n);
}

Tensor* Graph::unary(Tensor* x, UnaryKind kind) {
    if (x->type != DType::F32) fail("unary: '", x->name, "' must be F32");
    Node n;
    n.op = Op::UNARY;
    n.src[0] = x;
    n.params = UnaryParams{kind};
    n.out = out_tensor(DType::F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3]);
    return add_node(n);
}

Tensor* Graph::delta_net(Tensor* q, Tensor* k, Tensor* v, Tensor* g, Tensor* beta, Tensor* state, Tensor* seq,
                         float q_scale) {
    const int64_t dk = q->ne[0], nk = q->ne[1], T = q->ne[2], dv = v->ne[0], nv = v->ne[1];
    for (const Tensor* t : {q, k, v, g, beta})
        if (t->type != DType::F32 || t->ne[3] != 1) fail("delta_net: '", t->name, "' must be 3-D F32");
    if (k->ne[0] != dk || k->ne[1] != nk || k->ne[2] != T || v->ne[2] != T)
        fail("delta_net: q ", q->shape_str(), ", k ", k->shape_str(), " and v ", v->shape_str(), " do not match");
    if (nk <= 0 || nv % nk) fail("delta_net: ", nv, " value heads are not a multiple of ", nk, " key heads");
    if ((g->ne[0] != 1 && g->ne[0] != dk) || g->ne[1] != nv || g->ne[2] != T)
        fail("delta_net: decay ", g->shape_str(), " is not [1 or ", dk, ", ", nv, ", ", T, "]");
    if (beta->ne[0] != 1 || beta->ne[1] != nv || beta->ne[2] != T)
        fail("delta_net: beta ", beta->shape_str(), " is not [1, ", nv, ", ", T, "]");
    if (!state || state->type != DType::F32 || state->ne[0] != nv * dk * dv)
        fail("delta_net: state ", state ? state->shape_str() : std::string("(none)"), " does not hold ", nv,
             " matrices of ", dk, "x", dv);
    if (!seq || seq->type != DType::I32 || seq->ne[0] != T) fail("delta_net: one I32 slot per token needed");
    Node n;
    n.op = Op::DELTA_NET;
    n.src[DeltaNetArg::Q] = q;
    n.src[DeltaNetArg::K] = k;
    n.src[DeltaNetArg::V] = v;
    n.src[DeltaNetArg::G] = g;
    n.src[DeltaNetArg::BETA] = beta;
    n.src[DeltaNetArg::STATE] = state;
    n.src[DeltaNetArg::SEQ] = seq;
    n.writes = 1u << DeltaNetArg::STATE;
    n.params = DeltaNetParams{q_scale};
    n.out = out_tensor(DType::F32, dv, nv, T);
    return add_node(n);
}

Tensor* Graph::mul_bcast(Tensor* a, Tensor* b) {
    for (int d = 0; d < 4; ++d)
        if (b->ne[d] != 1 && b->ne[d] != a->ne[d])
            fail("mul_bcast: ", b->shape_str(), " does not broadcast over ", a->shape_str());
    if (a->type != DType::F32 || b->type != DType::F32) fail("mul_bcast: operands must be F32");
    Node n;
    n.op = Op::MUL_BCAST;
    n.src[BinaryArg::A] = a;
    n.src[BinaryArg::B] = b;
    n.out = out_tensor(DType::F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
    return add_node(n);
}

Tensor* Graph::concat(Tensor* a, Tensor* b, int dim) {
    if (dim < 0 || dim > 3) fail("concat: dim ", dim);
    for (int d = 0; d < 4; ++d)
        if (d != dim && a->ne[d] != b->ne[d])
            fail("concat: ", a->shape_str(), " and ", b->shape_str(), " differ outside dim ", dim);
    if (a->type != DType::F32 || b->type != DType::F32) fail("concat: operands must be F32");
    int64_t ne[4] = {a->ne[0], a->ne[1], a->ne[2], a->ne[3]};
    ne[dim] += b->ne[dim];
    Node n;
    n.op = Op::CONCAT;
    n.src[BinaryArg::A] = a;
    n.src[BinaryArg::B] = b;
    n.params = ConcatParams{dim};
    n.out = out_tensor(DType::F32, ne[0], ne[1], ne[2], ne[3]);
    return add_node(n);
}

Tensor* Graph::matmul_heads(Tensor* w, Tensor* x) {
    if (w->ne[0] != x->ne[0] || w->ne[2] != x->ne[1] || x->ne[3] != 1)
        fail("matmul_heads: '", w->name, "' ", w->shape_str(), " does not map ", x->shape_str(), " per head");
    if (x->type != DType::F32) fail("matmul_heads: input must be F32");
    Node n;
    n.op = Op::MATMUL_HEADS;
    n.src[MatmulArg::W] = w;
    n.src[MatmulArg::X] = x;
    n.out = out_tensor(DType::F32, w->ne[1], x->ne[1], x->ne[2]);
    return add_node(n);
}

Tensor* Graph::res_mix(Tensor* stack, Tensor* cur, Tensor* w, float eps) {
    if (!stack) return cur;
    const int64_t E = cur->ne[0], T = cur->ne[1];
    if (stack->ne[0] != E || stack->ne[2] != T || cur->ne[2] != 1 || w->ne[0] != E || w->type != DType::F32)
        fail("res_mix: stack ", stack->shape_str(), ", current ", cur->shape_str(), " and weights ", w->shape_str(),
             " do not fit");
    Node n;
    n.op = Op::RES_MIX;
    n.src[ResMixArg::STACK] = stack;
    n.src[ResMixArg::CUR] = cur;
    n.src[ResMixArg::W] = w;
    n.params = NormParams{eps};
    n.out = out_tensor(DType::F32, E, T);
    return add_node(n);
}

Tensor* Graph::situ(Tensor* gate, Tensor* up, float beta, float linear_beta) {
    if (!(beta > 0) || !(linear_beta > 0)) fail("situ: betas must be positive");
    Node n = glu_node(Op::SITU, gate, up);
    n.params = GluParams{GluKind::SITU, beta, linear_beta, 0};
    return add_node(n);
}

Tensor* Graph::moe_gather_weights(Tensor* probs, Tensor* ids, bool norm) {
    if (probs->type != DType::F32 || ids->type != DType::I32 || ids->ne[1] != probs->ne[1])
        fail("moe_gather_weights: ids ", ids->shape_str(), " for probabilities ", probs->shape_str());
    Node n;
    n.op = Op::MOE_GATHER_WEIGHTS;
    n.src[MoeGatherArg::PROBS] = probs;
    n.src[MoeGatherArg::IDS] = ids;
    n.params = MoeParams{static_cast<int>(ids->ne[0]), norm};
    n.out = out_tensor(DType::F32, ids->ne[0], ids->ne[1]);
    return add_node(n);
}

Tensor* Graph::moe_experts_glu(Tensor* x, Tensor* gate_exps, Tensor* up_exps, Tensor* down_exps, Tensor* ids,
                               Tensor* weights, const GluParams& act) {
    Tensor* out = moe_experts(x, gate_exps, up_exps, down_exps, ids, weights);  // the checks, then retyped
    Node& n = nodes_.back();
    n.op = Op::MOE_EXPERTS_GLU;
    GluParams gp = act;
    gp.n_used = static_cast<int>(ids->ne[0]);
    n.params = gp;
    return out;
}

Tensor* Graph::all_reduce(Tensor* x, Communicator* comm) {
    if (!comm) fail("all_reduce of '", x->name, "' without a communicator");
    if (x->type != DType::F32 || !x->is_contiguous()) fail("all_reduce: '", x->name, "' must be contiguous F32");
    Node n;
    n.op = Op::ALL_REDUCE;
    n.src[0] = x;
    n.params = CollectiveParams{comm};
    n.out = out_tensor(DType::F32, x->ne[0], x->ne[1], x->ne[2], x->ne[3]);
    return add_node(n);
}

Tensor* Graph::all_gather(Tensor* x, Communicator* comm) {
    if (!comm) fail("all_gather of '", x->name, "' without a communicator");
    if (x->type != DType::F32 || !x->is_contiguous() || x->ne[2] != 1 || x->ne[3] != 1)
        fail("all_gather: '", x->name, "' must be contiguous 2-D F32, not ", x->shape_str());
    Node n;
    n.op = Op::ALL_GATHER;
    n.src[0] = x;
    n.params = CollectiveParams{comm};
    n.out = out_tensor(DType::F32, x->ne[0] * comm->world(), x->ne[1]);
    return add_node(n);
}

}  // namespace glia
