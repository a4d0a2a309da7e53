// Per-level kernel declarations, internal to src/backend/cpu/simd. The public entry point
// is the table in simd.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/simd/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#define GLIA_SIMD_X86 1
// Per-function targets: the translation units are compiled for baseline x86-64.
#define GLIA_TARGET_AVX2 __attribute__((target("avx2,fma,f16c,bmi2")))
#define GLIA_TARGET_AVX512 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c,bmi2")))
#endif

namespace glia::cpu::simd {

#define GLIA_SIMD_LEVEL_DECLS                                                \
    void vec_dot_f32(int64_t n, float* s, const void* w, const void* a);     \
    void vec_dot_f16(int64_t n, float* s, const void* w, const void* a);     \
    void vec_dot_q4_0(int64_t n, float* s, const void* w, const void* a);    \
    void vec_dot_q8_0(int64_t n, float* s, const void* w, const void* a);    \
    void vec_dot_q4_k(int64_t n, float* s, const void* w, const void* a);    \
    void vec_dot_q5_k(int64_t n, float* s, const void* w, const void* a);    \
    void vec_dot_q6_k(int64_t n, float* s, const void* w, const void* a);    \
    void quantize_act_q8_0(const float* x, void* dst, int64_t n);            \
    void quantize_act_q8_k(const float* x, void* dst, int64_t n);

namespace avx2 { GLIA_SIMD_LEVEL_DECLS }
namespace avx512 {
GLIA_SIMD_LEVEL_DECLS
extern const Gemm gemm_q4_k, gemm_q5_k, gemm_q6_k, gemm_q8_0, gemm_q4_0;
#define GLIA_GEMV_DECL(name)                                                                                  \
    void name(const uint8_t* w, size_t row_stride, int nr, int64_t K, int64_t slice_k, const uint8_t* act, \
              size_t act_stride, int nt, float* out, size_t out_stride);
GLIA_GEMV_DECL(gemv_q4_k)
GLIA_GEMV_DECL(gemv_q5_k)
GLIA_GEMV_DECL(gemv_q6_k)
GLIA_GEMV_DECL(gemv_q8_0)
GLIA_GEMV_DECL(gemv_q4_0)
#undef GLIA_GEMV_DECL
// The decode layout's offsets within one super-block of a 16-row group (avx512_gemv_il.cpp
// describes the layouts).
namespace il_layout {
inline constexpr size_t kQ4Block = 2304, kQ4Scales = 64, kQ4Quants = 256;
inline constexpr size_t kQ6Block = 3360, kQ6Ql = 256, kQ6Qh = 2304, kQ6D = 3328;
}  // namespace il_layout
size_t il_bytes_q4_k(int64_t K);
void il_pack_q4_k(const uint8_t* w, size_t row_stride, int nr, int64_t K, void* group);
void il_gemv_q4_k(const void* group, int nr, int64_t K, int64_t slice_k, const uint8_t* act, size_t act_stride,
                  int nt, float* out, size_t out_stride);
size_t il_bytes_q6_k(int64_t K);
void il_pack_q6_k(const uint8_t* w, size_t row_stride, int nr, int64_t K, void* group);
void il_gemv_q6_k(const void* group, int nr, int64_t K, int64_t slice_k, const uint8_t* act, size_t act_stride,
                  int nt, float* out, size_t out_stride);
}  // namespace avx512
#undef GLIA_SIMD_LEVEL_DECLS

}  // namespace glia::cpu::simd
