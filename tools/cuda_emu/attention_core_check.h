// The CUDA-core attention (k_attention.cu: the store kernels and the split kernel with its
// merge) on the emulator, over caches of F16, BF16, Q8_0 and Q4_0 (kv_rows.cuh). For each
// case: the rows the batch stores must be the bytes the CPU's store writes (the CPU's
// quantizer, quant::quantize_act_row, over the token's heads); the outputs of a batch that
// reaches past one split (64 cells) near a double-precision reference over the cache as the
// CPU widens it (quant::dequantize_row); each token alone, and a 3-token slice, the batch's
// bits; the split merge by counters (the fused backend) the bits of the merge kernel.
// Returns the number of failed cases.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention_reference.h"
#include "placement/cache_types.h"
#include "quant/quant.h"

struct AttnCoreCase {
    glia::DType kt, vt;
    int hd, hd_v, nh, nkv, window;
    float softcap;
    int past0, T;
};

inline int check_attention_core() {
    using namespace glia;
    using namespace glia::emucuda;
    using D = DType;
    const AttnCoreCase cases[] = {
        {D::F16, D::F16, 128, 128, 8, 2, 0, 0.0f, 90, 6},
        {D::Q8_0, D::Q8_0, 128, 128, 8, 2, 0, 0.0f, 90, 6},
        {D::Q4_0, D::Q4_0, 128, 128, 8, 2, 0, 0.0f, 90, 6},
        {D::BF16, D::BF16, 128, 128, 8, 2, 0, 0.0f, 90, 6},
        {D::Q8_0, D::F16, 64, 64, 2, 2, 0, 30.0f, 70, 5},  // a group of one, soft-cap, V in f16
        {D::BF16, D::Q4_0, 64, 64, 4, 1, 50, 0.0f, 80, 5},  // a window
        {D::Q4_0, D::Q8_0, 16, 16, 4, 2, 0, 0.0f, 75, 5},   // two heads a block
        {D::Q8_0, D::Q4_0, 8, 8, 8, 4, 0, 0.0f, 70, 4},     // four heads a block
        {D::Q8_0, D::Q8_0, 256, 256, 2, 1, 0, 0.0f, 66, 3}, // eight value dims a lane
    };
    int bad = 0;
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (const AttnCoreCase& c : cases) {
        const int bs = 16, hd = c.hd, hd_v = c.hd_v, T = c.T, nkv = c.nkv, nh = c.nh;
        const int64_t cells = 256, krow = int64_t(hd) * nkv, vrow = int64_t(hd_v) * nkv;
        const size_t kb = cache_row_bytes(c.kt, krow), vb = cache_row_bytes(c.vt, vrow);
        // Pages in reverse order, so that positions and cells differ.
        std::vector<int32_t> pages(size_t(cells / bs));
        for (size_t p = 0; p < pages.size(); ++p) pages[p] = int32_t(pages.size() - 1 - p);
        std::vector<int32_t> pos(static_cast<size_t>(T)), seq(pos.size(), 0), cell(pos.size());
        for (int t = 0; t < T; ++t) {
            pos[size_t(t)] = c.past0 + t;
            cell[size_t(t)] = pages[size_t(pos[size_t(t)] / bs)] * bs + pos[size_t(t)] % bs;
        }
        // The history: random rows stored as the CPU stores them.
        std::vector<uint8_t> kc(size_t(cells) * kb), vc(size_t(cells) * vb);
        std::vector<float> row(size_t(std::max(krow, vrow)));
        for (int64_t r = 0; r < cells; ++r) {
            for (int64_t i = 0; i < krow; ++i) row[size_t(i)] = nd(rng);
            quant::quantize_act_row(c.kt, row.data(), kc.data() + r * kb, krow);
            for (int64_t i = 0; i < vrow; ++i) row[size_t(i)] = nd(rng);
            quant::quantize_act_row(c.vt, row.data(), vc.data() + r * vb, vrow);
        }
        std::vector<float> q(size_t(hd) * nh * T), k(size_t(krow) * T), v(size_t(vrow) * T);
        for (auto& x : q) x = nd(rng) * 0.6f;
        for (auto& x : k) x = nd(rng);
        for (auto& x : v) x = nd(rng);
        AttnParams ap;
        ap.scale = 1.0f / std::sqrt(float(hd));
        ap.softcap = c.softcap;
        ap.window = c.window;
        ap.block_size = bs;
        // Tokens [t0, t0 + nt) as one step (merged by counters or by the merge kernel).
        auto run = [&](int t0, int nt, bool counters) {
            Tensor tq = Tensor::make(DType::F32, hd, nh, nt), tk = Tensor::make(DType::F32, hd, nkv, nt),
                   tv = Tensor::make(DType::F32, hd_v, nkv, nt);
            tq.data = q.data() + size_t(t0) * hd * nh;
            tk.data = k.data() + size_t(t0) * krow;
            tv.data = v.data() + size_t(t0) * vrow;
            Tensor tkc = Tensor::make(c.kt, krow, cells), tvc = Tensor::make(c.vt, vrow, cells);
            tkc.data = kc.data();
            tvc.data = vc.data();
            Tensor tp = Tensor::make(DType::I32, nt), ts = tp, tc = tp;
            Tensor tpg = Tensor::make(DType::I32, int64_t(pages.size()), 1);
            tp.data = pos.data() + t0;
            ts.data = seq.data() + t0;
            tc.data = cell.data() + t0;
            tpg.data = pages.data();
            std::vector<float> out(size_t(hd_v) * nh * nt);
            Tensor to = Tensor::make(DType::F32, hd_v, nh, nt);
            to.data = out.data();
            Node n;
            n.op = Op::ATTENTION;
            n.src[AttnArg::Q] = &tq, n.src[AttnArg::K] = &tk, n.src[AttnArg::V] = &tv;
            n.src[AttnArg::K_CACHE] = &tkc, n.src[AttnArg::V_CACHE] = &tvc;
            n.src[AttnArg::POS] = &tp, n.src[AttnArg::SEQ] = &ts, n.src[AttnArg::CELLS] = &tc;
            n.src[AttnArg::PAGES] = &tpg;
            n.params = ap;
            n.out = &to;
            std::vector<float> scratch(attention_scratch_bytes(n) / 4 + 16);
            std::vector<int> cnt(attention_counters(n) + 1, 0);
            launch_attention(n, nullptr, scratch.data(), counters ? cnt.data() : nullptr);
            for (int x : cnt)
                if (x != 0) fail("emu: the attention left a counter at ", x);
            return out;
        };
        const std::vector<float> all = run(0, T, false);
        // The stored rows: the CPU's bytes.
        int rows_differ = 0;
        std::vector<uint8_t> want(std::max(kb, vb));
        for (int t = 0; t < T; ++t) {
            quant::quantize_act_row(c.kt, k.data() + size_t(t) * krow, want.data(), krow);
            rows_differ += std::memcmp(want.data(), kc.data() + size_t(cell[size_t(t)]) * kb, kb) != 0;
            quant::quantize_act_row(c.vt, v.data() + size_t(t) * vrow, want.data(), vrow);
            rows_differ += std::memcmp(want.data(), vc.data() + size_t(cell[size_t(t)]) * vb, vb) != 0;
        }
        // The reference, in double, over the cache as the CPU widens it.
        std::vector<float> kw(size_t(cells * krow)), vw(size_t(cells * vrow));
        for (int64_t r = 0; r < cells; ++r) {
            quant::dequantize_row(c.kt, kc.data() + r * kb, kw.data() + r * krow, krow);
            quant::dequantize_row(c.vt, vc.data() + r * vb, vw.data() + r * vrow, vrow);
        }
        double err = 0, ref_max = 0;
        const int group = nh / nkv;
        for (int t = 0; t < T; ++t)
            for (int h = 0; h < nh; ++h) {
                const int p = pos[size_t(t)], lo = c.window > 0 ? std::max(0, p - c.window + 1) : 0;
                const int hk = h / group;
                const auto cell_of = [&](int j) { return int64_t(pages[size_t(j / bs)]) * bs + j % bs; };
                const std::vector<double> ref = reference_attention_row(
                    &q[size_t((t * nh + h) * hd)], hd, hd_v, lo, p, ap.scale, c.softcap, cell_of,
                    [&](int64_t cl, int i) { return kw[size_t(cl * krow + hk * hd + i)]; },
                    [&](int64_t cl, int i) { return vw[size_t(cl * vrow + hk * hd_v + i)]; });
                for (int i = 0; i < hd_v; ++i) {
                    err = std::max(err, std::fabs(ref[size_t(i)] - all[size_t((t * nh + h) * hd_v + i)]));
                    ref_max = std::max(ref_max, std::fabs(ref[size_t(i)]));
                }
            }
        int differ = 0, sets = 0;
        const size_t out_row = size_t(hd_v) * nh;
        auto same = [&](const std::vector<float>& got, int t0) {
            ++sets;
            differ += std::memcmp(got.data(), all.data() + size_t(t0) * out_row, got.size() * 4) != 0;
        };
        for (int t : {0, T / 2, T - 1}) same(run(t, 1, false), t);
        same(run(T - 3, 3, false), T - 3);
        same(run(0, T, true), 0);   // merged by the last split of each token (counters)
        same(run(T - 1, 1, true), T - 1);
        const double rel = err / ref_max;
        const bool ok = differ == 0 && rows_differ == 0 && rel < 5e-3;
        bad += !ok;
        char name[96];
        std::snprintf(name, sizeof name, "ATTENTION cuda cores k %s v %s hd%d/%d %d/%d%s%s past %d T=%d",
                      cache_type_name(c.kt), cache_type_name(c.vt), hd, hd_v, nh, nkv, c.window ? " win" : "",
                      c.softcap > 0 ? " cap" : "", c.past0, T);
        std::printf("%-72s %s err %.2g (bound 5e-03), %d of %d stored rows not the CPU's bytes, %d of %d token sets "
                    "not bit-equal to the %d-token step\n",
                    name, ok ? "ok " : "BAD", rel, rows_differ, 2 * T, differ, sets, T);
        std::fflush(stdout);
    }
    return bad;
}
