// KV cache rows on the GPU in the CPU's four cell types (--cache-type-k / -v; layouts in
// src/backend/cpu/simd/kv_rows.h): F16, BF16, Q8_0 (blocks of 32: f16 scale, 32 int8) and
// Q4_0 (blocks of 32: f16 scale, 16 bytes of nibbles, value j < 16 low nibble of byte j,
// j >= 16 high nibble of byte j - 16). A row holds one token's values of every KV head of a
// layer; blocks run over the whole row, so heads of 8 or 16 values share blocks.
//
// Writing: a warp converts one block of 32 values of a row (a lane per value) with the
// arithmetic of the CPU's store (ops_attention.cpp store_row): Q8_0 as the activation
// quantizer quantize_act_q8_0, Q4_0 as quantize_q4_0, BF16 as f32_to_bf16, F16 as f2h; every
// multiply and add rounded on its own (no contraction), so a finite row gets the CPU's bytes.
// Reading: eight values at a time widened to f32 exactly as the CPU widens them (an int
// times the f32 scale, rounded once), so the attention sees the CPU's values.
#pragma once
#include "common.cuh"

namespace glia::cuda {

enum KvCode : int { kKvF16 = 0, kKvBF16 = 1, kKvQ8_0 = 2, kKvQ4_0 = 3 };

// The code of a cache type; -1: not a type the CUDA attention reads.
inline int kv_code(DType t) {
    switch (t) {
        case DType::F16: return kKvF16;
        case DType::BF16: return kKvBF16;
        case DType::Q8_0: return kKvQ8_0;
        case DType::Q4_0: return kKvQ4_0;
        default: return -1;
    }
}

// A cache of these types fits the CUDA attention: rows of whole blocks for Q8_0 / Q4_0 (any
// head size that is a multiple of 8 then: eight values never cross a block).
inline bool kv_cache_supported(DType t, int64_t row_values) {
    const int c = kv_code(t);
    return c == kKvF16 || c == kKvBF16 || ((c == kKvQ8_0 || c == kKvQ4_0) && row_values % 32 == 0);
}

// Shared memory of the CUDA-core attention block (k_attention.cu): q of the group's heads,
// then 32 staged K rows and 32 V rows, as f16 (both caches F16) or widened to f32 (16 bytes
// of padding a row against bank conflicts either way).
inline size_t attention_kv_smem_bytes(DType kt, DType vt, int64_t group, int64_t hd, int64_t hd_v) {
    if (kt == DType::F16 && vt == DType::F16) return attention_smem_bytes(group, hd, hd_v);
    return size_t(group * hd) * 4 + size_t(32 * (hd + 4) + 32 * (hd_v + 4)) * 4;
}

__device__ __forceinline__ bool kv_finite(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }

// f32 -> bf16 as core/f16.h rounds: nearest even, a NaN kept quiet with its sign and top bits.
__device__ __forceinline__ uint16_t kv_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 64u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}

// Lane j's value x of a block as Q8_0: scale amax / 127, values x * (127 / amax) to nearest
// even; a block holding a NaN or an infinity becomes the invalid block (scale NaN, values 0).
__device__ __forceinline__ void kv_put_q8_0(uint8_t* blk, float x, int lane) {
    const bool bad = warp_max(kv_finite(x) ? 0.0f : 1.0f) > 0.0f;
    const float amax = warp_max(fabsf(x));
    int q = 0;
    uint16_t d = 0x7E00;  // f16 quiet NaN
    if (!bad) {
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const float v = __fmul_rn(x, id);
        q = kv_finite(v) ? __float2int_rn(v) : 0;
        d = f2h(amax / 127.0f);
    }
    if (lane == 0) *reinterpret_cast<uint16_t*>(blk) = d;
    blk[2 + lane] = uint8_t(int8_t(q));
}

// Lane j's value x of a block as Q4_0: scale d = max / -8 where max is the first value of
// largest magnitude (0 when all are 0), values min(15, trunc(x / d + 8.5)).
__device__ __forceinline__ void kv_put_q4_0(uint8_t* blk, float x, int lane) {
    const float a = fabsf(x);
    const float amax = warp_max(a);  // NaNs are passed over, as the CPU's strict compare does
    const int first = int(-warp_max(a == amax ? -float(lane) : -64.0f));
    const float xm = __shfl_sync(0xffffffffu, x, first & 31);
    const float mx = amax > 0.0f ? xm : 0.0f;
    const float d = mx / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const int q = min(15, int(__fadd_rn(__fmul_rn(x, id), 8.5f)));
    const int hi = __shfl_sync(0xffffffffu, q, (lane + 16) & 31);
    if (lane == 0) *reinterpret_cast<uint16_t*>(blk) = f2h(d);
    if (lane < 16) blk[2 + lane] = uint8_t(q | (hi << 4));
}

// A warp writes values [32 b, 32 b + 32) of one token's row of `code` for each of its blocks
// b = warp, warp + nwarps, ...: heads of hd values, head h at src.f(h, t).
__device__ __forceinline__ void kv_store_row(int code, const Rows& src, int64_t t, int hd, int n_kv, uint8_t* row,
                                             int warp, int nwarps, int lane) {
    const int n = hd * n_kv;
    for (int b = warp; b * 32 < n; b += nwarps) {
        const int x = b * 32 + lane;
        const float v = x < n ? src.f(x / hd, t)[x % hd] : 0.0f;
        if (code == kKvQ8_0) kv_put_q8_0(row + b * 34, v, lane);
        else if (code == kKvQ4_0) kv_put_q4_0(row + b * 18, v, lane);
        else if (x < n) reinterpret_cast<uint16_t*>(row)[x] = code == kKvBF16 ? kv_bf16(v) : f2h(v);
    }
}

// Values [x, x + 8) of a cache row (x a multiple of 8) as f32 in a and b. F16 / BF16 rows are
// read in 16 bytes (rows and heads 16-byte aligned, as the f16 kernel reads them); the blocks
// of Q8_0 / Q4_0 are 2-byte aligned, their values read in 2-byte words.
__device__ __forceinline__ void kv_widen8(int code, const uint8_t* row, int64_t x, float4& a, float4& b) {
    float f[8];
    if (code == kKvF16 || code == kKvBF16) {
        const int4 u = __ldg(reinterpret_cast<const int4*>(row + 2 * x));
        const uint32_t w[4] = {uint32_t(u.x), uint32_t(u.y), uint32_t(u.z), uint32_t(u.w)};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint16_t lo = uint16_t(w[i] & 0xffffu), hi = uint16_t(w[i] >> 16);
            f[2 * i] = code == kKvF16 ? h2f(lo) : __uint_as_float(uint32_t(lo) << 16);
            f[2 * i + 1] = code == kKvF16 ? h2f(hi) : __uint_as_float(uint32_t(hi) << 16);
        }
    } else if (code == kKvQ8_0) {
        const uint8_t* blk = row + x / 32 * 34;
        const float d = h2f(__ldg(reinterpret_cast<const uint16_t*>(blk)));
        const uint16_t* qs = reinterpret_cast<const uint16_t*>(blk + 2 + x % 32);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t w = __ldg(qs + i);
            f[2 * i] = __fmul_rn(float(int8_t(uint8_t(w & 0xffu))), d);
            f[2 * i + 1] = __fmul_rn(float(int8_t(uint8_t(w >> 8))), d);
        }
    } else {
        const uint8_t* blk = row + x / 32 * 18;
        const int j = int(x % 32);
        const float d = h2f(__ldg(reinterpret_cast<const uint16_t*>(blk)));
        const uint16_t* qs = reinterpret_cast<const uint16_t*>(blk + 2 + (j & 15));
        const int sh = j >= 16 ? 4 : 0;  // the block's second half: high nibbles
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint32_t w = __ldg(qs + i);
            f[2 * i] = __fmul_rn(float(int((w >> sh) & 15u) - 8), d);
            f[2 * i + 1] = __fmul_rn(float(int((w >> (8 + sh)) & 15u) - 8), d);
        }
    }
    a = make_float4(f[0], f[1], f[2], f[3]);
    b = make_float4(f[4], f[5], f[6], f[7]);
}

}  // namespace glia::cuda
