// A result never depends on the machine: the same tokens give the same logits, bit for bit,
// at any CPU thread count and whether or not other threads compete for the cores. Work is
// split by the thread count only across independent outputs (rows, heads, experts), never
// across a sum, and no split or choice depends on timing. A greedy reply that changed with
// load would break what users and the goldens rely on.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "model/model.h"
#include "runtime/session.h"
#include "test_util.h"

using namespace glia;

namespace {

// Every position's logits of a prompt in one pass, then the last logits of each of a few
// tokens decoded one at a time (the decode-sized products and attention tiles).
std::vector<float> run(const Model& m, const std::vector<int32_t>& prompt, const std::vector<int32_t>& steps,
                       int n_threads, int n_ctx = 128) {
    SessionOptions so;
    so.n_ctx = n_ctx;
    so.n_threads = n_threads;
    Session s(m, so);
    std::vector<float> out = s.decode(prompt, true);
    for (int32_t t : steps) {
        const std::vector<float>& l = s.decode({t});
        out.insert(out.end(), l.begin(), l.end());
    }
    return out;
}

size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return std::max(a.size(), b.size());
    size_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return n;
}

// Busy threads beside the computation for as long as the object lives: the pool's workers
// are descheduled at random points, wait longer, fall asleep and are woken late.
class CpuHog {
public:
    explicit CpuHog(int n) {
        for (int i = 0; i < n; ++i)
            threads_.emplace_back([this] {
                volatile uint64_t x = 0;
                while (!stop_.load(std::memory_order_relaxed)) x = x + 1;
            });
    }
    ~CpuHog() {
        stop_.store(true);
        for (auto& t : threads_) t.join();
    }

private:
    std::atomic<bool> stop_{false};
    std::vector<std::thread> threads_;
};

void check_thread_counts(const std::string& file) {
    auto m = Model::load(test::shared_path("models/" + file));
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> tok(3, m->profile().n_vocab - 1);
    std::vector<int32_t> prompt(40), steps(6);
    for (auto& t : prompt) t = tok(rng);
    for (auto& t : steps) t = tok(rng);
    const std::vector<float> one = run(*m, prompt, steps, 1);
    ASSERT_EQ(one.size(), (prompt.size() + steps.size()) * static_cast<size_t>(m->profile().n_vocab));
    for (int nt : {2, 3, 4}) EXPECT_EQ(differing(one, run(*m, prompt, steps, nt)), 0u) << file << ": " << nt << " threads";
    CpuHog hog(2);
    EXPECT_EQ(differing(one, run(*m, prompt, steps, 2)), 0u) << file << ": 2 threads beside 2 busy threads";
}

// Decode against a deep cache (1,100 cells: 9 chunks) with more threads than tiles x KV
// heads: the cells are cut into parts whose records are folded afterwards; the logits stay
// those of one thread (no parts) at every count, for 2 and 4 KV heads, with a sliding window.
void check_deep_decode(const std::string& file) {
    auto m = Model::load(test::shared_path("models/" + file));
    std::mt19937 rng(9);
    std::uniform_int_distribution<int> tok(3, m->profile().n_vocab - 1);
    std::vector<int32_t> prompt(1100), steps(3);
    for (auto& t : prompt) t = tok(rng);
    for (auto& t : steps) t = tok(rng);
    const size_t n_vocab = static_cast<size_t>(m->profile().n_vocab);
    auto decode_logits = [&](int nt) {
        std::vector<float> all = run(*m, prompt, steps, nt, 1280);
        return std::vector<float>(all.end() - static_cast<std::ptrdiff_t>(steps.size() * n_vocab), all.end());
    };
    const std::vector<float> one = decode_logits(1);
    for (int nt : {3, 4, 8}) EXPECT_EQ(differing(one, decode_logits(nt)), 0u) << file << ": " << nt << " threads";
}

TEST(ThreadCountBits, DeepDecodeSharedAmongThreadsGemma3) { check_deep_decode("tiny-gemma3-q4_k_m.gguf"); }
TEST(ThreadCountBits, DeepDecodeSharedAmongThreadsStories) { check_deep_decode("stories260K-q4_k_m.gguf"); }

TEST(ThreadCountBits, StoriesQ4KM) { check_thread_counts("stories260K-q4_k_m.gguf"); }
TEST(ThreadCountBits, LlamaF16) { check_thread_counts("tiny-llama-f16.gguf"); }
TEST(ThreadCountBits, LlamaQ6K) { check_thread_counts("tiny-llama-q6_k.gguf"); }
TEST(ThreadCountBits, Gemma3SlidingWindowQ4KM) { check_thread_counts("tiny-gemma3-q4_k_m.gguf"); }
TEST(ThreadCountBits, Qwen3MoeQ8_0) { check_thread_counts("tiny-qwen3moe-q8_0.gguf"); }
TEST(ThreadCountBits, Lfm2RecurrentQ4KM) { check_thread_counts("tiny-lfm2-q4_k_m.gguf"); }

}  // namespace
