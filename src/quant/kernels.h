// Scalar reference kernels of every supported type (internal to src/quant; the public
// entry point is the table in quant.h).
#pragma once
#include <cstdint>

namespace glia::quant::kernels {

#define GLIA_QUANT_KERNELS(name)                                               \
    void dequantize_##name(const void* src, float* dst, int64_t n);            \
    void quantize_##name(const float* src, void* dst, int64_t n);              \
    void vec_dot_##name(int64_t n, float* s, const void* w, const void* a);

GLIA_QUANT_KERNELS(f32)
GLIA_QUANT_KERNELS(f16)
GLIA_QUANT_KERNELS(bf16)
GLIA_QUANT_KERNELS(q4_0)
GLIA_QUANT_KERNELS(q4_1)
GLIA_QUANT_KERNELS(q5_0)
GLIA_QUANT_KERNELS(q5_1)
GLIA_QUANT_KERNELS(q8_0)
GLIA_QUANT_KERNELS(q8_1)
GLIA_QUANT_KERNELS(iq4_nl)
GLIA_QUANT_KERNELS(q2_k)
GLIA_QUANT_KERNELS(q3_k)
GLIA_QUANT_KERNELS(q4_k)
GLIA_QUANT_KERNELS(q5_k)
GLIA_QUANT_KERNELS(q6_k)
GLIA_QUANT_KERNELS(q8_k)
GLIA_QUANT_KERNELS(iq4_xs)
#undef GLIA_QUANT_KERNELS

// Activation quantizers of the reference CPU backend on x86 (AVX2/AVX-512 path):
// d = amax/127, q = round-half-even(x * (127/amax)).
void quantize_act_q8_0(const float* src, void* dst, int64_t n);
void quantize_act_q8_1(const float* src, void* dst, int64_t n);
// IQ4_NL without the scale search (the reference's quantize_row_iq4_nl_ref, ntry = -1).
void quantize_iq4_nl_fast(const float* src, void* dst, int64_t n);

}  // namespace glia::quant::kernels
