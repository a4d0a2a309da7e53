// Attention over KV caches of the other cell types (BF16, Q8_0, Q4_0): the kernels read the
// rows as the format defines them (what the reference dequantizer gives), every kernel
// level alike, and a query's bits still do not depend on its tile.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/simd/attention.h"
#include "backend/cpu/simd/kv_rows.h"
#include "kv_cache_rows.h"
#include "core/dtype.h"
#include "core/f16.h"
#include "quant/quant.h"

namespace glia {
namespace {

using cpu::simd::AttnKernels;
using cpu::simd::AttnTile;
using cpu::simd::Isa;
using cpu::simd::KvType;

struct TypeCase { DType dtype; KvType kv; };
const TypeCase kTypes[] = {{DType::F16, KvType::F16}, {DType::BF16, KvType::BF16},
                           {DType::Q8_0, KvType::Q8_0}, {DType::Q4_0, KvType::Q4_0}};

using test::Cache;

// Widening a head of a row gives the reference dequantizer's values, bit for bit, at the
// scalar and the AVX-512 level; heads of 8 and 16 values inside a block too.
TEST(AttentionKvTypes, WidenedRowsAreTheFormatsValues) {
    std::mt19937 rng(3);
    const int width = 128;
    for (const TypeCase& tc : kTypes) {
        Cache c(rng, tc.dtype, 4, width, 2.0f);
        for (int r = 0; r < 4; ++r) {
            std::vector<float> ref(width);
            quant::dequantize_row(tc.dtype, c.rows[r], ref.data(), width);
            for (int hd : {8, 16, 32, 64})
                for (int off = 0; off + hd <= width; off += hd) {
                    std::vector<float> got(hd, NAN);
                    cpu::simd::kv_widen_scalar(tc.kv, c.rows[r], off, hd, got.data());
                    EXPECT_EQ(0, std::memcmp(got.data(), ref.data() + off, sizeof(float) * hd))
                        << dtype_name(tc.dtype) << " scalar, head of " << hd << " at " << off;
                    if (!cpu::simd::isa_supported(Isa::Avx512) || hd % 16) continue;
                    std::vector<float> fast(hd, NAN);
                    cpu::simd::kv_widen_avx512(tc.kv, c.rows[r], off, hd, fast.data());
                    EXPECT_EQ(0, std::memcmp(fast.data(), ref.data() + off, sizeof(float) * hd))
                        << dtype_name(tc.dtype) << " avx512, head of " << hd << " at " << off;
                }
        }
    }
}

struct TileRun {
    std::vector<float> q;
    std::vector<int> lo, hi;
    AttnTile t;
};

TileRun make_tile(std::mt19937& rng, const Cache& k, const Cache& v, const TypeCase& tk, const TypeCase& tv, int hd,
                  int nq, int n, int head, int window) {
    TileRun r;
    std::normal_distribution<float> g(0.f, 1.f);
    r.q.resize(size_t(nq) * hd);
    for (auto& x : r.q) x = round_f16(g(rng));
    r.lo.resize(nq);
    r.hi.resize(nq);
    for (int j = 0; j < nq; ++j) {
        r.hi[j] = n - (nq - 1 - j) * 2;
        r.lo[j] = window > 0 ? std::max(0, r.hi[j] - window) : 0;
    }
    AttnTile& t = r.t;
    t.hd = t.hd_v = hd;
    t.nq = nq;
    t.q = r.q.data();
    t.k = k.rows.data();
    t.v = v.rows.data();
    t.k_off = t.v_off = size_t(head) * hd;
    t.k_type = tk.kv;
    t.v_type = tv.kv;
    t.n = n;
    t.lo = r.lo.data();
    t.hi = r.hi.data();
    t.scale = 1.0f / std::sqrt(float(hd));
    t.out_stride = size_t(hd);
    return r;
}

// Every type and head size: the AVX-512 tile agrees with the scalar one as closely as with
// f16 pages, and each query of a 13-query tile run alone over its own cells gives the bits
// it got in the tile (scalar and AVX-512).
TEST(AttentionKvTypes, TilesAgreeAcrossLevelsAndQueryAlone) {
    std::vector<const AttnKernels*> levels = {&cpu::simd::attn_kernels(Isa::Scalar)};
    if (cpu::simd::isa_supported(Isa::Avx512)) levels.push_back(&cpu::simd::attn_kernels(Isa::Avx512));
    uint32_t seed = 10;
    for (const TypeCase& tk : kTypes)
        for (const TypeCase& tv : kTypes)
            for (int hd : {16, 64}) {
                if (tk.kv != tv.kv && hd == 16) continue;
                std::mt19937 rng(seed++);
                const int n_kv = 2, nq = 13, n = 170;
                Cache k(rng, tk.dtype, n, hd * n_kv, 1.0f), v(rng, tv.dtype, n, hd * n_kv, 1.0f);
                TileRun tr = make_tile(rng, k, v, tk, tv, hd, nq, n, 1, hd == 16 ? 50 : 0);
                tr.t.pos0 = hd == 16 ? 0 : 100;  // chunk boundaries at cells 28 and 156
                const std::string what = std::string(dtype_name(tk.dtype)) + "/" + dtype_name(tv.dtype) + " hd " +
                                         std::to_string(hd);
                std::vector<std::vector<float>> outs;
                for (const AttnKernels* kern : levels) {
                    std::vector<float> all(size_t(nq) * hd, NAN);
                    AttnTile t = tr.t;
                    t.out = all.data();
                    kern->tile(t);
                    for (int j = 0; j < nq; ++j) {
                        AttnTile a = t;
                        const int lo1 = 0, hi1 = tr.hi[j] - tr.lo[j];
                        a.nq = 1;
                        a.q = tr.q.data() + size_t(j) * hd;
                        a.k = k.rows.data() + tr.lo[j];
                        a.v = v.rows.data() + tr.lo[j];
                        a.n = hi1;
                        a.pos0 = t.pos0 + tr.lo[j];
                        a.lo = &lo1;
                        a.hi = &hi1;
                        std::vector<float> one(size_t(hd), NAN);
                        a.out = one.data();
                        kern->tile(a);
                        EXPECT_EQ(0, std::memcmp(one.data(), all.data() + size_t(j) * hd, sizeof(float) * hd))
                            << what << " query " << j << (kern == levels[0] ? " (scalar)" : " (avx512)");
                    }
                    outs.push_back(all);
                }
                if (outs.size() < 2) continue;
                double max_err = 0;
                for (size_t i = 0; i < outs[0].size(); ++i)
                    max_err = std::max(max_err, double(std::fabs(outs[0][i] - outs[1][i])));
                EXPECT_LT(max_err, 2e-3) << what;  // the bound of Attention.TileKernelMatchesScalar
            }
}

// One call serving several KV heads (the cells read once for all of them) gives each head
// the bits of its own single-head call: every type, both kernel levels, 1 and 13 queries
// (decode and prompt tiles), cells over several chunks.
TEST(AttentionKvTypes, MultiHeadTilesGiveEachHeadItsOwnBits) {
    std::vector<const AttnKernels*> levels = {&cpu::simd::attn_kernels(Isa::Scalar)};
    if (cpu::simd::isa_supported(Isa::Avx512)) levels.push_back(&cpu::simd::attn_kernels(Isa::Avx512));
    uint32_t seed = 200;
    for (const TypeCase& tc : kTypes)
        for (int nq : {1, 4, 13}) {
            std::mt19937 rng(seed++);
            const int hd = 64, n_kv = 4, nh = 3, n = 300;  // heads 1..3 of 4, 3 chunks of cells
            Cache k(rng, tc.dtype, n, hd * n_kv, 1.0f), v(rng, tc.dtype, n, hd * n_kv, 1.0f);
            TileRun tr = make_tile(rng, k, v, tc, tc, hd, nq, n, 1, 0);
            std::normal_distribution<float> g(0.f, 1.f);
            std::vector<float> q(size_t(nh) * nq * hd);
            for (auto& x : q) x = round_f16(g(rng));
            for (const AttnKernels* kern : levels) {
                const std::string what = std::string(dtype_name(tc.dtype)) + " nq " + std::to_string(nq) +
                                         (kern == levels[0] ? " (scalar)" : " (avx512)");
                AttnTile t = tr.t;
                t.nh = nh;
                t.q = q.data();
                t.q_head_stride = size_t(nq) * hd;
                t.out_head_stride = size_t(nq) * hd;
                std::vector<float> all(size_t(nh) * nq * hd, NAN);
                t.out = all.data();
                kern->tile(t);
                for (int h = 0; h < nh; ++h) {
                    AttnTile a = tr.t;
                    a.q = q.data() + size_t(h) * nq * hd;
                    a.k_off = a.v_off = size_t(1 + h) * hd;
                    std::vector<float> one(size_t(nq) * hd, NAN);
                    a.out = one.data();
                    kern->tile(a);
                    EXPECT_EQ(0, std::memcmp(one.data(), all.data() + size_t(h) * nq * hd, sizeof(float) * one.size()))
                        << what << " head " << h;
                }
            }
        }
}

// The quantized pages hold the same keys and values as f16 pages up to their rounding: the
// attention outputs of one set of K/V rows stored as Q8_0 and Q4_0 stay close to those of
// F16 pages (a misread block, e.g. the nibbles swapped, is off by O(1)).
TEST(AttentionKvTypes, QuantizedPagesStayCloseToF16) {
    const int hd = 64, n_kv = 2, nq = 8, n = 200, width = hd * n_kv;
    std::mt19937 rng(77);
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<float> kx(size_t(n) * width), vx(size_t(n) * width);
    for (auto& x : kx) x = g(rng);
    for (auto& x : vx) x = g(rng);
    const AttnKernels& kern = cpu::simd::attn_kernels();
    auto run = [&](DType t, KvType kv) {
        Cache k(t, kx, width), v(t, vx, width);
        std::mt19937 qrng(5);
        TileRun tr = make_tile(qrng, k, v, {t, kv}, {t, kv}, hd, nq, n, 1, 0);
        // Sharper attention than 1/sqrt(hd), so that a few keys dominate.
        tr.t.scale = 0.5f;
        std::vector<float> out(size_t(nq) * hd);
        tr.t.out = out.data();
        kern.tile(tr.t);
        return out;
    };
    const std::vector<float> f16 = run(DType::F16, KvType::F16);
    for (const auto& [t, kv, bound] : {std::tuple{DType::Q8_0, KvType::Q8_0, 0.05}, {DType::Q4_0, KvType::Q4_0, 0.5}}) {
        const std::vector<float> got = run(t, kv);
        double max_err = 0, changed = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            max_err = std::max(max_err, double(std::fabs(got[i] - f16[i])));
            changed += got[i] != f16[i];
        }
        EXPECT_LT(max_err, bound) << dtype_name(t);
        EXPECT_GT(changed, 0) << dtype_name(t) << ": the pages were not quantized";
    }
}

}  // namespace
}  // namespace glia
