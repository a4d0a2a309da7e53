// Admission by the pages a sequence needs now, growth page by page as it decodes, and
// preemption by recompute when the cache runs out (issue 26): requests whose budgets
// together exceed the cache all start at once; a preempted request pauses and resumes
// with exactly the tokens (greedy picks and seeded draws alike) it gives alone.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>

#include "model/model.h"
#include "runtime/engine.h"
#include "test_util.h"
#include "tokenizer/vocab.h"

using namespace glia;

namespace {

const char* kPrompts[] = {"Once upon a time", "Lily and Tom went to the park", "The little dog",
                          "One day, a girl named Sue", "The sun was hot", "Tim had a big red ball"};

// A request's events, drained from its stream.
struct Reply {
    std::shared_ptr<EventStream> out = std::make_shared<EventStream>();
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    bool done = false;
    FinishReason finish = FinishReason::NONE;
    // Takes what is queued now (until == now) or waits until `until` for more.
    void take(EventStream::Clock::time_point until) {
        for (const TokenEvent& ev : out->wait(until)) {
            if (ev.token >= 0) {
                tokens.push_back(ev.token);
                logprobs.push_back(ev.logprob);
            }
            if (ev.done) {
                done = true;
                finish = ev.finish;
            }
        }
    }
    void wait() {
        const auto until = EventStream::Clock::now() + std::chrono::seconds(120);
        while (!done && EventStream::Clock::now() < until) take(until);
        ASSERT_TRUE(done) << "request never finished";
    }
};

GenerationRequest request(const std::vector<int32_t>& prompt, int n, bool logprobs) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = n;
    r.sampling.temperature = 0;
    r.ignore_eos = true;  // long replies: the cache must run out
    r.logprobs = logprobs;
    return r;
}

// The request run alone on an engine with room for everything.
Reply alone(const Model& m, const GenerationRequest& r) {
    EngineOptions eo;
    eo.n_ctx = 4096;
    eo.n_parallel = 1;
    eo.n_threads = 2;
    Engine engine(m, eo);
    Reply rep;
    engine.submit(r, rep.out);
    rep.wait();
    return rep;
}

// The same tokens (the answer: every greedy pick, every seeded draw), finish and
// log-probabilities, bit for bit: a resumed sequence's K/V come from a prompt-sized step,
// which gives the bits its token-by-token history gave (PrefillDecodeBits.*).
void expect_same(const Reply& got, const Reply& want, const std::string& what) {
    EXPECT_EQ(got.finish, want.finish) << what;
    EXPECT_EQ(got.tokens, want.tokens) << what;
    ASSERT_EQ(got.logprobs.size(), want.logprobs.size()) << what;
    for (size_t i = 0; i < got.logprobs.size(); ++i)
        EXPECT_EQ(std::memcmp(&got.logprobs[i], &want.logprobs[i], sizeof(float)), 0)
            << what << ": logprob " << i << " " << got.logprobs[i] << " vs " << want.logprobs[i];
}

// Holds the engine thread before its step number `at` (counting from 1) until let go, so
// that a test can look at what the earlier steps delivered.
struct StepGate {
    std::mutex mu;
    std::condition_variable cv;
    int steps = 0, at = 0;
    bool held = false, open = false;
    std::function<void()> hook() {
        return [this] {
            std::unique_lock<std::mutex> lk(mu);
            if (++steps != at) return;
            held = true;
            cv.notify_all();
            cv.wait(lk, [&] { return open; });
        };
    }
    bool wait_held() {
        std::unique_lock<std::mutex> lk(mu);
        return cv.wait_for(lk, std::chrono::seconds(120), [&] { return held; });
    }
    void release() {
        {
            std::lock_guard<std::mutex> lk(mu);
            open = true;
        }
        cv.notify_all();
    }
};

// n requests of `n_tokens` each in a cache of n_ctx cells that holds far less than their
// budgets: after two steps every one has its first token and none has finished; each
// reply is then the one it gives alone, bit for bit, though some were preempted.
void check_all_start_and_equal_alone(const std::string& file, int n_ctx, int n_requests, int n_tokens,
                                     std::function<void(GenerationRequest&, int)> adjust, bool prefix_cache = true) {
    auto m = Model::load(test::shared_path("models/" + file));
    StepGate gate;
    gate.at = 3;
    EngineOptions eo;
    eo.n_ctx = n_ctx;
    eo.n_parallel = n_requests;
    eo.n_threads = 2;
    eo.prefix_cache = prefix_cache;
    eo.before_step = gate.hook();
    std::vector<GenerationRequest> reqs;
    int budget = 0;
    for (int i = 0; i < n_requests; ++i) {
        reqs.push_back(request(m->vocab().tokenize(kPrompts[i % 6], true, false), n_tokens, i % 2 == 1));
        adjust(reqs.back(), i);
        budget += static_cast<int>(reqs.back().prompt.size()) + n_tokens;
    }
    ASSERT_GT(budget, 2 * n_ctx) << "the budgets must not fit the cache";
    std::vector<Reply> replies(n_requests);
    {
        Engine engine(*m, eo);
        struct Release {
            StepGate& g;
            ~Release() { g.release(); }
        } release{gate};
        std::vector<std::pair<GenerationRequest, std::shared_ptr<EventStream>>> batch;
        for (int i = 0; i < n_requests; ++i) batch.emplace_back(reqs[i], replies[i].out);
        engine.submit_batch(std::move(batch));
        ASSERT_TRUE(gate.wait_held());
        for (int i = 0; i < n_requests; ++i) {
            replies[i].take(EventStream::Clock::now());
            EXPECT_FALSE(replies[i].tokens.empty()) << file << ": request " << i << " has not started after two steps";
            EXPECT_FALSE(replies[i].done) << file << ": request " << i;
        }
        gate.release();
        for (auto& r : replies) r.wait();
        const EngineStats st = engine.stats();
        EXPECT_GT(st.preemptions, 0u) << file;
        EXPECT_EQ(st.requests_finished, static_cast<uint64_t>(n_requests));
        EXPECT_EQ(st.running, 0);
        EXPECT_EQ(st.waiting, 0);
        EXPECT_EQ(st.kv_blocks_used, 0);
    }
    for (int i = 0; i < n_requests; ++i) {
        const Reply want = alone(*m, reqs[i]);
        EXPECT_EQ(replies[i].tokens.size(), static_cast<size_t>(n_tokens)) << file << " request " << i;
        expect_same(replies[i], want, file + " request " + std::to_string(i));
    }
}

}  // namespace

// Greedy requests (every other one with logprobs, so steps bring logits back) in a cache of
// 256 cells: 4 x ~190 tokens of budget.
TEST(Preemption, AllStartAtOnceAndGreedyRepliesEqualAlone) {
    check_all_start_and_equal_alone("stories260K.gguf", 256, 4, 180, [](GenerationRequest&, int) {});
}

// The same with the prefix cache off: a preempted sequence recomputes everything.
TEST(Preemption, RecomputeWithoutPrefixCacheEqualsAlone) {
    check_all_start_and_equal_alone("stories260K.gguf", 256, 4, 180, [](GenerationRequest&, int) {}, false);
}

// A quantized file: the recomputed K/V come from prompt-sized steps (quantized products),
// the originals from one-token steps.
TEST(Preemption, QuantizedModelEqualsAlone) {
    check_all_start_and_equal_alone("stories260K-q8_0.gguf", 256, 4, 150, [](GenerationRequest&, int) {});
}

// Sampled requests (temperature, top-k/p, a repetition penalty, their own seeds) continue
// their random stream across a preemption: the same draws as alone.
TEST(Preemption, SampledRequestsKeepTheirRandomStream) {
    check_all_start_and_equal_alone("stories260K.gguf", 256, 4, 180, [](GenerationRequest& r, int i) {
        r.sampling.temperature = 0.9f;
        r.sampling.top_k = 20;
        r.sampling.top_p = 0.9f;
        r.sampling.repeat_penalty = 1.1f;
        r.sampling.seed = 1000 + i;
    });
}

TEST(Preemption, SampledRequestsKeepTheirRandomStreamQuantized) {
    check_all_start_and_equal_alone("stories260K-q8_0.gguf", 256, 4, 150, [](GenerationRequest& r, int i) {
        r.sampling.temperature = 0.9f;
        r.sampling.seed = 2000 + i;
    });
}

// A hybrid model (recurrent short-conv layers): a preempted sequence restarts from a
// checkpointed page boundary (or from nothing without the prefix cache).
TEST(Preemption, HybridModelEqualsAlone) {
    check_all_start_and_equal_alone("tiny-lfm2-f16.gguf", 96, 4, 60, [](GenerationRequest&, int) {});
    check_all_start_and_equal_alone("tiny-lfm2-f16.gguf", 96, 4, 60, [](GenerationRequest&, int) {}, false);
    check_all_start_and_equal_alone("tiny-lfm2-q8_0.gguf", 96, 4, 60, [](GenerationRequest&, int) {});
}

// Two requests each as long as the whole cache: they take turns (one preempted while the
// other fills the cache), both end with `length` and their solo replies; no deadlock.
TEST(Preemption, RequestsAsLongAsTheCacheTakeTurns) {
    auto m = Model::load(test::shared_path("models/stories260K-q8_0.gguf"));
    EngineOptions eo;
    eo.n_ctx = 64;
    eo.n_parallel = 2;
    eo.n_threads = 2;
    Engine engine(*m, eo);
    std::vector<GenerationRequest> reqs;
    for (int i = 0; i < 2; ++i) {
        const auto p = m->vocab().tokenize(kPrompts[i], true, false);
        reqs.push_back(request(p, 64 - static_cast<int>(p.size()), true));
    }
    std::vector<Reply> replies(2);
    for (int i = 0; i < 2; ++i) engine.submit(reqs[i], replies[i].out);
    for (auto& r : replies) r.wait();
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(replies[i].finish, FinishReason::LENGTH);
        expect_same(replies[i], alone(*m, reqs[i]), "request " + std::to_string(i));
    }
    const EngineStats st = engine.stats();
    EXPECT_GT(st.preemptions, 0u);
    EXPECT_EQ(st.kv_blocks_used, 0);
    EXPECT_EQ(st.running, 0);
}

// A preempted request waiting to resume is cancelled like any waiting one: it ends at once
// and leaves nothing behind; the others finish with their solo replies.
TEST(Preemption, CancellingAPreemptedRequestFreesEverything) {
    auto m = Model::load(test::shared_path("models/stories260K-q8_0.gguf"));
    EngineOptions eo;
    eo.n_ctx = 128;
    eo.n_parallel = 3;
    eo.n_threads = 2;
    Engine engine(*m, eo);
    std::vector<GenerationRequest> reqs;
    std::vector<Reply> replies(3);
    for (int i = 0; i < 3; ++i) reqs.push_back(request(m->vocab().tokenize(kPrompts[i], true, false), 100, false));
    std::vector<uint64_t> ids;
    for (int i = 0; i < 3; ++i) ids.push_back(engine.submit(reqs[i], replies[i].out));
    // The youngest is the first preempted: cancel it once it has been.
    const auto until = EventStream::Clock::now() + std::chrono::seconds(120);
    while (engine.stats().preemptions == 0 && EventStream::Clock::now() < until && !replies[0].done)
        replies[0].take(EventStream::Clock::now() + std::chrono::milliseconds(5));
    ASSERT_GT(engine.stats().preemptions, 0u);
    engine.cancel(ids[2]);
    for (auto& r : replies) r.wait();
    EXPECT_EQ(replies[2].finish, FinishReason::CANCELLED);
    for (int i = 0; i < 2; ++i) expect_same(replies[i], alone(*m, reqs[i]), "request " + std::to_string(i));
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.requests_cancelled, 1u);
    EXPECT_EQ(st.kv_blocks_used, 0);
    EXPECT_EQ(st.running + st.waiting, 0);
}

