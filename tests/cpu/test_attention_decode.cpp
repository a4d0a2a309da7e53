// Decode-sized attention tiles (1-4 queries per KV head, several KV heads per call): the
// AVX-512 kernel packs the heads' queries into shared softmax lanes and reads the cells a
// piece at a time, every head per piece. Neither may change a bit: each head gets the bits
// of its own single-head call (partial records too), and the outputs of fixed cases are the
// bits the kernel gave before the restructuring (one chunk of cells at a time, head by head,
// 16 softmax lanes per head).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/simd/attention.h"
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

// Portable pseudo-random values (an LCG), as f16 bits in about [-2, 2).
uint16_t lcg_f16(uint32_t& s) {
    s = s * 1664525u + 1013904223u;
    return f32_to_f16(static_cast<float>(s >> 8) / 16777216.0f * 4.0f - 2.0f);
}

// FNV-1a over the outputs' bits.
uint64_t hash_floats(const float* x, size_t n) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char* b = reinterpret_cast<const unsigned char*>(x);
    for (size_t i = 0; i < n * sizeof(float); ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

struct DecodeCase {
    int nq, nh, n, pos0, window;
    float softcap;
    uint64_t hash;  // of the outputs, AVX-512 kernel of commit de1261c
};

// The case's outputs: F16 rows of nh + 1 heads of 128 values (the call serves heads 1..nh),
// handed out in a scrambled order, hashed.
uint64_t run_case(const AttnKernels& kern, const DecodeCase& dc) {
    const int hd = 128, width = hd * (dc.nh + 1);
    uint32_t s = 12345u + static_cast<uint32_t>(dc.nq * 1000 + dc.nh * 100 + dc.n + dc.window);
    std::vector<uint16_t> kd(static_cast<size_t>(dc.n) * width), vd(kd.size());
    for (auto& x : kd) x = lcg_f16(s);
    for (auto& x : vd) x = lcg_f16(s);
    std::vector<const uint8_t*> kr(dc.n), vr(dc.n);
    for (int c = 0; c < dc.n; ++c) {
        const size_t r = static_cast<size_t>((c * 7) % dc.n);  // n is not a multiple of 7
        kr[c] = reinterpret_cast<const uint8_t*>(kd.data() + r * width);
        vr[c] = reinterpret_cast<const uint8_t*>(vd.data() + r * width);
    }
    std::vector<float> q(static_cast<size_t>(dc.nh) * dc.nq * hd);
    for (auto& x : q) x = f16_to_f32(lcg_f16(s));
    std::vector<int> lo(dc.nq), hi(dc.nq);
    for (int j = 0; j < dc.nq; ++j) {
        hi[j] = dc.n - (dc.nq - 1 - j);
        lo[j] = dc.window > 0 ? std::max(0, hi[j] - dc.window) : 0;
    }
    AttnTile t;
    t.hd = t.hd_v = hd;
    t.nq = dc.nq;
    t.q = q.data();
    t.nh = dc.nh;
    t.q_head_stride = t.out_head_stride = static_cast<size_t>(dc.nq) * hd;
    t.k = kr.data();
    t.v = vr.data();
    t.k_off = t.v_off = hd;
    t.n = dc.n;
    t.pos0 = dc.pos0;
    t.lo = lo.data();
    t.hi = hi.data();
    t.scale = 0.088388f;
    t.softcap = dc.softcap;
    std::vector<float> out(static_cast<size_t>(dc.nh) * dc.nq * hd);
    t.out = out.data();
    t.out_stride = hd;
    kern.tile(t);
    return hash_floats(out.data(), out.size());
}

// Decode of a GQA group of 2 over 8 KV heads (qwen3-0.6b), 1, 3 and 4 queries, a window and
// soft-capping, chunks and pieces cut off their boundaries; and prompt tiles (13, 32 queries).
TEST(AttentionDecode, TileBitsAreThoseOfThePerHeadKernel) {
    if (!cpu::simd::isa_supported(Isa::Avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
    const DecodeCase cases[] = {
        {2, 8, 200, 0, 0, 0.0f, 0xba6b9d5af3935aecull},    {2, 8, 150, 77, 0, 0.0f, 0x862d7726c2cd522aull},
        {1, 8, 300, 5, 0, 0.0f, 0x6c48fb939d5beeb3ull},    {3, 6, 170, 100, 40, 0.0f, 0x5029083a1d195d2full},
        {4, 8, 129, 0, 0, 30.0f, 0xf8a6dd2c7ecf47d7ull},   {2, 1, 61, 3, 0, 0.0f, 0xed97c9076aa2d0c3ull},
        {13, 1, 300, 77, 0, 0.0f, 0x0399ae76b33aa7dfull},  {32, 1, 200, 0, 100, 0.0f, 0xe5407352ad69654bull},
        {32, 2, 300, 0, 0, 50.0f, 0x78c638371de43e46ull},
    };
    const AttnKernels& kern = cpu::simd::attn_kernels(Isa::Avx512);
    for (const DecodeCase& dc : cases)
        EXPECT_EQ(dc.hash, run_case(kern, dc)) << "nq " << dc.nq << " nh " << dc.nh << " n " << dc.n << " pos0 "
                                               << dc.pos0 << " window " << dc.window << " cap " << dc.softcap;
}


// A call serving nh heads (their queries packed several heads to a group of lanes, 3-query
// heads leaving a lane free, 4-query heads filling two groups) gives each head the bits of
// its own single-head call: outputs, and the records of partial mode; both kernel levels,
// f16 and Q8_0 rows, with and without a window, cells cut off chunk and piece boundaries.
TEST(AttentionDecode, PackedHeadsGiveEachHeadItsOwnBits) {
    std::vector<const AttnKernels*> levels = {&cpu::simd::attn_kernels(Isa::Scalar)};
    if (cpu::simd::isa_supported(Isa::Avx512)) levels.push_back(&cpu::simd::attn_kernels(Isa::Avx512));
    const KvType kv_of[] = {KvType::F16, KvType::Q8_0};
    const DType dt_of[] = {DType::F16, DType::Q8_0};
    uint32_t seed = 300;
    for (int ti = 0; ti < 2; ++ti)
        for (int nq : {1, 2, 3, 4})
            for (int nh : {2, 5, 8})
                for (int window : {0, 60}) {
                    std::mt19937 rng(seed++);
                    const int hd = 64, n_kv = nh + 1, n = 237, pos0 = 50;  // chunks end at cells 78, 206
                    test::Cache k(rng, dt_of[ti], n, hd * n_kv, 1.0f), v(rng, dt_of[ti], n, hd * n_kv, 1.0f);
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
                    t.k_off = t.v_off = size_t(hd);  // heads 1..nh of the rows
                    t.k_type = t.v_type = kv_of[ti];
                    t.n = n;
                    t.pos0 = pos0;
                    t.lo = lo.data();
                    t.hi = hi.data();
                    t.scale = 0.125f;
                    t.out_stride = size_t(hd);
                    const int n_chunks = 3;
                    const size_t rs = cpu::simd::attn_record(hd);
                    for (const AttnKernels* kern : levels) {
                        const std::string what = std::string(ti ? "q8_0" : "f16") + " nq " + std::to_string(nq) +
                                                 " nh " + std::to_string(nh) + " window " + std::to_string(window) +
                                                 (kern == levels[0] ? " (scalar)" : " (avx512)");
                        std::vector<float> all(size_t(nh) * nq * hd, NAN);
                        std::vector<float> rec_all(size_t(nh) * n_chunks * nq * rs, NAN);
                        AttnTile a = t;
                        a.out = all.data();
                        kern->tile(a);
                        a.out = nullptr;
                        a.partial = rec_all.data();
                        a.partial_head_stride = size_t(n_chunks) * nq * rs;
                        kern->tile(a);
                        for (int h = 0; h < nh; ++h) {
                            AttnTile o = t;
                            o.nh = 1;
                            o.q = q.data() + size_t(h) * nq * hd;
                            o.k_off = o.v_off = size_t(1 + h) * hd;
                            std::vector<float> one(size_t(nq) * hd, NAN), rec(size_t(n_chunks) * nq * rs, NAN);
                            o.out = one.data();
                            kern->tile(o);
                            EXPECT_EQ(0, std::memcmp(one.data(), all.data() + size_t(h) * nq * hd,
                                                     sizeof(float) * one.size()))
                                << what << " head " << h;
                            o.out = nullptr;
                            o.partial = rec.data();
                            kern->tile(o);
                            // Records of chunks a query does not see hold -inf, 0 and zeros alike.
                            EXPECT_EQ(0, std::memcmp(rec.data(), rec_all.data() + size_t(h) * n_chunks * nq * rs,
                                                     sizeof(float) * rec.size()))
                                << what << " head " << h << " (records)";
                        }
                    }
                }
}

}  // namespace
}  // namespace glia
