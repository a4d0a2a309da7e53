// The in-process communicator (ranks as threads) and the collective nodes' CPU kernels:
// sums in rank order with the same bits on every rank, gathers stacked by rank, clear
// errors for mismatched sizes, and an abort that frees waiting ranks.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "graph/graph.h"
#include "parallel/rank_threads.h"
#include "parallel/thread_group.h"

namespace glia {
namespace {

// Values whose float sum depends on the order (large and small magnitudes mixed).
std::vector<float> rank_values(int rank, size_t n, uint32_t seed) {
    std::mt19937 rng(seed * 31 + uint32_t(rank));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = u(rng) * (i % 3 == 0 ? 1e7f : 1e-3f);
    return v;
}

TEST(ThreadGroup, AllReduceSumsInRankOrderWithTheSameBitsOnEveryRank) {
    for (int world : {1, 2, 3, 4}) {
        ThreadGroup g(world);
        RankThreads threads(world);
        for (size_t n : {size_t(1), size_t(3), size_t(1000), size_t(4099)}) {
            std::vector<std::vector<float>> buf(static_cast<size_t>(world));
            for (int r = 0; r < world; ++r) buf[size_t(r)] = rank_values(r, n, uint32_t(n));
            std::vector<float> want(n);
            for (size_t i = 0; i < n; ++i) {
                float s = buf[0][i];
                for (int r = 1; r < world; ++r) s += buf[size_t(r)][i];
                want[i] = s;
            }
            threads.run([&](int r) { g.comm(r).all_reduce_sum(buf[size_t(r)].data(), n); });
            for (int r = 0; r < world; ++r)
                EXPECT_EQ(std::memcmp(buf[size_t(r)].data(), want.data(), n * sizeof(float)), 0)
                    << "world " << world << " n " << n << " rank " << r;
        }
    }
}

TEST(ThreadGroup, AllGatherStacksByRank) {
    const int world = 3;
    ThreadGroup g(world);
    RankThreads threads(world);
    const size_t n = 5;
    std::vector<std::vector<float>> out(world, std::vector<float>(n * world));
    threads.run([&](int r) {
        std::vector<float> in(n);
        for (size_t i = 0; i < n; ++i) in[i] = float(r * 100 + int(i));
        g.comm(r).all_gather(in.data(), out[size_t(r)].data(), n);
    });
    for (int r = 0; r < world; ++r)
        for (int k = 0; k < world; ++k)
            for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[size_t(r)][size_t(k) * n + i], float(k * 100 + int(i)));
}

TEST(ThreadGroup, RanksThatDisagreeOnTheSizeGetAnError) {
    ThreadGroup g(2);
    RankThreads threads(2);
    std::vector<float> a(8), b(9);
    try {
        threads.run([&](int r) { g.comm(r).all_reduce_sum(r == 0 ? a.data() : b.data(), r == 0 ? 8 : 9); });
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("disagree on a collective's size"), std::string::npos) << e.what();
    }
}

TEST(ThreadGroup, AbortFreesRanksWaitingForAFailedOne) {
    ThreadGroup g(3);
    std::vector<float> v(4);
    std::vector<std::string> errors(2);
    std::vector<std::thread> waiting;
    for (int r = 1; r <= 2; ++r)
        waiting.emplace_back([&, r] {
            try {
                g.comm(r).all_reduce_sum(v.data(), 4);
            } catch (const Error& e) {
                errors[size_t(r) - 1] = e.what();
            }
        });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    g.abort("rank 0 failed: out of memory");
    for (auto& t : waiting) t.join();
    for (const auto& e : errors) EXPECT_NE(e.find("rank 0 failed: out of memory"), std::string::npos) << e;
    EXPECT_THROW(g.comm(0).all_reduce_sum(v.data(), 4), Error);  // and later calls fail at once
}

// The CPU kernels of ALL_REDUCE and ALL_GATHER, one backend per rank as the runtime uses.
TEST(CollectiveNodes, CpuKernelsSumAndStackAcrossRanks) {
    const int world = 2;
    const int64_t n = 6, T = 3;
    ThreadGroup g(world);
    RankThreads threads(world);
    std::vector<std::unique_ptr<cpu::CpuBackend>> cpus;
    for (int r = 0; r < world; ++r) cpus.push_back(std::make_unique<cpu::CpuBackend>(1));
    std::vector<std::vector<float>> x(world), red(world), gat(world);
    threads.run([&](int r) {
        Graph gr;
        Tensor* in = gr.new_input(DType::F32, n, T);
        x[size_t(r)].resize(size_t(n * T));
        for (int64_t i = 0; i < n * T; ++i) x[size_t(r)][size_t(i)] = float(r + 1) * float(i);
        std::memcpy(in->data, x[size_t(r)].data(), size_t(n * T) * sizeof(float));
        Tensor* s = gr.all_reduce(in, &g.comm(r));
        Tensor* a = gr.all_gather(in, &g.comm(r));
        red[size_t(r)].resize(size_t(n * T));
        gat[size_t(r)].resize(size_t(n * T * world));
        s->data = red[size_t(r)].data();
        a->data = gat[size_t(r)].data();
        for (const Node& node : gr.nodes()) {
            ASSERT_TRUE(cpus[size_t(r)]->supports(node));
            cpus[size_t(r)]->run(node);
        }
    });
    for (int r = 0; r < world; ++r)
        for (int64_t t = 0; t < T; ++t)
            for (int64_t i = 0; i < n; ++i) {
                EXPECT_EQ(red[size_t(r)][size_t(t * n + i)], x[0][size_t(t * n + i)] + x[1][size_t(t * n + i)]);
                for (int k = 0; k < world; ++k)  // column t: rank 0's n values, then rank 1's
                    EXPECT_EQ(gat[size_t(r)][size_t(t * n * world + k * n + i)], x[size_t(k)][size_t(t * n + i)]);
            }
}

}  // namespace
}  // namespace glia
