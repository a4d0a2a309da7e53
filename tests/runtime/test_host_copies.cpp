// What `glia plan` says the CPU keeps beside a model's weights (the "repacked" column: the
// GEMM's packed panels and the decode layout, cpu::weight_copy_bytes) is what the CPU
// backend really holds once a prompt and some decode steps have run.
#include <gtest/gtest.h>

#include <random>

#include "backend/cpu/simd/matmul.h"
#include "backend/registry.h"
#include "model/model.h"
#include "placement/placement.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace glia;

namespace {

// The copies the CPU backend made while one session ran a long prompt with every
// position's logits (more tokens than kDecodeLayoutMaxTokens: the GEMM path, whose panels
// PackCache keeps for some types) and then decoded one token at a time (the decode layout).
uint64_t copies_made(const Model& m, int n_decode) {
    cpu::CpuBackend& cpu = cpu_backend();
    const uint64_t before = cpu.packed_bytes() + cpu.decode_layout_bytes();
    SessionOptions so;
    so.n_ctx = 256;
    so.n_threads = 2;
    Session s(m, so);
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> tok(3, m.profile().n_vocab - 1);
    std::vector<int32_t> prompt(cpu::kDecodeLayoutMaxTokens + 16);
    for (auto& t : prompt) t = tok(rng);
    s.decode(prompt, true);  // every position's logits: the LM head takes the GEMM path too
    for (int i = 0; i < n_decode; ++i) s.decode({tok(rng)});
    return cpu.packed_bytes() + cpu.decode_layout_bytes() - before;
}

uint64_t planned(const Model& m) {
    PlanRequest req;
    req.n_ctx = 256;
    req.host_copies = cpu::weight_copy_bytes;
    return plan_placement(m.profile(), m.file(), req).usage[0].repacked;
}

bool has_gemm(DType t) {
    const cpu::simd::Isa isa = cpu::simd::best_isa();
    return cpu::simd::has_kernels(t, isa) && cpu::simd::kernels(t, isa).gemm;
}

// Dense models of the types with a decode layout (Q4_K, Q6_K) and without (Q8_0: panels),
// a tied LM head (gemma3), and a MoE model (its expert stacks keep their decode layouts).
TEST(HostCopies, PlanCountsWhatTheCpuKeeps) {
    for (const char* file : {"tiny-llama-q4_k_m.gguf", "tiny-llama-q8_0.gguf", "tiny-gemma3-q4_k_m.gguf",
                             "tiny-qwen3moe-q4_k_m.gguf"}) {
        SCOPED_TRACE(file);
        auto m = Model::load(test::shared_path(std::string("models/") + file));
        const uint64_t plan = planned(*m);
        if (has_gemm(DType::Q8_0)) EXPECT_GT(plan, 0u);  // these kernels derive copies of these types
        EXPECT_EQ(copies_made(*m, 4), plan);
    }
}

}  // namespace
