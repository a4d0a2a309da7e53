// Rows as float4 chunks for the RMS norm kernels (k_rows.cu, k_fused.cu), and the checks a
// launcher makes before taking them. Plain enough for tools/cuda_emu to run on the host.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace glia::cuda {

// One block per row of norm_threads(ne0) threads; thread i takes chunks i, i + blockDim, ...
// four at a time with their loads in flight together, sums their squares in that order, and
// block_sum adds the threads' sums. The order depends on the row length alone; the fused and
// the separate kernel share it (the same bits fused or not).
inline int norm_threads(int64_t ne0) {
    const int64_t warps = (ne0 / 4 + 31) / 32;
    return int(warps < 1 ? 32 : warps > 32 ? 1024 : warps * 32);
}
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }
// Whether every row of t can be read as float4 chunks: a whole number of them, 16-byte aligned.
inline bool rows16(const Tensor& t) {
    return t.ne[0] % 4 == 0 && t.nb[1] % 16 == 0 && t.nb[2] % 16 == 0 && aligned16(t.data);
}
// Whether the bytes two tensors span meet (views included).
inline bool overlaps(const Tensor& a, const Tensor& b) {
    const char* pa = static_cast<const char*>(a.data);
    const char* pb = static_cast<const char*>(b.data);
    return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}
__device__ __forceinline__ float sumsq4(float ss, float4 v) {
    ss += v.x * v.x;
    ss += v.y * v.y;
    ss += v.z * v.z;
    ss += v.w * v.w;
    return ss;
}
// The norm's output: out[i] = x[i] * scale * w[i] (w null: 1) over the block's chunks.
__device__ __forceinline__ void norm_write4(const float4* x, float scale, const float* w, float* out, int64_t n4) {
    float4* o = reinterpret_cast<float4*>(out);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    for (int64_t i = threadIdx.x; i < n4; i += blockDim.x) {
        const float4 v = x[i];
        const float4 g = w ? w4[i] : make_float4(1.f, 1.f, 1.f, 1.f);
        o[i] = make_float4(v.x * scale * g.x, v.y * scale * g.y, v.z * scale * g.z, v.w * scale * g.w);
    }
}

}  // namespace glia::cuda
