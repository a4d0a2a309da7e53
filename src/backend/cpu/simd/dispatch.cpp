// CPU feature detection and the per-level kernel tables.
#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "backend/cpu/simd/internal.h"
#ifdef GLIA_SIMD_X86
#include <cpuid.h>
#endif
#include "core/error.h"

namespace glia::cpu::simd {
namespace {

constexpr uint32_t kMaxType = 40;

#ifdef GLIA_SIMD_X86
// F16C and BMI2 through CPUID: clang's __builtin_cpu_supports does not know them (they
// need no OS support beyond AVX's, which the avx2 check covers).
bool has_f16c_bmi2() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_F16C)) return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return (b & bit_BMI2) != 0;
}
#endif

bool cpu_has(Isa isa) {
#ifdef GLIA_SIMD_X86
    // __builtin_cpu_supports also checks that the OS saves the wide registers.
    switch (isa) {
        case Isa::Scalar: return true;
        case Isa::Avx2:
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c_bmi2();
        case Isa::Avx512:
            return cpu_has(Isa::Avx2) && __builtin_cpu_supports("avx512f") &&
                   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                   __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
    }
    return false;
#else
    return isa == Isa::Scalar;
#endif
}

struct Tables {
    std::array<std::array<TypeKernels, kMaxType>, kIsaCount> t{};
    std::array<std::array<bool, kMaxType>, kIsaCount> present{};

    void set(Isa isa, DType type, const TypeKernels& k) {
        t[int(isa)][uint32_t(type)] = k;
        present[int(isa)][uint32_t(type)] = true;
    }

    Tables() {
        // Scalar: the reference table.
        for (uint32_t id = 0; id < kMaxType; ++id) {
            const DTypeInfo* info = dtype_info(id);
            if (!info || !quant::supported(info->type)) continue;
            const quant::TypeTraits& tr = quant::traits(info->type);
            if (!tr.vec_dot) continue;
            TypeKernels k;
            k.act_type = tr.vec_dot_type;
            k.vec_dot = tr.vec_dot;
            k.quantize_act = quant::traits(tr.vec_dot_type).quantize_act;
            for (int l = 0; l < kIsaCount; ++l) set(Isa(l), info->type, k);
        }
#ifdef GLIA_SIMD_X86
        add_level(Isa::Avx2, avx2::vec_dot_f32, avx2::vec_dot_f16, avx2::vec_dot_q4_0, avx2::vec_dot_q8_0,
                  avx2::vec_dot_q4_k, avx2::vec_dot_q5_k, avx2::vec_dot_q6_k, avx2::quantize_act_q8_0,
                  avx2::quantize_act_q8_k);
        add_level(Isa::Avx512, avx512::vec_dot_f32, avx512::vec_dot_f16, avx512::vec_dot_q4_0,
                  avx512::vec_dot_q8_0, avx512::vec_dot_q4_k, avx512::vec_dot_q5_k, avx512::vec_dot_q6_k,
                  avx512::quantize_act_q8_0, avx512::quantize_act_q8_k);
        auto gemm = [&](DType ty, const Gemm* g) { t[int(Isa::Avx512)][uint32_t(ty)].gemm = g; };
        gemm(DType::Q4_K, &avx512::gemm_q4_k);
        gemm(DType::Q5_K, &avx512::gemm_q5_k);
        gemm(DType::Q6_K, &avx512::gemm_q6_k);
        gemm(DType::Q8_0, &avx512::gemm_q8_0);
        gemm(DType::Q4_0, &avx512::gemm_q4_0);
#endif
    }

    void add_level(Isa isa, quant::VecDotFn f32, quant::VecDotFn f16, quant::VecDotFn q4_0, quant::VecDotFn q8_0,
                   quant::VecDotFn q4_k, quant::VecDotFn q5_k, quant::VecDotFn q6_k, quant::QuantizeRowFn act_q8_0,
                   quant::QuantizeRowFn act_q8_k) {
        auto& row = t[int(isa)];
        // Every type whose activations are Q8_0 / Q8_K gets the fast quantizer.
        for (uint32_t id = 0; id < kMaxType; ++id) {
            if (!present[int(isa)][id]) continue;
            if (row[id].act_type == DType::Q8_0) row[id].quantize_act = act_q8_0;
            if (row[id].act_type == DType::Q8_K) row[id].quantize_act = act_q8_k;
        }
        row[uint32_t(DType::F32)].vec_dot = f32;
        row[uint32_t(DType::F16)].vec_dot = f16;
        row[uint32_t(DType::Q4_0)].vec_dot = q4_0;
        row[uint32_t(DType::Q8_0)].vec_dot = q8_0;
        row[uint32_t(DType::Q4_K)].vec_dot = q4_k;
        row[uint32_t(DType::Q5_K)].vec_dot = q5_k;
        row[uint32_t(DType::Q6_K)].vec_dot = q6_k;
    }
};

const Tables& tables() {
    static const Tables t;
    return t;
}

Isa detect_best() {
    Isa best = Isa::Scalar;
    for (int l = kIsaCount - 1; l >= 0; --l)
        if (cpu_has(Isa(l))) { best = Isa(l); break; }
    if (const char* env = std::getenv("GLIA_CPU_ISA"); env && *env) {
        for (int l = 0; l < kIsaCount; ++l)
            if (std::strcmp(env, isa_name(Isa(l))) == 0) {
                if (l < int(best)) best = Isa(l);
                return best;
            }
        fail("GLIA_CPU_ISA='", env, "' is not one of scalar, avx2, avx512");
    }
    return best;
}

}  // namespace

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::Scalar: return "scalar";
        case Isa::Avx2: return "avx2";
        case Isa::Avx512: return "avx512";
    }
    return "?";
}

// Detected once: CPUID traps to the hypervisor in a VM (microseconds a call), and the
// kernels look their level up per op.
bool isa_supported(Isa isa) {
    static const std::array<bool, kIsaCount> has = [] {
        std::array<bool, kIsaCount> h{};
        for (int l = 0; l < kIsaCount; ++l) h[size_t(l)] = cpu_has(Isa(l));
        return h;
    }();
    return has[size_t(isa)];
}

Isa best_isa() {
    static const Isa best = detect_best();
    return best;
}

bool has_kernels(DType t, Isa isa) {
    const uint32_t id = static_cast<uint32_t>(t);
    return id < kMaxType && tables().present[int(isa)][id];
}

const TypeKernels& kernels(DType t, Isa isa) {
    const uint32_t id = static_cast<uint32_t>(t);
    const Tables& tab = tables();
    if (id >= kMaxType || !tab.present[int(isa)][id])
        fail("no CPU dot product for weight type ", dtype_name(t));
    return tab.t[int(isa)][id];
}

}  // namespace glia::cpu::simd
