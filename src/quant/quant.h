// Tensor block formats: one table entry per type (DESIGN.md "Formats").
//
// Reference (scalar) dequantize/quantize rows, and the dot product of a weight row with
// an activation row already converted to the type's `vec_dot_type` (as the reference
// engine does: Q8_0 activations for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1, Q8_K for
// the K-quants and IQ4_XS, F16 for F16, BF16 for BF16, F32 for F32).
//
// Exactness contract:
//  - dequantize_row is bit-identical to the reference implementation (pinned by the
//    dequantization goldens).
//  - quantize_row is the reference's non-imatrix model-file quantizer (what its quantize
//    tool writes without an importance matrix), bit-identical by construction.
//  - quantize_act is how the reference CPU backend (x86, AVX2/AVX-512 build, as used for
//    the goldens) converts f32 activations into this type when it is a vec_dot_type.
//    It differs from quantize_row only for Q8_0/Q8_1 (id = 127/amax and ties-to-even
//    instead of id = 1/(amax/127) and ties-away); use it for activations.
//  - vec_dot sums integer products per block in int32 and scales per block in float.
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
    // Activation quantizer (see above); set for every supported type, equal to
    // quantize_row except for Q8_0/Q8_1.
    QuantizeRowFn quantize_act = nullptr;
};

// The table entry for a type; throws glia::Error naming the type when unsupported.
const TypeTraits& traits(DType t);
// True when the type can be dequantized (and hence used as a weight).
bool supported(DType t);
// Comma-separated names of the supported types ("F32, F16, ...").
const char* supported_names();

// Convenience wrappers.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
void quantize_row(DType t, const float* src, void* dst, int64_t n);
// Converts an f32 activation row into `t` (normally some weight type's vec_dot_type).
void quantize_act_row(DType t, const float* src, void* dst, int64_t n);

// IQ4_NL without the scale search: the reference's quantize_row_iq4_nl_ref (what its CPU
// backend uses to convert f32 data into IQ4_NL at run time, e.g. for a KV cache).
void quantize_row_iq4_nl_fast(const float* src, void* dst, int64_t n);

}  // namespace glia::quant
