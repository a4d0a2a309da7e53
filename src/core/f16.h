// IEEE half and bfloat16 conversions, bit-exact with hardware conversion
// (round to nearest even, NaN preserved as quiet NaN).
#pragma once
#include <cstdint>
#include <cstring>

namespace glia {

inline float bits_to_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t f32_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float f16_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0) {
        if (mant == 0) return bits_to_f32(sign);
        // subnormal: normalise
        int e = -1;
        do { mant <<= 1; ++e; } while ((mant & 0x400) == 0);
        mant &= 0x3ff;
        return bits_to_f32(sign | uint32_t(127 - 15 - e) << 23 | mant << 13);
    }
    if (exp == 31) return bits_to_f32(sign | 0x7f800000u | mant << 13);
    return bits_to_f32(sign | (exp + 127 - 15) << 23 | mant << 13);
}

inline uint16_t f32_to_f16(float f) {
    const uint32_t x = f32_to_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000;
    const uint32_t absx = x & 0x7fffffff;
    if (absx >= 0x7f800000u) {  // inf or nan
        return uint16_t(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 | ((absx >> 13) & 0x3ff) : 0));
    }
    if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // rounds to inf
    if (absx < 0x38800000u) {                                 // subnormal or zero in half
        if (absx < 0x33000000u) return uint16_t(sign);        // < half of smallest subnormal
        const uint32_t e = absx >> 23;
        const uint32_t m = (absx & 0x7fffff) | 0x800000;
        const uint32_t shift = 126 - e;  // 14 + (113 - e) ... places mantissa
        // value = m * 2^(e-150); half subnormal unit = 2^-24 -> result = m >> (126 - e)
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) ++r;
        return uint16_t(sign | r);
    }
    uint32_t r = absx - 0x38000000u;  // rebias exponent 127 -> 15
    const uint32_t rem = r & 0x1fff;
    r >>= 13;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
    return uint16_t(sign | r);
}

inline float bf16_to_f32(uint16_t h) { return bits_to_f32(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000u) return uint16_t((u >> 16) | 64);  // quiet NaN
    u += 0x7fff + ((u >> 16) & 1);
    return uint16_t(u >> 16);
}

// Round a float through half precision (what a F16 KV cache or F16 activation does).
inline float round_f16(float f) { return f16_to_f32(f32_to_f16(f)); }

}  // namespace glia
