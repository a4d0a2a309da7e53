// Attention kernels for the CPU backend, chosen at run time like the matmul kernels.
// The KV cache is paged, so key and value rows are passed as one pointer per cache cell
// (rows of F16 values; `off` selects a head inside a row).
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/simd/simd.h"

namespace glia::cpu::simd {

// One tile of queries against a range of cache cells, softmax included: the prefill path.
struct AttnTile {
    int hd = 0, hd_v = 0;         // key and value head sizes
    int nq = 0;                   // queries, rows q + j * hd (f32 holding f16-rounded values)
    const float* q = nullptr;
    const uint16_t* const* k = nullptr;  // k[c] + k_off: key row of cell c, c < n
    const uint16_t* const* v = nullptr;  // v[c] + v_off: value row of cell c
    size_t k_off = 0, v_off = 0;
    int n = 0;                    // cells
    const int* lo = nullptr;      // query j sees cells [lo[j], hi[j]) (at least one)
    const int* hi = nullptr;
    float scale = 1.0f, softcap = 0.0f;
    float* out = nullptr;         // query j's hd_v outputs at out + j * out_stride
    size_t out_stride = 0;
};

struct AttnKernels {
    // s[j * s_stride + c] = dot(q_j, k[c] + off) for queries j < nq (rows q + j * hd,
    // f32) and cells c < n.
    void (*scores)(int hd, int nq, const float* q, const uint16_t* const* k, size_t off, int n, float* s,
                   size_t s_stride);
    // In place over one query's row of n scores: s = scale * s (then cap * tanh(s / cap)
    // when cap > 0), softmax, each probability rounded to f16 (as the reference feeds
    // them to its f16 dot product with V).
    void (*softmax)(float* s, int n, float scale, float cap);
    // acc[j * hd + i] += sum_c p[j * p_stride + c] * v[c][off + i] for j < nq, i < hd.
    void (*weighted_sum)(int hd, int nq, const float* p, size_t p_stride, const uint16_t* const* v, size_t off,
                         int n, float* acc);
    // The whole tile (same numerics as scores + softmax + weighted_sum).
    void (*tile)(const AttnTile& t);
};

const AttnKernels& attn_kernels(Isa isa);
inline const AttnKernels& attn_kernels() { return attn_kernels(best_isa()); }

}  // namespace glia::cpu::simd
