// MATMUL: out[N, T] = W[K, N] . x[K, T], straight from the weight's blocks.
//
// The activations are first converted to the weight type's vec_dot_type (Q8_0, Q8_K,
// F16 ...), as the reference does, with the SIMD quantizer of simd/ (bit-identical to the
// scalar one). Then one of two paths:
//  - few tokens (decode, small batches): memory-bound. Threads take contiguous row
//    ranges, so each weight byte is streamed once per token from DRAM by exactly one core;
//    row tiles of 16 are reused across the tokens while they are in L1.
//  - many tokens (prefill): compute-bound. Each thread packs a panel of 32 rows (simd
//    Gemm), then runs the VNNI micro-kernel over all tokens, slice by slice of K so the
//    packed slice stays in L1 while the tokens stream past it.
// A token's outputs must not depend on how many tokens share the step (a batch changes no
// sequence's logits): where a type has a packed GEMM (and K % 256 == 0), the few-token path
// runs the GEMM's own arithmetic on the unpacked rows (Gemm::gemv: same integer sums, same
// float steps, same K slices), so both paths give the same bits. Elsewhere both paths are
// the row dot product. With a DecodeCache (simd/matmul.h) the few-token path reads the
// weight's decode layout instead (Gemm::il_*: 16 rows a group, the same bits). Threads
// split rows and tokens only, never K.
#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/simd/matmul.h"
#include "backend/cpu/simd/simd.h"
#include "core/error.h"

namespace glia::cpu {
namespace {

// A per-thread, 64-byte aligned buffer that only grows (no allocation in steady state).
struct AlignedBuffer {
    struct Free { void operator()(uint8_t* p) const { ::operator delete(p, std::align_val_t(64)); } };
    std::unique_ptr<uint8_t, Free> p;
    size_t size = 0;
    uint8_t* get(size_t n) {
        if (n > size) {
            p.reset(static_cast<uint8_t*>(::operator new(n, std::align_val_t(64))));
            size = n;
        }
        return p.get();
    }
};

uint8_t* panel_buffer(size_t n) {
    thread_local AlignedBuffer buf;
    return buf.get(n);
}

template <class F>
void split(ThreadPool& pool, int64_t n, double work, F&& fn) {
    if (work < kMatmulParallelMinWork) fn(int64_t(0), n);
    else pool.parallel_for(n, fn);
}

// Row path: rows are taken in tiles of kRowTile so a tile of weights stays in cache
// across all tokens. Computes rows [r0, r1) of y[t * N + r] for every token.
constexpr int64_t kRowTile = 16;
void row_tile(const simd::TypeKernels& kk, const uint8_t* w, size_t w_stride, int64_t K, int64_t N, int64_t r0,
              int64_t r1, const MatmulAct& a, int64_t T, float* y, const uint8_t* groups) {
    static_assert(kRowTile == 16, "a row tile is one group of the decode layout");
    if (groups) {
        const simd::Gemm& g = *kk.gemm;
        g.il_gemv(groups + size_t(r0 / g.il_rows) * g.il_bytes(K), static_cast<int>(r1 - r0), K, kGemmSliceK, a.act,
                  a.act_row, static_cast<int>(T), y + r0, static_cast<size_t>(N));
        return;
    }
    if (matmul_gemm_bits(kk, K)) {
        kk.gemm->gemv(w + r0 * w_stride, w_stride, static_cast<int>(r1 - r0), K, kGemmSliceK, a.act, a.act_row,
                      static_cast<int>(T), y + r0, static_cast<size_t>(N));
        return;
    }
    for (int64_t t = 0; t < T; ++t) {
        const uint8_t* act = a.act + t * a.act_row;
        for (int64_t r = r0; r < r1; ++r) kk.vec_dot(K, &y[t * N + r], w + r * w_stride, act);
    }
}

}  // namespace

bool matmul_gemm_bits(const simd::TypeKernels& kk, int64_t K) { return kk.gemm && K % 256 == 0; }

int64_t gemm_min_tokens(const simd::TypeKernels& kk, bool layout) {
    return layout && kk.gemm && kk.gemm->il_rows > 0 ? kDecodeLayoutMaxTokens + 1 : kGemmMinTokens;
}

bool matmul_uses_gemm(const simd::TypeKernels& kk, int64_t K, int64_t T, bool layout) {
    return matmul_gemm_bits(kk, K) && T >= gemm_min_tokens(kk, layout);
}

void matmul_convert_row(const simd::TypeKernels& kk, const float* x, int64_t K, uint8_t* row, uint8_t* side) {
    if (kk.act_type == DType::F32) std::memcpy(row, x, sizeof(float) * K);
    else kk.quantize_act(x, row, K);
    if (side) kk.gemm->prepare(row, K, side);
}

MatmulAct matmul_prepare(const simd::TypeKernels& kk, const float* x, size_t x_row, int64_t K, int64_t T,
                         std::vector<uint8_t>& scratch, ThreadPool& pool) {
    MatmulAct a;
    if (kk.act_type == DType::F32) {
        a.act = reinterpret_cast<const uint8_t*>(x);
        a.act_row = x_row;
        return a;
    }
    a.act_row = row_bytes(kk.act_type, K);
    a.side_row = matmul_uses_gemm(kk, K, T) ? kk.gemm->side_bytes(K) : 0;
    const size_t need = (a.act_row + a.side_row) * size_t(T);
    if (scratch.size() < need) scratch.resize(need);
    uint8_t* qa = scratch.data();
    uint8_t* side = qa + a.act_row * T;
    const auto* xb = reinterpret_cast<const uint8_t*>(x);
    split(pool, T, double(K) * 4 * double(T), [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            matmul_convert_row(kk, reinterpret_cast<const float*>(xb + t * x_row), K, qa + t * a.act_row,
                               a.side_row ? side + t * a.side_row : nullptr);
    });
    a.act = qa;
    a.side = a.side_row ? side : nullptr;
    return a;
}

const uint8_t* PackCache::get(const simd::Gemm& g, const uint8_t* w, size_t w_stride, int64_t K, int64_t N,
                               ThreadPool& pool) {
    const int64_t P = g.panel_rows;
    return copies_.get(w, (N + P - 1) / P, g.panel_bytes(K), [&](int64_t ip, uint8_t* dst) {
        const int64_t r0 = ip * P;
        g.pack(w + r0 * w_stride, w_stride, static_cast<int>(std::min(P, N - r0)), K, dst);
    }, pool);
}

int64_t matmul_units(const simd::TypeKernels& kk, int64_t K, int64_t N, int64_t T, bool layout) {
    const int64_t rows = matmul_uses_gemm(kk, K, T, layout) ? kk.gemm->panel_rows : kRowTile;
    return (N + rows - 1) / rows;
}

void matmul_unit(const simd::TypeKernels& kk, const uint8_t* w, size_t w_stride, int64_t K, int64_t N,
                 const MatmulAct& a, int64_t T, float* y, int64_t u, const uint8_t* packed,
                 const uint8_t* groups) {
    if (!matmul_uses_gemm(kk, K, T, groups != nullptr)) {
        row_tile(kk, w, w_stride, K, N, u * kRowTile, std::min(N, (u + 1) * kRowTile), a, T, y, groups);
        return;
    }
    const simd::Gemm& g = *kk.gemm;
    const int64_t P = g.panel_rows;
    const size_t pbytes = g.panel_bytes(K);
    const int64_t r0 = u * P;
    const int nr = static_cast<int>(std::min(P, N - r0));
    const uint8_t* panel = packed ? packed + u * pbytes : nullptr;
    if (!panel) {
        uint8_t* own = panel_buffer(pbytes);
        if (groups && g.il_pack_panel) g.il_pack_panel(groups + size_t(r0 / g.il_rows) * g.il_bytes(K), nr, K, own);
        else g.pack(w + r0 * w_stride, w_stride, nr, K, own);
        panel = own;
    }
    for (int64_t k0 = 0; k0 < K; k0 += kGemmSliceK) {
        const int64_t kc = std::min(kGemmSliceK, K - k0);
        g.compute(panel + g.panel_bytes(k0), nr, kc, a.act + row_bytes(kk.act_type, k0), a.act_row,
                  a.side ? a.side + g.side_bytes(k0) : nullptr, a.side_row, static_cast<int>(T), y + r0,
                  static_cast<size_t>(N), k0 > 0);
    }
}

void matmul_compute(const simd::TypeKernels& kk, const uint8_t* w, size_t w_stride, int64_t K, int64_t N,
                    const MatmulAct& a, int64_t T, float* y, ThreadPool& pool, PackCache* cache,
                    DecodeCache* decode) {
    // A weight with a decode layout keeps only that (read by products of up to
    // kDecodeLayoutMaxTokens tokens, packed from by the GEMM above); others their panels.
    const uint8_t* groups = decode && matmul_has_decode_layout(kk, K) ? decode->get(kk, w, w_stride, K, N, pool) : nullptr;
    const bool layout = groups != nullptr;
    const uint8_t* packed = cache && !layout && matmul_uses_gemm(kk, K, T) ? cache->get(*kk.gemm, w, w_stride, K, N, pool)
                                                                            : nullptr;
    split(pool, matmul_units(kk, K, N, T, layout), double(w_stride) * double(N) * double(T), [&](int64_t b, int64_t e) {
        for (int64_t u = b; u < e; ++u) matmul_unit(kk, w, w_stride, K, N, a, T, y, u, packed, groups);
    });
}

bool matmul_group_fusable(const Node& a, const Node& b, bool layout) {
    if (a.op != Op::MATMUL || b.op != Op::MATMUL || a.src[1] != b.src[1]) return false;
    const Tensor& x = *a.src[1];
    const simd::TypeKernels& ka = simd::kernels(a.src[0]->type);
    const simd::TypeKernels& kb = simd::kernels(b.src[0]->type);
    return ka.act_type == kb.act_type && ka.quantize_act == kb.quantize_act &&
           !matmul_uses_gemm(ka, x.ne[0], x.n_rows(), layout) && !matmul_uses_gemm(kb, x.ne[0], x.n_rows(), layout);
}

void op_matmul_group(const Node* const* ns, int m, ThreadPool& pool, std::vector<uint8_t>& scratch,
                     DecodeCache* decode) {
    const Tensor& x = *ns[0]->src[1];
    const int64_t K = x.ne[0], T = x.n_rows();
    const MatmulAct a = matmul_prepare(simd::kernels(ns[0]->src[0]->type), x.ptr<float>(), x.nb[1], K, T, scratch,
                                       pool);
    // Row tiles of every weight, numbered one after the other.
    constexpr int kMaxGroup = 8;
    int64_t tile0[kMaxGroup + 1];
    const uint8_t* groups[kMaxGroup] = {};
    double work = 0;
    tile0[0] = 0;
    for (int j = 0; j < m; ++j) {
        const Tensor& w = *ns[j]->src[0];
        const simd::TypeKernels& kk = simd::kernels(w.type);
        if (decode && matmul_uses_decode_layout(kk, K, T))
            groups[j] = decode->get(kk, w.row(0), w.nb[1], K, w.ne[1], pool);
        tile0[j + 1] = tile0[j] + (w.ne[1] + kRowTile - 1) / kRowTile;
        work += double(w.nb[1]) * double(w.ne[1]) * double(T);
    }
    split(pool, tile0[m], work, [&](int64_t b, int64_t e) {
        int j = 0;
        for (int64_t tile = b; tile < e; ++tile) {
            while (tile >= tile0[j + 1]) ++j;
            const Tensor& w = *ns[j]->src[0];
            const int64_t N = w.ne[1], r0 = (tile - tile0[j]) * kRowTile;
            row_tile(simd::kernels(w.type), w.row(0), w.nb[1], K, N, r0, std::min(N, r0 + kRowTile), a, T,
                     ns[j]->out->ptr<float>(), groups[j]);
        }
    });
}

void op_matmul(const Node& n, ThreadPool& pool, std::vector<uint8_t>& scratch, PackCache* cache,
               DecodeCache* decode) {
    const Tensor& w = *n.src[0];
    const Tensor& x = *n.src[1];
    Tensor& out = *n.out;
    const int64_t K = w.ne[0], N = w.ne[1], T = x.n_rows();
    if (!quant::traits(w.type).vec_dot)
        fail("matmul: no dot product for weight type ", dtype_name(w.type), " ('", w.name, "')");
    const simd::TypeKernels& kk = simd::kernels(w.type);
    const MatmulAct a = matmul_prepare(kk, x.ptr<float>(), x.nb[1], K, T, scratch, pool);
    matmul_compute(kk, w.row(0), w.nb[1], K, N, a, T, out.ptr<float>(), pool, cache, decode);
}

}  // namespace glia::cpu
