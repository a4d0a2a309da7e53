#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.h"
#include "core/error.h"
#include "core/f16.h"

using namespace glia;

// Every half value converts to float and back to the same bits (NaNs stay NaN).
TEST(F16, RoundTripsEveryHalfValue) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        float f = f16_to_f32(uint16_t(h));
        if (std::isnan(f)) { EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f)))); continue; }
        ASSERT_EQ(f32_to_f16(f), h) << "half bits " << h;
    }
}

// Float -> half rounds to nearest, ties to even, compared against a float64 search.
TEST(F16, RoundsToNearestEven) {
    const float samples[] = {1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65519.0f, 65520.0f, 6.0e-8f, 2.98e-8f,
                             3.0e-8f, -1.00048828125f, 0.1f, 1e-5f, 3.14159f};
    for (float f : samples) {
        uint16_t h = f32_to_f16(f);
        double got = f16_to_f32(h);
        // neighbours
        double lo = f16_to_f32(uint16_t(h - 1)), hi = f16_to_f32(uint16_t(h + 1));
        if (std::isinf(got)) { EXPECT_GE(std::fabs(f), 65520.0f); continue; }
        if (!std::isnan(lo)) {
            EXPECT_LE(std::fabs(got - f), std::fabs(lo - f)) << f;
        }
        EXPECT_LE(std::fabs(got - f), std::fabs(hi - f)) << f;
    }
    EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even
    EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);  // tie -> even (up)
    EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);            // overflow -> inf
}

TEST(BF16, RoundsToNearestEven) {
    EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
    EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808000)), 0x3f80);  // tie -> even
    EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f818000)), 0x3f82);  // tie -> even (up)
    EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808001)), 0x3f81);
}

TEST(DType, RowBytesAndNames) {
    EXPECT_EQ(row_bytes(DType::Q4_K, 512), 288u);
    EXPECT_EQ(row_bytes(DType::F16, 3), 6u);
    EXPECT_THROW(row_bytes(DType::Q8_0, 33), glia::Error);
    DType t;
    ASSERT_TRUE(dtype_from_name("q6_k", t));
    EXPECT_EQ(t, DType::Q6_K);
    EXPECT_FALSE(dtype_from_name("q9_9", t));
    EXPECT_EQ(dtype_info(99u), nullptr);
}
