// DecodeCache: weights in the few-token products' decode layout (see simd.h, Gemm::il_*,
// and simd/matmul.h), built once per weight on first use.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/simd/matmul.h"
#include "core/page_out.h"

namespace glia::cpu {

// Measured on the 2-core EPYC (bench/LOG.md, 2026-12-07, sessions 20 and 21): decode
// 1.5-2x the file layout's speed, for 1x the Q4_K / Q6_K bytes more memory.
bool decode_layout_enabled() {
    static const bool on = [] {
        const char* e = std::getenv("GLIA_CPU_GEMV_INTERLEAVE");
        if (e && *e) return std::strcmp(e, "0") != 0;
        return kDecodeLayoutDefault;
    }();
    return on;
}

bool matmul_has_decode_layout(const simd::TypeKernels& kk, int64_t K) {
    return matmul_gemm_bits(kk, K) && kk.gemm->il_rows > 0;
}

bool expert_decode_layout(const simd::TypeKernels& kk, int64_t K, int64_t N) {
    static const bool on = [] {  // GLIA_CPU_MOE_LAYOUT=0: experts on the file's layout (A/B, bisecting)
        const char* e = std::getenv("GLIA_CPU_MOE_LAYOUT");
        return !(e && std::strcmp(e, "0") == 0);
    }();
    return on && matmul_has_decode_layout(kk, K) && N % kk.gemm->il_rows == 0;
}

bool matmul_uses_decode_layout(const simd::TypeKernels& kk, int64_t K, int64_t T) {
    return matmul_has_decode_layout(kk, K) && !matmul_uses_gemm(kk, K, T, true);
}

const uint8_t* DecodeCache::get(const simd::TypeKernels& kk, const uint8_t* w, size_t w_stride, int64_t K,
                                int64_t N, ThreadPool& pool, bool* built) {
    if (!matmul_has_decode_layout(kk, K)) return nullptr;
    const simd::Gemm& g = *kk.gemm;
    const int64_t G = g.il_rows;
    bool fresh = false;
    const uint8_t* groups = copies_.get(w, (N + G - 1) / G, g.il_bytes(K), [&](int64_t i, uint8_t* dst) {
        const int64_t r0 = i * G;
        g.il_pack(w + r0 * w_stride, w_stride, static_cast<int>(std::min(G, N - r0)), K, dst);
    }, pool, &fresh);
    // The GEMM packs from the layout only where the type can (il_pack_panel); a weight that
    // would still be packed from its own rows keeps its pages.
    const size_t n = w_stride * size_t(N);
    if (fresh && g.il_pack_panel && !kept(w, n)) page_out(w, n);
    if (built) *built = fresh;
    return groups;
}

void DecodeCache::keep_pages(const void* p, size_t n) {
    std::lock_guard<std::mutex> lk(keep_mu_);
    size_t& m = keep_[static_cast<const uint8_t*>(p)];
    m = std::max(m, n);
}

bool DecodeCache::kept(const uint8_t* w, size_t n) const {
    std::lock_guard<std::mutex> lk(keep_mu_);
    for (const auto& [p, m] : keep_)  // a few ranges: the weights other ops read
        if (p < w + n && p + m > w) return true;
    return false;
}

}  // namespace glia::cpu
