// A position's logits do not depend on how the history before it was computed: the
// history prefilled in one step or decoded one token at a time gives the same bits
// (principle 6). The serving engine relies on it whenever a sequence's K/V is computed
// again (a request preempted and recomputed, a prefix cached by an earlier request that
// generated it token by token).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "model/model.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace glia;

namespace {

// The last logits after `n` random tokens: all in one forward pass, and the first n - 1 in
// one pass then the last alone, and every token alone (KV cells of the given types).
void check_history_paths(const std::string& file, int n, CacheTypes cache = {}) {
    auto m = Model::load(test::shared_path("models/" + file));
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> tok(3, m->profile().n_vocab - 1);
    std::vector<int32_t> toks(static_cast<size_t>(n));
    for (auto& t : toks) t = tok(rng);
    SessionOptions so;
    so.n_ctx = 256;
    so.n_threads = 2;
    so.placement.cache = cache;
    Session whole(*m, so);
    const std::vector<float> a = whole.decode(toks);
    Session split(*m, so);
    split.decode(std::vector<int32_t>(toks.begin(), toks.end() - 1));
    const std::vector<float> b = split.decode({toks.back()});
    Session steps(*m, so);
    std::vector<float> c;
    for (int32_t t : toks) c = steps.decode({t});
    ASSERT_EQ(a.size(), b.size());
    ASSERT_EQ(a.size(), c.size());
    size_t diff_b = 0, diff_c = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff_b += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
        diff_c += std::memcmp(&a[i], &c[i], sizeof(float)) != 0;
    }
    EXPECT_EQ(diff_b, 0u) << file << ": last token alone after a prefill of " << n - 1;
    EXPECT_EQ(diff_c, 0u) << file << ": every token alone";
}

TEST(PrefillDecodeBits, StoriesF32) { check_history_paths("stories260K.gguf", 60); }
TEST(PrefillDecodeBits, StoriesQ8_0) { check_history_paths("stories260K-q8_0.gguf", 60); }
TEST(PrefillDecodeBits, LlamaQ4KM) { check_history_paths("tiny-llama-q4_k_m.gguf", 60); }
TEST(PrefillDecodeBits, LlamaF16) { check_history_paths("tiny-llama-f16.gguf", 60); }
TEST(PrefillDecodeBits, Qwen3Q8_0) { check_history_paths("tiny-qwen3-q8_0.gguf", 60); }
// Quantized caches: each token's row is quantized once when stored, and every path reads
// the same blocks (heads of 64: whole blocks; stories260K's heads of 8: four to a block).
TEST(PrefillDecodeBits, LlamaF16CacheQ8_0) { check_history_paths("tiny-llama-f16.gguf", 60, {DType::Q8_0, DType::Q8_0}); }
TEST(PrefillDecodeBits, LlamaQ4KMCacheQ4_0) {
    check_history_paths("tiny-llama-q4_k_m.gguf", 60, {DType::Q4_0, DType::Q4_0});
}
TEST(PrefillDecodeBits, StoriesCacheQ8_0) { check_history_paths("stories260K.gguf", 60, {DType::Q8_0, DType::Q8_0}); }
TEST(PrefillDecodeBits, Qwen3CacheBf16Q4_0) {
    check_history_paths("tiny-qwen3-q8_0.gguf", 60, {DType::BF16, DType::Q4_0});
}

}  // namespace
