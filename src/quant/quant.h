// Tensor block formats: one table entry per type (DESIGN.md "Formats").
//
// Reference (scalar) dequantize/quantize rows, and the dot product of a weight row with
// an activation row already converted to the type's `vec_dot_type` (as the reference
// engine does: Q8_0 activations for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1, Q8_K for
// the K-quants and IQ4_XS, F16 for F16, BF16 for BF16, F32 for F32).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace glia::quant {

using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);
// s = dot(weight row of n elements, activation row of n elements in vec_dot_type)
using VecDotFn = void (*)(int64_t n, float* s, const void* w, const void* a);

struct TypeTraits {
    DType type;
    int64_t block_size;
    size_t type_size;
    DequantizeRowFn dequantize_row = nullptr;  // nullptr: not supported
    QuantizeRowFn quantize_row = nullptr;      // reference quantizer
    DType vec_dot_type = DType::F32;
    VecDotFn vec_dot = nullptr;
};

// The table entry for a type; throws glia::Error naming the type when unsupported.
const TypeTraits& traits(DType t);
// True when the type can be dequantized (and hence used as a weight).
bool supported(DType t);

// Convenience wrappers.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace glia::quant
