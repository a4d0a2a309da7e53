// The one-token products' prologues on the device (prologue.h): the activation row made
// inside the product's blocks with the separate kernels' expressions and reduction order.
#pragma once
#include "common.cuh"
#include "glu.cuh"
#include "prologue.h"
#include "rowvec.cuh"

namespace glia::cuda {

// Chunk b (4 values) of the row the norm reduces: x, or x + y (ADD_NORM), as the add
// kernels compute it.
template <int P>
__device__ __forceinline__ float4 pro_chunk(const ActPrologue& p, int64_t b) {
    const float4 a = reinterpret_cast<const float4*>(p.x)[b];
    if constexpr (P == PRO_ADD_NORM) {
        const float4 c = reinterpret_cast<const float4*>(p.y)[b];
        return make_float4(a.x + c.x, a.y + c.y, a.z + c.z, a.w + c.w);
    } else {
        return a;
    }
}

// The norm's scale as rms_norm4_row computes it in a block of p.norm_threads threads, the
// row (x, or x + y) kept in shared memory (row: ne0 floats) for the quantization. The row's
// loads go out together (a thread's chunks unrolled, one round trip); then virtual thread v
// sums the squares of chunks v, v + n, v + 2n, ... (n = p.norm_threads) in that order, each
// virtual warp's sums are added by warp_sum and the warps' totals by block_sum's last
// warp_sum. This block's warps take the virtual warps in turn; each warp adds the totals
// itself (every warp gets the same value). Every thread must call it.
template <int P>
__device__ __forceinline__ float pro_norm_scale(const ActPrologue& p, float4* row) {
    __shared__ float vsum[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int n = p.norm_threads, vwarps = n >> 5;
    const int64_t n4 = p.ne0 / 4;
    const int bd = blockDim.x;
    for (int64_t b0 = threadIdx.x; b0 < n4; b0 += 4 * bd) {  // four chunks' loads at once
        float4 v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
            if (b0 + k * bd < n4) v[k] = pro_chunk<P>(p, b0 + k * bd);
#pragma unroll
        for (int k = 0; k < 4; ++k)
            if (b0 + k * bd < n4) row[b0 + k * bd] = v[k];
    }
    __syncthreads();
    for (int vw = warp; vw < vwarps; vw += nw) {
        float ss = 0.0f;
        for (int64_t b = vw * 32 + lane; b < n4; b += n) ss = sumsq4(ss, row[b]);
        ss = warp_sum(ss);
        if (lane == 0) vsum[vw] = ss;
    }
    __syncthreads();
    const float t = warp_sum(lane < vwarps ? vsum[lane] : 0.0f);
    return rsqrtf(t / float(p.ne0) + p.eps);
}

// Chunk b (values 4b .. 4b + 3) of the activation row (row: the norm's input, in shared memory).
template <int P>
__device__ __forceinline__ float4 pro_out4(const ActPrologue& p, float scale, const float4* row, int64_t b) {
    if constexpr (P == PRO_SWIGLU) {
        const float4 g = reinterpret_cast<const float4*>(p.x)[b];
        const float4 u = reinterpret_cast<const float4*>(p.y)[b];
        return make_float4(swiglu_value(g.x, u.x), swiglu_value(g.y, u.y), swiglu_value(g.z, u.z),
                           swiglu_value(g.w, u.w));
    } else {  // norm_write4's expression
        const float4 x = row[b];
        const float4 w = p.w ? reinterpret_cast<const float4*>(p.w)[b] : make_float4(1.f, 1.f, 1.f, 1.f);
        return make_float4(x.x * scale * w.x, x.y * scale * w.y, x.z * scale * w.z, x.w * scale * w.w);
    }
}

// Values i .. i + 7 of the activation row (i a multiple of 8), for quantize_vals256.
template <int P>
__device__ __forceinline__ void pro_values(const ActPrologue& p, float scale, const float4* row, int64_t i,
                                           float (&v)[8]) {
    const float4 a = pro_out4<P>(p, scale, row, i / 4), b = pro_out4<P>(p, scale, row, i / 4 + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// The fused nodes' outputs, stored by one block: out (and sum) over the whole row.
template <int P>
__device__ __forceinline__ void pro_store(const ActPrologue& p, float scale, const float4* row) {
    const int64_t n4 = p.ne0 / 4;
    for (int64_t b = threadIdx.x; b < n4; b += blockDim.x) {
        if constexpr (P == PRO_ADD_NORM) reinterpret_cast<float4*>(p.sum)[b] = row[b];
        reinterpret_cast<float4*>(p.out)[b] = pro_out4<P>(p, scale, row, b);
    }
}

// Shared-memory bytes a prologue of this kind needs after the kernel's own (the norm's row).
inline size_t pro_smem_bytes(int kind, int64_t ne0) {
    return kind == PRO_NORM || kind == PRO_ADD_NORM ? size_t(ne0) * 4 : 0;
}

}  // namespace glia::cuda
