// Block-format kernels: SHA-256, the type table, quantize/dequantize round trips and the
// integer dot products against the dequantizers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/f16.h"
#include "core/sha256.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace glia {
namespace {

using quant::traits;

// ---------------------------------------------------------------- SHA-256

TEST(Sha256, KnownVectors) {
    EXPECT_EQ(sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    EXPECT_EQ(sha256_hex(two.data(), two.size()),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const std::string million(1000000, 'a');
    EXPECT_EQ(sha256_hex(million.data(), million.size()),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
    std::string data;
    for (int i = 0; i < 1000; ++i) data += char(i * 7 + 3);
    const std::string one = sha256_hex(data.data(), data.size());
    for (size_t step : {1, 3, 63, 64, 65, 200}) {
        Sha256 s;
        for (size_t off = 0; off < data.size(); off += step)
            s.update(data.data() + off, std::min(step, data.size() - off));
        EXPECT_EQ(s.hex(), one) << "step " << step;
    }
}

// ---------------------------------------------------------------- table

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16,   DType::Q4_0,  DType::Q4_1,
                              DType::Q5_0, DType::Q5_1, DType::Q8_0,   DType::Q2_K,  DType::Q3_K,
                              DType::Q4_K, DType::Q5_K, DType::Q6_K,   DType::IQ4_NL, DType::IQ4_XS,
                              DType::Q8_1, DType::Q8_K};

TEST(QuantTable, SupportedTypesHaveCompleteEntries) {
    for (DType t : kWeightTypes) {
        ASSERT_TRUE(quant::supported(t)) << dtype_name(t);
        const auto& tr = traits(t);
        EXPECT_EQ(tr.type, t);
        EXPECT_EQ(tr.block_size, dtype_info(t).block_size);
        EXPECT_EQ(tr.type_size, dtype_info(t).type_size);
        EXPECT_NE(tr.dequantize_row, nullptr);
        EXPECT_NE(tr.quantize_row, nullptr);
        EXPECT_NE(tr.quantize_act, nullptr);
        EXPECT_NE(tr.vec_dot, nullptr);
        EXPECT_TRUE(quant::supported(tr.vec_dot_type));
    }
    EXPECT_EQ(traits(DType::Q4_0).vec_dot_type, DType::Q8_0);
    EXPECT_EQ(traits(DType::Q5_0).vec_dot_type, DType::Q8_0);
    EXPECT_EQ(traits(DType::IQ4_NL).vec_dot_type, DType::Q8_0);
    EXPECT_EQ(traits(DType::Q8_0).vec_dot_type, DType::Q8_0);
    EXPECT_EQ(traits(DType::Q4_1).vec_dot_type, DType::Q8_1);
    EXPECT_EQ(traits(DType::Q5_1).vec_dot_type, DType::Q8_1);
    for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS})
        EXPECT_EQ(traits(t).vec_dot_type, DType::Q8_K) << dtype_name(t);
    EXPECT_EQ(traits(DType::F16).vec_dot_type, DType::F16);
    EXPECT_EQ(traits(DType::BF16).vec_dot_type, DType::BF16);
    EXPECT_EQ(traits(DType::F32).vec_dot_type, DType::F32);
}

TEST(QuantTable, UnsupportedTypesThrowNamingTheType) {
    for (DType t : {DType::IQ2_XXS, DType::IQ1_S, DType::IQ3_S, DType::TQ1_0, DType::MXFP4,
                    DType::I8, DType::I32, DType::F64}) {
        EXPECT_FALSE(quant::supported(t)) << dtype_name(t);
        try {
            traits(t);
            ADD_FAILURE() << "no error for " << dtype_name(t);
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find(std::string("tensor type ") + dtype_name(t) + " is not supported"),
                      std::string::npos) << msg;
            EXPECT_NE(msg.find("supported: F32, F16"), std::string::npos) << msg;
            EXPECT_NE(msg.find("IQ4_XS"), std::string::npos) << msg;
        }
    }
    EXPECT_THROW(traits(static_cast<DType>(1000)), Error);
    EXPECT_FALSE(quant::supported(static_cast<DType>(1000)));
    EXPECT_EQ(std::string(quant::traits(DType::F32).type == DType::F32 ? "ok" : ""), "ok");
    try {
        traits(DType::IQ2_XXS);
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).rfind("tensor type IQ2_XXS is not supported (supported: ", 0), 0u);
    }
}

TEST(QuantTable, WrappersRejectPartialBlocks) {
    std::vector<float> x(48, 1.0f);
    std::vector<uint8_t> q(1000);
    EXPECT_THROW(quant::quantize_row(DType::Q4_0, x.data(), q.data(), 48), Error);
    EXPECT_THROW(quant::dequantize_row(DType::Q4_K, q.data(), x.data(), 48), Error);
}

// ---------------------------------------------------------------- helpers

std::vector<float> normal_rows(size_t n, uint32_t seed, float sigma = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, sigma);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x, int64_t row, bool act = false) {
    const int64_t rows = int64_t(x.size()) / row;
    const size_t rb = row_bytes(t, row);
    std::vector<uint8_t> q(rb * size_t(rows));
    for (int64_t r = 0; r < rows; ++r) {
        if (act) quant::quantize_act_row(t, x.data() + r * row, q.data() + r * rb, row);
        else quant::quantize_row(t, x.data() + r * row, q.data() + r * rb, row);
    }
    return q;
}

std::vector<float> dequantize(DType t, const std::vector<uint8_t>& q, int64_t row) {
    const size_t rb = row_bytes(t, row);
    const int64_t rows = int64_t(q.size() / rb);
    std::vector<float> y(size_t(rows * row));
    for (int64_t r = 0; r < rows; ++r) quant::dequantize_row(t, q.data() + r * rb, y.data() + r * row, row);
    return y;
}

double rel_rms(const std::vector<float>& x, const std::vector<float>& y) {
    double e = 0, s = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        e += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
        s += double(x[i]) * x[i];
    }
    return std::sqrt(e / s);
}

// ---------------------------------------------------------------- round trips

// Relative RMS error |x - deq(q(x))| / |x| on 16 rows of 4096 N(0,1) values (seed 1234,
// std::mt19937 + std::normal_distribution), as measured with these reference quantizers;
// bound = measured rounded up with ~20% headroom.
//
//   type    measured    bound
//   F32     0           0
//   F16     2.075e-4    2.5e-4
//   BF16    1.663e-3    2.0e-3
//   Q8_0    5.363e-3    6.5e-3
//   Q8_1    5.363e-3    6.5e-3
//   Q8_K    7.022e-3    8.5e-3
//   Q6_K    1.776e-2    2.1e-2
//   Q5_K    3.619e-2    4.3e-2
//   Q5_1    3.776e-2    4.5e-2
//   Q5_0    4.265e-2    5.1e-2
//   Q4_K    7.156e-2    8.6e-2
//   IQ4_NL  7.650e-2    9.2e-2
//   IQ4_XS  7.710e-2    9.3e-2
//   Q4_1    7.853e-2    9.4e-2
//   Q4_0    8.629e-2    1.04e-1
//   Q3_K    1.509e-1    1.8e-1
//   Q2_K    2.966e-1    3.6e-1
const std::map<DType, double> kRoundTripBound = {
    {DType::F32, 0.0},       {DType::F16, 2.5e-4},    {DType::BF16, 2.0e-3},
    {DType::Q8_0, 6.5e-3},   {DType::Q8_1, 6.5e-3},   {DType::Q8_K, 8.5e-3},
    {DType::Q6_K, 2.1e-2},   {DType::Q5_K, 4.3e-2},   {DType::Q5_1, 4.5e-2},
    {DType::Q5_0, 5.1e-2},   {DType::Q4_K, 8.6e-2},   {DType::IQ4_NL, 9.2e-2},
    {DType::IQ4_XS, 9.3e-2}, {DType::Q4_1, 9.4e-2},   {DType::Q4_0, 1.04e-1},
    {DType::Q3_K, 1.8e-1},   {DType::Q2_K, 3.6e-1},
};

class RoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(RoundTrip, RelativeRmsErrorWithinBound) {
    const DType t = GetParam();
    constexpr int64_t kRow = 4096;
    const std::vector<float> x = normal_rows(16 * kRow, 1234);
    const std::vector<uint8_t> q = quantize(t, x, kRow);
    const std::vector<float> y = dequantize(t, q, kRow);
    const double err = rel_rms(x, y);
    RecordProperty("rel_rms", std::to_string(err));
    std::printf("[ measured ] %-6s rel RMS %.4g\n", dtype_name(t), err);
    EXPECT_LE(err, kRoundTripBound.at(t)) << dtype_name(t);
    // Quantizing the dequantized data again is a fixed point for the plain grid types.
    if (t == DType::Q8_0 || t == DType::F16 || t == DType::BF16 || t == DType::F32) {
        EXPECT_EQ(quantize(t, y, kRow), q) << dtype_name(t);
    }
    // Scale invariance sanity: all zeros round-trip to zeros without NaN.
    std::vector<float> z(kRow, 0.0f);
    std::vector<float> zy = dequantize(t, quantize(t, z, kRow), kRow);
    for (float v : zy) ASSERT_EQ(v, 0.0f) << dtype_name(t);
}

std::string type_name(const ::testing::TestParamInfo<DType>& info) { return dtype_name(info.param); }

INSTANTIATE_TEST_SUITE_P(Types, RoundTrip, ::testing::ValuesIn(kWeightTypes), type_name);

TEST(RoundTripBounds, OrderingIsSane) {
    const auto& b = kRoundTripBound;
    EXPECT_LT(b.at(DType::F16), b.at(DType::BF16));
    EXPECT_LT(b.at(DType::BF16), b.at(DType::Q8_0));
    EXPECT_LT(b.at(DType::Q8_0), b.at(DType::Q6_K));
    for (DType t5 : {DType::Q5_0, DType::Q5_1, DType::Q5_K}) {
        EXPECT_LT(b.at(DType::Q6_K), b.at(t5));
        for (DType t4 : {DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::IQ4_NL, DType::IQ4_XS})
            EXPECT_LT(b.at(t5), b.at(t4)) << dtype_name(t5) << " vs " << dtype_name(t4);
    }
    for (DType t4 : {DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::IQ4_NL, DType::IQ4_XS})
        EXPECT_LT(b.at(t4), b.at(DType::Q3_K));
    EXPECT_LT(b.at(DType::Q3_K), b.at(DType::Q2_K));
}

// ---------------------------------------------------------------- activation formats

TEST(Activation, Q8KMatchesItsDefinition) {
    const std::vector<float> x = normal_rows(1024, 7, 3.0f);
    std::vector<quant::BlockQ8_K> q(4);
    quant::quantize_row(DType::Q8_K, x.data(), q.data(), 1024);
    for (int b = 0; b < 4; ++b) {
        const float* xb = x.data() + 256 * b;
        float max = 0, amax = 0;
        for (int j = 0; j < 256; ++j)
            if (std::fabs(xb[j]) > amax) { amax = std::fabs(xb[j]); max = xb[j]; }
        const float iscale = -127.f / max;
        EXPECT_EQ(q[b].d, 1 / iscale);
        for (int j = 0; j < 256; ++j) {
            const int v = std::min(127, int(std::nearbyint(iscale * xb[j])));
            ASSERT_EQ(q[b].qs[j], v) << b << "," << j;
        }
        for (int g = 0; g < 16; ++g) {
            int s = 0;
            for (int j = 0; j < 16; ++j) s += q[b].qs[16 * g + j];
            EXPECT_EQ(q[b].bsums[g], s);
        }
    }
}

TEST(Activation, Q8_0AndQ8_1Definitions) {
    std::vector<float> x = normal_rows(32 * 64, 9);
    x[5] = 0.5f * 127.f / 127.f;  // keep some exact values around
    std::vector<quant::BlockQ8_0> r(64), a(64);
    std::vector<quant::BlockQ8_1> r1(64), a1(64);
    quant::quantize_row(DType::Q8_0, x.data(), r.data(), 32 * 64);
    quant::quantize_act_row(DType::Q8_0, x.data(), a.data(), 32 * 64);
    quant::quantize_row(DType::Q8_1, x.data(), r1.data(), 32 * 64);
    quant::quantize_act_row(DType::Q8_1, x.data(), a1.data(), 32 * 64);
    int differing = 0;
    for (int b = 0; b < 64; ++b) {
        const float* xb = x.data() + 32 * b;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127;
        EXPECT_EQ(r[b].d, f32_to_f16(d));
        EXPECT_EQ(a[b].d, f32_to_f16(d));
        int s = 0, sa = 0;
        for (int j = 0; j < 32; ++j) {
            ASSERT_EQ(r[b].qs[j], int(std::round(xb[j] * (1.0f / d))));
            ASSERT_EQ(a[b].qs[j], int(std::nearbyint(xb[j] * (127.f / amax))));
            differing += r[b].qs[j] != a[b].qs[j];
            ASSERT_EQ(r1[b].qs[j], r[b].qs[j]);
            ASSERT_EQ(a1[b].qs[j], a[b].qs[j]);
            s += r[b].qs[j];
            sa += a[b].qs[j];
        }
        EXPECT_EQ(r1[b].d, r[b].d);
        EXPECT_EQ(r1[b].s, f32_to_f16(float(s) * d));
        EXPECT_EQ(a1[b].s, f32_to_f16(float(sa) * d));
    }
    EXPECT_LT(differing, 8);  // the two conventions agree almost everywhere
}

// ---------------------------------------------------------------- vec_dot

class VecDot : public ::testing::TestWithParam<DType> {};

TEST_P(VecDot, MatchesFloat64DotOfDequantizedRows) {
    const DType t = GetParam();
    const auto& tr = traits(t);
    const DType vt = tr.vec_dot_type;
    constexpr int64_t kRow = 4096;
    constexpr int kRows = 8;
    const std::vector<float> w = normal_rows(kRows * kRow, 100 + uint32_t(t));
    const std::vector<float> act = normal_rows(kRow, 200 + uint32_t(t), 2.0f);
    const std::vector<uint8_t> wq = quantize(t, w, kRow);
    const std::vector<float> wd = dequantize(t, wq, kRow);
    for (bool use_act : {true, false}) {
        const std::vector<uint8_t> aq = quantize(vt, act, kRow, use_act);
        const std::vector<float> ad = dequantize(vt, aq, kRow);
        const size_t rb = row_bytes(t, kRow);
        for (int r = 0; r < kRows; ++r) {
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < kRow; ++i) {
                const double p = double(wd[r * kRow + i]) * double(ad[i]);
                ref += p;
                mag += std::fabs(p);
            }
            if (t == DType::Q4_1 || t == DType::Q5_1) {
                // The weight's min term uses the activation's stored s = f16(d * sum q),
                // not the exact block sum: account for that rounding.
                const auto* ab = reinterpret_cast<const quant::BlockQ8_1*>(aq.data());
                for (int64_t b = 0; b < kRow / 32; ++b) {
                    const uint8_t* wb = wq.data() + r * rb + b * tr.type_size;
                    uint16_t mh;
                    std::memcpy(&mh, wb + 2, 2);
                    double exact = 0;
                    for (int j = 0; j < 32; ++j) exact += ad[b * 32 + j];
                    ref += double(f16_to_f32(mh)) * (double(f16_to_f32(ab[b].s)) - exact);
                }
            }
            float s = 0;
            tr.vec_dot(kRow, &s, wq.data() + r * rb, aq.data());
            ASSERT_NEAR(s, ref, 1e-5 * mag) << dtype_name(t) << " row " << r << " act " << use_act;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, VecDot, ::testing::ValuesIn(kWeightTypes), type_name);

TEST(VecDot, F16ActivationIsRoundedToHalf) {
    std::vector<float> a = {1.0f + 1.0f / 4096, 3.0f};
    std::vector<float> w = {1.0f, 1.0f};
    std::vector<uint16_t> wq(2), aq(2);
    quant::quantize_row(DType::F16, w.data(), wq.data(), 2);
    quant::quantize_act_row(DType::F16, a.data(), aq.data(), 2);
    float s = 0;
    traits(DType::F16).vec_dot(2, &s, wq.data(), aq.data());
    EXPECT_EQ(s, 4.0f);
}

// IQ4_NL quick variant: same format, no scale search, still a valid quantization.
TEST(Iq4Nl, FastVariantIsValidAndNotBetter) {
    constexpr int64_t kRow = 4096;
    const std::vector<float> x = normal_rows(4 * kRow, 55);
    std::vector<uint8_t> q(row_bytes(DType::IQ4_NL, kRow) * 4);
    for (int r = 0; r < 4; ++r)
        quant::quantize_row_iq4_nl_fast(x.data() + r * kRow, q.data() + r * row_bytes(DType::IQ4_NL, kRow), kRow);
    const double fast = rel_rms(x, dequantize(DType::IQ4_NL, q, kRow));
    const double full = rel_rms(x, dequantize(DType::IQ4_NL, quantize(DType::IQ4_NL, x, kRow), kRow));
    std::printf("[ measured ] IQ4_NL fast %.4g full %.4g\n", fast, full);
    EXPECT_LT(fast, 0.095);  // measured 0.0785 (full search: 0.0759)
    EXPECT_LE(full, fast);
}

}  // namespace
}  // namespace glia
