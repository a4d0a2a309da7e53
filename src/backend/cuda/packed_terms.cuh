// Pieces every product on packed quantized weights shares (k_mmvq.cu's dp4a kernel and
// mmq_tile.cuh's tensor-core kernel): the per-superblock float steps from exact integer
// sums, which make both kernels' outputs the same bits, and the set of matrices one
// launch multiplies.
#pragma once

#include "common.cuh"
#include "packed.cuh"

namespace glia::cuda {
namespace {

__device__ __forceinline__ uint32_t rbyte(const uint32_t* w, int i) { return (w[i >> 2] >> (8 * (i & 3))) & 0xffu; }

// 32 int8 activations (global or shared memory).
__device__ __forceinline__ void load8(const int8_t* p, int* x) {
    const int4 a = *reinterpret_cast<const int4*>(p);
    const int4 b = *(reinterpret_cast<const int4*>(p) + 1);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

// One superblock's contribution to an output, from exact integer sums. Both kernels (dp4a
// and tensor cores) call these, so every output gets the same bits.
//   Q4_K: isc = sum of sc_s * (q . x)_s, imx = sum of m_s * (sum of x)_s
//   Q6_K: comb = sum over 16-value groups of sc_g * ((q . x)_g - 32 (sum of x)_g)
//   Q8_0: each 32-value block adds (d_b * xd_b) * (q . x)_b to the sum in order (q8_0_block)
__device__ __forceinline__ float q4k_term(float xd, float d, float dmin, float isc, float imx) {
    return __fmul_rn(xd, __fmaf_rn(d, isc, -__fmul_rn(dmin, imx)));
}
__device__ __forceinline__ float q6k_term(float xd, float d, int comb) { return __fmul_rn(xd, __fmul_rn(d, float(comb))); }
__device__ __forceinline__ float q8_0_block(float acc, float d, float xd, int isum) {
    return __fadd_rn(acc, __fmul_rn(__fmul_rn(d, xd), float(isum)));
}

// Q4_K sub-block s's scale and min from the record's words 1..3 (bytes 4..15).
__device__ __forceinline__ void q4k_scale_min(const uint32_t* rec, int s, int& sc, int& m) {
    if (s < 4) {
        sc = int(rbyte(rec, 4 + s) & 63);
        m = int(rbyte(rec, 8 + s) & 63);
    } else {
        sc = int((rbyte(rec, 8 + s) & 0xF) | ((rbyte(rec, s) >> 6) << 4));
        m = int((rbyte(rec, 8 + s) >> 4) | ((rbyte(rec, 4 + s) >> 6) << 4));
    }
}

// Q6_K: the 6-bit values (0..63) of words i of the record for sub-block s = 4h + k.
__device__ __forceinline__ uint32_t q6k_word(uint32_t l4, uint32_t h4, int k) {
    const uint32_t lo = k < 2 ? (l4 & 0x0F0F0F0Fu) : ((l4 >> 4) & 0x0F0F0F0Fu);
    return lo | (((h4 >> (2 * k)) & 0x03030303u) << 4);
}

// Up to kMaxMats products of one input, one launch: blocks [gstart[m], gstart[m+1]) are
// matrix m's row groups (tiles for the tensor-core kernel); off[m]: where its segment sums
// start in the tensor-core kernel's partial buffer.
constexpr int kMaxMats = 4;
struct MatSet {
    const int4* W[kMaxMats];
    const uint16_t* side[kMaxMats];
    float* out[kMaxMats];
    int N[kMaxMats];
    int gstart[kMaxMats + 1];
    int n;
    int64_t off[kMaxMats];
};

// MoE expert products (G kernels): the columns are (token, selected expert) pairs, each
// multiplied by its own expert's matrix of a packed stack (packed.cuh).
struct Gather {
    const int32_t* ids;     // the expert of pair b
    const int32_t* sorted;  // the pairs sorted by expert (tensor cores)
    const int32_t* pos;     // [E + 1]: expert e's pairs are sorted[pos[e] .. pos[e + 1])
    const int32_t* tiles;   // [E + 1]: its 64-pair tiles are the grid's x in [tiles[e], tiles[e + 1])
    int n_exp;
    int x_div;              // pair b reads activation row b / x_div
    int64_t mat_groups;     // row groups of one expert's matrix
};

// Matrix b of a set (b: the grid's row-tile index), picked with constant indices only (an
// indexed kernel parameter would be copied to local memory by every thread).
struct MatQ {
    const int4* W;
    const uint16_t* side;
    float* out;
    int N, first;
    int64_t off;
};
__device__ __forceinline__ MatQ mat_at(const MatSet& ms, int b) {
    MatQ r{ms.W[0], ms.side[0], ms.out[0], ms.N[0], 0, ms.off[0]};
#pragma unroll
    for (int i = 1; i < kMaxMats; ++i)
        if (i < ms.n && b >= ms.gstart[i]) r = MatQ{ms.W[i], ms.side[i], ms.out[i], ms.N[i], ms.gstart[i], ms.off[i]};
    return r;
}

}  // namespace
}  // namespace glia::cuda
