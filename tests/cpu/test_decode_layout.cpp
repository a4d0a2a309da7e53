// The decode layout (simd::Gemm::il_*, DecodeCache): the interleaved few-token products
// give exactly the bits of Gemm::gemv on the file layout (and so the packed GEMM's), for
// any row count, token count and slice, and through the matmul driver.
#include <gtest/gtest.h>

#include <tuple>

#include <cstring>
#include <random>
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

// Rows of random bytes with valid small f16 scales (every quant and scale pattern);
// `extreme`: every quant at its top (15 / 63), Q4_K scales and mins 63, Q6_K scales
// alternating 127 and -128.
std::vector<uint8_t> random_rows(std::mt19937& rng, DType t, int64_t K, int64_t N, bool extreme) {
    std::vector<uint8_t> w(row_bytes(t, K) * N);
    for (auto& b : w) b = extreme ? 0xFF : uint8_t(rng());
    std::uniform_real_distribution<float> u(0.001f, 0.05f);
    auto set_half = [&](uint8_t* p) { const uint16_t v = f32_to_f16(u(rng)); std::memcpy(p, &v, 2); };
    const size_t ts = dtype_info(t).type_size;
    for (size_t o = 0; o < w.size(); o += ts) {
        if (t == DType::Q4_K) {
            set_half(w.data() + o);
            set_half(w.data() + o + 2);
        } else {
            auto* b = reinterpret_cast<quant::BlockQ6_K*>(w.data() + o);
            set_half(reinterpret_cast<uint8_t*>(&b->d));
            if (extreme)
                for (int i = 0; i < 16; ++i) b->scales[i] = int8_t(i % 2 ? -128 : 127);
        }
    }
    return w;
}

std::vector<float> acts(std::mt19937& rng, int64_t n, int flavour) {
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<float> v(n);
    for (auto& x : v) x = g(rng);
    if (flavour == 1)  // outliers: most values quantize near the int8 ends
        for (int64_t i = 0; i < n; i += 3) v[i] = (i % 2 ? 1.f : -1.f) * 50.f;
    if (flavour == 2)
        for (int64_t i = 0; i < n; i += 5) v[i] = 0.f;
    return v;
}

const DType kIlTypes[] = {DType::Q4_K, DType::Q6_K};

const cpu::simd::TypeKernels* il_kernels(DType t) {
    if (!cpu::simd::isa_supported(Isa::Avx512)) return nullptr;
    const auto& kk = cpu::simd::kernels(t, Isa::Avx512);
    return kk.gemm && kk.gemm->il_rows > 0 ? &kk : nullptr;
}

TEST(DecodeLayout, GroupsHaveTheRowsBytes) {
    if (!cpu::simd::isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 VNNI";
    for (DType t : kIlTypes) {
        const auto* kk = il_kernels(t);
        ASSERT_TRUE(kk) << dtype_name(t);
        const cpu::simd::Gemm& g = *kk->gemm;
        EXPECT_EQ(16, g.il_rows);
        for (int64_t K : {256, 2048, 8192}) EXPECT_EQ(g.il_bytes(K), size_t(g.il_rows) * row_bytes(t, K));
    }
}

// il_gemv on each group against Gemm::gemv on the file layout: every token count 1..8,
// row counts that leave a short last group, K of one to 33 super-blocks, several slices.
TEST(DecodeLayout, InterleavedGivesTheGemvBits) {
    if (!cpu::simd::isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 VNNI";
    std::mt19937 rng(30);
    struct Shape { int64_t K, N; bool extreme; };
    for (DType t : kIlTypes)
    for (const Shape s : {Shape{256, 16, false}, Shape{512, 37, false}, Shape{1792, 45, false},
                          Shape{2048, 7, false}, Shape{8448, 21, false}, Shape{2048, 33, true}}) {
        const auto* kk = il_kernels(t);
        ASSERT_TRUE(kk) << dtype_name(t);
        const cpu::simd::Gemm& g = *kk->gemm;
        const int64_t K = s.K, N = s.N;
        const size_t wrow = row_bytes(t, K), arow = row_bytes(kk->act_type, K);
        const std::vector<uint8_t> w = random_rows(rng, t, K, N, s.extreme);
        const int64_t groups = (N + g.il_rows - 1) / g.il_rows;
        std::vector<uint8_t> il(g.il_bytes(K) * groups);
        for (int64_t i = 0; i < groups; ++i)
            g.il_pack(w.data() + i * g.il_rows * wrow, wrow, int(std::min<int64_t>(g.il_rows, N - i * g.il_rows)), K,
                      il.data() + i * g.il_bytes(K));
        for (int nt = 1; nt <= 8; ++nt) {
            std::vector<uint8_t> qa(arow * nt);
            for (int c = 0; c < nt; ++c) {
                const std::vector<float> x = acts(rng, K, s.extreme ? 1 : c % 3);
                kk->quantize_act(x.data(), qa.data() + c * arow, K);
            }
            for (int64_t slice : {cpu::kGemmSliceK, int64_t(256), int64_t(1 << 20)}) {
                std::vector<float> want(N * nt, -1.f), got(N * nt, -2.f);
                g.gemv(w.data(), wrow, int(N), K, slice, qa.data(), arow, nt, want.data(), N);
                for (int64_t i = 0; i < groups; ++i) {
                    const int64_t r0 = i * g.il_rows;
                    g.il_gemv(il.data() + i * g.il_bytes(K), int(std::min<int64_t>(g.il_rows, N - r0)), K, slice,
                              qa.data(), arow, nt, got.data() + r0, N);
                }
                for (int64_t j = 0; j < N * nt; ++j)
                    ASSERT_EQ(0, std::memcmp(&want[j], &got[j], sizeof(float)))
                        << dtype_name(t) << " K=" << K << " N=" << N << " nt=" << nt << " slice=" << slice << " token " << j / N
                        << " row " << j % N << ": " << got[j] << " interleaved, " << want[j] << " file layout";
            }
        }
    }
}

// The GEMM's panels packed from the decode layout are byte for byte the panels packed
// from the file's rows (full and short panels, a panel whose second half has no rows).
TEST(DecodeLayout, PanelsFromTheLayoutAreTheFilePanels) {
    if (!cpu::simd::isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 VNNI";
    std::mt19937 rng(32);
    for (DType t : kIlTypes)
    for (const auto& [K, N, extreme] : {std::tuple<int64_t, int64_t, bool>{256, 32, false}, {512, 70, false},
                                        {2048, 45, true}, {1792, 16, false}, {256, 5, false}}) {
        const auto* kk = il_kernels(t);
        ASSERT_TRUE(kk) << dtype_name(t);
        const cpu::simd::Gemm& g = *kk->gemm;
        ASSERT_TRUE(g.il_pack_panel) << dtype_name(t);
        const size_t wrow = row_bytes(t, K);
        const std::vector<uint8_t> w = random_rows(rng, t, K, N, extreme);
        const int64_t groups = (N + g.il_rows - 1) / g.il_rows;
        std::vector<uint8_t> il(g.il_bytes(K) * groups);
        for (int64_t i = 0; i < groups; ++i)
            g.il_pack(w.data() + i * g.il_rows * wrow, wrow, int(std::min<int64_t>(g.il_rows, N - i * g.il_rows)), K,
                      il.data() + i * g.il_bytes(K));
        const size_t pbytes = g.panel_bytes(K);
        for (int64_t r0 = 0; r0 < N; r0 += g.panel_rows) {
            const int nr = int(std::min<int64_t>(g.panel_rows, N - r0));
            // 64-byte aligned, different junk in each: every byte must be written alike.
            std::vector<uint8_t> a(pbytes + 64, 0xAA), b(pbytes + 64, 0x55);
            uint8_t* pa = a.data() + (64 - reinterpret_cast<uintptr_t>(a.data()) % 64) % 64;
            uint8_t* pb = b.data() + (64 - reinterpret_cast<uintptr_t>(b.data()) % 64) % 64;
            g.pack(w.data() + r0 * wrow, wrow, nr, K, pa);
            g.il_pack_panel(il.data() + (r0 / g.il_rows) * g.il_bytes(K), nr, K, pb);
            size_t first = pbytes;
            for (size_t i = 0; i < pbytes && first == pbytes; ++i)
                if (pa[i] != pb[i]) first = i;
            EXPECT_EQ(first, pbytes) << dtype_name(t) << " K=" << K << " N=" << N << " rows " << r0 << "+" << nr
                                     << ": first differing byte of the panel";
        }
    }
}

// The matmul driver with a DecodeCache (one and two threads; the fused products'
// path reads the same groups) gives the bits of the driver without one, and the cache
// holds the rows' bytes.
TEST(DecodeLayout, DriverWithCacheGivesTheSameBits) {
    if (!cpu::simd::isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 VNNI";
    std::mt19937 rng(31);
    for (int threads : {1, 2}) {
        cpu::ThreadPool pool(threads);
        for (DType t : kIlTypes)
        for (auto [K, N] : {std::pair<int64_t, int64_t>{1024, 70}, {2048, 512}, {256, 5}}) {
            const auto* kk = il_kernels(t);
            ASSERT_TRUE(kk) << dtype_name(t);
            const size_t wrow = row_bytes(t, K);
            const std::vector<uint8_t> w = random_rows(rng, t, K, N, false);
            cpu::DecodeCache cache;
            // Both sides of the GEMM's threshold (4 tokens without the layout, 65 with it).
            for (int64_t T : {1, 2, 3, 4, 5, 17, 64, 65, 70}) {
                std::vector<float> x;
                for (int64_t c = 0; c < T; ++c) {
                    const std::vector<float> xc = acts(rng, K, int(c % 3));
                    x.insert(x.end(), xc.begin(), xc.end());
                }
                std::vector<uint8_t> scratch;
                const cpu::MatmulAct a = cpu::matmul_prepare(*kk, x.data(), K * 4, K, T, scratch, pool);
                std::vector<float> want(N * T, -1.f), got(N * T, -2.f);
                cpu::matmul_compute(*kk, w.data(), wrow, K, N, a, T, want.data(), pool);
                cpu::matmul_compute(*kk, w.data(), wrow, K, N, a, T, got.data(), pool, nullptr, &cache);
                EXPECT_EQ(cpu::matmul_uses_decode_layout(*kk, K, T), T <= cpu::kDecodeLayoutMaxTokens);
                ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
                    << dtype_name(t) << " threads " << threads << " K=" << K << " N=" << N << " T=" << T;
            }
            EXPECT_EQ(cache.bytes(), ((N + 15) / 16) * 16 * wrow) << dtype_name(t) << " K=" << K << " N=" << N;
            cache.forget(w.data());
            EXPECT_EQ(cache.bytes(), 0u);
        }
    }
}

}  // namespace
}  // namespace glia
