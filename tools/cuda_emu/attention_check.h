// The tensor-core attention (k_attention_tc.cu) on the emulator: a batch of over 128 tokens
// (many-token mode) against a double-precision reference over the same f16 cache, and the
// bits of each token alone, of three tokens and of a 40-token slice (few-token mode) and of
// all but the first token (many-token mode, other tiles) against the batch's. Cases: GQA groups of 4 at head size 128, one query
// head per KV head at 64, a sliding window, a soft-cap, and a batch of two sequences whose
// tokens share tiles. Returns the number of failed cases.
#pragma once
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "attention_reference.h"

struct AttnCase {
    const char* name;
    int hd, nh, nkv, window;
    float softcap;
    int past0, T, seq1_at;  // seq1_at >= 0: tokens [seq1_at, seq1_at + 24) are a second sequence from position 0
};

inline int check_attention_tc() {
    using namespace glia;
    using namespace glia::emucuda;
    const AttnCase cases[] = {
        {"hd128 group4", 128, 8, 2, 0, 0.0f, 200, 140, -1},
        {"hd64 group1", 64, 2, 2, 0, 0.0f, 250, 136, -1},
        {"hd128 window 100", 128, 4, 1, 100, 0.0f, 230, 131, -1},
        {"hd64 softcap 30", 64, 8, 2, 0, 30.0f, 5, 133, -1},
        {"hd64 two sequences", 64, 4, 2, 0, 0.0f, 270, 140, 20},
        {"hd128 group4 deep", 128, 8, 2, 0, 0.0f, 700, 131, -1},  // four chunks: the merge folds several
    };
    int bad = 0;
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (const AttnCase& c : cases) {
        const int bs = 16, hd = c.hd, T = c.T;
        const int64_t cells = 1024;
        std::vector<int32_t> pos(static_cast<size_t>(T)), seq(pos), cell(pos);
        for (int t = 0; t < T; ++t) {
            const bool s1 = c.seq1_at >= 0 && t >= c.seq1_at && t < c.seq1_at + 24;
            const int before = c.seq1_at >= 0 && t >= c.seq1_at + 24 ? 24 : 0;
            seq[size_t(t)] = s1 ? 1 : 0;
            pos[size_t(t)] = s1 ? t - c.seq1_at : c.past0 + t - before;
        }
        // Sequence 0's pages are pages 0.., sequence 1's start at page 40 (positions as cells).
        std::vector<int32_t> pages(2 * 64);
        for (int p = 0; p < 64; ++p) pages[size_t(p)] = p, pages[size_t(64 + p)] = 40 + p;
        for (int t = 0; t < T; ++t)
            cell[size_t(t)] = pages[size_t(seq[size_t(t)] * 64 + pos[size_t(t)] / bs)] * bs + pos[size_t(t)] % bs;
        std::vector<uint16_t> kc(size_t(cells * hd * c.nkv)), vc(kc.size());
        for (auto& x : kc) x = f32_to_f16(nd(rng));
        for (auto& x : vc) x = f32_to_f16(nd(rng));
        std::vector<float> q(size_t(hd * c.nh * T)), k(size_t(hd * c.nkv * T)), v(k.size());
        for (auto& x : q) x = nd(rng) * 0.6f;
        for (auto& x : k) x = nd(rng);
        for (auto& x : v) x = nd(rng);
        AttnParams ap;
        ap.scale = 1.0f / std::sqrt(float(hd));
        ap.softcap = c.softcap;
        ap.window = c.window;
        ap.block_size = bs;
        // Tokens [t0, t0 + nt) as one step; returns their outputs.
        auto run = [&](int t0, int nt) {
            Tensor tq = Tensor::make(DType::F32, hd, c.nh, nt), tk = Tensor::make(DType::F32, hd, c.nkv, nt),
                   tv = Tensor::make(DType::F32, hd, c.nkv, nt);
            tq.data = q.data() + size_t(t0) * hd * c.nh;
            tk.data = k.data() + size_t(t0) * hd * c.nkv;
            tv.data = v.data() + size_t(t0) * hd * c.nkv;
            Tensor tkc = Tensor::make(DType::F16, int64_t(hd) * c.nkv, cells), tvc = tkc;
            tkc.data = kc.data();
            tvc.data = vc.data();
            Tensor tp = Tensor::make(DType::I32, nt), ts = tp, tc = tp, tpg = Tensor::make(DType::I32, 64, 2);
            tp.data = pos.data() + t0;
            ts.data = seq.data() + t0;
            tc.data = cell.data() + t0;
            tpg.data = pages.data();
            std::vector<float> out(size_t(hd * c.nh * nt));
            Tensor to = Tensor::make(DType::F32, hd, c.nh, nt);
            to.data = out.data();
            Node n;
            n.op = Op::ATTENTION;
            n.src[AttnArg::Q] = &tq, n.src[AttnArg::K] = &tk, n.src[AttnArg::V] = &tv;
            n.src[AttnArg::K_CACHE] = &tkc, n.src[AttnArg::V_CACHE] = &tvc;
            n.src[AttnArg::POS] = &tp, n.src[AttnArg::SEQ] = &ts, n.src[AttnArg::CELLS] = &tc, n.src[AttnArg::PAGES] = &tpg;
            n.params = ap;
            n.out = &to;
            if (!attention_tc_usable(n)) fail("emu: the tensor-core attention does not take case ", c.name);
            std::vector<float> scratch(attention_scratch_bytes(n) / 4 + 16);
            launch_attention(n, nullptr, scratch.data(), nullptr);
            return out;
        };
        const std::vector<float> all = run(0, T);
        // The reference, in double, over the cache as the batch left it.
        double err = 0, ref_max = 0;
        const int group = c.nh / c.nkv;
        for (int t = 0; t < T; ++t)
            for (int h = 0; h < c.nh; ++h) {
                const int p = pos[size_t(t)], lo = c.window > 0 ? std::max(0, p - c.window + 1) : 0;
                const auto cell_of = [&](int j) {
                    return int64_t(pages[size_t(seq[size_t(t)] * 64 + j / bs)]) * bs + j % bs;
                };
                const std::vector<double> ref = reference_attention_row(
                    &q[size_t((t * c.nh + h) * hd)], hd, hd, lo, p, ap.scale, c.softcap, cell_of,
                    [&](int64_t cl, int i) { return f16_to_f32(kc[size_t(cl * hd * c.nkv + (h / group) * hd + i)]); },
                    [&](int64_t cl, int i) { return f16_to_f32(vc[size_t(cl * hd * c.nkv + (h / group) * hd + i)]); });
                for (int i = 0; i < hd; ++i) {
                    err = std::max(err, std::fabs(ref[size_t(i)] - all[size_t((t * c.nh + h) * hd + i)]));
                    ref_max = std::max(ref_max, std::fabs(ref[size_t(i)]));
                }
            }
        int differ = 0, sets = 0;
        const size_t row = size_t(hd * c.nh);
        auto same = [&](int t0, int nt) {
            const std::vector<float> got = run(t0, nt);
            ++sets;
            differ += std::memcmp(got.data(), all.data() + size_t(t0) * row, got.size() * 4) != 0;
        };
        for (int t : {0, 1, T / 2, T - 1}) same(t, 1);
        same(T - 3, 3);
        same(T - 40, 40);
        same(1, T - 1);  // many tokens again, other tiles
        const double rel = err / ref_max;
        const bool ok = differ == 0 && rel < 5e-3;
        // The batch's bits as one number, so that a change meant to keep them can be checked
        // against the previous kernel's run (FNV-1a over the outputs' bytes).
        uint64_t fp = 1469598103934665603ull;
        for (size_t i = 0; i < all.size() * 4; ++i) fp = (fp ^ reinterpret_cast<const uint8_t*>(all.data())[i]) * 1099511628211ull;
        bad += !ok;
        std::printf("%-60s %s err %.2g (bound 5e-03), %d of %d token sets not bit-equal to the %d-token step, bits %016llx\n",
                    (std::string("ATTENTION tensor cores ") + c.name).c_str(), ok ? "ok " : "BAD", rel, differ, sets, T,
                    static_cast<unsigned long long>(fp));
    }
    return bad;
}
