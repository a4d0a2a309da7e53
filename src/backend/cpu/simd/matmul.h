// The CPU matrix multiplication driver (defined in backend/cpu/ops_matmul.cpp), exposed
// for benchmarks and tests: out[t * N + r] = dot(weight row r, activation row t).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "backend/cpu/simd/simd.h"
#include "backend/cpu/threadpool.h"
#include "core/huge_buffer.h"

namespace glia::cpu {

inline constexpr int64_t kGemmMinTokens = 4;   // fewer tokens: row dot products
// Products of a weight whose decode layout is in hand (a DecodeCache) read it for up to this
// many tokens and take the GEMM (panels packed per call, from the layout) above: with the
// same bits either way, the layout is the faster of the two up to 64-128 tokens (bench/LOG.md,
// 2026-12-07, session 21), which serves decoding, batched decoding and short prompts.
inline constexpr int64_t kDecodeLayoutMaxTokens = 64;
inline constexpr int64_t kGemmSliceK = 512;    // K columns per packed slice (fits L1)
// Below this much work (weight bytes x tokens) waking the other threads costs more than
// it saves: tiny models run each matmul on the calling thread.
inline constexpr double kMatmulParallelMinWork = 128 * 1024;

// Activations converted for a matmul: rows of `act_row` bytes (the weight type's
// vec_dot_type) plus, for the packed path, per-row side data.
struct MatmulAct {
    const uint8_t* act = nullptr;
    size_t act_row = 0;
    const uint8_t* side = nullptr;
    size_t side_row = 0;
};

// Whether products with K columns follow the packed GEMM's arithmetic at every token count
// (the type has a GEMM and K % 256 == 0): fewer tokens than kGemmMinTokens then run
// Gemm::gemv, which gives the GEMM's bits; otherwise every count runs the row dot product.
bool matmul_gemm_bits(const simd::TypeKernels& kk, int64_t K);
// The fewest tokens that take the packed GEMM itself: kGemmMinTokens, or
// kDecodeLayoutMaxTokens + 1 for a type with a decode layout when `layout` (the weight's
// layout is in hand).
int64_t gemm_min_tokens(const simd::TypeKernels& kk, bool layout = false);
// Whether T tokens take the packed GEMM itself.
bool matmul_uses_gemm(const simd::TypeKernels& kk, int64_t K, int64_t T, bool layout = false);

// One activation row of K floats converted for weights with kernels kk into `row`
// (row_bytes(kk.act_type, K) bytes: quantized, or copied for F32 weights), plus the packed
// path's side data when `side` is not null.
void matmul_convert_row(const simd::TypeKernels& kk, const float* x, int64_t K, uint8_t* row, uint8_t* side);

// Quantizes T rows of K floats (rows x_row bytes apart) into `scratch` (grown only when
// too small). For F32 weights the rows are used in place.
MatmulAct matmul_prepare(const simd::TypeKernels& kk, const float* x, size_t x_row, int64_t K, int64_t T,
                         std::vector<uint8_t>& scratch, ThreadPool& pool);

// Copies derived from weight matrices, one buffer a matrix keyed by the matrix's data:
// built on first use from `units` pieces of `unit_bytes` each (pack(u, dst) writes piece u,
// split across the pool: not from inside the pool's workers), kept until forgotten.
// `built` (when given) tells whether this call made the copy.
class WeightCopies {
public:
    const uint8_t* get(const uint8_t* w, int64_t units, size_t unit_bytes, FunctionRef<void(int64_t, uint8_t*)> pack,
                       ThreadPool& pool, bool* built = nullptr);
    size_t bytes() const;
    // Drops the copies of every matrix that starts in [w, w + n) (a weight going away).
    void forget(const uint8_t* w, size_t n = 1);

private:
    mutable std::mutex mu_;
    std::map<const uint8_t*, HugeBuffer> copies_;
    size_t bytes_ = 0;
};

// Weight matrices repacked into the GEMM's panel layout, kept for the life of a backend
// (whose model outlives it): packing then happens once per weight instead of once per
// matmul, which is what makes the packed path pay for small batches (batched decode).
// Costs memory: a Q8_0 matrix packs to about its bytes (see pack_cache_keeps for which
// weights it serves).
class PackCache {
public:
    // The packed panels of weight `w` (packed on first use, split across the pool).
    const uint8_t* get(const simd::Gemm& g, const uint8_t* w, size_t w_stride, int64_t K, int64_t N,
                       ThreadPool& pool);
    size_t bytes() const { return copies_.bytes(); }
    // Drops the panels of the weight at [w, w + n) (the weight is going away).
    void forget(const uint8_t* w, size_t n = 1) { copies_.forget(w, n); }

private:
    WeightCopies copies_;
};

// Weight matrices rearranged into the few-token products' decode layout (simd::Gemm::il_*,
// same bytes as the weight), kept like PackCache's panels: built on first use, once per
// matrix (a stacked MoE tensor's experts as one matrix: expert_decode_layout). Products of up to
// kDecodeLayoutMaxTokens tokens then read them instead of the file layout, with the same
// bits. On by default ($GLIA_CPU_GEMV_INTERLEAVE=0: off; see decode_layout_enabled).
class DecodeCache {
public:
    // The groups of the matrix at `w` (built on first use, split across the pool: not
    // from inside the pool's workers); nullptr when the type has no decode layout or K is
    // not a multiple of 256. `built` (when given): whether this call made the layout.
    // Once a layout is built nothing on the CPU reads the matrix's own bytes for products
    // again (few tokens read the layout, the GEMM packs its panels from it), so its pages
    // are handed back (core/page_out: a mapped file's pages are dropped, read again only if
    // touched): the layout takes the weight's place in memory. Not for bytes that another
    // op reads (keep_pages: a tied embedding's row lookups).
    const uint8_t* get(const simd::TypeKernels& kk, const uint8_t* w, size_t w_stride, int64_t K, int64_t N,
                       ThreadPool& pool, bool* built = nullptr);
    size_t bytes() const { return copies_.bytes(); }
    // Drops the layouts of every matrix that starts in [w, w + n) (a weight going away).
    void forget(const uint8_t* w, size_t n = 1) { copies_.forget(w, n); }
    // [p, p + n) is read by other ops than the products: its pages stay where they are.
    void keep_pages(const void* p, size_t n);

private:
    bool kept(const uint8_t* w, size_t n) const;
    WeightCopies copies_;
    mutable std::mutex keep_mu_;
    std::map<const uint8_t*, size_t> keep_;  // start -> bytes
};
// Whether the CPU backend keeps a DecodeCache ($GLIA_CPU_GEMV_INTERLEAVE: 0 off, 1 on;
// unset: kDecodeLayoutDefault).
inline constexpr bool kDecodeLayoutDefault = true;
bool decode_layout_enabled();
// Whether the CPU backend keeps a PackCache ($GLIA_PACK_CACHE=0: off; on otherwise).
bool pack_cache_enabled();
// Whether a PackCache keeps the panels of weights with kernels kk and K columns. Not where
// the weight has a decode layout (while that is on): one derived copy a weight (the
// layout, 1x its bytes) instead of two (the panels are ~1.8x the bytes of Q4_K); its GEMM
// packs per call from the layout, for products of more than kDecodeLayoutMaxTokens tokens
// only, where packing is a small share.
bool pack_cache_keeps(const simd::TypeKernels& kk, int64_t K);
// The bytes of host memory the CPU backend derives from one product matrix of `type` with
// K columns and N rows (`expert`: one expert of a stacked MoE tensor): the GEMM's panels
// (PackCache, made by the first product of many tokens; never for experts) and the decode
// layout (DecodeCache, made by the first product of any size for experts, of few tokens for
// other weights), as this machine's kernels and the settings above make them. `glia plan`
// counts them.
uint64_t weight_copy_bytes(DType type, int64_t K, int64_t N, bool expert);
// Whether products with K columns and T tokens of weights with kernels kk read a decode
// layout when there is one.
bool matmul_uses_decode_layout(const simd::TypeKernels& kk, int64_t K, int64_t T);
// Whether a decode layout of such weights can be made (the type has one, K % 256 == 0).
bool matmul_has_decode_layout(const simd::TypeKernels& kk, int64_t K);
// Whether the experts of a stacked tensor of N-row matrices get one decode layout for the
// whole stack: they do where the type has one and every expert starts a group (N a
// multiple of Gemm::il_rows), so that an expert's part is found by its index;
// GLIA_CPU_MOE_LAYOUT=0 keeps them on the file's layout (A/B).
bool expert_decode_layout(const simd::TypeKernels& kk, int64_t K, int64_t N);

// y[t * N + r] for r < N, t < T; weight rows `w_stride` bytes apart. With a cache the
// packed path reuses panels packed earlier; without one it packs per call. With a decode
// cache the few-token path reads the weight's decode layout.
void matmul_compute(const simd::TypeKernels& kk, const uint8_t* w, size_t w_stride, int64_t K, int64_t N,
                    const MatmulAct& a, int64_t T, float* y, ThreadPool& pool, PackCache* cache = nullptr,
                    DecodeCache* decode = nullptr);

// The same products in units that threads may take in any order and any grouping (row
// tiles, or panels of the packed path), for callers that schedule several products at
// once (the MoE experts): matmul_units() of them, unit u computing its rows of y for all
// T tokens. `packed`: the weight's panels from a PackCache, or nullptr to pack per unit.
// Every split gives the same bits.
// `layout`: the units will be given the weight's decode layout (`groups` below).
int64_t matmul_units(const simd::TypeKernels& kk, int64_t K, int64_t N, int64_t T, bool layout = false);
// `groups`: the weight's decode layout from a DecodeCache (read by units of up to
// kDecodeLayoutMaxTokens tokens; GEMM units without `packed` pack their panels from it),
// or nullptr.
void matmul_unit(const simd::TypeKernels& kk, const uint8_t* w, size_t w_stride, int64_t K, int64_t N,
                 const MatmulAct& a, int64_t T, float* y, int64_t u, const uint8_t* packed = nullptr,
                 const uint8_t* groups = nullptr);

}  // namespace glia::cpu
