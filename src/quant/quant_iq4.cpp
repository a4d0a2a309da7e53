// IQ4_NL (32-element blocks) and IQ4_XS (256-element super-blocks with 6-bit sub-block
// scales): 4-bit indices into a fixed non-linear table of 16 levels.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/f16.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace glia::quant::kernels {
namespace {

inline float h2f(uint16_t h) { return f16_to_f32(h); }
constexpr float kGroupMaxEps = 1e-15f;

// Index of the table level nearest to x (ties to the upper level), by bisection.
inline int best_index(const int8_t* val, float x) {
    if (x <= val[0]) return 0;
    if (x >= val[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < val[mid]) hi = mid; else lo = mid;
    }
    return x - val[hi - 1] < val[hi] - x ? hi - 1 : hi;
}

// Quantizes one super-block of `sbs` elements (32: IQ4_NL, 256: IQ4_XS) in sub-blocks of
// 32, weights x^2 (no importance matrix). ntry > 0 searches 2*ntry+1 scales per
// sub-block and re-quantizes with the final scale; ntry < 0 is the quick variant.
void iq4_impl(int sbs, const float* x, uint16_t* dh, uint8_t* q4, uint16_t* scales_h,
              uint8_t* scales_l, int ntry) {
    const int8_t* values = kValuesIQ4NL;
    uint8_t L[kQK_K];
    float scales[kQK_K / 32];
    float weight[32];
    std::memset(L, 0, size_t(sbs));  // (an all-zero sub-block may keep these indices)
    std::memset(q4, 0, size_t(sbs / 2));
    *dh = f32_to_f16(0.f);
    float max_scale = 0, amax_scale = 0;
    const int nb = sbs / 32;
    for (int ib = 0; ib < nb; ++ib) {
        const float* xb = x + 32 * ib;
        uint8_t* Lb = L + 32 * ib;
        for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
        float amax = 0, max = 0;
        for (int j = 0; j < 32; ++j) {
            const float ax = std::fabs(xb[j]);
            if (ax > amax) { amax = ax; max = xb[j]; }
        }
        if (amax < kGroupMaxEps) {
            scales[ib] = 0;
            continue;
        }
        float d = ntry > 0 ? -max / float(values[0]) : max / float(values[0]);
        float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < 32; ++j) {
            const int l = best_index(values, id * xb[j]);
            Lb[j] = uint8_t(l);
            const float q = values[l];
            const float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumqx / sumq2;
        float best = d * sumqx;
        for (int itry = -ntry; itry <= ntry; ++itry) {
            id = (float(itry) + float(values[0])) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < 32; ++j) {
                const float q = values[best_index(values, id * xb[j])];
                const float w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        if (std::fabs(d) > amax_scale) { amax_scale = std::fabs(d); max_scale = d; }
    }
    if (nb > 1) {
        *scales_h = 0;
        const float d = -max_scale / 32;
        *dh = f32_to_f16(d);
        const float id = d != 0 ? 1 / d : 0.f;
        for (int ib = 0; ib < nb; ++ib) {
            int l = std::max(-32, std::min(31, nearest_int(id * scales[ib])));
            const float dl = d * float(l);
            const float idl = dl != 0 ? 1 / dl : 0.f;
            uint8_t* Lb = L + 32 * ib;
            const float* xb = x + 32 * ib;
            for (int j = 0; j < 32; ++j) Lb[j] = uint8_t(best_index(values, idl * xb[j]));
            l += 32;
            const uint8_t l_l = uint8_t(l & 0xF), l_h = uint8_t(l >> 4);
            if (ib % 2 == 0) scales_l[ib / 2] = l_l;
            else scales_l[ib / 2] |= uint8_t(l_l << 4);
            *scales_h |= uint16_t(l_h << (2 * ib));
        }
    } else {
        *dh = f32_to_f16(scales[0]);
        if (ntry > 0) {
            const float id = scales[0] != 0 ? 1 / scales[0] : 0;
            for (int j = 0; j < sbs; ++j) L[j] = uint8_t(best_index(values, id * x[j]));
        }
    }
    for (int i = 0; i < sbs / 32; ++i)
        for (int j = 0; j < 16; ++j)
            q4[16 * i + j] = uint8_t(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

}  // namespace

// IQ4_NL as the reference's model quantizer writes it without an importance matrix.
void quantize_iq4_nl(const float* src, void* dst, int64_t n) {
    BlockIQ4_NL* y = static_cast<BlockIQ4_NL*>(dst);
    uint16_t unused_h = 0;
    for (int64_t i = 0; i < n / kQK; ++i)
        iq4_impl(kQK, src + kQK * i, &y[i].d, y[i].qs, &unused_h, nullptr, 7);
}

void quantize_iq4_nl_fast(const float* src, void* dst, int64_t n) {
    BlockIQ4_NL* y = static_cast<BlockIQ4_NL*>(dst);
    uint16_t unused_h = 0;
    for (int64_t i = 0; i < n / kQK; ++i)
        iq4_impl(kQK, src + kQK * i, &y[i].d, y[i].qs, &unused_h, nullptr, -1);
}

void dequantize_iq4_xs(const void* src, float* y, int64_t n) {
    const BlockIQ4_XS* x = static_cast<const BlockIQ4_XS*>(src);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = h2f(x[i].d);
        const uint8_t* qs = x[i].qs;
        for (int ib = 0; ib < 8; ++ib, y += 32, qs += 16) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) |
                           (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * float(ls - 32);
            for (int j = 0; j < 16; ++j) {
                y[j] = dl * float(kValuesIQ4NL[qs[j] & 0xF]);
                y[j + 16] = dl * float(kValuesIQ4NL[qs[j] >> 4]);
            }
        }
    }
}

void quantize_iq4_xs(const float* src, void* dst, int64_t n) {
    BlockIQ4_XS* y = static_cast<BlockIQ4_XS*>(dst);
    for (int64_t i = 0; i < n / kQK_K; ++i)
        iq4_impl(kQK_K, src + kQK_K * i, &y[i].d, y[i].qs, &y[i].scales_h, y[i].scales_l, 7);
}

void vec_dot_iq4_xs(int64_t n, float* s, const void* w, const void* a) {
    const BlockIQ4_XS* x = static_cast<const BlockIQ4_XS*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const uint8_t* qs = x[i].qs;
        const int8_t* q8 = y[i].qs;
        int isum = 0;
        for (int ib = 0; ib < 8; ++ib, qs += 16, q8 += 32) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) |
                           (((x[i].scales_h >> 2 * ib) & 3) << 4);
            int sub = 0;
            for (int j = 0; j < 16; ++j)
                sub += q8[j] * kValuesIQ4NL[qs[j] & 0xF] + q8[j + 16] * kValuesIQ4NL[qs[j] >> 4];
            isum += (ls - 32) * sub;
        }
        sum += (h2f(x[i].d) * y[i].d) * float(isum);
    }
    *s = sum;
}

}  // namespace glia::quant::kernels
