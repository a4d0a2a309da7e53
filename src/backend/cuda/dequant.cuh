// Dequantization on the device, 32 values at a time: chunk c of a row is values
// [32c, 32c + 32). Block layouts are the GGUF ones (src/quant/blocks.h); the arithmetic
// is the reference dequantizer's, so a row lookup gives the CPU's values exactly: where
// the CPU rounds a product before adding (d * q - m), we do too (__fmul_rn keeps nvcc
// from contracting the two into one FMA, which rounds once).
#pragma once
#include "common.cuh"

namespace glia::cuda {

struct Q4_0Blk { uint16_t d; uint8_t qs[16]; };
struct Q4_1Blk { uint16_t d, m; uint8_t qs[16]; };
struct Q5_0Blk { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct Q5_1Blk { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct Q8_0Blk { uint16_t d; int8_t qs[32]; };
struct Q2_KBlk { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; };
struct Q3_KBlk { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct Q4_KBlk { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct Q5_KBlk { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct Q6_KBlk { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct IQ4_NLBlk { uint16_t d; uint8_t qs[16]; };
struct IQ4_XSBlk { uint16_t d, scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };
static_assert(sizeof(Q4_1Blk) == 20 && sizeof(Q5_0Blk) == 22 && sizeof(Q5_1Blk) == 24);
static_assert(sizeof(Q2_KBlk) == 84 && sizeof(Q3_KBlk) == 110 && sizeof(Q5_KBlk) == 176);
static_assert(sizeof(IQ4_NLBlk) == 18 && sizeof(IQ4_XSBlk) == 136);

// The 16 non-linear levels of IQ4_NL / IQ4_XS, packed 8 to a 64-bit constant so that a
// lookup is a shift in registers (no table in memory, no divergent constant loads).
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
constexpr uint64_t iq4_pack(int first) {
    uint64_t r = 0;
    for (int i = 0; i < 8; ++i) r |= uint64_t(uint8_t(kIq4Levels[first + i])) << (8 * i);
    return r;
}
constexpr uint64_t kIq4Lo = iq4_pack(0), kIq4Hi = iq4_pack(8);
__device__ inline float iq4_level(int q) {
    return float(int8_t(uint8_t(((q & 8) ? kIq4Hi : kIq4Lo) >> ((q & 7) * 8))));
}

// d * q - m with the product rounded first (as the CPU's reference dequantizers).
__device__ inline float mul_sub(float d, float q, float m) { return __fsub_rn(__fmul_rn(d, q), m); }
__device__ inline float mul_add(float q, float d, float m) { return __fadd_rn(__fmul_rn(q, d), m); }

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
// A chunk's 32 16-bit values: four 16-byte loads when the chunk is 16-byte aligned (rows of
// whole chunks in cudaMalloc'd memory always are), else 32 two-byte loads. Same values.
__device__ inline void load_halfs32(const uint16_t* p, uint16_t* h) {
    if ((reinterpret_cast<uintptr_t>(p) & 15) == 0) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const uint4 v = reinterpret_cast<const uint4*>(p)[i];
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int k = 0; k < 4; ++k) h[8 * i + 2 * k] = uint16_t(w[k] & 0xffffu), h[8 * i + 2 * k + 1] = uint16_t(w[k] >> 16);
        }
    } else {
#pragma unroll
        for (int i = 0; i < 32; ++i) h[i] = p[i];
    }
}
template <> struct Dq<DType::F16> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        uint16_t h[32];
        load_halfs32(reinterpret_cast<const uint16_t*>(row) + c * 32, h);
#pragma unroll
        for (int i = 0; i < 32; ++i) y[i] = h2f(h[i]);
    }
};
template <> struct Dq<DType::BF16> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        uint16_t h[32];
        load_halfs32(reinterpret_cast<const uint16_t*>(row) + c * 32, h);
#pragma unroll
        for (int i = 0; i < 32; ++i) y[i] = __uint_as_float(uint32_t(h[i]) << 16);
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
template <> struct Dq<DType::Q4_1> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const Q4_1Blk* b = reinterpret_cast<const Q4_1Blk*>(row) + c;
        const float d = h2f(b->d), m = h2f(b->m);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            y[j] = mul_add(float(b->qs[j] & 0xF), d, m);
            y[j + 16] = mul_add(float(b->qs[j] >> 4), d, m);
        }
    }
};
// Q5_0 / Q5_1: the fifth bits of values j and j + 16 are bits j and j + 16 of qh.
__device__ inline uint32_t q5_high(const uint8_t* qh) {
    return uint32_t(qh[0]) | (uint32_t(qh[1]) << 8) | (uint32_t(qh[2]) << 16) | (uint32_t(qh[3]) << 24);
}
template <> struct Dq<DType::Q5_0> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const Q5_0Blk* b = reinterpret_cast<const Q5_0Blk*>(row) + c;
        const float d = h2f(b->d);
        const uint32_t qh = q5_high(b->qh);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const int v0 = (b->qs[j] & 0xF) | int(((qh >> j) << 4) & 0x10);
            const int v1 = (b->qs[j] >> 4) | int((qh >> (j + 12)) & 0x10);
            y[j] = float(v0 - 16) * d;
            y[j + 16] = float(v1 - 16) * d;
        }
    }
};
template <> struct Dq<DType::Q5_1> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const Q5_1Blk* b = reinterpret_cast<const Q5_1Blk*>(row) + c;
        const float d = h2f(b->d), m = h2f(b->m);
        const uint32_t qh = q5_high(b->qh);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const int v0 = (b->qs[j] & 0xF) | int(((qh >> j) << 4) & 0x10);
            const int v1 = (b->qs[j] >> 4) | int((qh >> (j + 12)) & 0x10);
            y[j] = mul_add(float(v0), d, m);
            y[j + 16] = mul_add(float(v1), d, m);
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
            for (int l = 0; l < 32; ++l) y[l] = mul_sub(d, float(q[l] & 0xF), mn);
        } else {
#pragma unroll
            for (int l = 0; l < 32; ++l) y[l] = mul_sub(d, float(q[l] >> 4), mn);
        }
    }
};
// Q2_K / Q3_K: chunk j of a block is 2-bit plane j % 4 (shift 2 (j % 4)) of the 32 bytes
// qs[32 (j / 4) ...]; its two halves of 16 values have scales 2j and 2j + 1.
template <> struct Dq<DType::Q2_K> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const Q2_KBlk* b = reinterpret_cast<const Q2_KBlk*>(row) + c / 8;
        const int j = int(c % 8), shift = 2 * (j % 4);
        const uint8_t* q = b->qs + (j / 4) * 32;
        const float d = h2f(b->d), mn = h2f(b->dmin);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint8_t sc = b->scales[2 * j + h];
            const float dl = d * float(sc & 0xF), ml = mn * float(sc >> 4);
#pragma unroll
            for (int l = 0; l < 16; ++l) y[16 * h + l] = mul_sub(dl, float((q[16 * h + l] >> shift) & 3), ml);
        }
    }
};
template <> struct Dq<DType::Q3_K> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const Q3_KBlk* b = reinterpret_cast<const Q3_KBlk*>(row) + c / 8;
        const int j = int(c % 8), shift = 2 * (j % 4);
        const uint8_t* q = b->qs + (j / 4) * 32;
        const uint8_t m = uint8_t(1u << j);  // the high bit: bit j of hmask[l]
        const float d = h2f(b->d);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int is = 2 * j + h;  // the 6-bit scale: 4 low bits, then 2 high bits
            const int lo = is < 8 ? (b->scales[is] & 0xF) : (b->scales[is - 8] >> 4);
            const int hi = (b->scales[8 + is % 4] >> (2 * (is / 4))) & 3;
            const float dl = d * float((lo | (hi << 4)) - 32);
#pragma unroll
            for (int l = 0; l < 16; ++l) {
                const int i = 16 * h + l;
                y[i] = dl * float(((q[i] >> shift) & 3) - ((b->hmask[i] & m) ? 0 : 4));
            }
        }
    }
};
template <> struct Dq<DType::Q5_K> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const Q5_KBlk* b = reinterpret_cast<const Q5_KBlk*>(row) + c / 8;
        const int j = int(c % 8);
        int sc, m;
        k4_scale_min(j, b->scales, sc, m);
        const float d = h2f(b->d) * float(sc), mn = h2f(b->dmin) * float(m);
        const uint8_t* q = b->qs + (j / 2) * 32;
        const uint8_t hb = uint8_t(1u << j);
        if (j % 2 == 0) {
#pragma unroll
            for (int l = 0; l < 32; ++l) y[l] = mul_sub(d, float((q[l] & 0xF) + ((b->qh[l] & hb) ? 16 : 0)), mn);
        } else {
#pragma unroll
            for (int l = 0; l < 32; ++l) y[l] = mul_sub(d, float((q[l] >> 4) + ((b->qh[l] & hb) ? 16 : 0)), mn);
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

template <> struct Dq<DType::IQ4_NL> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const IQ4_NLBlk* b = reinterpret_cast<const IQ4_NLBlk*>(row) + c;
        const float d = h2f(b->d);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            y[j] = d * iq4_level(b->qs[j] & 0xF);
            y[j + 16] = d * iq4_level(b->qs[j] >> 4);
        }
    }
};
template <> struct Dq<DType::IQ4_XS> {
    __device__ static void chunk(const uint8_t* row, int64_t c, float* y) {
        const IQ4_XSBlk* b = reinterpret_cast<const IQ4_XSBlk*>(row) + c / 8;
        const int ib = int(c % 8);
        const int ls = ((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) | (((b->scales_h >> 2 * ib) & 3) << 4);
        const float dl = h2f(b->d) * float(ls - 32);
        const uint8_t* qs = b->qs + 16 * ib;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            y[j] = dl * iq4_level(qs[j] & 0xF);
            y[j + 16] = dl * iq4_level(qs[j] >> 4);
        }
    }
};

// The weight types the kernels handle.
inline bool type_supported(DType t) {
    switch (t) {
        case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q4_1: case DType::Q5_0:
        case DType::Q5_1: case DType::Q8_0: case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K:
        case DType::Q6_K: case DType::IQ4_NL: case DType::IQ4_XS: return true;
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
        case DType::Q4_1: { constexpr DType D = DType::Q4_1; BODY; break; }    \
        case DType::Q5_0: { constexpr DType D = DType::Q5_0; BODY; break; }    \
        case DType::Q5_1: { constexpr DType D = DType::Q5_1; BODY; break; }    \
        case DType::Q8_0: { constexpr DType D = DType::Q8_0; BODY; break; }    \
        case DType::Q2_K: { constexpr DType D = DType::Q2_K; BODY; break; }    \
        case DType::Q3_K: { constexpr DType D = DType::Q3_K; BODY; break; }    \
        case DType::Q4_K: { constexpr DType D = DType::Q4_K; BODY; break; }    \
        case DType::Q5_K: { constexpr DType D = DType::Q5_K; BODY; break; }    \
        case DType::Q6_K: { constexpr DType D = DType::Q6_K; BODY; break; }    \
        case DType::IQ4_NL: { constexpr DType D = DType::IQ4_NL; BODY; break; } \
        case DType::IQ4_XS: { constexpr DType D = DType::IQ4_XS; BODY; break; } \
        default: ::glia::fail("cuda: no kernel for weight type ", dtype_name(t)); \
    }

}  // namespace glia::cuda
