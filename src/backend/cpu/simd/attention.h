// Attention kernels for the CPU backend, chosen at run time like the matmul kernels.
// The KV cache is paged, so key and value rows are passed as one pointer per cache cell
// (rows of F16, BF16, Q8_0 or Q4_0 values, kv_rows.h; `off` selects a head inside a row).
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/simd/kv_rows.h"
#include "backend/cpu/simd/simd.h"

namespace glia::cpu::simd {

// One tile of queries against a range of cache cells, softmax included: every query of
// prompts and decode alike (a query's bits do not depend on the tile it is in, nor on how
// many heads share the call). A call may serve nh KV heads side by side (head h: queries at
// q + h * q_head_stride, cache values at k_off + h * hd / v_off + h * hd_v, outputs at
// out + h * out_head_stride): the cells are then read once for all of them, a chunk of
// cells at a time, instead of once per head (a deep cache read head by head runs at the
// memory's latency, not its bandwidth).
//
// The softmax runs online over chunks of kAttnChunk cells aligned to absolute positions
// (pos0 is cell 0's): each chunk's scores, maximum, sum and probability-weighted values are
// computed in cache-sized pieces and folded into the query's running result in chunk order.
// A query's chunks depend on its positions only, so its bits do not depend on the tile, the
// heads beside it, or where the tile starts.
inline constexpr int kAttnChunk = 128;

struct AttnTile {
    int hd = 0, hd_v = 0;         // key and value head sizes
    int nq = 0;                   // queries, rows q + j * hd (f32 holding f16-rounded values)
    const float* q = nullptr;
    int nh = 1;                   // KV heads served (adjacent in the cache rows)
    size_t q_head_stride = 0, out_head_stride = 0;  // floats from one head's block to the next
    const uint8_t* const* k = nullptr;  // k[c]: key row of cell c, c < n; the head at value k_off
    const uint8_t* const* v = nullptr;  // v[c]: value row of cell c; the head at value v_off
    size_t k_off = 0, v_off = 0;
    KvType k_type = KvType::F16, v_type = KvType::F16;
    int n = 0;                    // cells
    int pos0 = 0;                 // absolute position of cell 0 (chunk alignment)
    const int* lo = nullptr;      // query j sees cells [lo[j], hi[j]) (at least one)
    const int* hi = nullptr;
    float scale = 1.0f, softcap = 0.0f;
    float* out = nullptr;         // query j's hd_v outputs at out + j * out_stride
    size_t out_stride = 0;
    // Partial mode (a deep cache's chunks shared among threads): with `partial` set, nothing
    // goes to out; chunk k of the call (k from 0) leaves query j's record of head h at
    // partial + h * partial_head_stride + (k * nq + j) * attn_record(hd_v): its maximum m_k,
    // sum l_k and hd_v weighted values (m_k = -inf where the query sees no cell of the chunk).
    // AttnKernels::fold then folds the records in chunk order as the tile would have.
    float* partial = nullptr;
    size_t partial_head_stride = 0;
};

inline size_t attn_record(int hd_v) { return static_cast<size_t>(hd_v) + 2; }

// Records of n_chunks consecutive chunks (record of chunk k, query j at rec + (k * nq + j) *
// attn_record(hd_v)), folded in chunk order into each query's outputs out + j * out_stride.
struct AttnFold {
    int nq = 0, hd_v = 0, n_chunks = 0;
    const float* rec = nullptr;
    float* out = nullptr;
    size_t out_stride = 0;
};

struct AttnKernels {
    // Each query of the tile: q.k over the head dimension (one FMA chain), scaled (and
    // soft-capped); per chunk the maximum m_k, e = exp(s - m_k), their sum l_k, and the
    // weighted sum a_k of V in cell order; chunks folded in order (m = max(m, m_k), l = l
    // exp(m_old - m) + l_k exp(m_k - m), the same for a). The scalar level weighs V by e / l_k
    // rounded to f16, as the reference rounds its softmax (exact for a query whose cells lie
    // in one chunk), keeps a as an average and folds it by weights l x / L and l_k y / L
    // (out = a); the AVX-512 level still weighs by e rounded to f16 and divides at the end
    // (out = a / l). Quantized rows are widened to f32 as they are read (exactly:
    // value times scale), so a query's bits depend on the cache's values only.
    void (*tile)(const AttnTile& t);
    // The fold of partial-mode records: out bit for bit what one tile call over all the
    // chunks gives.
    void (*fold)(const AttnFold& f);
};

const AttnKernels& attn_kernels(Isa isa);
inline const AttnKernels& attn_kernels() { return attn_kernels(best_isa()); }

}  // namespace glia::cpu::simd
