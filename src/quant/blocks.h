// On-disk block layouts of the quantized tensor types (GGUF format facts) and small
// helpers shared by the scalar kernels. Internal to src/quant.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace glia::quant {

inline constexpr int kQK = 32;    // legacy block size (Q4_0 ... Q8_1, IQ4_NL)
inline constexpr int kQK_K = 256; // super-block size (K-quants, IQ4_XS, Q8_K)

struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockQ8_1 { uint16_t d; uint16_t s; int8_t qs[32]; };  // s = d * sum(qs)
struct BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d; uint16_t dmin; };
struct BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct BlockQ8_K { float d; int8_t qs[256]; int16_t bsums[16]; };
struct BlockIQ4_NL { uint16_t d; uint8_t qs[16]; };
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

// The 12 packed scale bytes of a Q4_K/Q5_K block as 8 six-bit scales (sc) and 8 six-bit
// mins (m), one byte each (every SIMD kernel unpacks them this way).
inline void unpack_k4_scales(const uint8_t* packed, uint8_t sc[8], uint8_t m[8]) {
    uint32_t u[3];
    std::memcpy(u, packed, 12);
    const uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    const uint32_t s[2] = {u[0] & k1, (u[2] & k2) | (((u[0] >> 6) & k3) << 4)};
    const uint32_t mm[2] = {u[1] & k1, ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4)};
    std::memcpy(sc, s, 8);
    std::memcpy(m, mm, 8);
}
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);

// The 16 non-linear levels of IQ4_NL / IQ4_XS.
inline constexpr int8_t kValuesIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// Activation blocks (Q8_0, Q8_1, Q8_K) of values that cannot be scaled, because the block
// holds a NaN or an infinity, are written as the invalid block: scale NaN, every value 0
// (and Q8_1's sum, Q8_K's block sums 0 / NaN), so that every product with them is NaN, as
// the float product would be. The scalar quantizers and their SIMD copies all do this, so
// they stay bit-identical and never convert a NaN to an integer. In a finite block a value
// whose scaled product is not finite (an amax below ~3.7e-37 makes 127/amax overflow; the
// f16 scale is 0 then) is quantized to 0.
inline constexpr uint16_t kF16QuietNaN = 0x7E00;
inline bool all_finite(const float* x, int n) {
    for (int j = 0; j < n; ++j)
        if (!std::isfinite(x[j])) return false;
    return true;
}

// Round to nearest, ties to even, via the 1.5*2^23 trick (valid for |x| < 2^22); this is
// bit-for-bit the rounding the reference quantizers use.
inline int nearest_int(float x) {
    const float v = x + 12582912.f;
    int32_t i;
    std::memcpy(&i, &v, 4);
    return (i & 0x007fffff) - 0x00400000;
}

// 6-bit scale and min j (0..7) of a Q4_K / Q5_K block's 12 packed scale bytes.
inline void k4_scale_min(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// The 16 signed 6-bit scales of a Q3_K block (already minus 32).
inline void q3k_scales(const uint8_t* packed, int8_t out[16]) {
    for (int j = 0; j < 16; ++j) {
        const int lo = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
        const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = int8_t((lo | (hi << 4)) - 32);
    }
}

}  // namespace glia::quant
