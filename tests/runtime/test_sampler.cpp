// The sampler: greedy is the argmax (ties to the lowest id), penalties change the pick,
// seeded sampling repeats, and top-k / min-p / top-p keep only the candidates they allow.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "runtime/sampler.h"

namespace glia {
namespace {

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
    SamplerParams p;
    p.temperature = 0;
    Sampler s(p);
    const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
    EXPECT_EQ(s.sample(l.data(), 5, {}), 1);
    EXPECT_EQ(s.sample(l.data(), 5, {}), 1);  // buffers reused between calls
}

TEST(Sampler, PenaltiesMoveTheGreedyPick) {
    SamplerParams p;
    p.temperature = 0;
    p.frequency_penalty = 1.0f;
    Sampler s(p);
    const std::vector<float> l = {0.0f, 2.0f, 1.5f};
    EXPECT_EQ(s.sample(l.data(), 3, {}), 1);
    EXPECT_EQ(s.sample(l.data(), 3, {1}), 2);  // 2.0 - 1 < 1.5
    EXPECT_EQ(l[1], 2.0f);                      // the caller's logits are untouched
}

TEST(Sampler, SeededSamplingRepeatsAndRespectsTopK) {
    SamplerParams p;
    p.temperature = 1.0f;
    p.top_k = 2;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 42;
    const std::vector<float> l = {1.0f, 0.9f, 0.8f, 0.7f, 0.95f};
    Sampler a(p), b(p);
    std::set<int32_t> seen;
    for (int i = 0; i < 200; ++i) {
        const int32_t x = a.sample(l.data(), 5, {});
        EXPECT_EQ(x, b.sample(l.data(), 5, {}));
        seen.insert(x);
    }
    EXPECT_EQ(seen, (std::set<int32_t>{0, 4}));  // the two best only, both drawn
}

TEST(Sampler, MinPDropsUnlikelyCandidates) {
    SamplerParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.5f;
    p.seed = 7;
    Sampler s(p);
    const std::vector<float> l = {3.0f, 2.9f, 0.0f, -1.0f};  // e^-3 and e^-4 are below half
    for (int i = 0; i < 200; ++i) {
        const int32_t x = s.sample(l.data(), 4, {});
        EXPECT_TRUE(x == 0 || x == 1) << x;
    }
}


// plain_greedy(): exactly when sample() is the argmax of the logits as given.
TEST(Sampler, PlainGreedyOnlyWithoutTemperatureOrPenalties) {
    SamplerParams p;
    p.temperature = 0;
    EXPECT_TRUE(Sampler(p).plain_greedy());
    p.repeat_penalty = 1.3f;
    EXPECT_FALSE(Sampler(p).plain_greedy());
    p.repeat_last_n = 0;  // penalties over an empty window change nothing
    EXPECT_TRUE(Sampler(p).plain_greedy());
    p = SamplerParams{};
    p.temperature = 0;
    p.presence_penalty = 0.5f;
    EXPECT_FALSE(Sampler(p).plain_greedy());
    p.presence_penalty = 0;
    p.temperature = 0.7f;
    EXPECT_FALSE(Sampler(p).plain_greedy());
    // Where it says greedy, sample() gives the argmax whatever the history.
    p.temperature = 0;
    Sampler s(p);
    const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f};
    EXPECT_EQ(s.sample(l.data(), 4, {1, 1, 1}), 1);
}

}  // namespace
}  // namespace glia
