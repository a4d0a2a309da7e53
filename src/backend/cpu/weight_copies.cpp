// What the CPU backend derives from its weights and keeps (the GEMM's packed panels, the
// decode layout), counted ahead of time for the planner (glia plan, the runtime's -v).
#include <cstdlib>
#include <cstring>

#include "backend/cpu/simd/matmul.h"

namespace glia::cpu {

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
    if (expert) return 0;  // the experts' products keep no copies (ops_moe.cpp)
    const simd::Gemm& g = *kk.gemm;
    uint64_t n = 0;
    if (pack_cache_enabled() && pack_cache_keeps(kk, K))
        n += uint64_t(g.panel_bytes(K)) * uint64_t((N + g.panel_rows - 1) / g.panel_rows);
    if (decode_layout_enabled() && matmul_has_decode_layout(kk, K))
        n += uint64_t(g.il_bytes(K)) * uint64_t((N + g.il_rows - 1) / g.il_rows);
    return n;
}

}  // namespace glia::cpu
