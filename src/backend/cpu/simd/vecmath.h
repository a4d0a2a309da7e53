// Element-wise math kernels of the CPU backend, chosen at run time like the others.
#pragma once
#include <cstdint>

#include "backend/cpu/simd/simd.h"

namespace glia::cpu::simd {

struct VecMath {
    // Sum of squares of x[0, n) (RMS norm).
    double (*sum_sq)(const float* x, int64_t n);
    // y = x * s * w (w may be null: y = x * s).
    void (*scale_mul)(const float* x, float s, const float* w, float* y, int64_t n);
    // y = silu(g) * u = g / (1 + exp(-g)) * u.
    void (*silu_mul)(const float* g, const float* u, float* y, int64_t n);
    // y = f16(x), round to nearest even (KV-cache stores).
    void (*to_f16)(const float* x, uint16_t* y, int64_t n);
    // y = f32(f16(x)): x rounded to f16 precision.
    void (*round_f16)(const float* x, float* y, int64_t n);
};

const VecMath& vec_math(Isa isa);
inline const VecMath& vec_math() { return vec_math(best_isa()); }

}  // namespace glia::cpu::simd
