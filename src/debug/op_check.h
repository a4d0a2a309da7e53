// The op harness: runs one node on a backend over random inputs, compares its output with
// the scalar reference (op_reference.h) and times it. This is how each kernel of a backend
// is enabled: `glia bench-ops --ops` prints these checks, and the tests assert them.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace glia {

// One op at one shape. Sizes not used by an op are ignored.
struct OpSpec {
    Op op = Op::MATMUL;
    DType type = DType::F32;  // weight type (MATMUL, GET_ROWS, MOE_EXPERTS)
    int64_t K = 256;          // MATMUL rows of W / width of row ops / embedding width / MoE width
    int64_t N = 256;          // MATMUL outputs / embedding rows / MoE expert width
    int64_t T = 1;            // tokens
    // ATTENTION and ROPE
    int head_dim = 64, n_head = 4, n_kv_head = 2, n_past = 0, window = 0;
    float softcap = 0.0f;
    DType k_cache = DType::F16, v_cache = DType::F16;  // ATTENTION: the KV cache's cell types
    bool neox = false;
    // MOE_*
    int n_expert = 8, n_used = 2;
    std::optional<DType> down_type;  // MOE_EXPERTS(_GLU): the down experts' type when not `type`
    // UNARY: the UnaryKind; DELTA_NET: 1 = one decay per key channel (else one per head).
    // DELTA_NET uses head_dim (dk = dv), n_kv_head key heads and n_head value heads.
    // CONCAT: the dim; RES_MIX: saved streams; MOE_EXPERTS_GLU: 0 situ, 1 swiglu.
    int kind = 0;
    // The main F32 inputs as strided views (padded rows) of a tensor made on the backend, as
    // the models pass them (UNARY, MUL_BCAST, CONCAT, SITU, MATMUL_HEADS, ROPE, ROPE_FREQS).
    bool strided = false;
    std::string label() const;  // "MATMUL q4_k 4096x4096 T=1"
};

struct OpCheck {
    std::string label;
    bool supported = true;  // false: the backend does not run this node (nothing measured)
    double max_err = 0;     // max |ours - reference| / max |reference|
    double tolerance = 0;   // the bound this op and type are held to
    bool ok = false;        // supported and max_err <= tolerance
    double seconds = 0;     // median time of the node per run
    double bytes = 0;       // operand + output bytes per run (GB/s = bytes / seconds)
    double flops = 0;       // arithmetic per run (GFLOP/s = flops / seconds)
    // MATMUL, ATTENTION and the MoE expert products with T > 1: tokens run again alone (the
    // first and the last; attention's against the caches as the batch left them); a batch may
    // change no token's bits (DESIGN.md principle 6), so ok also needs alone_equal == alone_checked.
    int alone_checked = 0, alone_equal = 0;
    bool checked = true;  // false: timed only (check_op's check = false), max_err and ok unset
};

// `reps` timed runs after one warm-up run, random inputs from `seed`. check = false skips the
// scalar reference and the comparisons (its cost grows with the square of a long attention).
OpCheck check_op(Backend& backend, const OpSpec& spec, int reps = 5, unsigned seed = 1, bool check = true);

// One decoder layer's dimensions: attention and FFN (every family), and the blocks of the
// newer families, so that every op is measured at every named shape.
struct LayerShape {
    const char* name;
    int64_t n_embd;
    int n_head, n_kv_head, head_dim;
    int64_t n_ff;
    int n_expert, n_used;            // MoE routing
    int64_t n_ff_exp;                // one expert's FFN width
    int lin_k_heads, lin_v_heads, lin_head_dim;  // linear attention (DELTA_NET, qwen35 / kimi-k3)
    int mla_nope, mla_rope, mla_rank, mla_v;     // MLA (kimi-k3): per-head dims and the latent rank
    int n_saved;                     // RES_MIX: saved residual streams
};
// The named shapes (llama3-1b, qwen3-0.6b, llama3-8b, qwen35, kimi-k3, gemma4).
const std::vector<LayerShape>& layer_shapes();
const LayerShape* find_layer_shape(const std::string& name);

// Every op of one layer of `shape` at T tokens, over the weight types given: what
// bench-ops --ops measures.
std::vector<OpSpec> layer_op_specs(const LayerShape& shape, const std::vector<DType>& types, int64_t T, int n_past);

}  // namespace glia
