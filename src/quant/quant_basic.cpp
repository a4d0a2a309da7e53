// Scalar kernels of the float types and the 32-element block types (Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q8_1, IQ4_NL). The float operations follow the reference implementation's
// order exactly so that dequantization and quantization are bit-identical to it.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/f16.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace glia::quant::kernels {
namespace {
inline float h2f(uint16_t h) { return f16_to_f32(h); }
inline uint16_t f2h(float f) { return f32_to_f16(f); }
}  // namespace

// ---------------------------------------------------------------- F32 / F16 / BF16

void dequantize_f32(const void* src, float* dst, int64_t n) {
    std::memcpy(dst, src, size_t(n) * sizeof(float));
}
void quantize_f32(const float* src, void* dst, int64_t n) {
    std::memcpy(dst, src, size_t(n) * sizeof(float));
}
void vec_dot_f32(int64_t n, float* s, const void* w, const void* a) {
    const float* x = static_cast<const float*>(w);
    const float* y = static_cast<const float*>(a);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += double(x[i] * y[i]);
    *s = float(sum);
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
    const uint16_t* x = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(x[i]);
}
void quantize_f16(const float* src, void* dst, int64_t n) {
    uint16_t* y = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) y[i] = f32_to_f16(src[i]);
}
void vec_dot_f16(int64_t n, float* s, const void* w, const void* a) {
    const uint16_t* x = static_cast<const uint16_t*>(w);
    const uint16_t* y = static_cast<const uint16_t*>(a);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += double(f16_to_f32(x[i]) * f16_to_f32(y[i]));
    *s = float(sum);
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
    const uint16_t* x = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(x[i]);
}
void quantize_bf16(const float* src, void* dst, int64_t n) {
    uint16_t* y = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(src[i]);
}
void vec_dot_bf16(int64_t n, float* s, const void* w, const void* a) {
    const uint16_t* x = static_cast<const uint16_t*>(w);
    const uint16_t* y = static_cast<const uint16_t*>(a);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += double(bf16_to_f32(x[i]) * bf16_to_f32(y[i]));
    *s = float(sum);
}

// ---------------------------------------------------------------- Q4_0

void dequantize_q4_0(const void* src, float* dst, int64_t n) {
    const BlockQ4_0* x = static_cast<const BlockQ4_0*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
        const float d = h2f(x[i].d);
        for (int j = 0; j < 16; ++j) {
            dst[j] = float((x[i].qs[j] & 0xF) - 8) * d;
            dst[j + 16] = float((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void quantize_q4_0(const float* src, void* dst, int64_t n) {
    BlockQ4_0* y = static_cast<BlockQ4_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
        float amax = 0, max = 0;  // the value of largest magnitude, with its sign
        for (int j = 0; j < kQK; ++j)
            if (amax < std::fabs(src[j])) { amax = std::fabs(src[j]); max = src[j]; }
        const float d = max / -8;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = f2h(d);
        for (int j = 0; j < 16; ++j) {
            const float x0 = src[j] * id, x1 = src[j + 16] * id;
            const int q0 = std::min(15, int(x0 + 8.5f)), q1 = std::min(15, int(x1 + 8.5f));
            y[i].qs[j] = uint8_t(q0 | (q1 << 4));
        }
    }
}

void vec_dot_q4_0(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ4_0* x = static_cast<const BlockQ4_0*>(w);
    const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int s0 = 0, s1 = 0;
        for (int j = 0; j < 16; ++j) {
            s0 += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j];
            s1 += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        }
        sum += float(s0 + s1) * h2f(x[i].d) * h2f(y[i].d);
    }
    *s = sum;
}

// ---------------------------------------------------------------- Q4_1

void dequantize_q4_1(const void* src, float* dst, int64_t n) {
    const BlockQ4_1* x = static_cast<const BlockQ4_1*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
        const float d = h2f(x[i].d), m = h2f(x[i].m);
        for (int j = 0; j < 16; ++j) {
            dst[j] = float(x[i].qs[j] & 0xF) * d + m;
            dst[j + 16] = float(x[i].qs[j] >> 4) * d + m;
        }
    }
}

void quantize_q4_1(const float* src, void* dst, int64_t n) {
    BlockQ4_1* y = static_cast<BlockQ4_1*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < kQK; ++j) {
            if (src[j] < min) min = src[j];
            if (src[j] > max) max = src[j];
        }
        const float d = (max - min) / 15;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = f2h(d);
        y[i].m = f2h(min);
        for (int j = 0; j < 16; ++j) {
            const float x0 = (src[j] - min) * id, x1 = (src[j + 16] - min) * id;
            const int q0 = std::min(15, int(x0 + 0.5f)), q1 = std::min(15, int(x1 + 0.5f));
            y[i].qs[j] = uint8_t(q0 | (q1 << 4));
        }
    }
}

void vec_dot_q4_1(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ4_1* x = static_cast<const BlockQ4_1*>(w);
    const BlockQ8_1* y = static_cast<const BlockQ8_1*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int s0 = 0, s1 = 0;
        for (int j = 0; j < 16; ++j) {
            s0 += (x[i].qs[j] & 0xF) * y[i].qs[j];
            s1 += (x[i].qs[j] >> 4) * y[i].qs[j + 16];
        }
        sum += (h2f(x[i].d) * h2f(y[i].d)) * float(s0 + s1) + h2f(x[i].m) * h2f(y[i].s);
    }
    *s = sum;
}

// ---------------------------------------------------------------- Q5_0 / Q5_1

namespace {
inline uint32_t load_qh(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
// The 5-bit values j and j+16 of a block (without offset).
inline void q5_pair(const uint8_t* qs, uint32_t qh, int j, int& v0, int& v1) {
    v0 = (qs[j] & 0xF) | int(((qh >> j) << 4) & 0x10);
    v1 = (qs[j] >> 4) | int((qh >> (j + 12)) & 0x10);
}
}  // namespace

void dequantize_q5_0(const void* src, float* dst, int64_t n) {
    const BlockQ5_0* x = static_cast<const BlockQ5_0*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
        const float d = h2f(x[i].d);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < 16; ++j) {
            int v0, v1;
            q5_pair(x[i].qs, qh, j, v0, v1);
            dst[j] = float(v0 - 16) * d;
            dst[j + 16] = float(v1 - 16) * d;
        }
    }
}

void quantize_q5_0(const float* src, void* dst, int64_t n) {
    BlockQ5_0* y = static_cast<BlockQ5_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
        float amax = 0, max = 0;
        for (int j = 0; j < kQK; ++j)
            if (amax < std::fabs(src[j])) { amax = std::fabs(src[j]); max = src[j]; }
        const float d = max / -16;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = f2h(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; ++j) {
            const float x0 = src[j] * id, x1 = src[j + 16] * id;
            const int q0 = std::min(31, int(x0 + 16.5f)), q1 = std::min(31, int(x1 + 16.5f));
            y[i].qs[j] = uint8_t((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= uint32_t((q0 & 0x10) >> 4) << j;
            qh |= uint32_t((q1 & 0x10) >> 4) << (j + 16);
        }
        std::memcpy(y[i].qh, &qh, 4);
    }
}

void vec_dot_q5_0(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ5_0* x = static_cast<const BlockQ5_0*>(w);
    const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const uint32_t qh = load_qh(x[i].qh);
        int s0 = 0, s1 = 0;
        for (int j = 0; j < 16; ++j) {
            int v0, v1;
            q5_pair(x[i].qs, qh, j, v0, v1);
            s0 += (v0 - 16) * y[i].qs[j];
            s1 += (v1 - 16) * y[i].qs[j + 16];
        }
        sum += (h2f(x[i].d) * h2f(y[i].d)) * float(s0 + s1);
    }
    *s = sum;
}

void dequantize_q5_1(const void* src, float* dst, int64_t n) {
    const BlockQ5_1* x = static_cast<const BlockQ5_1*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
        const float d = h2f(x[i].d), m = h2f(x[i].m);
        const uint32_t qh = load_qh(x[i].qh);
        for (int j = 0; j < 16; ++j) {
            int v0, v1;
            q5_pair(x[i].qs, qh, j, v0, v1);
            dst[j] = float(v0) * d + m;
            dst[j + 16] = float(v1) * d + m;
        }
    }
}

void quantize_q5_1(const float* src, void* dst, int64_t n) {
    BlockQ5_1* y = static_cast<BlockQ5_1*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < kQK; ++j) {
            if (src[j] < min) min = src[j];
            if (src[j] > max) max = src[j];
        }
        const float d = (max - min) / 31;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = f2h(d);
        y[i].m = f2h(min);
        uint32_t qh = 0;
        for (int j = 0; j < 16; ++j) {
            const float x0 = (src[j] - min) * id, x1 = (src[j + 16] - min) * id;
            const int q0 = uint8_t(x0 + 0.5f), q1 = uint8_t(x1 + 0.5f);
            y[i].qs[j] = uint8_t((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= uint32_t((q0 & 0x10) >> 4) << j;
            qh |= uint32_t((q1 & 0x10) >> 4) << (j + 16);
        }
        std::memcpy(y[i].qh, &qh, 4);
    }
}

void vec_dot_q5_1(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ5_1* x = static_cast<const BlockQ5_1*>(w);
    const BlockQ8_1* y = static_cast<const BlockQ8_1*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        const uint32_t qh = load_qh(x[i].qh);
        int s0 = 0, s1 = 0;
        for (int j = 0; j < 16; ++j) {
            int v0, v1;
            q5_pair(x[i].qs, qh, j, v0, v1);
            s0 += v0 * y[i].qs[j];
            s1 += v1 * y[i].qs[j + 16];
        }
        sum += (h2f(x[i].d) * h2f(y[i].d)) * float(s0 + s1) + h2f(x[i].m) * h2f(y[i].s);
    }
    *s = sum;
}

// ---------------------------------------------------------------- Q8_0 / Q8_1

void dequantize_q8_0(const void* src, float* dst, int64_t n) {
    const BlockQ8_0* x = static_cast<const BlockQ8_0*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
        const float d = h2f(x[i].d);
        for (int j = 0; j < kQK; ++j) dst[j] = float(x[i].qs[j]) * d;
    }
}

namespace {
inline float block_amax(const float* x) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    return amax;
}
}  // namespace

// Reference (model-file) quantizer: id = 1/d, q = roundf (ties away from zero).
void quantize_q8_0(const float* src, void* dst, int64_t n) {
    BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
        const float d = block_amax(src) / 127;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = f2h(d);
        for (int j = 0; j < kQK; ++j) y[i].qs[j] = int8_t(std::round(src[j] * id));
    }
}

namespace {
// x * id rounded to nearest even; 0 where the product is not finite (see blocks.h).
inline int8_t act_q(float x, float id) {
    const float v = x * id;
    return std::isfinite(v) ? int8_t(std::nearbyint(v)) : int8_t(0);
}
}  // namespace

// The reference CPU backend's activation quantizer: id = 127/amax, ties to even. A block
// with a NaN or an infinity becomes the invalid block (blocks.h).
void quantize_act_q8_0(const float* src, void* dst, int64_t n) {
    BlockQ8_0* y = static_cast<BlockQ8_0*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
        if (!all_finite(src, kQK)) {
            y[i].d = kF16QuietNaN;
            std::memset(y[i].qs, 0, sizeof y[i].qs);
            continue;
        }
        const float amax = block_amax(src);
        const float d = amax / 127.f;
        const float id = amax != 0 ? 127.f / amax : 0.0f;
        y[i].d = f2h(d);
        for (int j = 0; j < kQK; ++j) y[i].qs[j] = act_q(src[j], id);
    }
}

void vec_dot_q8_0(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ8_0* x = static_cast<const BlockQ8_0*>(w);
    const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int si = 0;
        for (int j = 0; j < kQK; ++j) si += x[i].qs[j] * y[i].qs[j];
        sum += float(si) * (h2f(x[i].d) * h2f(y[i].d));
    }
    *s = sum;
}

void dequantize_q8_1(const void* src, float* dst, int64_t n) {
    const BlockQ8_1* x = static_cast<const BlockQ8_1*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
        const float d = h2f(x[i].d);
        for (int j = 0; j < kQK; ++j) dst[j] = float(x[i].qs[j]) * d;
    }
}

void quantize_q8_1(const float* src, void* dst, int64_t n) {
    BlockQ8_1* y = static_cast<BlockQ8_1*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
        const float d = block_amax(src) / 127;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = f2h(d);
        int sum = 0;
        for (int j = 0; j < kQK; ++j) {
            y[i].qs[j] = int8_t(std::round(src[j] * id));
            sum += y[i].qs[j];
        }
        y[i].s = f2h(float(sum) * d);
    }
}

void quantize_act_q8_1(const float* src, void* dst, int64_t n) {
    BlockQ8_1* y = static_cast<BlockQ8_1*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i, src += kQK) {
        if (!all_finite(src, kQK)) {
            y[i].d = y[i].s = kF16QuietNaN;
            std::memset(y[i].qs, 0, sizeof y[i].qs);
            continue;
        }
        const float amax = block_amax(src);
        const float d = amax / 127.f;
        const float id = amax != 0 ? 127.f / amax : 0.0f;
        y[i].d = f2h(d);
        int sum = 0;
        for (int j = 0; j < kQK; ++j) {
            y[i].qs[j] = act_q(src[j], id);
            sum += y[i].qs[j];
        }
        y[i].s = f2h(d * float(sum));
    }
}

void vec_dot_q8_1(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ8_1* x = static_cast<const BlockQ8_1*>(w);
    const BlockQ8_1* y = static_cast<const BlockQ8_1*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int si = 0;
        for (int j = 0; j < kQK; ++j) si += x[i].qs[j] * y[i].qs[j];
        sum += float(si) * (h2f(x[i].d) * h2f(y[i].d));
    }
    *s = sum;
}

// ---------------------------------------------------------------- IQ4_NL

void dequantize_iq4_nl(const void* src, float* dst, int64_t n) {
    const BlockIQ4_NL* x = static_cast<const BlockIQ4_NL*>(src);
    for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
        const float d = h2f(x[i].d);
        for (int j = 0; j < 16; ++j) {
            dst[j] = d * float(kValuesIQ4NL[x[i].qs[j] & 0xF]);
            dst[j + 16] = d * float(kValuesIQ4NL[x[i].qs[j] >> 4]);
        }
    }
}

void vec_dot_iq4_nl(int64_t n, float* s, const void* w, const void* a) {
    const BlockIQ4_NL* x = static_cast<const BlockIQ4_NL*>(w);
    const BlockQ8_0* y = static_cast<const BlockQ8_0*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK; ++i) {
        int s0 = 0, s1 = 0;
        for (int j = 0; j < 16; ++j) {
            s0 += y[i].qs[j] * kValuesIQ4NL[x[i].qs[j] & 0xF];
            s1 += y[i].qs[j + 16] * kValuesIQ4NL[x[i].qs[j] >> 4];
        }
        sum += (h2f(y[i].d) * h2f(x[i].d)) * float(s0 + s1);
    }
    *s = sum;
}

}  // namespace glia::quant::kernels
