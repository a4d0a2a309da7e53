#include "debug/op_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <sstream>

#include "backend/registry.h"
#include "core/error.h"
#include "core/f16.h"
#include "debug/op_reference.h"
#include "dispatch/dispatcher.h"
#include "placement/cache_types.h"
#include "quant/quant.h"

namespace glia {

std::string OpSpec::label() const {
    std::ostringstream os;
    os << op_name(op);
    switch (op) {
        case Op::MATMUL: case Op::GET_ROWS: os << " " << dtype_name(type) << " " << K << "x" << N; break;
        case Op::MOE_EXPERTS:
            os << " " << dtype_name(type) << (down_type ? std::string("/") + dtype_name(*down_type) : "") << " " << K
               << "x" << N << " " << n_used << "/" << n_expert;
            break;
        case Op::MOE_TOPK: case Op::MOE_WEIGHTS: case Op::MOE_GATHER_WEIGHTS:
            os << " " << n_used << "/" << n_expert;
            break;
        case Op::MOE_EXPERTS_GLU:
            os << (kind == 1 ? " swiglu " : " situ ") << dtype_name(type)
               << (down_type ? std::string("/") + dtype_name(*down_type) : "") << " " << K << "x" << N << " " << n_used
               << "/" << n_expert;
            break;
        case Op::MATMUL_HEADS: os << " " << dtype_name(type) << " " << K << "x" << N << " x" << n_head; break;
        case Op::MUL_BCAST: os << " " << K << " x" << n_head; break;
        case Op::CONCAT: os << " dim " << kind << " " << K; break;
        case Op::RES_MIX: os << " " << kind << " saved " << K; break;
        case Op::ATTENTION:
            os << " hd" << head_dim << " " << n_head << "/" << n_kv_head << " past " << n_past;
            if (k_cache != DType::F16 || v_cache != DType::F16)
                os << " cache " << cache_type_name(k_cache) << "/" << cache_type_name(v_cache);
            if (window) os << " win " << window;
            if (softcap > 0) os << " cap";
            break;
        case Op::ROPE: case Op::ROPE_FREQS: os << " hd" << head_dim << " x" << n_head << (neox ? " neox" : ""); break;
        case Op::UNARY:
            os << " " << (kind == int(UnaryKind::SILU) ? "silu" : kind == int(UnaryKind::SIGMOID) ? "sigmoid" : "softplus")
               << " " << K;
            break;
        case Op::DELTA_NET:
            os << " hd" << head_dim << " " << n_head << "/" << n_kv_head << (kind == 1 ? " per-channel" : "");
            break;
        default: os << " " << K; break;
    }
    if (strided) os << " strided";
    os << " T=" << T;
    return os.str();
}

namespace {

// Host memory for the harness's tensors, kept until the check ends.
struct Pool {
    std::deque<std::unique_ptr<uint8_t[]>> bufs;
    std::deque<Tensor> tensors;
    Tensor* make(DType t, int64_t ne0, int64_t ne1, int64_t ne2, TensorRole role, const std::string& name) {
        Tensor x = Tensor::make(t, ne0, ne1, ne2);
        x.role = role;
        x.name = name;
        bufs.emplace_back(new uint8_t[x.nbytes() + 64]);
        x.data = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(bufs.back().get()) + 63) & ~uintptr_t(63));
        tensors.push_back(std::move(x));
        return &tensors.back();
    }
};

// Fills t (F32, F16, BF16 or a quantized type) with N(0, sd) values. Large tensors (stacks
// of experts, wide matrices) repeat a pool of 509 distinct rows: quantizing every row of
// 8 experts of 2048 x 2048 took most of a bench-ops run. Row r is pool row r % 509, so
// neighbouring rows and the same row of neighbouring experts still differ.
void fill(Tensor& t, std::mt19937& rng, float sd) {
    constexpr int64_t kPool = 509;
    std::normal_distribution<float> g(0.0f, sd);
    std::vector<float> row(t.ne[0]);
    const int64_t rows = t.n_rows(), distinct = rows > 2 * kPool ? kPool : rows;
    for (int64_t r = 0; r < distinct; ++r) {
        for (auto& x : row) x = g(rng);
        uint8_t* dst = static_cast<uint8_t*>(t.data) + r * t.nb[1];
        switch (t.type) {
            case DType::F32: std::memcpy(dst, row.data(), row.size() * 4); break;
            case DType::F16:
                for (size_t i = 0; i < row.size(); ++i) reinterpret_cast<uint16_t*>(dst)[i] = f32_to_f16(row[i]);
                break;
            default: quant::quantize_row(t.type, row.data(), dst, t.ne[0]); break;
        }
    }
    const size_t row_size = t.row_size();
    for (int64_t r = distinct; r < rows; ++r)
        std::memcpy(static_cast<uint8_t*>(t.data) + r * t.nb[1], static_cast<uint8_t*>(t.data) + (r % kPool) * t.nb[1],
                    row_size);
}

double tolerance_for(const OpSpec& s) {
    switch (s.op) {
        case Op::MATMUL: case Op::MOE_EXPERTS: case Op::MOE_EXPERTS_GLU: case Op::MATMUL_HEADS: {
            const double chain = s.op == Op::MOE_EXPERTS || s.op == Op::MOE_EXPERTS_GLU ? 1.5 : 1.0;
            auto of = [](DType t) {
                if (t == DType::F32) return 1e-5;
                if (t == DType::F16) return 4e-3;
                return 2e-2;  // BF16; quantized types: activations quantized to 8 bits
            };
            return std::max(of(s.type), s.down_type ? of(*s.down_type) : 0.0) * chain;
        }
        case Op::GEGLU: return 2e-3;      // GELU read from an f16 table, as the reference does
        case Op::ATTENTION: return 5e-3;  // q and probabilities rounded to f16 (the reference reads the same cache)
        case Op::ROPE: case Op::ROPE_FREQS: return 1e-4;  // angles by float recurrence
        case Op::DELTA_NET: return 1e-4;  // float sums over the state, token after token
        case Op::MOE_TOPK: case Op::ARGMAX: return 0;  // ids: exact
        case Op::GET_ROWS: return 0;      // rows dequantized exactly as the reference dequantizer does
        default: return 1e-5;
    }
}

struct Timer : NodeTimer {
    Op op;
    std::vector<double> times;
    explicit Timer(Op o) : op(o) {}
    void record(const Node& n, double seconds) override {
        if (n.op == op) times.push_back(seconds);
    }
};

// The first and the last token of a T-token product alone (one-token graphs of the same
// weights): the same bits as in the batch. Counts into r.alone_checked / r.alone_equal.
void check_alone(const std::vector<Backend*>& backends, int bi, const DispatchOptions& dopt, const Graph& g,
                 const std::vector<Tensor*>& weights, const Tensor& got, int64_t T, Op op, OpCheck& r) {
    const bool experts = op == Op::MOE_EXPERTS || op == Op::MOE_EXPERTS_GLU;
    const Node& node = g.nodes().back();
    const int64_t n_out = got.n_elements() / T;  // a token's outputs
    // Row tk of a per-token operand as a one-token input of g1.
    auto row_of = [](Graph& g1, const Tensor& src, int64_t tk, const char* name) {
        Tensor* t = g1.new_input(src.type, src.ne[0], 1, 1, 1, name);
        std::memcpy(t->data, static_cast<const uint8_t*>(src.data) + tk * src.nb[1], row_bytes(src.type, src.ne[0]));
        return t;
    };
    // Token tk of a [ne0, ne1, T] operand (contiguous) as a one-token input of g1.
    auto token_of = [](Graph& g1, const Tensor& src, int64_t tk, const char* name) {
        Tensor* t = g1.new_input(src.type, src.ne[0], src.ne[1], 1, 1, name);
        std::memcpy(t->data, static_cast<const uint8_t*>(src.data) + tk * src.nb[2], t->nbytes());
        return t;
    };
    for (const int64_t tk : {int64_t(0), T - 1}) {
        Graph g1;
        if (op == Op::ATTENTION) {
            // The token alone against the caches as the batch left them (its own K/V row stored
            // again, the same bytes): what a one-token step of the same sequence computes.
            auto scalar_of = [&](int arg, const char* name) {
                Tensor* t = g1.new_input(DType::I32, 1, 1, 1, 1, name);
                t->ptr<int32_t>()[0] = node.src[arg]->ptr<int32_t>()[tk];
                return t;
            };
            Graph::AttnInputs ai;
            ai.k_cache = node.src[AttnArg::K_CACHE];
            ai.v_cache = node.src[AttnArg::V_CACHE];
            ai.pos = scalar_of(AttnArg::POS, "pos");
            ai.seq = scalar_of(AttnArg::SEQ, "seq");
            ai.cells = scalar_of(AttnArg::CELLS, "cells");
            const Tensor& pg = *node.src[AttnArg::PAGES];
            ai.pages = g1.new_input(DType::I32, pg.ne[0], pg.ne[1], 1, 1, "pages");
            std::memcpy(ai.pages->data, pg.data, ai.pages->nbytes());
            g1.set_output(g1.attention(token_of(g1, *node.src[AttnArg::Q], tk, "q"),
                                       token_of(g1, *node.src[AttnArg::K], tk, "k"),
                                       token_of(g1, *node.src[AttnArg::V], tk, "v"), ai, node.p<AttnParams>()));
        } else if (!experts) {
            g1.set_output(g1.matmul(weights[0], row_of(g1, *node.src[MatmulArg::X], tk, "x")));
        } else {
            Tensor* x1 = row_of(g1, *node.src[MoeExpertsArg::X], tk, "x");
            Tensor* ids1 = row_of(g1, *node.src[MoeExpertsArg::IDS], tk, "ids");
            Tensor* wt1 = row_of(g1, *node.src[MoeExpertsArg::WEIGHTS], tk, "weights");
            g1.set_output(op == Op::MOE_EXPERTS
                              ? g1.moe_experts(x1, weights[0], weights[1], weights[2], ids1, wt1)
                              : g1.moe_experts_glu(x1, weights[0], weights[1], weights[2], ids1, wt1,
                                                   node.p<GluParams>()));
        }
        Dispatcher d1(backends, [bi](const Tensor&, const Node&) { return bi; }, dopt);
        auto plan1 = d1.compile(g1);
        const Tensor& one = d1.run(*plan1);
        ++r.alone_checked;
        r.alone_equal += std::memcmp(one.data, got.ptr<float>() + tk * n_out, size_t(n_out) * 4) == 0;
    }
}

}  // namespace

OpCheck check_op(Backend& b, const OpSpec& s, int reps, unsigned seed, bool check) {
    OpCheck r;
    r.label = s.label();
    r.tolerance = tolerance_for(s);
    std::mt19937 rng(seed);
    Pool pool;
    Graph g;
    auto input = [&](DType t, int64_t a, int64_t b2, int64_t c, const char* name, float sd = 1.0f) {
        Tensor* x = g.new_input(t, a, b2, c, 1, name);
        if (t != DType::I32) fill(*x, rng, sd);
        return x;
    };
    auto weight = [&](DType t, int64_t a, int64_t b2, int64_t c, const char* name, float sd = 0.05f) {
        Tensor* w = pool.make(t, a, b2, c, TensorRole::WEIGHT, name);
        fill(*w, rng, sd);
        return w;
    };
    std::vector<Tensor*> weights, states;
    std::vector<Tensor*> state_host;  // host mirrors (initial contents), parallel to states
    auto state = [&](DType t, int64_t a, int64_t b2, const char* name) {
        Tensor* h = pool.make(t, a, b2, 1, TensorRole::STATE, name);
        fill(*h, rng, 1.0f);
        Tensor* d = pool.make(t, a, b2, 1, TensorRole::STATE, name);  // memory replaced below
        states.push_back(d);
        state_host.push_back(h);
        return d;
    };
    const int64_t K = s.K, N = s.N, T = s.T;
    // Expert ids [n_used, T], distinct within a token: id(t, i) = (t * mul + i * step) % n_expert.
    auto expert_ids = [&](int mul, int step) {
        Tensor* ids = input(DType::I32, s.n_used, T, 1, "ids");
        int32_t* id = ids->ptr<int32_t>();
        for (int64_t t = 0; t < T; ++t)
            for (int i = 0; i < s.n_used; ++i) id[t * s.n_used + i] = (int32_t(t) * mul + i * step) % s.n_expert;
        return ids;
    };
    // An F32 input [a, b2, c] as a view with padded rows (stride a + pad values) of x * 1 (exact)
    // computed on the backend, so that the kernel reads a strided operand as in the models;
    // the reference reads the same view of the host input.
    std::deque<Tensor> host_views;
    std::vector<std::pair<Tensor*, Tensor*>> view_for_ref;
    auto f32_input = [&](int64_t a, int64_t b2, int64_t c, const char* name, float sd = 1.0f) {
        if (!s.strided) return input(DType::F32, a, b2, c, name, sd);
        const int64_t pad = 8, row = a + pad;
        Tensor* full = input(DType::F32, row, b2, c, name, sd);
        const size_t offset = 4 * sizeof(float);  // the view starts inside the row, as a model's slices do
        Tensor* v = g.view(g.scale(full, 1.0f), a, b2, c, size_t(row) * 4, size_t(row) * 4 * size_t(b2), offset);
        Tensor hv = *v;
        hv.view_src = nullptr;
        hv.view_offs = 0;
        hv.role = TensorRole::INPUT;
        hv.data = static_cast<uint8_t*>(full->data) + offset;
        host_views.push_back(hv);
        view_for_ref.emplace_back(v, &host_views.back());
        return v;
    };
    Tensor* out = nullptr;
    switch (s.op) {
        case Op::MATMUL: {
            Tensor* w = weight(s.type, K, N, 1, "w");
            weights.push_back(w);
            out = g.matmul(w, input(DType::F32, K, T, 1, "x"));
            r.bytes = double(w->nbytes()) + 4.0 * (K + N) * T;
            r.flops = 2.0 * K * N * T;
            break;
        }
        case Op::GET_ROWS: {
            Tensor* w = weight(s.type, K, N, 1, "table");
            weights.push_back(w);
            Tensor* ids = input(DType::I32, T, 1, 1, "ids");
            for (int64_t t = 0; t < T; ++t) ids->ptr<int32_t>()[t] = int32_t(rng() % N);
            out = g.get_rows(w, ids);
            r.bytes = double(T) * row_bytes(s.type, K) + 4.0 * K * T;
            break;
        }
        case Op::RMS_NORM: {
            Tensor* w = weight(DType::F32, K, 1, 1, "norm", 1.0f);
            weights.push_back(w);
            out = g.rms_norm(input(DType::F32, K, T, 1, "x"), w, 1e-6f);
            r.bytes = 8.0 * K * T;
            r.flops = 3.0 * K * T;
            break;
        }
        case Op::ADD: case Op::MUL: case Op::SWIGLU: case Op::GEGLU: {
            Tensor* a = input(DType::F32, K, T, 1, "a");
            Tensor* c = input(DType::F32, K, T, 1, "b");
            out = s.op == Op::ADD ? g.add(a, c) : s.op == Op::MUL ? g.mul(a, c) : s.op == Op::SWIGLU ? g.swiglu(a, c)
                                                                                                    : g.geglu(a, c);
            r.bytes = 12.0 * K * T;
            r.flops = double(K) * T;
            break;
        }
        case Op::SCALE: case Op::SOFTCAP: {
            Tensor* a = input(DType::F32, K, T, 1, "a", s.op == Op::SOFTCAP ? 20.0f : 1.0f);
            out = s.op == Op::SCALE ? g.scale(a, 0.7f) : g.softcap(a, 15.0f);
            r.bytes = 8.0 * K * T;
            r.flops = double(K) * T;
            break;
        }
        case Op::ARGMAX: {
            // Values on a coarse grid, so that rows hold equal maxima (the first must win).
            Tensor* a = input(DType::F32, K, T, 1, "logits", 4.0f);
            float* v = a->ptr<float>();
            for (int64_t i = 0; i < K * T; ++i) v[i] = std::round(v[i] * 2.0f) / 2.0f;
            out = g.argmax(a);
            r.bytes = 4.0 * K * T;
            break;
        }
        case Op::ROPE: {
            Tensor* x = f32_input(s.head_dim, s.n_head, T, "x");
            Tensor* pos = input(DType::I32, T, 1, 1, "pos");
            for (int64_t t = 0; t < T; ++t) pos->ptr<int32_t>()[t] = int32_t(s.n_past + t);
            RopeParams rp;
            rp.type = s.neox ? RopeType::NEOX : RopeType::NORMAL;
            rp.n_dims = s.head_dim;
            rp.freq_base = 10000.0f;
            out = g.rope(x, pos, rp);
            r.bytes = 8.0 * x->n_elements();
            r.flops = 6.0 * x->n_elements();
            break;
        }
        case Op::ROPE_FREQS: {
            Tensor* x = f32_input(s.head_dim, s.n_head, T, "x");
            Tensor* pos = input(DType::I32, T, 1, 1, "pos");
            for (int64_t t = 0; t < T; ++t) pos->ptr<int32_t>()[t] = int32_t(s.n_past + t);
            Tensor* ff = weight(DType::F32, s.head_dim / 2, 1, 1, "freqs");
            weights.push_back(ff);
            // Some pairs as given, some slowed down, the last quarter not rotated (1e30).
            std::uniform_real_distribution<float> u(1.0f, 4.0f);
            for (int64_t i = 0; i < ff->ne[0]; ++i)
                ff->ptr<float>()[i] = i < ff->ne[0] / 4 ? 1.0f : i < 3 * ff->ne[0] / 4 ? u(rng) : 1e30f;
            RopeParams rp;
            rp.type = s.neox ? RopeType::NEOX : RopeType::NORMAL;
            rp.n_dims = s.head_dim;
            rp.freq_base = 10000.0f;
            out = g.rope_freqs(x, pos, ff, rp);
            r.bytes = 8.0 * x->n_elements();
            r.flops = 6.0 * x->n_elements();
            break;
        }
        case Op::UNARY: {
            out = g.unary(f32_input(K, s.strided ? 2 : 1, T, "x", 4.0f), static_cast<UnaryKind>(s.kind));
            r.bytes = 8.0 * double(out->n_elements());
            r.flops = 4.0 * double(out->n_elements());
            break;
        }
        case Op::DELTA_NET: {
            // Two sequences with interleaved tokens, each continuing from a random state; q and
            // k of about unit length, decays in (0.37, 1), beta in (0, 1), as in real models.
            const int64_t dk = s.head_dim, nv = s.n_head, nk = s.n_kv_head;
            const int n_slots = T > 1 ? 2 : 1;
            Tensor* q = input(DType::F32, dk, nk, T, "q", 1.0f / std::sqrt(float(dk)));
            Tensor* k = input(DType::F32, dk, nk, T, "k", 1.0f / std::sqrt(float(dk)));
            Tensor* v = input(DType::F32, dk, nv, T, "v");
            Tensor* gd = input(DType::F32, s.kind == 1 ? dk : 1, nv, T, "g");
            Tensor* beta = input(DType::F32, 1, nv, T, "beta");
            std::uniform_real_distribution<float> ud(-1.0f, 0.0f), ub(0.0f, 1.0f);
            for (int64_t i = 0; i < gd->n_elements(); ++i) gd->ptr<float>()[i] = ud(rng);
            for (int64_t i = 0; i < beta->n_elements(); ++i) beta->ptr<float>()[i] = ub(rng);
            Tensor* st = state(DType::F32, nv * dk * dk, n_slots, "delta_state");
            Tensor* seq = input(DType::I32, T, 1, 1, "seq");
            for (int64_t t = 0; t < T; ++t) seq->ptr<int32_t>()[t] = int32_t(t % n_slots);
            out = g.delta_net(q, k, v, gd, beta, st, seq, 1.0f / std::sqrt(float(dk)));
            r.bytes = 4.0 * (q->n_elements() * 2 + v->n_elements() * 2) + 8.0 * st->n_elements();
            r.flops = 8.0 * dk * dk * nv * T;
            break;
        }
        case Op::MUL_BCAST: {
            // Per-head factors: [K, n_head, T] times [1, n_head, 1].
            Tensor* a = f32_input(K, s.n_head, T, "a");
            out = g.mul_bcast(a, input(DType::F32, 1, s.n_head, 1, "b"));
            r.bytes = 8.0 * a->n_elements();
            r.flops = double(a->n_elements());
            break;
        }
        case Op::CONCAT: {
            // kind = the dim: [K, 4, T] + [K/4, 4, T] along 0, [K, 2, T] + [K, 1, T] along 1.
            Tensor* a = input(DType::F32, K, s.kind == 0 ? 4 : 2, T, "a");
            Tensor* b = f32_input(s.kind == 0 ? K / 4 : K, s.kind == 0 ? 4 : 1, T, "b");
            out = g.concat(a, b, s.kind);
            r.bytes = 8.0 * (a->n_elements() + b->n_elements());
            break;
        }
        case Op::MATMUL_HEADS: {
            Tensor* w = weight(s.type, K, N, s.n_head, "w_heads");
            weights.push_back(w);
            out = g.matmul_heads(w, f32_input(K, s.n_head, T, "x"));
            r.bytes = double(w->nbytes()) + 4.0 * (K + N) * s.n_head * T;
            r.flops = 2.0 * K * N * s.n_head * T;
            break;
        }
        case Op::RES_MIX: {
            Tensor* w = weight(DType::F32, K, 1, 1, "score", 0.3f);
            weights.push_back(w);
            out = g.res_mix(input(DType::F32, K, s.kind, T, "stack"), input(DType::F32, K, T, 1, "cur"), w, 1e-5f);
            r.bytes = 4.0 * K * T * (s.kind + 2);
            break;
        }
        case Op::SITU: {
            out = g.situ(f32_input(K, T, 1, "gate", 3.0f), f32_input(K, T, 1, "up", 3.0f), 2.0f, 3.0f);
            r.bytes = 12.0 * K * T;
            break;
        }
        case Op::MOE_GATHER_WEIGHTS: {
            Tensor* probs = input(DType::F32, s.n_expert, T, 1, "probs");
            for (int64_t i = 0; i < probs->n_elements(); ++i) probs->ptr<float>()[i] = float(rng() % 1000) / 1000.0f;
            Tensor* ids = expert_ids(1, 3);
            out = g.moe_gather_weights(probs, ids, true);
            r.bytes = 4.0 * s.n_expert * T;
            break;
        }
        case Op::MOE_EXPERTS_GLU: {
            Tensor* gw = weight(s.type, K, N, s.n_expert, "gate_exps");
            Tensor* uw = weight(s.type, K, N, s.n_expert, "up_exps");
            Tensor* dw = weight(s.down_type.value_or(s.type), N, K, s.n_expert, "down_exps");
            weights = {gw, uw, dw};
            Tensor* ids = expert_ids(5, 1);
            Tensor* wt = input(DType::F32, s.n_used, T, 1, "weights", 0.3f);
            GluParams gp;
            gp.kind = s.kind == 1 ? GluKind::SWIGLU : GluKind::SITU;
            gp.beta = 2.0f;
            gp.linear_beta = 3.0f;
            out = g.moe_experts_glu(input(DType::F32, K, T, 1, "x"), gw, uw, dw, ids, wt, gp);
            r.bytes = std::min<double>(s.n_expert, double(s.n_used) * T) *
                      (2.0 * row_bytes(s.type, K) * N + double(row_bytes(s.down_type.value_or(s.type), N)) * K);
            r.flops = 6.0 * K * N * s.n_used * T;
            break;
        }
        case Op::ATTENTION: {
            const int hd = s.head_dim, nh = s.n_head, nkv = s.n_kv_head, bs = 16;
            const int64_t n_cells = (s.n_past + T + bs - 1) / bs * bs;
            Tensor* q = input(DType::F32, hd, nh, T, "q");
            Tensor* k = input(DType::F32, hd, nkv, T, "k");
            Tensor* v = input(DType::F32, hd, nkv, T, "v");
            Graph::AttnInputs ai;
            ai.k_cache = state(s.k_cache, int64_t(hd) * nkv, n_cells, "k_pages");
            ai.v_cache = state(s.v_cache, int64_t(hd) * nkv, n_cells, "v_pages");
            ai.pos = input(DType::I32, T, 1, 1, "pos");
            ai.seq = input(DType::I32, T, 1, 1, "seq");
            ai.cells = input(DType::I32, T, 1, 1, "cells");
            ai.pages = input(DType::I32, n_cells / bs, 1, 1, "pages");
            for (int64_t t = 0; t < T; ++t) {
                ai.pos->ptr<int32_t>()[t] = int32_t(s.n_past + t);
                ai.seq->ptr<int32_t>()[t] = 0;
                ai.cells->ptr<int32_t>()[t] = int32_t(s.n_past + t);
            }
            for (int64_t p = 0; p < n_cells / bs; ++p) ai.pages->ptr<int32_t>()[p] = int32_t(p);
            AttnParams ap;
            ap.scale = 1.0f / std::sqrt(float(hd));
            ap.window = s.window;
            ap.softcap = s.softcap;
            ap.block_size = bs;
            out = g.attention(q, k, v, ai, ap);
            const double ctx = double(s.n_past + T);
            r.bytes = 4.0 * (q->n_elements() * 2 + k->n_elements() + v->n_elements()) +
                      ctx * double(row_bytes(s.k_cache, int64_t(hd) * nkv) + row_bytes(s.v_cache, int64_t(hd) * nkv));
            // q.k and p.V over the cells each token sees (causal, and the window).
            double seen = 0;
            for (int64_t t = 0; t < T; ++t) {
                const double p = double(s.n_past + t);
                seen += s.window > 0 ? std::min<double>(p + 1, s.window) : p + 1;
            }
            r.flops = 4.0 * hd * nh * seen;
            break;
        }
        case Op::MOE_TOPK: case Op::MOE_WEIGHTS: {
            Tensor* l = input(DType::F32, s.n_expert, T, 1, "logits");
            if (s.op == Op::MOE_TOPK) {
                out = g.moe_topk(l, s.n_used);
            } else {
                out = g.moe_weights(l, expert_ids(1, 3), true);
            }
            r.bytes = 4.0 * s.n_expert * T;
            break;
        }
        case Op::MOE_EXPERTS: {
            Tensor* gw = weight(s.type, K, N, s.n_expert, "gate_exps");
            Tensor* uw = weight(s.type, K, N, s.n_expert, "up_exps");
            Tensor* dw = weight(s.down_type.value_or(s.type), N, K, s.n_expert, "down_exps");
            weights = {gw, uw, dw};
            Tensor* ids = expert_ids(5, 1);
            Tensor* wt = input(DType::F32, s.n_used, T, 1, "weights", 0.3f);
            out = g.moe_experts(input(DType::F32, K, T, 1, "x"), gw, uw, dw, ids, wt);
            const double used = std::min<double>(s.n_expert, double(s.n_used) * T);
            r.bytes = used * (2.0 * row_bytes(s.type, K) * N + double(row_bytes(s.down_type.value_or(s.type), N)) * K);
            r.flops = 6.0 * K * N * s.n_used * T;
            break;
        }
        case Op::SHORTCONV: {
            const int L = 3;
            Tensor* w = weight(DType::F32, L, K, 1, "kernel", 0.5f);
            weights.push_back(w);
            Tensor* st = state(DType::F32, (L - 1) * K, 1, "conv_state");
            Tensor* seq = input(DType::I32, T, 1, 1, "seq");
            for (int64_t t = 0; t < T; ++t) seq->ptr<int32_t>()[t] = 0;
            out = g.shortconv(input(DType::F32, K, T, 1, "x"), w, st, seq);
            r.bytes = 8.0 * K * T;
            r.flops = 2.0 * L * K * T;
            break;
        }
        default: fail("check_op: no harness for ", op_name(s.op));
    }
    g.set_output(out);

    cpu::CpuBackend& cpu = cpu_backend(0);
    const bool on_cpu = &b == static_cast<Backend*>(&cpu);
    const int bi = on_cpu ? 0 : 1;
    std::vector<Backend*> backends{&cpu};
    if (!on_cpu) backends.push_back(&b);
    if (!b.supports(g.nodes().back())) {
        r.supported = false;
        return r;
    }
    for (Tensor* w : weights) {
        cpu.prepare_weight(*w);
        if (!on_cpu) b.prepare_weight(*w);
    }
    std::vector<void*> state_mem;
    for (size_t i = 0; i < states.size(); ++i) {
        states[i]->data = b.alloc(states[i]->nbytes(), MemoryKind::STATE, states[i]->name);
        state_mem.push_back(states[i]->data);
        b.copy(*state_host[i], *states[i]);
    }
    b.synchronize();
    // The reference reads the same operands, state as it was before the run.
    Node ref = g.nodes().back();
    for (int i = 0; i < kMaxOperands; ++i) {
        for (size_t k = 0; k < states.size(); ++k)
            if (ref.src[i] == states[k]) ref.src[i] = state_host[k];
        for (auto& [v, hv] : view_for_ref)
            if (ref.src[i] == v) ref.src[i] = hv;
    }
    std::vector<double> want;
    r.checked = check;
    if (check) reference_op(ref, want);

    auto cleanup = [&] {
        for (Tensor* w : weights) {
            cpu.release_weight(*w);
            if (!on_cpu) b.release_weight(*w);
        }
        for (void* m : state_mem) b.free(m);
    };
    try {
        DispatchOptions dopt;
        dopt.default_device = bi;
        Dispatcher d(backends, [bi](const Tensor&, const Node&) { return bi; }, dopt);
        auto plan = d.compile(g);
        const Tensor& got = d.run(*plan);
        if (check) {
            double max_ref = 0, max_diff = 0;
            const int64_t n = got.n_elements();
            if (static_cast<int64_t>(want.size()) != n) fail("check_op: reference has ", want.size(), " values, output ", n);
            for (int64_t i = 0; i < n; ++i) {
                const double o = got.type == DType::I32 ? double(got.ptr<int32_t>()[i]) : double(got.ptr<float>()[i]);
                max_ref = std::max(max_ref, std::fabs(want[i]));
                max_diff = std::max(max_diff, std::isnan(o) ? INFINITY : std::fabs(o - want[i]));
            }
            r.max_err = got.type == DType::I32 ? max_diff : max_diff / std::max(max_ref, 1e-30);
            r.ok = r.max_err <= r.tolerance;
            const bool experts = s.op == Op::MOE_EXPERTS || s.op == Op::MOE_EXPERTS_GLU;
            if ((s.op == Op::MATMUL || s.op == Op::ATTENTION || experts) && T > 1) {
                check_alone(backends, bi, dopt, g, weights, got, T, s.op, r);
                r.ok = r.ok && r.alone_equal == r.alone_checked;
            }
        }
        Timer timer(s.op);
        for (int i = 0; i < reps; ++i) d.run(*plan, &timer);
        std::sort(timer.times.begin(), timer.times.end());
        if (!timer.times.empty()) r.seconds = timer.times[timer.times.size() / 2];
    } catch (...) {
        cleanup();
        throw;
    }
    cleanup();
    return r;
}

// Dense shapes (llama3, qwen3) carry the newer blocks at sizes derived from their own; the
// newer families' shapes are roughly their public configurations (for timing: the tiny
// goldens check the exact ones): qwen35 as Qwen3-Next-80B-A3B (gated delta net 16 key /
// 32 value heads of 128, MoE 512 experts, 10 used), kimi-k3 as Kimi-Linear-48B-A3B (KDA
// heads of 128 with per-channel decay, MLA rank 512, MoE 256/8), gemma4 as a Gemma-3-4B
// layer (heads of 256, RoPE frequency factors).
const std::vector<LayerShape>& layer_shapes() {
    static const std::vector<LayerShape> v = {
        //  name         embd  head kv  hd   ff     exp used ffe   lin k/v/hd   mla nope rope rank v  saved
        {"llama3-1b",    2048, 32, 8, 64,  8192,  8,  2,  2048, 16, 32, 64,  128, 64, 512, 128, 4},
        {"qwen3-0.6b",   1024, 16, 8, 128, 3072,  8,  2,  768,  8,  16, 128, 128, 64, 512, 128, 4},
        {"llama3-8b",    4096, 32, 8, 128, 14336, 8,  2,  3584, 16, 32, 128, 128, 64, 512, 128, 4},
        {"qwen35",       2048, 16, 2, 256, 5120,  512, 10, 512, 16, 32, 128, 128, 64, 512, 128, 4},
        {"kimi-k3",      2304, 32, 32, 128, 9216, 256, 8, 1024, 32, 32, 128, 128, 64, 512, 128, 8},
        {"gemma4",       2560, 8, 4, 256,  10240, 8,  2,  2560, 16, 32, 128, 128, 64, 512, 128, 4},
    };
    return v;
}

const LayerShape* find_layer_shape(const std::string& name) {
    for (const LayerShape& d : layer_shapes())
        if (name == d.name) return &d;
    return nullptr;
}

std::vector<OpSpec> layer_op_specs(const LayerShape& d, const std::vector<DType>& types, int64_t T, int n_past) {
    std::vector<OpSpec> v;
    auto add = [&](Op op, int64_t K, int64_t N = 0, DType t = DType::F32) -> OpSpec& {
        OpSpec s;
        s.op = op;
        s.K = K;
        s.N = N;
        s.T = T;
        s.type = t;
        s.head_dim = d.head_dim;
        s.n_head = d.n_head;
        s.n_kv_head = d.n_kv_head;
        s.n_past = n_past;
        s.n_expert = d.n_expert;
        s.n_used = d.n_used;
        v.push_back(s);
        return v.back();
    };
    auto fits = [](DType t, int64_t K) { return K % dtype_info(t).block_size == 0; };
    // The expert products read only the selected experts: 16 stacked ones stand for all (the
    // harness fills every expert with random quantized rows, which is slow at 256 or 512).
    auto experts = [&](Op op, DType t) -> OpSpec& {
        OpSpec& s = add(op, d.n_embd, d.n_ff_exp, t);
        s.n_expert = std::min(d.n_expert, 16);
        s.n_used = std::min(d.n_used, s.n_expert);
        return s;
    };
    for (DType t : types) {
        add(Op::GET_ROWS, d.n_embd, 4096, t);
        add(Op::MATMUL, d.n_embd, int64_t(d.n_head) * d.head_dim, t);
        add(Op::MATMUL, d.n_embd, int64_t(d.n_kv_head) * d.head_dim, t);
        add(Op::MATMUL, d.n_embd, d.n_ff, t);
        add(Op::MATMUL, d.n_ff, d.n_embd, t);
        experts(Op::MOE_EXPERTS, t);
        // MLA's per-head matrices: k_b maps the nope part to the latent rank (rows of 128:
        // block-32 types only), v_b the latent back to the value head.
        if (fits(t, d.mla_nope)) add(Op::MATMUL_HEADS, d.mla_nope, d.mla_rank, t).n_head = d.n_head;
        add(Op::MATMUL_HEADS, d.mla_rank, d.mla_v, t).n_head = d.n_head;
        experts(Op::MOE_EXPERTS_GLU, t);  // situ experts (kimi-k3)
    }
    // Float rows of a length that is no multiple of 32 (stories260K's ffn_down).
    for (DType t : {DType::F32, DType::F16}) add(Op::MATMUL, 172, 64, t);
    // qwen3moe Q4_K_M: Q4_K gate/up experts with Q6_K down experts.
    experts(Op::MOE_EXPERTS, DType::Q4_K).down_type = DType::Q6_K;
    experts(Op::MOE_EXPERTS_GLU, DType::Q4_K).down_type = DType::Q6_K;
    experts(Op::MOE_EXPERTS_GLU, DType::Q8_0).kind = 1;  // swiglu
    add(Op::RMS_NORM, d.n_embd);
    add(Op::ROPE, 0);
    add(Op::ROPE, 0).neox = true;
    add(Op::ROPE, 0).strided = true;
    add(Op::ROPE_FREQS, 0).neox = true;  // gemma4's global layers
    add(Op::ROPE_FREQS, 0).strided = true;
    add(Op::ATTENTION, 0);
    // Quantized KV caches (--cache-type-k / -v), read directly by the kernels.
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::BF16}) {
        OpSpec& a = add(Op::ATTENTION, 0);
        a.k_cache = a.v_cache = t;
    }
    add(Op::ADD, d.n_embd);
    add(Op::MUL, d.n_embd);
    add(Op::SWIGLU, d.n_ff);
    add(Op::GEGLU, d.n_ff);
    add(Op::SITU, d.n_ff);
    add(Op::SITU, d.n_ff).strided = true;  // gate and up as halves of one product (kimi-k3)
    add(Op::SOFTCAP, d.n_embd);
    add(Op::SCALE, d.n_embd);
    add(Op::ARGMAX, 128256);  // greedy picks over a llama3-sized vocabulary
    add(Op::MOE_TOPK, 0);
    add(Op::MOE_WEIGHTS, 0);
    add(Op::MOE_GATHER_WEIGHTS, 0);
    add(Op::SHORTCONV, d.n_embd);
    // Linear attention: the activations around the delta rule, then the rule itself with one
    // decay per head (qwen35) and one per key channel (kimi-k3).
    const int64_t lin = int64_t(d.lin_v_heads) * d.lin_head_dim;
    for (UnaryKind k : {UnaryKind::SILU, UnaryKind::SIGMOID, UnaryKind::SOFTPLUS}) add(Op::UNARY, lin).kind = int(k);
    add(Op::UNARY, lin).strided = true;  // silu of q/k/v slices of the convolution's output (qwen35)
    for (int per_channel : {0, 1}) {
        OpSpec& s = add(Op::DELTA_NET, 0);
        s.kind = per_channel;
        s.head_dim = d.lin_head_dim;
        s.n_head = d.lin_v_heads;
        s.n_kv_head = per_channel ? d.lin_v_heads : d.lin_k_heads;
    }
    add(Op::MUL_BCAST, d.lin_head_dim).n_head = d.lin_v_heads;  // per-head decay factors (kimi-k3)
    add(Op::MUL_BCAST, d.lin_head_dim).strided = true;
    // MLA: q = [nope-absorbed | rope part] per head, k = [latent | rope part] (kimi-k3).
    for (int dim : {0, 1}) add(Op::CONCAT, d.mla_rank).kind = dim;
    OpSpec& cs = add(Op::CONCAT, d.mla_rank);
    cs.strided = true;
    add(Op::MATMUL_HEADS, d.mla_rank, d.mla_v, DType::F16).strided = true;
    add(Op::RES_MIX, d.n_embd).kind = d.n_saved;
    return v;
}

}  // namespace glia
