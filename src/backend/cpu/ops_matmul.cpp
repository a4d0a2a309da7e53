// MATMUL: out[N, T] = W[K, N] . x[K, T], straight from the weight's blocks.
// The activations are first converted to the weight type's vec_dot_type (Q8_0, Q8_K,
// F16 ...), as the reference does, then each (row, token) is one vec_dot.
#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "quant/quant.h"

namespace glia::cpu {

void op_matmul(const Node& n, ThreadPool& pool, std::vector<uint8_t>& scratch) {
    const Tensor& w = *n.src[0];
    const Tensor& x = *n.src[1];
    Tensor& out = *n.out;
    const int64_t K = w.ne[0], N = w.ne[1], T = x.n_rows();
    const quant::TypeTraits& tr = quant::traits(w.type);
    if (!tr.vec_dot) fail("matmul: no dot product for weight type ", dtype_name(w.type), " ('", w.name, "')");

    const void* act = x.data;
    size_t act_row = x.nb[1];
    if (tr.vec_dot_type != DType::F32) {
        act_row = row_bytes(tr.vec_dot_type, K);
        if (scratch.size() < act_row * T) scratch.resize(act_row * T);
        pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
            for (int64_t t = t0; t < t1; ++t)
                quant::quantize_act_row(tr.vec_dot_type, reinterpret_cast<const float*>(x.row(t)),
                                    scratch.data() + t * act_row, K);
        });
        act = scratch.data();
    }
    const auto* actb = static_cast<const uint8_t*>(act);
    float* y = out.ptr<float>();
    // Rows in small tiles so a tile of weights stays in cache across all tokens.
    constexpr int64_t kTile = 16;
    const int64_t n_tiles = (N + kTile - 1) / kTile;
    pool.parallel_for(n_tiles, [&](int64_t b, int64_t e) {
        for (int64_t tile = b; tile < e; ++tile) {
            const int64_t r0 = tile * kTile, r1 = std::min(N, r0 + kTile);
            for (int64_t t = 0; t < T; ++t) {
                const uint8_t* a = actb + t * act_row;
                for (int64_t r = r0; r < r1; ++r) tr.vec_dot(K, &y[t * N + r], w.row(r), a);
            }
        }
    });
}

}  // namespace glia::cpu
