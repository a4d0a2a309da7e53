// The CPU matrix multiplication driver (defined in backend/cpu/ops_matmul.cpp), exposed
// for benchmarks and tests: out[t * N + r] = dot(weight row r, activation row t).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cpu/simd/simd.h"
#include "backend/cpu/threadpool.h"

namespace glia::cpu {

inline constexpr int64_t kGemmMinTokens = 4;   // fewer tokens: row dot products
inline constexpr int64_t kGemmSliceK = 512;    // K columns per packed slice (fits L1)

// Activations converted for a matmul: rows of `act_row` bytes (the weight type's
// vec_dot_type) plus, for the packed path, per-row side data.
struct MatmulAct {
    const uint8_t* act = nullptr;
    size_t act_row = 0;
    const uint8_t* side = nullptr;
    size_t side_row = 0;
};

bool matmul_uses_gemm(const simd::TypeKernels& kk, int64_t K, int64_t T);

// Quantizes T rows of K floats (rows x_row bytes apart) into `scratch` (grown only when
// too small). For F32 weights the rows are used in place.
MatmulAct matmul_prepare(const simd::TypeKernels& kk, const float* x, size_t x_row, int64_t K, int64_t T,
                         std::vector<uint8_t>& scratch, ThreadPool& pool);

// y[t * N + r] for r < N, t < T; weight rows `w_stride` bytes apart.
void matmul_compute(const simd::TypeKernels& kk, const uint8_t* w, size_t w_stride, int64_t K, int64_t N,
                    const MatmulAct& a, int64_t T, float* y, ThreadPool& pool);

}  // namespace glia::cpu
