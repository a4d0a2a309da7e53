// DecodeCache: weights in the few-token products' decode layout (see simd.h, Gemm::il_*,
// and simd/matmul.h), built once per weight on first use.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/simd/matmul.h"

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

bool matmul_uses_decode_layout(const simd::TypeKernels& kk, int64_t K, int64_t T) {
    return matmul_has_decode_layout(kk, K) && !matmul_uses_gemm(kk, K, T, true);
}

const uint8_t* DecodeCache::get(const simd::TypeKernels& kk, const uint8_t* w, size_t w_stride, int64_t K,
                                int64_t N, ThreadPool& pool) {
    if (!matmul_has_decode_layout(kk, K)) return nullptr;
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (auto it = groups_.find(w); it != groups_.end()) return it->second.data();
    }
    const simd::Gemm& g = *kk.gemm;
    const int64_t G = g.il_rows, n_groups = (N + G - 1) / G;
    const size_t gbytes = g.il_bytes(K);
    HugeBuffer buf(gbytes * size_t(n_groups));
    uint8_t* base = buf.data();
    pool.parallel_for(n_groups, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const int64_t r0 = i * G;
            g.il_pack(w + r0 * w_stride, w_stride, static_cast<int>(std::min(G, N - r0)), K, base + i * gbytes);
        }
    });
    std::lock_guard<std::mutex> lk(mu_);
    auto [it, fresh] = groups_.emplace(w, std::move(buf));
    if (fresh) bytes_ += it->second.size();
    return it->second.data();
}

void DecodeCache::forget(const uint8_t* w, size_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    const auto end = groups_.lower_bound(w + n);
    for (auto it = groups_.lower_bound(w); it != end;) {
        bytes_ -= it->second.size();
        it = groups_.erase(it);
    }
}

size_t DecodeCache::bytes() const {
    std::lock_guard<std::mutex> lk(mu_);
    return bytes_;
}

}  // namespace glia::cpu
