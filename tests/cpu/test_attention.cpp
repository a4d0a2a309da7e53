// The attention tile kernel of each SIMD level against the scalar one, over head sizes,
// query counts (decode-sized tiles of 1-4 queries too), causal / window ranges and
// soft-capping. Probabilities are rounded to f16 in both, so results agree closely.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/simd/attention.h"
#include "core/f16.h"

namespace glia {
namespace {

using cpu::simd::AttnKernels;
using cpu::simd::AttnTile;
using cpu::simd::Isa;

struct Cache {
    std::vector<uint16_t> data;
    std::vector<const uint8_t*> rows;
    Cache(std::mt19937& rng, int n, int width, float sd) : data(size_t(n) * width), rows(n) {
        std::normal_distribution<float> g(0.f, sd);
        for (auto& x : data) x = f32_to_f16(g(rng));
        // Rows out of order, as a paged cache hands them out.
        std::vector<int> perm(n);
        for (int i = 0; i < n; ++i) perm[i] = i;
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int c = 0; c < n; ++c) rows[c] = reinterpret_cast<const uint8_t*>(data.data() + size_t(perm[c]) * width);
    }
};

void run_tile_case(const AttnKernels& fast, int hd, int hd_v, int nq, int n, int window, float cap, uint32_t seed) {
    std::mt19937 rng(seed);
    const int n_kv = 2;
    Cache k(rng, n, hd * n_kv, 1.0f), v(rng, n, hd_v * n_kv, 1.0f);
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<float> q(size_t(nq) * hd);
    for (auto& x : q) x = round_f16(g(rng));
    std::vector<int> lo(nq), hi(nq);
    for (int j = 0; j < nq; ++j) {
        hi[j] = n - (nq - 1 - j) / 2;  // later queries see more cells (two heads per token)
        lo[j] = window > 0 ? std::max(0, hi[j] - window) : 0;
    }
    AttnTile t;
    t.hd = hd;
    t.hd_v = hd_v;
    t.nq = nq;
    t.q = q.data();
    t.k = k.rows.data();
    t.v = v.rows.data();
    t.k_off = size_t(hd);  // the second KV head
    t.v_off = size_t(hd_v);
    t.n = n;
    t.lo = lo.data();
    t.hi = hi.data();
    t.scale = 1.0f / std::sqrt(float(hd));
    t.softcap = cap;
    std::vector<float> ref(size_t(nq) * hd_v), got(size_t(nq) * hd_v, NAN);
    t.out = ref.data();
    t.out_stride = size_t(hd_v);
    cpu::simd::attn_kernels(Isa::Scalar).tile(t);
    t.out = got.data();
    fast.tile(t);
    double max_err = 0;
    for (size_t i = 0; i < ref.size(); ++i) max_err = std::max(max_err, double(std::fabs(ref[i] - got[i])));
    // Outputs are O(1) averages of unit values; f16-rounded probabilities may round the
    // other way when the softmax sums differ in the last bits.
    EXPECT_LT(max_err, 2e-3) << "hd " << hd << " hd_v " << hd_v << " nq " << nq << " n " << n << " window " << window
                             << " cap " << cap;
}

TEST(Attention, TileKernelMatchesScalar) {
    if (!cpu::simd::isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 on this CPU: only the scalar kernels run";
    const AttnKernels& fast = cpu::simd::attn_kernels(Isa::Avx512);
    uint32_t seed = 1;
    for (int hd : {64, 128, 256})
        for (int nq : {1, 2, 4, 8, 17, 32, 64})
            for (int n : {nq / 2 + 1, 130, 300}) run_tile_case(fast, hd, hd, nq, n, 0, 0.0f, seed++);
    run_tile_case(fast, 128, 64, 32, 200, 0, 0.0f, seed++);   // different value size
    run_tile_case(fast, 64, 64, 32, 300, 100, 0.0f, seed++);  // sliding window
    run_tile_case(fast, 64, 64, 32, 150, 0, 50.0f, seed++);   // soft-capped scores
    run_tile_case(fast, 48, 48, 16, 100, 0, 0.0f, seed++);    // head size the fast path hands to scalar
}

// A query's outputs do not depend on the tile it is computed in: each query of a tile of
// 17 (window and soft-cap cases too, tiles starting on and off a chunk boundary), run alone
// over just its own cells, gives the same bits. Prompts and decode then agree (runtime:
// PrefillDecodeBits.*).
TEST(Attention, QueryAloneGivesItsTileBits) {
    std::vector<const AttnKernels*> levels = {&cpu::simd::attn_kernels(Isa::Scalar)};
    if (cpu::simd::isa_supported(Isa::Avx512)) levels.push_back(&cpu::simd::attn_kernels(Isa::Avx512));
    for (const AttnKernels* kern : levels)
        for (int window : {0, 40})
            for (float cap : {0.0f, 30.0f})
            for (int pos0 : {0, 77}) {
                const int hd = 64, nq = 17, n = 150;
                std::mt19937 rng(5 + window);
                Cache k(rng, n, hd, 1.0f), v(rng, n, hd, 1.0f);
                std::normal_distribution<float> g(0.f, 1.f);
                std::vector<float> q(size_t(nq) * hd);
                for (auto& x : q) x = round_f16(g(rng));
                std::vector<int> lo(nq), hi(nq);
                for (int j = 0; j < nq; ++j) {
                    hi[j] = n - (nq - 1 - j) * 3;
                    lo[j] = window > 0 ? std::max(0, hi[j] - window) : 0;
                }
                AttnTile t;
                t.hd = t.hd_v = hd;
                t.nq = nq;
                t.q = q.data();
                t.k = k.rows.data();
                t.v = v.rows.data();
                t.n = n;
                t.lo = lo.data();
                t.hi = hi.data();
                t.scale = 0.125f;
                t.softcap = cap;
                t.pos0 = pos0;
                std::vector<float> all(size_t(nq) * hd);
                t.out = all.data();
                t.out_stride = size_t(hd);
                kern->tile(t);
                for (int j = 0; j < nq; ++j) {
                    AttnTile a = t;
                    const int lo1 = 0, hi1 = hi[j] - lo[j];
                    a.nq = 1;
                    a.q = q.data() + size_t(j) * hd;
                    a.k = k.rows.data() + lo[j];
                    a.v = v.rows.data() + lo[j];
                    a.n = hi1;
                    a.pos0 = t.pos0 + lo[j];
                    a.lo = &lo1;
                    a.hi = &hi1;
                    std::vector<float> one(static_cast<size_t>(hd));
                    a.out = one.data();
                    kern->tile(a);
                    EXPECT_EQ(0, std::memcmp(one.data(), all.data() + size_t(j) * hd, sizeof(float) * hd))
                        << "query " << j << " window " << window << " cap " << cap << " pos0 " << pos0
                        << (kern == levels[0] ? " (scalar)" : " (avx512)");
                }
            }
}

// A deep cache shared among threads: the cells cut at chunk boundaries into parts, each part
// run in partial mode (a record per chunk and query), the records folded in chunk order give
// the bits of one tile call over all the cells (scalar and AVX-512; decode and verification
// sized tiles, a window, a tile starting off a chunk boundary).
TEST(Attention, ChunkRecordsFoldToTheTileBits) {
    std::vector<const AttnKernels*> levels = {&cpu::simd::attn_kernels(Isa::Scalar)};
    if (cpu::simd::isa_supported(Isa::Avx512)) levels.push_back(&cpu::simd::attn_kernels(Isa::Avx512));
    for (const AttnKernels* kern : levels)
        for (int nq : {1, 4, 13})
            for (int window : {0, 300}) {
                const int hd = 64, n = 700, pos0 = 77, nh = 2;
                std::mt19937 rng(11 + nq + window);
                Cache k(rng, n, hd * nh, 1.0f), v(rng, n, hd * nh, 1.0f);
                std::normal_distribution<float> g(0.f, 1.f);
                std::vector<float> q(size_t(nh) * nq * hd);
                for (auto& x : q) x = round_f16(g(rng));
                std::vector<int> lo(nq), hi(nq);
                for (int j = 0; j < nq; ++j) {
                    hi[j] = n - (nq - 1 - j);
                    lo[j] = window > 0 ? std::max(0, hi[j] - window) : 0;
                }
                AttnTile t;
                t.hd = t.hd_v = hd;
                t.nq = nq;
                t.q = q.data();
                t.nh = nh;
                t.q_head_stride = t.out_head_stride = size_t(nq) * hd;
                t.k = k.rows.data();
                t.v = v.rows.data();
                t.n = n;
                t.pos0 = pos0;
                t.lo = lo.data();
                t.hi = hi.data();
                t.scale = 0.125f;
                t.out_stride = size_t(hd);
                std::vector<float> all(size_t(nh) * nq * hd, NAN);
                t.out = all.data();
                kern->tile(t);
                // Parts [0, 179), [179, 435), [435, 700): chunks end at cells 51, 179, 307, ...
                const int cuts[] = {0, 179, 435, n};
                const int chunks_in[] = {2, 2, 3};
                const int n_chunks = 7;
                const size_t rs = cpu::simd::attn_record(hd);
                std::vector<float> rec(size_t(nh) * n_chunks * nq * rs, NAN);
                for (int p = 0, first = 0; p < 3; first += chunks_in[p], ++p) {
                    const int a = cuts[p], b = cuts[p + 1];
                    std::vector<int> lo1(nq), hi1(nq);
                    for (int j = 0; j < nq; ++j) {
                        lo1[j] = std::clamp(lo[j] - a, 0, b - a);
                        hi1[j] = std::clamp(hi[j] - a, 0, b - a);
                    }
                    AttnTile pt = t;
                    pt.k = k.rows.data() + a;
                    pt.v = v.rows.data() + a;
                    pt.n = b - a;
                    pt.pos0 = pos0 + a;
                    pt.lo = lo1.data();
                    pt.hi = hi1.data();
                    pt.out = nullptr;
                    pt.partial = rec.data() + size_t(first) * nq * rs;
                    pt.partial_head_stride = size_t(n_chunks) * nq * rs;
                    kern->tile(pt);
                }
                for (int h = 0; h < nh; ++h) {
                    std::vector<float> got(size_t(nq) * hd, NAN);
                    cpu::simd::AttnFold f;
                    f.nq = nq;
                    f.hd_v = hd;
                    f.n_chunks = n_chunks;
                    f.rec = rec.data() + size_t(h) * n_chunks * nq * rs;
                    f.out = got.data();
                    f.out_stride = size_t(hd);
                    kern->fold(f);
                    EXPECT_EQ(0, std::memcmp(got.data(), all.data() + size_t(h) * nq * hd, sizeof(float) * got.size()))
                        << "nq " << nq << " window " << window << " head " << h
                        << (kern == levels[0] ? " (scalar)" : " (avx512)");
                }
            }
}

}  // namespace
}  // namespace glia
