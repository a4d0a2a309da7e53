// Dequantization on the device, 32 values at a time: chunk c of a row is values
// [32c, 32c + 32). Block layouts are the GGUF ones (src/quant/blocks.h); the arithmetic
// is the reference dequantizer's, so a row lookup gives the CPU's values exactly.
#pragma once
#include "common.cuh"

namespace glia::cuda {

struct Q4_0Blk { uint16_t d; uint8_t qs[16]; };
struct Q8_0Blk { uint16_t d; int8_t qs[32]; };
struct Q4_KBlk { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct Q6_KBlk { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };

__device__ inline void k4_scale_min(int j, const uint8_t* q, int& sc, int& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

template <DType T> struct Dq;

template <> struct Dq<DType::F32> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const float4* p = reinterpret_cast<const float4*>(row) + c * 8;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const float4 v = p[i];
            y[4 * i] = v.x, y[4 * i + 1] = v.y, y[4 * i + 2] = v.z, y[4 * i + 3] = v.w;
        }
    }
};
template <> struct Dq<DType::F16> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + c * 32;
#pragma unroll
        for (int i = 0; i < 32; ++i) y[i] = h2f(p[i]);
    }
};
template <> struct Dq<DType::BF16> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + c * 32;
#pragma unroll
        for (int i = 0; i < 32; ++i) y[i] = __uint_as_float(uint32_t(p[i]) << 16);
    }
};
template <> struct Dq<DType::Q4_0> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const Q4_0Blk* b = reinterpret_cast<const Q4_0Blk*>(row) + c;
        const float d = h2f(b->d);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            y[j] = float((b->qs[j] & 0xF) - 8) * d;
            y[j + 16] = float((b->qs[j] >> 4) - 8) * d;
        }
    }
};
template <> struct Dq<DType::Q8_0> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const Q8_0Blk* b = reinterpret_cast<const Q8_0Blk*>(row) + c;
        const float d = h2f(b->d);
#pragma unroll
        for (int j = 0; j < 32; ++j) y[j] = float(b->qs[j]) * d;
    }
};
template <> struct Dq<DType::Q4_K> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const Q4_KBlk* b = reinterpret_cast<const Q4_KBlk*>(row) + c / 8;
        const int j = int(c % 8);
        int sc, m;
        k4_scale_min(j, b->scales, sc, m);
        const float d = h2f(b->d) * float(sc), mn = h2f(b->dmin) * float(m);
        const uint8_t* q = b->qs + (j / 2) * 32;
        if (j % 2 == 0) {
#pragma unroll
            for (int l = 0; l < 32; ++l) y[l] = d * float(q[l] & 0xF) - mn;
        } else {
#pragma unroll
            for (int l = 0; l < 32; ++l) y[l] = d * float(q[l] >> 4) - mn;
        }
    }
};
template <> struct Dq<DType::Q6_K> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const Q6_KBlk* b = reinterpret_cast<const Q6_KBlk*>(row) + c / 8;
        const int half = int(c % 8) / 4, k = int(c % 4);
        const uint8_t* ql = b->ql + half * 64;
        const uint8_t* qh = b->qh + half * 32;
        const int8_t* sc = b->scales + half * 8;
        const float d = h2f(b->d);
#pragma unroll
        for (int l = 0; l < 32; ++l) {
            int q;
            if (k == 0) q = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            else if (k == 1) q = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            else if (k == 2) q = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            else q = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * float(sc[l / 16 + 2 * k]) * float(q);
        }
    }
};

// The weight types the kernels handle.
inline bool type_supported(DType t) {
    switch (t) {
        case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q8_0: case DType::Q4_K:
        case DType::Q6_K: return true;
        default: return false;
    }
}

// Expands BODY once per supported type with D the type (a constexpr DType).
#define GLIA_CUDA_TYPE_SWITCH(t, BODY)                                         \
    switch (t) {                                                              \
        case DType::F32: { constexpr DType D = DType::F32; BODY; break; }      \
        case DType::F16: { constexpr DType D = DType::F16; BODY; break; }      \
        case DType::BF16: { constexpr DType D = DType::BF16; BODY; break; }    \
        case DType::Q4_0: { constexpr DType D = DType::Q4_0; BODY; break; }    \
        case DType::Q8_0: { constexpr DType D = DType::Q8_0; BODY; break; }    \
        case DType::Q4_K: { constexpr DType D = DType::Q4_K; BODY; break; }    \
        case DType::Q6_K: { constexpr DType D = DType::Q6_K; BODY; break; }    \
        default: ::glia::fail("cuda: no kernel for weight type ", dtype_name(t)); \
    }

}  // namespace glia::cuda
