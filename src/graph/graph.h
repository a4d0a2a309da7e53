// The computation graph: one op enum, nodes over tensors with named operands and per-op
// parameters, shape checks at build time. A family's forward pass (src/model/) builds a
// Graph; the dispatcher (src/dispatch/) places and runs it on the backends.
//
// Everything an op reads or writes is an operand, state included (a layer's K/V pages,
// a recurrent layer's state): nothing is hidden behind pointers, so the dispatcher sees
// where every operand lives. Operands an op writes in place are marked (Node::writes).
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "core/tensor.h"

namespace glia {

class Communicator;  // parallel/communicator.h

enum class Op : uint8_t {
    NONE,         // a leaf: weight, input or state
    GET_ROWS,     // out[:, t] = dequant(table row ids[t])
    RMS_NORM,     // out = x / sqrt(mean(x^2) + eps) * w (w optional)
    ADD,          // out = a + b (b broadcast over rows when it has one row)
    MUL,          // out = a * b (same broadcast)
    SCALE,        // out = a * s
    MATMUL,       // out[N, T] = W[K, N] . x[K, T]
    ROPE,         // rotate pairs of x [head_dim, n_head, T] by positions
    ATTENTION,    // store k/v into the layer's pages, attend q over them
    SWIGLU,       // out = silu(gate) * up
    GEGLU,        // out = gelu_tanh(gate) * up
    SOFTCAP,      // out = cap * tanh(x / cap)
    MOE_TOPK,     // router logits [n_exp, T] -> expert ids I32 [n_used, T] (softmax order, ties to the lower id)
    MOE_WEIGHTS,  // router logits + ids -> their softmax probabilities [n_used, T] (optionally renormalised)
    MOE_EXPERTS,  // sum over the selected experts of weight * SwiGLU expert(x)
    SHORTCONV,    // causal depthwise conv over time, state carried per sequence
    COPY,         // out = src on another device (inserted by the dispatcher)
    ROPE_FREQS,   // ROPE with a per-pair frequency divisor (theta_i / freqs[i]; 1e30: not rotated)
    UNARY,        // out = f(x) element-wise (silu, sigmoid, softplus); any strides in, contiguous out
    DELTA_NET,    // gated delta rule over per-head state matrices, state carried per sequence
    MUL_BCAST,    // out = a * b, b broadcast along every dim where it has one element
    CONCAT,       // a and b joined along one dim (any strides in, contiguous out)
    MATMUL_HEADS, // out[N, h, T] = W[K, N, h] . x[K, h, T]: one matrix per head
    RES_MIX,      // softmax-weighted mix of saved residual streams and the current one
    SITU,         // out = b tanh(g / b) sigmoid(g) * c tanh(u / c)
    MOE_GATHER_WEIGHTS,  // the selected experts' given probabilities [n_used, T], optionally renormalised
    MOE_EXPERTS_GLU,     // MOE_EXPERTS with a chosen gated activation (SWIGLU, GEGLU, SITU)
    ARGMAX,       // I32 [rows]: index of each row's largest value (the first of equals; NaN never wins)
    ALL_REDUCE,   // out = the sum of x over the ranks of a tensor-parallel group (rank order)
    ALL_GATHER,   // out [n * world, T] = the ranks' x [n, T] stacked by rank, per column
    COUNT
};
const char* op_name(Op op);        // "MATMUL"
const char* op_cli_name(Op op);    // "matmul": the name GLIA_CPU_OPS / --cpu-ops use
bool op_from_cli_name(const std::string& s, Op& op);

enum class RopeType : uint8_t { NORMAL = 0, NEOX = 2 };

// Per-op parameters.
struct NormParams { float eps = 1e-5f; };
struct ScaleParams { float s = 1.0f; };
struct SoftcapParams { float cap = 0.0f; };
struct RopeParams {
    RopeType type = RopeType::NORMAL;
    int n_dims = 0;          // rotated dims per head (the rest pass through)
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
};
struct AttnParams {
    float scale = 1.0f;      // applied to q.k
    float softcap = 0.0f;    // 0: none; else cap * tanh(s / cap)
    int window = 0;          // sliding window (0: full causal)
    int block_size = 16;     // cells per page
};
struct MoeParams {
    int n_used = 0;
    bool norm_weights = true;
};
enum class UnaryKind : uint8_t { SILU, SIGMOID, SOFTPLUS };
struct UnaryParams { UnaryKind kind = UnaryKind::SILU; };
struct DeltaNetParams { float q_scale = 1.0f; };
struct ConcatParams { int dim = 0; };
enum class GluKind : uint8_t { SWIGLU, GEGLU, SITU };
struct GluParams {
    GluKind kind = GluKind::SWIGLU;
    float beta = 1.0f, linear_beta = 1.0f;  // SITU: b, c
    int n_used = 0;                          // MOE_EXPERTS_GLU: experts per token
};
// ALL_REDUCE / ALL_GATHER: the group's communicator for this rank (it outlives the graph).
struct CollectiveParams { Communicator* comm = nullptr; };
using OpParams = std::variant<std::monostate, NormParams, ScaleParams, SoftcapParams, RopeParams, AttnParams, MoeParams,
                              UnaryParams, DeltaNetParams, ConcatParams, GluParams, CollectiveParams>;

// Operand names, per op (indices into Node::src).
struct MatmulArg { enum : int { W, X }; };
struct GetRowsArg { enum : int { TABLE, IDS }; };
struct NormArg { enum : int { X, W }; };
struct BinaryArg { enum : int { A, B }; };
struct GluArg { enum : int { GATE, UP }; };
struct RopeArg { enum : int { X, POS }; };
// K_CACHE / V_CACHE: the layer's pages, F16 [kv_dim, n_cells] (written: this batch's rows).
// POS, SEQ, CELLS: I32 per token (position, sequence slot, cache cell to write).
// PAGES: I32 [max_pages, n_slots], page ids of each slot (cell = page * block + pos % block).
struct AttnArg { enum : int { Q, K, V, K_CACHE, V_CACHE, POS, SEQ, CELLS, PAGES }; };
struct MoeTopkArg { enum : int { LOGITS }; };
struct MoeWeightsArg { enum : int { LOGITS, IDS }; };
struct MoeExpertsArg { enum : int { X, GATE, UP, DOWN, IDS, WEIGHTS }; };
// STATE: F32 [state_floats, n_slots] (written); SEQ: I32 slot per token.
struct ShortconvArg { enum : int { X, KERNEL, STATE, SEQ }; };
// FREQS: F32 [n_dims / 2] divisors of the pair angles.
struct RopeFreqsArg { enum : int { X, POS, FREQS }; };
// Q, K [dk, n_k_heads, T]; V [dv, n_v_heads, T] (value head h reads key head h % n_k_heads);
// G: log-decay, [1 or dk, n_v_heads, T] (one per head, or one per key channel); BETA [1, n_v_heads, T];
// STATE: F32 [n_v_heads * dk * dv, n_slots] (written), per head S[i][j] at (h * dk + i) * dv + j; SEQ as above.
struct DeltaNetArg { enum : int { Q, K, V, G, BETA, STATE, SEQ }; };
// STACK [E, n, T] saved streams, CUR [E, T], W [E] score weights (F32).
struct ResMixArg { enum : int { STACK, CUR, W }; };
struct MoeGatherArg { enum : int { PROBS, IDS }; };

inline constexpr int kMaxOperands = 9;

struct Node {
    Op op = Op::NONE;
    Tensor* out = nullptr;
    std::array<Tensor*, kMaxOperands> src{};
    uint16_t writes = 0;   // bit i: operand i is written in place (state)
    int layer = -1;        // the block the node belongs to (-1: embeddings / head)
    OpParams params;

    template <class P> const P& p() const { return std::get<P>(params); }
    bool writes_operand(int i) const { return (writes >> i) & 1u; }
    int n_src() const {
        int n = 0;
        for (int i = 0; i < kMaxOperands; ++i)
            if (src[i]) n = i + 1;
        return n;
    }
};

// Low-rank additions to weights (LoRA adapters, model/lora.h). While a map is set
// (Graph::set_low_rank), matmul(W, x) of a W listed in it adds, for each entry in order,
//   y += B (factor * (s * (A x)))
// with s the entry's per-row scale [1, rows]: `token_scales` for rows of the step's tokens,
// `out_scales` for rows kept for output (Graph::mark_output_rows). A row whose scale is 0
// gets an exact 0 added, so rows with and without an adapter share a batch.
struct LowRank {
    Tensor* a = nullptr;      // [K, r]
    Tensor* b = nullptr;      // [r, N]
    float factor = 1.0f;      // alpha / r (1: no scale op)
    Tensor* token_scales = nullptr;  // F32 [1, n_tokens]
    Tensor* out_scales = nullptr;    // F32 [1, n_out]
};
using LowRankMap = std::unordered_map<const Tensor*, std::vector<LowRank>>;

class Graph {
public:
    Graph() = default;
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;

    // A step input owned by the graph, in host memory allocated now (not zero-filled):
    // the caller fills it before each run.
    Tensor* new_input(DType type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1,
                      const std::string& name = "");
    // A view of `t` with a new contiguous shape (same element count).
    Tensor* reshape(Tensor* t, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1);
    // A strided view of `t`: shape ne0..ne2, strides nb1/nb2, starting `offset` bytes in.
    Tensor* view(Tensor* t, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset);

    // The layer that following nodes belong to (-1: embeddings / head).
    void set_layer(int il) { layer_ = il; }

    // Builders: each appends a node and returns its output.
    Tensor* get_rows(Tensor* table, Tensor* ids);
    Tensor* rms_norm(Tensor* x, Tensor* w, float eps);
    Tensor* add(Tensor* a, Tensor* b);
    Tensor* mul(Tensor* a, Tensor* b);
    Tensor* scale(Tensor* a, float s);
    Tensor* matmul(Tensor* w, Tensor* x);
    Tensor* rope(Tensor* x, Tensor* pos, const RopeParams& p);
    // q [hd, n_head, T], k [hd, n_kv, T], v [hd_v, n_kv, T] -> [hd_v * n_head, T].
    struct AttnInputs { Tensor *k_cache, *v_cache, *pos, *seq, *cells, *pages; };
    Tensor* attention(Tensor* q, Tensor* k, Tensor* v, const AttnInputs& in, const AttnParams& p);
    Tensor* swiglu(Tensor* gate, Tensor* up);
    Tensor* geglu(Tensor* gate, Tensor* up);
    Tensor* softcap(Tensor* x, float cap);
    Tensor* argmax(Tensor* x);  // x F32 [n, rows] with contiguous rows -> I32 [rows]
    Tensor* moe_topk(Tensor* logits, int n_used);
    Tensor* moe_weights(Tensor* logits, Tensor* ids, bool norm_weights);
    Tensor* moe_experts(Tensor* x, Tensor* gate_exps, Tensor* up_exps, Tensor* down_exps, Tensor* ids, Tensor* weights);
    // bx [C, T], kernel w [L, C] -> [C, T]; state [(L-1) * C, n_slots]; seq: I32 slot per token
    // (a sequence's tokens in order).
    Tensor* shortconv(Tensor* bx, Tensor* w, Tensor* state, Tensor* seq);
    // rope with per-pair frequency divisors freqs [n_dims / 2] (F32).
    Tensor* rope_freqs(Tensor* x, Tensor* pos, Tensor* freqs, const RopeParams& p);
    Tensor* unary(Tensor* x, UnaryKind kind);
    // Per value head, for each token of a sequence in order, with S [dk, dv] (S_0 = its state):
    //   S = diag(exp(g)) S;  S += k (beta (v - S^T k))^T;  out = S^T q * q_scale.
    Tensor* delta_net(Tensor* q, Tensor* k, Tensor* v, Tensor* g, Tensor* beta, Tensor* state, Tensor* seq,
                      float q_scale);
    Tensor* mul_bcast(Tensor* a, Tensor* b);
    Tensor* concat(Tensor* a, Tensor* b, int dim);
    // w [K, N, n_heads] (any weight type), x [K, n_heads, T] -> [N, n_heads, T].
    Tensor* matmul_heads(Tensor* w, Tensor* x);
    // Per token: scores s_j = sum(rmsnorm(c_j) * w) over the stack entries and cur,
    // p = softmax(s), out = sum_j p_j c_j + p_cur cur (raw vectors). stack may be null
    // (then out = cur, no node).
    Tensor* res_mix(Tensor* stack, Tensor* cur, Tensor* w, float eps);
    Tensor* situ(Tensor* gate, Tensor* up, float beta, float linear_beta);
    // probs [n_exp, T], ids [n_used, T] -> probs of the ids [n_used, T], divided by their sum
    // (at least 6.1e-5) when norm.
    Tensor* moe_gather_weights(Tensor* probs, Tensor* ids, bool norm);
    Tensor* moe_experts_glu(Tensor* x, Tensor* gate_exps, Tensor* up_exps, Tensor* down_exps, Tensor* ids,
                            Tensor* weights, const GluParams& act);

    // Tensor parallelism (x contiguous F32): the sum of x over the ranks of comm's group,
    // and the ranks' x [n, T] stacked by rank along dim 0 ([n * world, T]).
    Tensor* all_reduce(Tensor* x, Communicator* comm);
    Tensor* all_gather(Tensor* x, Communicator* comm);

    // LoRA: the weights whose products get low-rank additions (see LowRank); nullptr: none.
    // The map outlives the graph's building.
    void set_low_rank(const LowRankMap* m) { low_rank_ = m; }
    // Marks t as holding only the rows whose outputs are wanted (model/blocks.h
    // keep_output_rows); what is computed from it, views included, is marked too.
    Tensor* mark_output_rows(Tensor* t);

    // Name the last output (for debug dumps): "attn_norm", layer 0 -> "attn_norm-0".
    Tensor* name(Tensor* t, const std::string& base, int layer = -1);

    const std::vector<Node>& nodes() const { return nodes_; }
    Tensor* output() const { return output_; }
    void set_output(Tensor* t) { output_ = t; }
    // A tensor owned by the graph (the dispatcher's copies live here too).
    Tensor* make_tensor(Tensor t);

private:
    Tensor* add_node(Node n);
    Tensor* out_tensor(DType type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1);
    Node glu_node(Op op, Tensor* gate, Tensor* up);
    Tensor* alias(Tensor* t, Tensor v, size_t offset);
    Tensor* add_low_rank(Tensor* y, Tensor* x, const std::vector<LowRank>& deltas);
    std::deque<Tensor> tensors_;
    std::vector<std::unique_ptr<uint8_t[]>> buffers_;
    std::vector<Node> nodes_;
    Tensor* output_ = nullptr;
    int layer_ = -1;
    const LowRankMap* low_rank_ = nullptr;
    std::unordered_set<const Tensor*> out_rows_;  // tensors of output rows only
};

}  // namespace glia
