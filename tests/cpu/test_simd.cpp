// SIMD kernels against the scalar references of src/quant: row dot products within a
// tight relative tolerance, activation quantizers bit-identical, and the matmul driver
// (row path and packed GEMM path) against a plain loop of scalar dot products.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/simd/matmul.h"
#include "backend/cpu/simd/simd.h"
#include "backend/cpu/threadpool.h"
#include "core/f16.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace glia {
namespace {

using cpu::simd::Isa;

const DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                        DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                        DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};

std::vector<Isa> simd_levels() {
    std::vector<Isa> v;
    for (Isa isa : {Isa::Avx2, Isa::Avx512})
        if (cpu::simd::isa_supported(isa)) v.push_back(isa);
    return v;
}

std::string label(DType t, Isa isa) { return std::string(dtype_name(t)) + "/" + cpu::simd::isa_name(isa); }

// Random floats: mostly Gaussian, some rows with outliers and some with exact zeros.
std::vector<float> random_floats(std::mt19937& rng, int64_t n, int flavour) {
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<float> v(n);
    for (auto& x : v) x = g(rng);
    if (flavour == 1)
        for (int64_t i = 0; i < n; i += 37) v[i] *= 30.f;
    if (flavour == 2)
        for (int64_t i = 0; i < n; i += 3) v[i] = 0.f;
    if (flavour == 3)  // a whole leading block of zeros
        for (int64_t i = 0; i < std::min<int64_t>(n, 256); ++i) v[i] = 0.f;
    return v;
}

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
    std::vector<uint8_t> q(row_bytes(t, int64_t(x.size())));
    quant::quantize_row(t, x.data(), q.data(), int64_t(x.size()));
    return q;
}

// Random block bytes with valid small scales: exercises every nibble/scale pattern,
// including Q8_0 weights of -128, which no quantizer writes.
std::vector<uint8_t> random_blocks(std::mt19937& rng, DType t, int64_t n) {
    std::vector<uint8_t> q(row_bytes(t, n));
    for (auto& b : q) b = uint8_t(rng());
    const int64_t nb = n / dtype_info(t).block_size;
    const size_t ts = dtype_info(t).type_size;
    std::uniform_real_distribution<float> u(0.001f, 0.05f);
    auto set_half = [&](uint8_t* p) { const uint16_t h = f32_to_f16(u(rng)); std::memcpy(p, &h, 2); };
    for (int64_t i = 0; i < nb; ++i) {
        uint8_t* b = q.data() + i * ts;
        switch (t) {
            case DType::Q4_0: case DType::Q8_0: set_half(b); break;
            case DType::Q4_K: case DType::Q5_K: set_half(b); set_half(b + 2); break;
            case DType::Q6_K: set_half(b + offsetof(quant::BlockQ6_K, d)); break;
            default: return quantize(t, random_floats(rng, n, 0));
        }
    }
    return q;
}

// sum |w_i * a_i| of the dequantized rows: the scale of the rounding error of any order
// of summation.
double abs_dot(DType wt, const uint8_t* w, DType at, const uint8_t* a, int64_t n) {
    std::vector<float> x(n), y(n);
    quant::dequantize_row(wt, w, x.data(), n);
    quant::dequantize_row(at, a, y.data(), n);
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::fabs(double(x[i]) * double(y[i]));
    return s;
}

std::vector<int64_t> lengths(DType t) {
    const int64_t bs = dtype_info(t).block_size;
    if (bs == 1) return {1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 257, 1000, 4096};
    std::vector<int64_t> v;
    for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 16, 33}) v.push_back(m * bs);
    return v;
}

TEST(SimdTable, BestIsaIsSupportedAndEveryTypeHasKernels) {
    EXPECT_TRUE(cpu::simd::isa_supported(cpu::simd::best_isa()));
    EXPECT_TRUE(cpu::simd::isa_supported(Isa::Scalar));
    for (int l = 0; l < cpu::simd::kIsaCount; ++l)
        for (DType t : kTypes) {
            const auto& k = cpu::simd::kernels(t, Isa(l));
            EXPECT_TRUE(k.vec_dot) << label(t, Isa(l));
            EXPECT_EQ(k.act_type, quant::traits(t).vec_dot_type) << label(t, Isa(l));
            if (k.act_type != DType::F32) {
                EXPECT_TRUE(k.quantize_act) << label(t, Isa(l));
            }
        }
}

TEST(SimdVecDot, MatchesScalarReference) {
    std::mt19937 rng(1234);
    for (Isa isa : simd_levels()) {
        for (DType t : kTypes) {
            const auto& fast = cpu::simd::kernels(t, isa);
            const auto& ref = cpu::simd::kernels(t, Isa::Scalar);
            for (int64_t n : lengths(t)) {
                for (int flavour = 0; flavour < 5; ++flavour) {
                    const std::vector<uint8_t> w =
                        flavour == 4 ? random_blocks(rng, t, n) : quantize(t, random_floats(rng, n, flavour));
                    const std::vector<float> xf = random_floats(rng, n, flavour % 4);
                    std::vector<uint8_t> a(row_bytes(ref.act_type, n));
                    if (ref.act_type == DType::F32) std::memcpy(a.data(), xf.data(), n * 4);
                    else ref.quantize_act(xf.data(), a.data(), n);
                    float s_ref = 0, s_fast = 0;
                    ref.vec_dot(n, &s_ref, w.data(), a.data());
                    fast.vec_dot(n, &s_fast, w.data(), a.data());
                    const double scale = abs_dot(t, w.data(), ref.act_type, a.data(), n);
                    ASSERT_NEAR(s_fast, s_ref, 2e-6 * scale + 1e-30)
                        << label(t, isa) << " n=" << n << " flavour=" << flavour;
                }
            }
        }
    }
}

TEST(SimdQuantizeAct, BitIdenticalToScalar) {
    std::mt19937 rng(99);
    for (Isa isa : simd_levels()) {
        for (DType at : {DType::Q8_0, DType::Q8_K}) {
            const auto& scalar = quant::traits(at);
            // The table entry of a weight type whose activations are `at`.
            const auto& fast = cpu::simd::kernels(at == DType::Q8_0 ? DType::Q4_0 : DType::Q4_K, isa);
            ASSERT_EQ(fast.act_type, at);
            for (int64_t nblk : {1, 2, 3, 8, 17}) {
                const int64_t n = nblk * dtype_info(at).block_size;
                for (int flavour = 0; flavour < 7; ++flavour) {
                    std::vector<float> x = random_floats(rng, n, flavour % 4);
                    if (flavour == 4)  // exact .5 products and ties of magnitude with both signs
                        for (int64_t i = 0; i < n; ++i) x[i] = float(int(i % 255) - 127) * 0.5f;
                    if (flavour == 5)  // largest magnitude appears negative first, then positive
                        for (int64_t i = 0; i < n; i += 64) { x[i] = -50.f; if (i + 1 < n) x[i + 1] = 50.f; }
                    if (flavour == 6)  // tiny values (denormal scales)
                        for (auto& v : x) v *= 1e-40f;
                    std::vector<uint8_t> want(row_bytes(at, n)), got(row_bytes(at, n), 0xAB);
                    scalar.quantize_act(x.data(), want.data(), n);
                    fast.quantize_act(x.data(), got.data(), n);
                    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size()))
                        << label(at, isa) << " n=" << n << " flavour=" << flavour;
                }
            }
        }
    }
}

// NaN and infinite activations have a defined quantization (quant/blocks.h): the block
// that holds one becomes the invalid block (scale NaN, values 0), at every level bit for
// bit, its neighbours are untouched, and a product with it is NaN. (The scalar code once
// converted the NaN of 0 * inf to int8, which is undefined behaviour.)
TEST(SimdQuantizeAct, NonFiniteBlocksAreInvalid) {
    std::mt19937 rng(3);
    const float kBad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::quiet_NaN()};
    std::vector<Isa> levels = simd_levels();
    levels.insert(levels.begin(), Isa::Scalar);
    for (DType at : {DType::Q8_0, DType::Q8_1, DType::Q8_K}) {
        const int64_t bs = dtype_info(at).block_size, n = 4 * bs;
        const size_t ts = dtype_info(at).type_size;
        for (float bad : kBad)
            for (int64_t pos : {int64_t(0), int64_t(7), bs / 2, bs - 1}) {
                std::vector<float> x = random_floats(rng, n, 0);
                x[bs + pos] = bad;  // block 1
                std::vector<uint8_t> want(row_bytes(at, n));
                quant::traits(at).quantize_act(x.data(), want.data(), n);
                // Block 1 is the invalid block.
                const uint8_t* b1 = want.data() + ts;
                if (at == DType::Q8_K) {
                    const auto* q = reinterpret_cast<const quant::BlockQ8_K*>(b1);
                    EXPECT_TRUE(std::isnan(q->d));
                    for (int j = 0; j < 256; ++j) ASSERT_EQ(q->qs[j], 0);
                    for (int j = 0; j < 16; ++j) ASSERT_EQ(q->bsums[j], 0);
                } else {
                    uint16_t d;
                    std::memcpy(&d, b1, 2);
                    EXPECT_EQ(d, quant::kF16QuietNaN) << dtype_name(at);
                    const size_t qs_off = at == DType::Q8_0 ? 2 : 4;
                    for (size_t j = qs_off; j < ts; ++j) ASSERT_EQ(b1[j], 0) << dtype_name(at) << " byte " << j;
                }
                // The other blocks are quantized as without the bad value.
                for (int64_t blk : {0, 2, 3}) {
                    std::vector<uint8_t> one(ts);
                    quant::traits(at).quantize_act(x.data() + blk * bs, one.data(), bs);
                    ASSERT_EQ(0, std::memcmp(one.data(), want.data() + blk * ts, ts))
                        << dtype_name(at) << " block " << blk;
                }
                // Every level writes the same bytes.
                if (at == DType::Q8_1) continue;  // scalar only
                for (Isa isa : levels) {
                    const auto& fast = cpu::simd::kernels(at == DType::Q8_0 ? DType::Q4_0 : DType::Q4_K, isa);
                    std::vector<uint8_t> got(want.size(), 0xAB);
                    fast.quantize_act(x.data(), got.data(), n);
                    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size()))
                        << label(at, isa) << " bad " << bad << " at " << pos;
                    // A product with it is NaN, by either path.
                    for (DType wt : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
                        const auto& kk = cpu::simd::kernels(wt, isa);
                        if (kk.act_type != at) continue;
                        const std::vector<uint8_t> w = quantize(wt, random_floats(rng, n, 0));
                        float s = 0;
                        kk.vec_dot(n, &s, w.data(), got.data());
                        EXPECT_TRUE(std::isnan(s)) << label(wt, isa) << " vec_dot gives " << s;
                        if (kk.gemm) {
                            cpu::ThreadPool pool(1);
                            std::vector<float> xs(n * 4);
                            for (int c = 0; c < 4; ++c) std::memcpy(xs.data() + c * n, x.data(), n * 4);
                            for (int64_t T : {1, 4}) {
                                std::vector<uint8_t> scratch;
                                const cpu::MatmulAct a = cpu::matmul_prepare(kk, xs.data(), n * 4, n, T, scratch, pool);
                                std::vector<float> y(T, 0.f);
                                cpu::matmul_compute(kk, w.data(), w.size(), n, 1, a, T, y.data(), pool);
                                for (float v : y) EXPECT_TRUE(std::isnan(v)) << label(wt, isa) << " T=" << T;
                            }
                        }
                    }
                }
            }
    }
}

// The matmul driver (row path for few tokens, packed GEMM for more) against a loop of
// scalar dot products on the same (scalar-quantized) activations.
void check_matmul(Isa isa, DType t, int64_t K, int64_t N, int64_t T, cpu::ThreadPool& pool, std::mt19937& rng) {
    const auto& kk = cpu::simd::kernels(t, isa);
    const auto& ref = cpu::simd::kernels(t, Isa::Scalar);
    const size_t wrow = row_bytes(t, K);
    std::vector<uint8_t> w(wrow * N);
    for (int64_t r = 0; r < N; ++r) {
        const std::vector<uint8_t> q = (r % 3 == 2) ? random_blocks(rng, t, K) : quantize(t, random_floats(rng, K, int(r % 4)));
        std::memcpy(w.data() + r * wrow, q.data(), wrow);
    }
    std::vector<float> x(K * T);
    for (int64_t c = 0; c < T; ++c) {
        const auto v = random_floats(rng, K, int(c % 3));
        std::memcpy(x.data() + c * K, v.data(), K * 4);
    }
    std::vector<uint8_t> scratch;
    const cpu::MatmulAct a = cpu::matmul_prepare(kk, x.data(), K * 4, K, T, scratch, pool);
    std::vector<float> y(N * T, -1.f);
    cpu::matmul_compute(kk, w.data(), wrow, K, N, a, T, y.data(), pool);
    for (int64_t c = 0; c < T; ++c) {
        std::vector<uint8_t> qa(row_bytes(ref.act_type, K));
        if (ref.act_type == DType::F32) std::memcpy(qa.data(), x.data() + c * K, K * 4);
        else ref.quantize_act(x.data() + c * K, qa.data(), K);
        for (int64_t r = 0; r < N; ++r) {
            float s = 0;
            ref.vec_dot(K, &s, w.data() + r * wrow, qa.data());
            const double scale = abs_dot(t, w.data() + r * wrow, ref.act_type, qa.data(), K);
            ASSERT_NEAR(y[c * N + r], s, 2e-6 * scale + 1e-30)
                << label(t, isa) << " K=" << K << " N=" << N << " T=" << T << " row " << r << " token " << c
                << (cpu::matmul_uses_gemm(kk, K, T) ? " (gemm)" : " (rows)");
        }
    }
}

TEST(SimdMatmul, MatchesScalarLoop) {
    std::mt19937 rng(7);
    cpu::ThreadPool pool(3);
    for (Isa isa : simd_levels())
        for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_0, DType::Q4_0, DType::F16, DType::F32,
                        DType::Q3_K, DType::IQ4_NL})
            for (int64_t T : {1, 2, 3, 4, 7, 16, 33})
                for (auto [K, N] : {std::pair<int64_t, int64_t>{256, 45}, {768, 32}, {1280, 17}, {512, 1}})
                    check_matmul(isa, t, K, N, T, pool, rng);
}

TEST(SimdMatmul, GemmPathIsUsedForPrefill) {
    if (!cpu::simd::isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 VNNI";
    for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_0, DType::Q4_0}) {
        const auto& kk = cpu::simd::kernels(t, Isa::Avx512);
        EXPECT_TRUE(cpu::matmul_uses_gemm(kk, 2048, 512)) << dtype_name(t);
        EXPECT_FALSE(cpu::matmul_uses_gemm(kk, 2048, 1)) << dtype_name(t);
    }
}

// A token's outputs must not depend on the tokens beside it (DESIGN.md principle 6): for
// every weight type, at every level, the product of token i computed in a batch of T
// tokens is bit-identical to the same token computed alone. T covers the row path (1..3),
// the packed GEMM's threshold (kGemmMinTokens) and its 4-token micro-tiles with every
// remainder; K covers one and several 512-column slices, a partial last slice, and
// lengths that are not a multiple of 256 (row dot products at every T).
void check_batch_invariant(Isa isa, DType t, int64_t K, int64_t N, cpu::ThreadPool& pool, cpu::PackCache* cache,
                           std::mt19937& rng) {
    const auto& kk = cpu::simd::kernels(t, isa);
    const size_t wrow = row_bytes(t, K);
    std::vector<uint8_t> w(wrow * N);
    for (int64_t r = 0; r < N; ++r) {
        const std::vector<uint8_t> q =
            (r % 3 == 2) ? random_blocks(rng, t, K) : quantize(t, random_floats(rng, K, int(r % 4)));
        std::memcpy(w.data() + r * wrow, q.data(), wrow);
    }
    constexpr int64_t kMaxT = 67;
    std::vector<float> x(K * kMaxT);
    for (int64_t c = 0; c < kMaxT; ++c) {
        const auto v = random_floats(rng, K, int(c % 4));
        std::memcpy(x.data() + c * K, v.data(), K * 4);
    }
    // Each token alone.
    std::vector<float> alone(N * kMaxT);
    std::vector<uint8_t> scratch;
    for (int64_t c = 0; c < kMaxT; ++c) {
        const cpu::MatmulAct a = cpu::matmul_prepare(kk, x.data() + c * K, K * 4, K, 1, scratch, pool);
        cpu::matmul_compute(kk, w.data(), wrow, K, N, a, 1, alone.data() + c * N, pool, cache);
    }
    for (int64_t T : {2, 3, 4, 5, 6, 7, 8, 9, 16, 33, 64, 67}) {
        // The batch starts at a token offset so token i meets different neighbours.
        const int64_t off = T % 3;
        const int64_t nt = std::min(T, kMaxT - off);
        const cpu::MatmulAct a = cpu::matmul_prepare(kk, x.data() + off * K, K * 4, K, nt, scratch, pool);
        std::vector<float> y(N * nt, -1.f);
        cpu::matmul_compute(kk, w.data(), wrow, K, N, a, nt, y.data(), pool, cache);
        for (int64_t c = 0; c < nt; ++c) {
            const float* got = y.data() + c * N;
            const float* want = alone.data() + (off + c) * N;
            if (std::memcmp(got, want, N * sizeof(float)) == 0) continue;
            int64_t r = 0;
            while (std::memcmp(got + r, want + r, sizeof(float)) == 0) ++r;
            FAIL() << label(t, isa) << " K=" << K << " N=" << N << " T=" << nt << " token " << c
                   << (cpu::matmul_uses_gemm(kk, K, nt) ? " (gemm)" : " (rows)") << (cache ? ", packed cache" : "")
                   << ": row " << r << " gives " << got[r] << " in the batch, " << want[r] << " alone";
        }
    }
}

TEST(SimdMatmul, TokenOutputsDoNotDependOnTheBatch) {
    std::mt19937 rng(2024);
    cpu::ThreadPool pool(3);
    std::vector<Isa> levels = simd_levels();
    levels.insert(levels.begin(), Isa::Scalar);
    for (Isa isa : levels)
        for (DType t : kTypes)
            for (auto [K, N] : {std::pair<int64_t, int64_t>{256, 45}, {512, 16}, {768, 33}, {1536, 7}, {1280, 19},
                                {288, 21}}) {
                if (K % dtype_info(t).block_size != 0) continue;
                check_batch_invariant(isa, t, K, N, pool, nullptr, rng);
                if (::testing::Test::HasFatalFailure()) return;
            }
}

// The same through the packed-weight cache (the engine's batched decode), on one and two
// threads.
TEST(SimdMatmul, TokenOutputsDoNotDependOnTheBatchWithPackCache) {
    std::mt19937 rng(77);
    for (int threads : {1, 2}) {
        cpu::ThreadPool pool(threads);
        for (Isa isa : simd_levels())
            for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_0, DType::Q4_0}) {
                cpu::PackCache cache;
                check_batch_invariant(isa, t, 1024, 70, pool, &cache, rng);
                if (::testing::Test::HasFatalFailure()) return;
            }
    }
}

// Every type with a packed GEMM has the few-token kernel of the same arithmetic, and a
// direct call of the packed kernel on one token (slice by slice, as the driver does) gives
// the bits of Gemm::gemv on the unpacked rows.
TEST(SimdMatmul, GemvGivesTheGemmBits) {
    if (!cpu::simd::isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 VNNI";
    std::mt19937 rng(5);
    for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_0, DType::Q4_0}) {
        const auto& kk = cpu::simd::kernels(t, Isa::Avx512);
        ASSERT_TRUE(kk.gemm && kk.gemm->gemv) << dtype_name(t);
        EXPECT_TRUE(cpu::matmul_gemm_bits(kk, 256)) << dtype_name(t);
        EXPECT_FALSE(cpu::matmul_gemm_bits(kk, 288)) << dtype_name(t);
        const cpu::simd::Gemm& g = *kk.gemm;
        // 8448: rows longer than the gemv kernel's chunk of K (Q8_0 / Q4_0: three chunks).
        for (const int64_t K : {int64_t(1792), int64_t(8448)}) {
            const int64_t N = 37;
            const size_t wrow = row_bytes(t, K);
            std::vector<uint8_t> w(wrow * N);
            for (int64_t r = 0; r < N; ++r) {
                const std::vector<uint8_t> q = random_blocks(rng, t, K);
                std::memcpy(w.data() + r * wrow, q.data(), wrow);
            }
            for (int nt = 1; nt <= 3; ++nt) {
                std::vector<uint8_t> qa(row_bytes(kk.act_type, K) * nt), side(g.side_bytes(K) * nt + 1);
                for (int c = 0; c < nt; ++c) {
                    const std::vector<float> x = random_floats(rng, K, c);
                    kk.quantize_act(x.data(), qa.data() + c * row_bytes(kk.act_type, K), K);
                    g.prepare(qa.data() + c * row_bytes(kk.act_type, K), K, side.data() + c * g.side_bytes(K));
                }
                std::vector<float> packed(N * nt), rows(N * nt, -1.f);
                std::vector<uint8_t> panel(g.panel_bytes(K) + 64);
                uint8_t* pp = panel.data() + (64 - reinterpret_cast<uintptr_t>(panel.data()) % 64) % 64;
                for (int64_t r0 = 0; r0 < N; r0 += g.panel_rows) {
                    const int nr = static_cast<int>(std::min<int64_t>(g.panel_rows, N - r0));
                    g.pack(w.data() + r0 * wrow, wrow, nr, K, pp);
                    for (int64_t k0 = 0; k0 < K; k0 += cpu::kGemmSliceK)
                        g.compute(pp + g.panel_bytes(k0), nr, std::min(cpu::kGemmSliceK, K - k0),
                                  qa.data() + row_bytes(kk.act_type, k0), row_bytes(kk.act_type, K),
                                  side.data() + g.side_bytes(k0), g.side_bytes(K), nt, packed.data() + r0, N, k0 > 0);
                }
                g.gemv(w.data(), wrow, static_cast<int>(N), K, cpu::kGemmSliceK, qa.data(), row_bytes(kk.act_type, K),
                       nt, rows.data(), N);
                EXPECT_EQ(0, std::memcmp(packed.data(), rows.data(), packed.size() * sizeof(float)))
                    << dtype_name(t) << " K=" << K << " nt=" << nt;
            }
        }
    }
}

// ---------------------------------------------------------------- thread pool

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
    for (int threads : {1, 2, 3, 5}) {
        cpu::ThreadPool pool(threads);
        EXPECT_EQ(pool.size(), threads);
        for (int64_t n : {0, 1, 2, 3, 4, 5, 7, 100, 1001}) {
            std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
            pool.parallel_for(n, [&](int64_t b, int64_t e) {
                ASSERT_LE(0, b);
                ASSERT_LT(b, e);
                ASSERT_LE(e, n);
                for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
            });
            for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "threads " << threads << " n " << n;
        }
    }
}

TEST(ThreadPool, RunGivesEveryWorkerItsIndex) {
    cpu::ThreadPool pool(4);
    std::vector<std::atomic<int>> seen(4);
    pool.run([&](int ith, int nth) {
        ASSERT_EQ(nth, 4);
        seen[size_t(ith)].fetch_add(1);
    });
    for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

TEST(ThreadPool, ManyRapidRunsAndSleepWake) {
    cpu::ThreadPool pool(3);
    std::atomic<int64_t> total{0};
    int64_t want = 0;
    for (int it = 0; it < 20000; ++it) {
        const int64_t n = 1 + it % 13;
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
            int64_t s = 0;
            for (int64_t i = b; i < e; ++i) s += i;
            total.fetch_add(s);
        });
        want += n * (n - 1) / 2;
        if (it % 5000 == 4999) std::this_thread::sleep_for(std::chrono::milliseconds(30));  // workers fall asleep
    }
    EXPECT_EQ(total.load(), want);
}

// A worker that stops for a long time (as one the system takes off its core on a loaded
// machine) right after taking its first chunk: the other threads take every other chunk
// instead of waiting for it. With a share fixed per worker the stalled thread would still
// owe the rest of its 1/threads of the range.
TEST(ThreadPool, OthersTakeAStalledWorkersChunks) {
    for (int threads : {2, 3}) {
        cpu::ThreadPool pool(threads);
        const int64_t n = 96;
        const std::thread::id caller = std::this_thread::get_id();
        std::mutex mu;
        std::thread::id stalled_id;
        int64_t by_stalled = 0;
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
            bool stall = false;
            {
                std::lock_guard<std::mutex> lk(mu);
                const std::thread::id me = std::this_thread::get_id();
                if (me != caller && stalled_id == std::thread::id()) stalled_id = me, stall = true;
                if (me == stalled_id) by_stalled += e - b;
            }
            if (stall) std::this_thread::sleep_for(std::chrono::milliseconds(800));
            else std::this_thread::sleep_for(std::chrono::milliseconds(2));  // time for the workers to wake
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << i;
        // Its one chunk (a quarter of a worker's share), not its whole share.
        EXPECT_LE(by_stalled, n / threads / 4) << threads << " threads";
    }
}

// parallel_for (which does not wait for late workers) and run (which needs every worker)
// interleaved, with sleeps so workers fall asleep between them: every index once, every
// worker once per run.
TEST(ThreadPool, ParallelForAndRunInterleave) {
    cpu::ThreadPool pool(3);
    std::atomic<int64_t> total{0};
    int64_t want = 0;
    for (int it = 0; it < 20000; ++it) {
        if (it % 3 == 2) {
            std::vector<std::atomic<int>> seen(3);
            pool.run([&](int ith, int) { seen[size_t(ith)].fetch_add(1); });
            for (auto& s : seen) ASSERT_EQ(s.load(), 1) << "run " << it;
        } else {
            const int64_t n = 1 + it % 29;
            pool.parallel_for(n, [&](int64_t b, int64_t e) {
                int64_t s = 0;
                for (int64_t i = b; i < e; ++i) s += i + 1;
                total.fetch_add(s);
            });
            want += n * (n + 1) / 2;
        }
        if (it % 4000 == 3999) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(total.load(), want);
}

}  // namespace
}  // namespace glia
