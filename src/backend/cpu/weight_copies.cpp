// What the CPU backend derives from its weights and keeps (the GEMM's packed panels, the
// decode layout): the store both caches keep their copies in, and their bytes counted
// ahead of time for the planner (glia plan, the runtime's -v).
#include <cstdlib>
#include <cstring>

#include "backend/cpu/simd/matmul.h"

namespace glia::cpu {

const uint8_t* WeightCopies::get(const uint8_t* w, int64_t units, size_t unit_bytes,
                                 FunctionRef<void(int64_t, uint8_t*)> pack, ThreadPool& pool, bool* built) {
    if (built) *built = false;
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (auto it = copies_.find(w); it != copies_.end()) return it->second.data();
    }
    HugeBuffer buf(unit_bytes * size_t(units));
    uint8_t* base = buf.data();
    pool.parallel_for(units, [&](int64_t b, int64_t e) {
        for (int64_t u = b; u < e; ++u) pack(u, base + size_t(u) * unit_bytes);
    });
    std::lock_guard<std::mutex> lk(mu_);
    auto [it, fresh] = copies_.emplace(w, std::move(buf));  // another thread may have built it meanwhile
    if (fresh) bytes_ += it->second.size();
    if (built) *built = fresh;
    return it->second.data();
}

size_t WeightCopies::bytes() const {
    std::lock_guard<std::mutex> lk(mu_);
    return bytes_;
}

void WeightCopies::forget(const uint8_t* w, size_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    const auto end = copies_.lower_bound(w + n);
    for (auto it = copies_.lower_bound(w); it != end;) {
        bytes_ -= it->second.size();
        it = copies_.erase(it);
    }
}

bool pack_cache_enabled() {
    static const bool on = [] {
        const char* e = std::getenv("GLIA_PACK_CACHE");
        return !(e && std::strcmp(e, "0") == 0);
    }();
    return on;
}

bool pack_cache_keeps(const simd::TypeKernels& kk, int64_t K) {
    return matmul_gemm_bits(kk, K) && !(decode_layout_enabled() && matmul_has_decode_layout(kk, K));
}

uint64_t weight_copy_bytes(DType type, int64_t K, int64_t N, bool expert) {
    if (K <= 0 || N <= 0) return 0;
    const simd::Isa isa = simd::best_isa();
    if (!simd::has_kernels(type, isa)) return 0;
    const simd::TypeKernels& kk = simd::kernels(type, isa);
    if (!matmul_gemm_bits(kk, K)) return 0;  // no GEMM for this type and K: nothing derived
    const simd::Gemm& g = *kk.gemm;
    if (expert)  // a stack's experts keep their decode layout only (ops_moe.cpp)
        return decode_layout_enabled() && expert_decode_layout(kk, K, N) ? uint64_t(g.il_bytes(K)) * uint64_t(N / g.il_rows)
                                                                         : 0;
    uint64_t n = 0;
    if (pack_cache_enabled() && pack_cache_keeps(kk, K))
        n += uint64_t(g.panel_bytes(K)) * uint64_t((N + g.panel_rows - 1) / g.panel_rows);
    if (decode_layout_enabled() && matmul_has_decode_layout(kk, K))
        n += uint64_t(g.il_bytes(K)) * uint64_t((N + g.il_rows - 1) / g.il_rows);
    return n;
}

}  // namespace glia::cpu
