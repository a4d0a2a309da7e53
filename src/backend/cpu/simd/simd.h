// CPU SIMD kernels, chosen at run time by CPU features (DESIGN.md "Performance shape").
//
// Each weight type has one entry per instruction-set level: a row dot product (decode and
// small batches), an activation quantizer that writes blocks bit-identical to
// quant::quantize_act, and, where it pays, a packed GEMM for prefill. Entries a level does
// not implement fall back to the scalar reference in src/quant, so every type works at
// every level. The SIMD files are compiled with per-function target attributes, never with
// -march flags, so the binary runs on any x86-64 (and builds elsewhere with scalar only).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "quant/quant.h"

namespace glia::cpu::simd {

enum class Isa : int { Scalar = 0, Avx2 = 1, Avx512 = 2 };
inline constexpr int kIsaCount = 3;

const char* isa_name(Isa isa);  // "scalar", "avx2", "avx512"
// True when this CPU (and this build) can run the level's kernels.
bool isa_supported(Isa isa);
// The best supported level, capped by $GLIA_CPU_ISA (scalar|avx2|avx512) when set.
Isa best_isa();

// Prefill GEMM on a packed weight panel. A panel holds `panel_rows` consecutive weight
// rows rearranged so that one vector lane is one row: each 4-byte group of a row's
// (unsigned) quantized values sits beside the same group of the other rows, and a VNNI
// dot instruction multiplies it with a broadcast of 4 activation bytes of one token.
// Each loaded weight vector is reused across several tokens, and each broadcast across
// several row groups; per-block scales are applied once per block, not per element.
struct Gemm {
    int panel_rows;
    // Bytes of one packed panel of K columns.
    size_t (*panel_bytes)(int64_t K);
    // Packs rows [0, nr) (nr <= panel_rows; the rest of the panel is zero) of a weight
    // matrix whose rows are `row_stride` bytes apart.
    void (*pack)(const uint8_t* w, size_t row_stride, int nr, int64_t K, void* panel);
    // Per-token data derived once per matmul from an activation row (already quantized
    // to the type's vec_dot_type): `side_bytes(K)` bytes (0: none needed).
    size_t (*side_bytes)(int64_t K);
    void (*prepare)(const uint8_t* act_row, int64_t K, void* side);
    // out[c * out_stride + r] (+)= dot(row r, token c) for r < nr, c < nt. Token c's
    // activation row is act + c * act_stride, its side data side + c * side_stride. A
    // slice of the columns [k0, k0 + K) is computed by offsetting panel, act and side by
    // panel_bytes(k0), row_bytes(act_type, k0) and side_bytes(k0) (k0 a multiple of 256);
    // `accumulate` adds to out instead of overwriting it.
    void (*compute)(const void* panel, int nr, int64_t K, const uint8_t* act, size_t act_stride,
                    const uint8_t* side, size_t side_stride, int nt, float* out, size_t out_stride,
                    bool accumulate);
    // The same products for a few tokens straight from the weights' file layout (rows
    // `row_stride` bytes apart; no side data): out[c * out_stride + r] for r < nr, c < nt,
    // bit-identical to compute() called over the slices [k0, k0 + slice_k) of K as the
    // matmul driver does (K a multiple of 256). So a sequence's outputs do not depend on
    // how many tokens share its step.
    void (*gemv)(const uint8_t* w, size_t row_stride, int nr, int64_t K, int64_t slice_k, const uint8_t* act,
                 size_t act_stride, int nt, float* out, size_t out_stride);
    // Optional (il_rows 0: none): the decode layout, the same products as gemv() with its
    // bits from weights rearranged once into groups of il_rows rows, il_bytes(K) bytes a
    // group (the rows' own bytes, a last short group padded), so that one instruction
    // serves a whole group. il_pack writes rows [0, nr) (nr <= il_rows) as one group;
    // il_gemv computes a group's nr rows: out[c * out_stride + r] for r < nr, c < nt.
    int il_rows;
    size_t (*il_bytes)(int64_t K);
    void (*il_pack)(const uint8_t* w, size_t row_stride, int nr, int64_t K, void* group);
    void (*il_gemv)(const void* group, int nr, int64_t K, int64_t slice_k, const uint8_t* act, size_t act_stride,
                    int nt, float* out, size_t out_stride);
    // Packs rows [0, nr) (nr <= panel_rows) of a panel from their decode layout: the
    // panel_rows / il_rows groups from `groups` on, il_bytes(K) apart (those holding no row
    // need not exist). The same bytes as pack() of the file's rows, with plain loads.
    void (*il_pack_panel)(const uint8_t* groups, int nr, int64_t K, void* panel);
};

struct TypeKernels {
    DType act_type = DType::F32;                   // the weight type's vec_dot_type
    quant::VecDotFn vec_dot = nullptr;             // one row . one activation row
    quant::QuantizeRowFn quantize_act = nullptr;   // f32 -> act_type, bit-identical
    const Gemm* gemm = nullptr;                    // nullptr: no packed path
};

// The kernels for weights of type `t` at level `isa` (scalar entries where the level has
// none). Throws glia::Error when the type has no dot product at all.
const TypeKernels& kernels(DType t, Isa isa);
inline const TypeKernels& kernels(DType t) { return kernels(t, best_isa()); }
// Whether kernels(t, isa) would return (the type has a dot product).
bool has_kernels(DType t, Isa isa);

// Reads n bytes with the widest loads available and returns a checksum: the memory
// bandwidth yardstick of bench-ops.
uint64_t read_memory(const void* p, size_t n);

}  // namespace glia::cpu::simd
