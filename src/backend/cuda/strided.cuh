// A 4-D F32 operand with byte strides (a view: rows of contiguous values, any row, plane
// and volume strides), for the kernels whose CPU versions accept strided inputs.
#pragma once
#include "common.cuh"

namespace glia::cuda {

struct View4 {
    const char* p;
    int64_t ne[4];
    int64_t nb[4];
    __host__ static View4 of(const Tensor& t) {
        View4 v{static_cast<const char*>(t.data), {t.ne[0], t.ne[1], t.ne[2], t.ne[3]},
                {int64_t(t.nb[0]), int64_t(t.nb[1]), int64_t(t.nb[2]), int64_t(t.nb[3])}};
        return v;
    }
    __device__ const float* row(int64_t i1, int64_t i2 = 0, int64_t i3 = 0) const {
        return reinterpret_cast<const float*>(p + i1 * nb[1] + i2 * nb[2] + i3 * nb[3]);
    }
    __device__ float at(int64_t i0, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) const { return row(i1, i2, i3)[i0]; }
};

// Elements of a contiguous 4-D output as (i0, i1, i2, i3) from a flat index.
__device__ inline void unflatten(int64_t idx, const int64_t ne[4], int64_t i[4]) {
    i[0] = idx % ne[0];
    idx /= ne[0];
    i[1] = idx % ne[1];
    idx /= ne[1];
    i[2] = idx % ne[2];
    i[3] = idx / ne[2];
}

// Blocks of `threads` for n elements (at least one block; the kernels bound-check).
inline unsigned blocks_for(int64_t n, int threads) { return unsigned(n > 0 ? (n + threads - 1) / threads : 1); }

// True when every row of t holds contiguous F32 values (what View4 assumes).
inline bool f32_rows(const Tensor* t) { return t && t->type == DType::F32 && t->nb[0] == sizeof(float); }

}  // namespace glia::cuda
