// MoE expert stacks on the decode layout (ops_moe.cpp, expert_decode_layout): the expert
// products give the bits they give on the file layout, for decode-sized groups, groups that
// read the layout and groups of the packed GEMM (panels packed from the layout), and the
// backend keeps exactly the bytes cpu::weight_copy_bytes counts for the planner.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/simd/matmul.h"
#include "dispatch/dispatcher.h"
#include "graph/graph.h"
#include "quant/quant.h"

namespace glia {
namespace {

struct Weights {
    std::deque<std::unique_ptr<uint8_t[]>> bufs;
    std::deque<Tensor> tensors;
    // [K, N, n_exp] of random rows quantized to `t` (64-byte aligned, as the mapped file's are not required to be).
    Tensor* make(DType t, int64_t K, int64_t N, int64_t n_exp, const char* name, std::mt19937& rng) {
        Tensor x = Tensor::make(t, K, N, n_exp);
        x.role = TensorRole::WEIGHT;
        x.name = name;
        bufs.emplace_back(new uint8_t[x.nbytes() + 64]);
        x.data = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(bufs.back().get()) + 63) & ~uintptr_t(63));
        std::normal_distribution<float> g(0.0f, 0.05f);
        std::vector<float> row(K);
        for (int64_t r = 0; r < x.n_rows(); ++r) {
            for (auto& v : row) v = g(rng);
            quant::quantize_row(t, row.data(), static_cast<uint8_t*>(x.data) + r * x.nb[1], K);
        }
        tensors.push_back(std::move(x));
        return &tensors.back();
    }
};

// The experts' output for T tokens (token t picks experts (t + i * 3) % n_exp) on `cpu`.
std::vector<float> run_experts(cpu::CpuBackend& cpu, Tensor* gw, Tensor* uw, Tensor* dw, int64_t T, int k,
                               std::mt19937 rng) {
    const int64_t E = gw->ne[0], n_exp = gw->ne[2];
    Graph g;
    Tensor* x = g.new_input(DType::F32, E, T, 1, 1, "x");
    std::normal_distribution<float> n01(0.0f, 1.0f);
    for (int64_t i = 0; i < E * T; ++i) x->ptr<float>()[i] = n01(rng);
    Tensor* ids = g.new_input(DType::I32, k, T, 1, 1, "ids");
    Tensor* wt = g.new_input(DType::F32, k, T, 1, 1, "weights");
    for (int64_t t = 0; t < T; ++t)
        for (int i = 0; i < k; ++i) {
            ids->ptr<int32_t>()[t * k + i] = int32_t((t + i * 3) % n_exp);
            wt->ptr<float>()[t * k + i] = 0.25f + 0.1f * float(i);
        }
    g.set_output(g.moe_experts(x, gw, uw, dw, ids, wt));
    DispatchOptions dopt;
    Dispatcher d({&cpu}, [](const Tensor&, const Node&) { return 0; }, dopt);
    auto plan = d.compile(g);
    const Tensor& out = d.run(*plan);
    return std::vector<float>(out.ptr<float>(), out.ptr<float>() + out.n_elements());
}

TEST(DecodeLayout, ExpertStacksGiveTheFileLayoutsBits) {
    const auto& kk = cpu::simd::kernels(DType::Q4_K);
    if (!cpu::expert_decode_layout(kk, 256, 512)) GTEST_SKIP() << "no decode layout on this machine";
    std::mt19937 rng(7);
    Weights ws;
    // qwen3moe's Q4_K_M mix: Q4_K gate and up, Q6_K down; 4 experts of 256 x 512.
    const int64_t E = 256, F = 512, n_exp = 4;
    Tensor* gw = ws.make(DType::Q4_K, E, F, n_exp, "gate_exps", rng);
    Tensor* uw = ws.make(DType::Q4_K, E, F, n_exp, "up_exps", rng);
    Tensor* dw = ws.make(DType::Q6_K, F, E, n_exp, "down_exps", rng);
    cpu::CpuBackend with(2, true), without(2, false);
    for (Tensor* w : {gw, uw, dw}) with.prepare_weight(*w), without.prepare_weight(*w);
    // 1 and 3 tokens: groups of one; 40: groups of 20 (the layout's few-token products);
    // 300: groups of 150 (the GEMM, its panels packed from the layout).
    for (int64_t T : {1, 3, 40, 300}) {
        const std::vector<float> a = run_experts(with, gw, uw, dw, T, 2, std::mt19937(T));
        const std::vector<float> b = run_experts(without, gw, uw, dw, T, 2, std::mt19937(T));
        ASSERT_EQ(a.size(), b.size());
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "T=" << T;
    }
    const uint64_t want = n_exp * (2 * cpu::weight_copy_bytes(DType::Q4_K, E, F, true) +
                                   cpu::weight_copy_bytes(DType::Q6_K, F, E, true));
    EXPECT_GT(want, 0u);
    EXPECT_EQ(with.decode_layout_bytes(), want);
    EXPECT_EQ(without.decode_layout_bytes(), 0u);
    for (Tensor* w : {gw, uw, dw}) with.release_weight(*w), without.release_weight(*w);
    EXPECT_EQ(with.decode_layout_bytes(), 0u);
}

}  // namespace
}  // namespace glia
