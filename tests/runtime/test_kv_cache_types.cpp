// Quantized KV caches in the runtime: the pages take the type's bytes, and the sequences of
// a batch get the bits they get alone (principle 6). With layers on a device:
// tests/dispatch/test_kv_cache_device.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "core/error.h"
#include "model/model.h"
#include "runtime/runner.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace glia;

namespace {

size_t state_bytes(const Model& m, CacheTypes c) {
    SessionOptions so;
    so.n_ctx = 256;
    so.n_threads = 1;
    so.placement.cache = c;
    Session s(m, so);
    return s.runner().state_bytes();
}

TEST(KvCacheTypes, PagesTakeTheTypesBytes) {
    auto m = Model::load(test::shared_path("models/tiny-llama-f16.gguf"));
    const size_t f16 = state_bytes(*m, {});
    ASSERT_GT(f16, 0u);
    EXPECT_EQ(state_bytes(*m, {DType::Q8_0, DType::Q8_0}) * 64, f16 * 34);
    EXPECT_EQ(state_bytes(*m, {DType::Q4_0, DType::Q4_0}) * 64, f16 * 18);
    EXPECT_EQ(state_bytes(*m, {DType::BF16, DType::Q8_0}) * 128, f16 * (64 + 34));
}

// Several sequences decoded together, with q8_0 keys and q4_0 values, give each the logits
// it gets alone.
TEST(KvCacheTypes, BatchedSequencesGetTheirSoloBits) {
    auto m = Model::load(test::shared_path("models/tiny-llama-f16.gguf"));
    const int n_vocab = m->profile().n_vocab;
    RunnerOptions ro;
    ro.n_ctx = 512;
    ro.n_slots = 3;
    ro.n_threads = 2;
    ro.placement.cache = {DType::Q8_0, DType::Q4_0};
    std::mt19937 rng(4);
    std::uniform_int_distribution<int> tok(3, n_vocab - 1);
    std::vector<std::vector<int32_t>> prompts(3);
    for (size_t s = 0; s < prompts.size(); ++s) prompts[s].resize(20 + 13 * s);
    for (auto& p : prompts)
        for (auto& t : p) t = tok(rng);
    // Alone: each sequence in slot 0 of its own runner, the whole prompt in one step.
    std::vector<std::vector<float>> alone;
    for (const auto& p : prompts) {
        RunnerOptions r1 = ro;
        r1.n_slots = 1;
        Runner r(*m, r1);
        std::vector<int32_t> pos(p.size());
        for (size_t i = 0; i < p.size(); ++i) pos[i] = int32_t(i);
        std::vector<int32_t> seq(p.size(), 0);
        ASSERT_TRUE(r.pages().reserve(0, int(p.size())));
        StepInputs in;
        in.tokens = p.data();
        in.pos = pos.data();
        in.seq = seq.data();
        in.n_tokens = int(p.size());
        const float* l = r.forward(in);
        alone.emplace_back(l, l + n_vocab);
    }
    // Together: every prompt in one step, then its last token read back.
    Runner r(*m, ro);
    std::vector<int32_t> toks, pos, seq, out_ids;
    for (size_t s = 0; s < prompts.size(); ++s) {
        ASSERT_TRUE(r.pages().reserve(int(s), int(prompts[s].size())));
        for (size_t i = 0; i < prompts[s].size(); ++i) {
            toks.push_back(prompts[s][i]);
            pos.push_back(int32_t(i));
            seq.push_back(int32_t(s));
        }
        out_ids.push_back(int32_t(toks.size() - 1));
    }
    StepInputs in;
    in.tokens = toks.data();
    in.pos = pos.data();
    in.seq = seq.data();
    in.n_tokens = int(toks.size());
    in.out_ids = out_ids.data();
    in.n_out = int(out_ids.size());
    const float* l = r.forward(in);
    ASSERT_EQ(r.n_outputs(), int(prompts.size()));
    const std::vector<float> together(l, l + size_t(n_vocab) * prompts.size());
    for (size_t s = 0; s < prompts.size(); ++s) {
        ASSERT_EQ(alone[s].size(), size_t(n_vocab));
        EXPECT_EQ(0, std::memcmp(alone[s].data(), together.data() + s * n_vocab, sizeof(float) * n_vocab))
            << "sequence " << s;
    }
}

}  // namespace
