// The op harness: runs one node on a backend over random inputs, compares its output with
// the scalar reference (op_reference.h) and times it. This is how each kernel of a backend
// is enabled: `glia bench-ops --ops` prints these checks, and the tests assert them.
#pragma once
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
    bool neox = false;
    // MOE_*
    int n_expert = 8, n_used = 2;
    // UNARY: the UnaryKind; DELTA_NET: 1 = one decay per key channel (else one per head).
    // DELTA_NET uses head_dim (dk = dv), n_kv_head key heads and n_head value heads.
    int kind = 0;
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
};

// `reps` timed runs after one warm-up run, random inputs from `seed`.
OpCheck check_op(Backend& backend, const OpSpec& spec, int reps = 5, unsigned seed = 1);

// The ops and shapes of one decoder layer of a model shape (hidden size, heads, FFN), at
// T tokens, over the weight types given: what bench-ops --ops measures.
std::vector<OpSpec> layer_op_specs(int64_t n_embd, int n_head, int n_kv_head, int head_dim, int64_t n_ff,
                                   const std::vector<DType>& types, int64_t T, int n_past);

}  // namespace glia
