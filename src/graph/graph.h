// The computation graph: one op enum, nodes over tensors, shape checks at build time.
// A family's forward pass (src/model/) builds a Graph; a backend executes its nodes.
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/huge_buffer.h"
#include "core/tensor.h"

namespace glia {

class KVCache;         // runtime/kv_cache.h
class RecurrentState;  // runtime/recurrent_state.h

enum class Op : uint8_t {
    NONE,       // a leaf: weight or input
    GET_ROWS,   // out[:, t] = dequant(src0 row src1[t]) ; src1 I32 ids
    RMS_NORM,   // out = x / sqrt(mean(x^2) + eps) * w (w optional: src1)
    ADD,        // out = src0 + src1 (src1 broadcast over rows when it has one row)
    MUL,        // out = src0 * src1 (same broadcast)
    SCALE,      // out = src0 * f0
    MATMUL,     // out[N, T] = W[K, N] . x[K, T]
    ROPE,       // rotate pairs of x [head_dim, n_head, T] by positions src1 (I32)
    ATTENTION,  // store k/v (src1/src2) into the cache, attend q (src0) over it
    SWIGLU,     // out = silu(src0) * src1
    GEGLU,      // out = gelu_tanh(src0) * src1
    SOFTCAP,    // out = f0 * tanh(src0 / f0)
    MOE,        // mixture of experts FFN: router src1, expert stacks src2 (gate), src3 (up), down in `extra`
    SHORTCONV,  // causal depthwise conv over time with per-sequence state
    COUNT
};
const char* op_name(Op op);

enum class RopeType : uint8_t { NORMAL = 0, NEOX = 2 };

struct RopeParams {
    RopeType type = RopeType::NORMAL;
    int n_dims = 0;          // rotated dims per head (the rest pass through)
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
};

struct AttnParams {
    int layer = 0;           // index into the KV cache
    float scale = 1.0f;      // applied to q.k
    float softcap = 0.0f;    // 0: none; else cap * tanh(s / cap)
    int window = 0;          // sliding window (0: full causal)
};

struct Node {
    Op op = Op::NONE;
    Tensor* out = nullptr;
    std::array<Tensor*, 4> src{};
    float f0 = 0.0f;         // eps / scale
    RopeParams rope;
    AttnParams attn;
    KVCache* cache = nullptr;
    RecurrentState* state = nullptr;
    Tensor* extra = nullptr;   // a fifth input (MOE: down-projection experts)
    int i0 = 0;                // MOE: experts used; SHORTCONV: layer
    bool b0 = false;           // MOE: renormalise weights
    const int32_t* forced = nullptr;  // MOE: forced expert ids [T][n_used] (testing), or null
};

// Memory for a graph's activations, kept from one step to the next: it grows to the
// largest plan seen and is never zero-filled (every op writes all of its output).
class Arena {
public:
    Arena() = default;
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;
    // At least `bytes` of 64-byte aligned memory; the contents are not kept when it grows.
    uint8_t* reserve(size_t bytes);
    size_t capacity() const { return mem_.size(); }

private:
    HugeBuffer mem_;
};

// The batch a graph computes: tokens and their positions.
struct Batch {
    std::vector<int32_t> tokens;
    std::vector<int32_t> pos;
    int n_tokens() const { return static_cast<int>(tokens.size()); }
};

class Graph {
public:
    Graph() = default;
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;

    // A new input tensor owned by the graph, its memory allocated now (not zero-filled):
    // the caller fills it before running the graph.
    Tensor* new_tensor(DType type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1,
                       const std::string& name = "");
    // A view of `t` with a new contiguous shape (same element count).
    Tensor* reshape(Tensor* t, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1);
    // A view of rows [row0, row0+n) of ne[0]-elements each... generic strided view:
    Tensor* view(Tensor* t, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset);

    // Builders: each appends a node and returns its output.
    Tensor* get_rows(Tensor* table, Tensor* ids);
    Tensor* rms_norm(Tensor* x, Tensor* w, float eps);
    Tensor* add(Tensor* a, Tensor* b);
    Tensor* mul(Tensor* a, Tensor* b);
    Tensor* scale(Tensor* a, float s);
    Tensor* matmul(Tensor* w, Tensor* x);
    Tensor* rope(Tensor* x, Tensor* pos, const RopeParams& p);
    // seq: I32 sequence id per token (nullptr: all sequence 0).
    Tensor* attention(Tensor* q, Tensor* k, Tensor* v, KVCache* cache, Tensor* pos, Tensor* seq, const AttnParams& p);
    Tensor* swiglu(Tensor* gate, Tensor* up);
    Tensor* geglu(Tensor* gate, Tensor* up);
    Tensor* softcap(Tensor* x, float cap);
    // x [E, T] -> [E, T]: softmax router, top-n_used experts, SwiGLU experts, weighted sum.
    Tensor* moe(Tensor* x, Tensor* router, Tensor* gate_exps, Tensor* up_exps, Tensor* down_exps, int n_used,
                bool norm_weights, const int32_t* forced = nullptr);
    // bx [C, T], kernel w [L, C] -> [C, T]; state holds the previous L-1 inputs per channel.
    // seq: I32 sequence id per token (nullptr: all sequence 0); a sequence's tokens must be in order.
    Tensor* shortconv(Tensor* bx, Tensor* w, RecurrentState* state, Tensor* seq, int layer);

    // Name the last output (for debug dumps): "attn_norm", layer 0 -> "attn_norm-0".
    Tensor* name(Tensor* t, const std::string& base, int layer = -1);

    // Places every node output in `arena` (reusing the memory of tensors no later node
    // reads) and resolves views of them. Called by the executor before running.
    void plan(Arena& arena);
    // Bytes the last plan needed (peak of live node outputs).
    size_t planned_bytes() const { return planned_bytes_; }

    const std::vector<Node>& nodes() const { return nodes_; }
    Tensor* output() const { return output_; }
    void set_output(Tensor* t) { output_ = t; }

private:
    Tensor* add_node(Node n);
    Tensor* alloc(Tensor t);
    // A node's output: memory assigned later by plan().
    Tensor* out_tensor(DType type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1);
    Node glu_node(Op op, Tensor* gate, Tensor* up);
    Tensor* alias(Tensor* t, Tensor v, size_t offset);
    struct Place { Tensor* root; size_t offset; };
    std::unordered_map<const Tensor*, Place> placed_;  // deferred tensors and their views
    size_t planned_bytes_ = 0;
    std::deque<Tensor> tensors_;
    std::vector<std::unique_ptr<uint8_t[]>> buffers_;
    std::vector<Node> nodes_;
    Tensor* output_ = nullptr;
};

}  // namespace glia
