// Scalar kernels of the K-quants (Q2_K ... Q6_K) and of Q8_K, their activation type.
// Quantizers are the reference implementation's non-imatrix ones (scale/min searches
// included), written so that every float operation happens in the reference's order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/f16.h"
#include "quant/blocks.h"
#include "quant/kernels.h"

namespace glia::quant::kernels {
namespace {

inline float h2f(uint16_t h) { return f16_to_f32(h); }
inline uint16_t f2h(float f) { return f32_to_f16(f); }
constexpr float kGroupMaxEps = 1e-15f;

// Symmetric quantization of n values to [-nmax, nmax-1] with a scale search weighted by
// x^2; L gets the values offset by nmax. Returns the scale.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < kGroupMaxEps) {
        std::memset(L, 0, size_t(n));
        return 0.f;
    }
    float iscale = float(-nmax) / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = int8_t(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * float(l);
        suml2 += w * float(l) * float(l);
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(float(nmax) + 0.1f * float(is)) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * float(l);
            suml2 += w * float(l) * float(l);
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i)
                L[i] = int8_t(nmax + std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Q3_K's sub-block quantizer: symmetric, then coordinate-descent refinement.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < kGroupMaxEps) {
        std::memset(L, 0, size_t(n));
        return 0.f;
    }
    const float iscale = float(-nmax) / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = int8_t(l);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * float(l);
        suml2 += w * float(l) * float(l);
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * float(L[i]);
            if (slx > 0) {
                float sl2 = suml2 - w * float(L[i]) * float(L[i]);
                const int new_l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (new_l != L[i]) {
                    slx += w * x[i] * float(new_l);
                    sl2 += w * float(new_l) * float(new_l);
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = int8_t(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = int8_t(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Asymmetric quantization x ~ scale*L - the_min with L in [0, nmax]: an initial guess,
// then nstep+1 candidate scales each refined by a weighted least-squares fit of scale
// and min; the candidate with the lowest weighted error (|diff| or diff^2) wins.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        std::memset(L, 0, size_t(n));
        *the_min = -min;
        return 0.f;
    }
    float iscale = float(nmax) / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = uint8_t(std::max(0, std::min(nmax, l)));
        float diff = scale * float(L[i]) + min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * float(is) + float(nmax)) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
            Laux[i] = uint8_t(l);
            const float w = weights[i];
            sum_l += w * float(l);
            sum_l2 += w * float(l) * float(l);
            sum_xl += w * float(l) * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * float(Laux[i]) + this_min - x[i];
                diff = use_mad ? std::fabs(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                std::memcpy(L, Laux, size_t(n));
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

// Packs 2-bit values of 256 elements the K-quant way (4 groups of 32 per byte run).
void pack_2bit(const uint8_t* L, uint8_t* qs) {
    for (int j = 0; j < kQK_K; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = uint8_t(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                    (L[j + l + 96] << 6));
}

// Shared Q4_K/Q5_K quantizer: 8 sub-blocks of 32 with 6-bit scales and mins.
void quantize_k45_block(const float* x, int nmax, float rmin, int nstep, uint16_t& d_out,
                        uint16_t& dmin_out, uint8_t* scales_out, uint8_t* L) {
    uint8_t Laux[32];
    float weights[32], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                     rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; ++j) {
        const uint8_t ls = std::min<uint8_t>(63, uint8_t(nearest_int(inv_scale * scales[j])));
        const uint8_t lm = std::min<uint8_t>(63, uint8_t(nearest_int(inv_min * mins[j])));
        if (j < 4) {
            scales_out[j] = ls;
            scales_out[j + 4] = lm;
        } else {
            scales_out[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
            scales_out[j - 4] |= uint8_t((ls >> 4) << 6);
            scales_out[j] |= uint8_t((lm >> 4) << 6);
        }
    }
    d_out = f2h(max_scale / 63.f);
    dmin_out = f2h(max_min / 63.f);
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        k4_scale_min(j, scales_out, sc, m);
        const float d = h2f(d_out) * float(sc);
        if (d == 0) continue;
        const float dm = h2f(dmin_out) * float(m);
        for (int ii = 0; ii < 32; ++ii) {
            const int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = uint8_t(std::max(0, std::min(nmax, l)));
        }
    }
}

}  // namespace

// ---------------------------------------------------------------- Q2_K

void dequantize_q2_k(const void* src, float* y, int64_t n) {
    const BlockQ2_K* x = static_cast<const BlockQ2_K*>(src);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = h2f(x[i].d), min = h2f(x[i].dmin);
        const uint8_t* q = x[i].qs;
        int is = 0;
        for (int c = 0; c < 2; ++c, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int h = 0; h < 2; ++h) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * float(sc & 0xF), ml = min * float(sc >> 4);
                    for (int l = 0; l < 16; ++l)
                        *y++ = dl * float((q[l + 16 * h] >> shift) & 3) - ml;
                }
            }
        }
    }
}

void quantize_q2_k(const float* x, void* dst, int64_t n) {
    BlockQ2_K* y = static_cast<BlockQ2_K*>(dst);
    uint8_t L[kQK_K], Laux[16];
    float weights[16], mins[16], scales[16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                         -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < 16; ++j) y[i].scales[j] = uint8_t(nearest_int(iscale * scales[j]));
            y[i].d = f2h(max_scale / q4scale);
        } else {
            std::memset(y[i].scales, 0, 16);
            y[i].d = f2h(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < 16; ++j)
                y[i].scales[j] |= uint8_t(nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = f2h(max_min / q4scale);
        } else {
            y[i].dmin = f2h(0.f);
        }
        for (int j = 0; j < 16; ++j) {
            const float d = h2f(y[i].d) * float(y[i].scales[j] & 0xF);
            if (d == 0) continue;
            const float dm = h2f(y[i].dmin) * float(y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = uint8_t(std::max(0, std::min(3, l)));
            }
        }
        pack_2bit(L, y[i].qs);
    }
}

void vec_dot_q2_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ2_K* x = static_cast<const BlockQ2_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        int summs = 0;
        for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (x[i].scales[j] >> 4);
        const float dall = y[i].d * h2f(x[i].d);
        const float dmin = y[i].d * h2f(x[i].dmin);
        const uint8_t* q2 = x[i].qs;
        const int8_t* q8 = y[i].qs;
        int isum = 0, is = 0;
        for (int c = 0; c < 2; ++c, q2 += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int h = 0; h < 2; ++h, q8 += 16) {
                    int sub = 0;
                    for (int l = 0; l < 16; ++l) sub += q8[l] * ((q2[l + 16 * h] >> shift) & 3);
                    isum += (x[i].scales[is++] & 0xF) * sub;
                }
            }
        }
        sum += dall * float(isum) - dmin * float(summs);
    }
    *s = sum;
}

// ---------------------------------------------------------------- Q3_K

void dequantize_q3_k(const void* src, float* y, int64_t n) {
    const BlockQ3_K* x = static_cast<const BlockQ3_K*>(src);
    int8_t scales[16];
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d_all = h2f(x[i].d);
        q3k_scales(x[i].scales, scales);
        const uint8_t* q = x[i].qs;
        const uint8_t* hm = x[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int c = 0; c < 2; ++c, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = uint8_t(m << 1)) {
                for (int h = 0; h < 2; ++h) {
                    const float dl = d_all * float(scales[is++]);
                    for (int l = 0; l < 16; ++l) {
                        const int v = ((q[l + 16 * h] >> shift) & 3) - ((hm[l + 16 * h] & m) ? 0 : 4);
                        *y++ = dl * float(v);
                    }
                }
            }
        }
    }
}

void quantize_q3_k(const float* x, void* dst, int64_t n) {
    BlockQ3_K* y = static_cast<BlockQ3_K*>(dst);
    int8_t L[kQK_K];
    float scales[16];
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < 16; ++j) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            const float scale = std::fabs(scales[j]);
            if (scale > amax) { amax = scale; max_scale = scales[j]; }
        }
        std::memset(y[i].scales, 0, 12);
        if (max_scale != 0) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; ++j) {
                int l = int8_t(nearest_int(iscale * scales[j]));
                l = std::max(-32, std::min(31, l)) + 32;
                if (j < 8) y[i].scales[j] = uint8_t(l & 0xF);
                else y[i].scales[j - 8] |= uint8_t((l & 0xF) << 4);
                l >>= 4;
                y[i].scales[j % 4 + 8] |= uint8_t(l << (2 * (j / 4)));
            }
            y[i].d = f2h(1 / iscale);
        } else {
            y[i].d = f2h(0.f);
        }
        int8_t sc[16];
        q3k_scales(y[i].scales, sc);
        for (int j = 0; j < 16; ++j) {
            const float d = h2f(y[i].d) * float(sc[j]);
            if (d == 0) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = int8_t(std::max(-4, std::min(3, l)) + 4);
            }
        }
        std::memset(y[i].hmask, 0, 32);
        int m = 0;
        uint8_t hm = 1;
        for (int j = 0; j < kQK_K; ++j) {
            if (L[j] > 3) {
                y[i].hmask[m] |= hm;
                L[j] = int8_t(L[j] - 4);
            }
            if (++m == 32) { m = 0; hm = uint8_t(hm << 1); }
        }
        pack_2bit(reinterpret_cast<const uint8_t*>(L), y[i].qs);
    }
}

void vec_dot_q3_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ3_K* x = static_cast<const BlockQ3_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    int8_t scales[16];
    float sum = 0;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        q3k_scales(x[i].scales, scales);
        const uint8_t* q = x[i].qs;
        const uint8_t* hm = x[i].hmask;
        const int8_t* q8 = y[i].qs;
        uint8_t m = 1;
        int isum = 0, is = 0;
        for (int c = 0; c < 2; ++c, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = uint8_t(m << 1)) {
                for (int h = 0; h < 2; ++h, q8 += 16) {
                    int sub = 0;
                    for (int l = 0; l < 16; ++l) {
                        const int v = ((q[l + 16 * h] >> shift) & 3) - ((hm[l + 16 * h] & m) ? 0 : 4);
                        sub += v * q8[l];
                    }
                    isum += scales[is++] * sub;
                }
            }
        }
        sum += (h2f(x[i].d) * y[i].d) * float(isum);
    }
    *s = sum;
}

// ---------------------------------------------------------------- Q4_K

void dequantize_q4_k(const void* src, float* y, int64_t n) {
    const BlockQ4_K* x = static_cast<const BlockQ4_K*>(src);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = h2f(x[i].d), min = h2f(x[i].dmin);
        const uint8_t* q = x[i].qs;
        for (int j = 0; j < 4; ++j, q += 32) {
            uint8_t sc, m;
            k4_scale_min(2 * j, x[i].scales, sc, m);
            const float d1 = d * float(sc), m1 = min * float(m);
            k4_scale_min(2 * j + 1, x[i].scales, sc, m);
            const float d2 = d * float(sc), m2 = min * float(m);
            for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
        }
    }
}

void quantize_q4_k(const float* x, void* dst, int64_t n) {
    BlockQ4_K* y = static_cast<BlockQ4_K*>(dst);
    uint8_t L[kQK_K];
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        quantize_k45_block(x, 15, -1.f, 20, y[i].d, y[i].dmin, y[i].scales, L);
        uint8_t* q = y[i].qs;
        for (int j = 0; j < kQK_K; j += 64, q += 32)
            for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
    }
}

void vec_dot_q4_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ4_K* x = static_cast<const BlockQ4_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const uint8_t* q = x[i].qs;
        const int8_t* q8 = y[i].qs;
        int isum = 0, summs = 0;
        for (int j = 0; j < 4; ++j, q += 32, q8 += 64) {
            uint8_t sc1, m1, sc2, m2;
            k4_scale_min(2 * j, x[i].scales, sc1, m1);
            k4_scale_min(2 * j + 1, x[i].scales, sc2, m2);
            int s1 = 0, s2 = 0;
            for (int l = 0; l < 32; ++l) {
                s1 += (q[l] & 0xF) * q8[l];
                s2 += (q[l] >> 4) * q8[l + 32];
            }
            isum += sc1 * s1 + sc2 * s2;
            summs += m1 * (y[i].bsums[4 * j] + y[i].bsums[4 * j + 1]) +
                     m2 * (y[i].bsums[4 * j + 2] + y[i].bsums[4 * j + 3]);
        }
        const float d = h2f(x[i].d) * y[i].d;
        const float dmin = h2f(x[i].dmin) * y[i].d;
        sum += d * float(isum) - dmin * float(summs);
    }
    *s = sum;
}

// ---------------------------------------------------------------- Q5_K

void dequantize_q5_k(const void* src, float* y, int64_t n) {
    const BlockQ5_K* x = static_cast<const BlockQ5_K*>(src);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = h2f(x[i].d), min = h2f(x[i].dmin);
        const uint8_t* ql = x[i].qs;
        const uint8_t* qh = x[i].qh;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 4; ++j, ql += 32, u1 = uint8_t(u1 << 2), u2 = uint8_t(u2 << 2)) {
            uint8_t sc, m;
            k4_scale_min(2 * j, x[i].scales, sc, m);
            const float d1 = d * float(sc), m1 = min * float(m);
            k4_scale_min(2 * j + 1, x[i].scales, sc, m);
            const float d2 = d * float(sc), m2 = min * float(m);
            for (int l = 0; l < 32; ++l)
                *y++ = d1 * float((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l)
                *y++ = d2 * float((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        }
    }
}

void quantize_q5_k(const float* x, void* dst, int64_t n) {
    BlockQ5_K* y = static_cast<BlockQ5_K*>(dst);
    uint8_t L[kQK_K];
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        quantize_k45_block(x, 31, -0.5f, 15, y[i].d, y[i].dmin, y[i].scales, L);
        uint8_t* qh = y[i].qh;
        uint8_t* ql = y[i].qs;
        std::memset(qh, 0, 32);
        uint8_t m1 = 1, m2 = 2;
        for (int c = 0; c < kQK_K; c += 64, ql += 32, m1 = uint8_t(m1 << 2), m2 = uint8_t(m2 << 2)) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[c + j], l2 = L[c + j + 32];
                if (l1 > 15) { l1 -= 16; qh[j] |= m1; }
                if (l2 > 15) { l2 -= 16; qh[j] |= m2; }
                ql[j] = uint8_t(l1 | (l2 << 4));
            }
        }
    }
}

void vec_dot_q5_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ5_K* x = static_cast<const BlockQ5_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const uint8_t* ql = x[i].qs;
        const uint8_t* qh = x[i].qh;
        const int8_t* q8 = y[i].qs;
        uint8_t u1 = 1, u2 = 2;
        int isum = 0, summs = 0;
        for (int j = 0; j < 4; ++j, ql += 32, q8 += 64, u1 = uint8_t(u1 << 2), u2 = uint8_t(u2 << 2)) {
            uint8_t sc1, m1, sc2, m2;
            k4_scale_min(2 * j, x[i].scales, sc1, m1);
            k4_scale_min(2 * j + 1, x[i].scales, sc2, m2);
            int s1 = 0, s2 = 0;
            for (int l = 0; l < 32; ++l) {
                s1 += ((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) * q8[l];
                s2 += ((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) * q8[l + 32];
            }
            isum += sc1 * s1 + sc2 * s2;
            summs += m1 * (y[i].bsums[4 * j] + y[i].bsums[4 * j + 1]) +
                     m2 * (y[i].bsums[4 * j + 2] + y[i].bsums[4 * j + 3]);
        }
        const float d = h2f(x[i].d) * y[i].d;
        const float dmin = h2f(x[i].dmin) * y[i].d;
        sum += d * float(isum) - dmin * float(summs);
    }
    *s = sum;
}

// ---------------------------------------------------------------- Q6_K

namespace {
// The four 6-bit values (minus 32) at positions l, l+32, l+64, l+96 of a 128 half.
inline void q6_quad(const uint8_t* ql, const uint8_t* qh, int l, int q[4]) {
    q[0] = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
    q[1] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
    q[2] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
    q[3] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
}
}  // namespace

void dequantize_q6_k(const void* src, float* y, int64_t n) {
    const BlockQ6_K* x = static_cast<const BlockQ6_K*>(src);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = h2f(x[i].d);
        const uint8_t* ql = x[i].ql;
        const uint8_t* qh = x[i].qh;
        const int8_t* sc = x[i].scales;
        for (int c = 0; c < 2; ++c, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                int q[4];
                q6_quad(ql, qh, l, q);
                for (int k = 0; k < 4; ++k) y[l + 32 * k] = d * float(sc[is + 2 * k]) * float(q[k]);
            }
        }
    }
}

void quantize_q6_k(const float* x, void* dst, int64_t n) {
    BlockQ6_K* y = static_cast<BlockQ6_K*>(dst);
    int8_t L[kQK_K];
    float scales[16];
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < 16; ++ib) {
            scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            const float abs_scale = std::fabs(scales[ib]);
            if (abs_scale > max_abs_scale) { max_abs_scale = abs_scale; max_scale = scales[ib]; }
        }
        if (max_abs_scale < kGroupMaxEps) {
            std::memset(&y[i], 0, sizeof(BlockQ6_K));
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = f2h(1 / iscale);
        for (int ib = 0; ib < 16; ++ib)
            y[i].scales[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
        for (int j = 0; j < 16; ++j) {
            const float d = h2f(y[i].d) * float(y[i].scales[j]);
            if (d == 0) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = int8_t(std::max(-32, std::min(31, l)) + 32);
            }
        }
        uint8_t* ql = y[i].ql;
        uint8_t* qh = y[i].qh;
        for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const int a0 = L[j + l], a1 = L[j + l + 32], a2 = L[j + l + 64], a3 = L[j + l + 96];
                ql[l] = uint8_t((a0 & 0xF) | ((a2 & 0xF) << 4));
                ql[l + 32] = uint8_t((a1 & 0xF) | ((a3 & 0xF) << 4));
                qh[l] = uint8_t((a0 >> 4) | ((a1 >> 4) << 2) | ((a2 >> 4) << 4) | ((a3 >> 4) << 6));
            }
        }
    }
}

void vec_dot_q6_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ6_K* x = static_cast<const BlockQ6_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const uint8_t* ql = x[i].ql;
        const uint8_t* qh = x[i].qh;
        const int8_t* sc = x[i].scales;
        const int8_t* q8 = y[i].qs;
        int isum = 0;
        for (int c = 0; c < 2; ++c, ql += 64, qh += 32, sc += 8, q8 += 128) {
            int sub[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // per 16-element group, scale order
            for (int l = 0; l < 32; ++l) {
                int q[4];
                q6_quad(ql, qh, l, q);
                const int is = l / 16;
                for (int k = 0; k < 4; ++k) sub[is + 2 * k] += q[k] * q8[l + 32 * k];
            }
            for (int k = 0; k < 8; ++k) isum += sc[k] * sub[k];
        }
        sum += (h2f(x[i].d) * y[i].d) * float(isum);
    }
    *s = sum;
}

// ---------------------------------------------------------------- Q8_K

void dequantize_q8_k(const void* src, float* y, int64_t n) {
    const BlockQ8_K* x = static_cast<const BlockQ8_K*>(src);
    for (int64_t i = 0; i < n / kQK_K; ++i, y += kQK_K)
        for (int j = 0; j < kQK_K; ++j) y[j] = x[i].d * float(x[i].qs[j]);
}

// Also the activation quantizer of the K-quants. A block with a NaN or an infinity becomes
// the invalid block (blocks.h): d NaN, values and block sums 0.
void quantize_q8_k(const float* x, void* dst, int64_t n) {
    BlockQ8_K* y = static_cast<BlockQ8_K*>(dst);
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        if (!all_finite(x, kQK_K)) {
            std::memset(&y[i], 0, sizeof(BlockQ8_K));
            y[i].d = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        float max = 0, amax = 0;
        for (int j = 0; j < kQK_K; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) { amax = ax; max = x[j]; }
        }
        if (amax == 0) {
            std::memset(&y[i], 0, sizeof(BlockQ8_K));
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < kQK_K; ++j) y[i].qs[j] = int8_t(std::min(127, nearest_int(iscale * x[j])));
        for (int j = 0; j < 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[16 * j + ii];
            y[i].bsums[j] = int16_t(sum);
        }
        y[i].d = 1 / iscale;
    }
}

void vec_dot_q8_k(int64_t n, float* s, const void* w, const void* a) {
    const BlockQ8_K* x = static_cast<const BlockQ8_K*>(w);
    const BlockQ8_K* y = static_cast<const BlockQ8_K*>(a);
    float sum = 0;
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        int isum = 0;
        for (int j = 0; j < kQK_K; ++j) isum += x[i].qs[j] * y[i].qs[j];
        sum += (x[i].d * y[i].d) * float(isum);
    }
    *s = sum;
}

}  // namespace glia::quant::kernels
