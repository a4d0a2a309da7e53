// The continuous-batching engine: batched sequences must produce exactly what each
// request produces alone, cancellation frees the cache, limits are enforced.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "greedy_alone.h"
#include "test_util.h"
#include "tokenizer/vocab.h"

using namespace glia;

namespace {

const char* kPrompts[] = {
    "Once upon a time",  "Lily and Tom went to the park", "The little dog",  "One day, a girl named Sue",
    "The sun was hot",   "Tim had a big red ball",        "Mom said",        "In the forest there was a tree",
    "The cat sat",       "Ben liked to run",              "A bird flew",     "The boat was small",
    "She found a shell", "They ate cake",                 "The moon was up", "He saw a frog",
};

struct Collector {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;  // when the request asked for them
    bool done = false;
    FinishReason finish = FinishReason::NONE;
    TokenCallback callback(std::atomic<int>* stop_after = nullptr) {
        return [this, stop_after](const TokenEvent& ev) {
            std::lock_guard<std::mutex> lk(mu);
            if (ev.token >= 0) {
                tokens.push_back(ev.token);
                logprobs.push_back(ev.logprob);
            }
            if (ev.done) {
                done = true;
                finish = ev.finish;
                cv.notify_all();
            }
            return !(stop_after && static_cast<int>(tokens.size()) >= stop_after->load());
        };
    }
    void wait() {
        std::unique_lock<std::mutex> lk(mu);
        ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(120), [&] { return done; })) << "request never finished";
    }
};

GenerationRequest greedy(const std::vector<int32_t>& prompt, int n) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = n;
    r.sampling.temperature = 0;
    return r;
}

// greedy_ids: plain greedy steps take only ids back from the runner (the default);
// logprobs_every: every so many requests also ask for logprobs, so that the steps they are
// in bring logits back and sample on the host while their neighbours are plain greedy.
void check_batched_equals_alone(const std::string& model_file, int n_requests, int n_tokens, int prefill_chunk,
                                bool greedy_ids = true, int logprobs_every = 0) {
    auto m = Model::load(test::shared_path("models/" + model_file));
    EngineOptions eo;
    eo.n_ctx = 4096;
    eo.n_parallel = 8;
    eo.n_threads = 2;
    eo.prefill_chunk = prefill_chunk;
    eo.greedy_ids = greedy_ids;
    Engine engine(*m, eo);
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::unique_ptr<Collector>> col;
    for (int i = 0; i < n_requests; ++i) {
        prompts.push_back(m->vocab().tokenize(kPrompts[i % 16], true, false));
        col.push_back(std::make_unique<Collector>());
        GenerationRequest r = greedy(prompts.back(), n_tokens);
        r.logprobs = logprobs_every > 0 && i % logprobs_every == 0;
        engine.submit(r, col.back()->callback());
    }
    for (int i = 0; i < n_requests; ++i) {
        col[i]->wait();
        EXPECT_EQ(col[i]->tokens, test::greedy_alone(*m, prompts[i], n_tokens)) << model_file << " request " << i;
    }
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.requests_finished, static_cast<uint64_t>(n_requests));
    EXPECT_EQ(st.kv_blocks_used, 0);
}

// A batch changes no one's answer, bit for bit (issue 14): 16 different greedy prompts
// submitted together give every sequence the tokens and the log-probabilities (compared as
// bits) of the same prompt run alone on the same engine, and the tokens of a plain
// session. No prefix cache, so every prompt is computed each time. The quantized products
// are where the step's token count could change the arithmetic (one-token and packed
// paths), so the models are quantized ones, dense and MoE.
void check_batch_bits(const std::string& model_file, int n_tokens) {
    auto m = Model::load(test::shared_path("models/" + model_file));
    EngineOptions eo;
    eo.n_ctx = 4096;
    eo.n_parallel = 16;
    eo.n_threads = 2;
    Engine engine(*m, eo);
    auto request = [&](const std::vector<int32_t>& prompt) {
        GenerationRequest r = greedy(prompt, n_tokens);
        r.logprobs = true;
        r.prefix_cache = false;
        return r;
    };
    std::vector<std::vector<int32_t>> prompts;
    for (const char* p : kPrompts) prompts.push_back(m->vocab().tokenize(p, true, false));
    std::vector<std::unique_ptr<Collector>> batch;
    std::vector<std::pair<GenerationRequest, TokenCallback>> reqs;
    for (const auto& p : prompts) {
        batch.push_back(std::make_unique<Collector>());
        reqs.emplace_back(request(p), batch.back()->callback());
    }
    engine.submit_batch(std::move(reqs));
    for (auto& c : batch) c->wait();
    int same = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
        Collector alone;
        engine.submit(request(prompts[i]), alone.callback());
        alone.wait();
        const Collector& b = *batch[i];
        ASSERT_TRUE(b.finish == FinishReason::LENGTH || b.finish == FinishReason::STOP)
            << model_file << " request " << i << ": " << finish_reason_name(b.finish);
        EXPECT_EQ(b.finish, alone.finish) << model_file << " request " << i;
        EXPECT_EQ(b.tokens, alone.tokens) << model_file << " request " << i;
        EXPECT_EQ(b.tokens, test::greedy_alone(*m, prompts[i], n_tokens)) << model_file << " request " << i;
        const size_t n = std::min(b.logprobs.size(), alone.logprobs.size());
        size_t first = n;
        for (size_t k = 0; k < n && first == n; ++k)
            if (std::memcmp(&b.logprobs[k], &alone.logprobs[k], sizeof(float)) != 0) first = k;
        EXPECT_EQ(first, n) << model_file << " request " << i << ": logprob of token " << first << " is "
                            << (first < n ? b.logprobs[first] : 0.f) << " in the batch, "
                            << (first < n ? alone.logprobs[first] : 0.f) << " alone";
        same += b.tokens == alone.tokens && first == n && b.logprobs.size() == alone.logprobs.size();
    }
    EXPECT_EQ(same, 16) << model_file;
}

}  // namespace

TEST(Engine, BatchChangesNoBitsTinyLlamaQ4KM) { check_batch_bits("tiny-llama-q4_k_m.gguf", 40); }
TEST(Engine, BatchChangesNoBitsQwen3Q4KM) { check_batch_bits("tiny-qwen3-q4_k_m.gguf", 40); }
TEST(Engine, BatchChangesNoBitsQwen3Q8_0) { check_batch_bits("tiny-qwen3-q8_0.gguf", 40); }
TEST(Engine, BatchChangesNoBitsQwen3MoeQ4KM) { check_batch_bits("tiny-qwen3moe-q4_k_m.gguf", 40); }

TEST(Engine, SixteenGreedyStreamsEqualEachAlone) { check_batched_equals_alone("stories260K.gguf", 16, 40, 256); }

// The same with the argmax taken from host logits (GLIA_GREEDY_IDS=0), and with steps that
// mix plain greedy requests and requests for logprobs (those steps bring logits back).
TEST(Engine, GreedyFromHostLogitsEqualsAlone) {
    check_batched_equals_alone("stories260K-q8_0.gguf", 8, 24, 256, false);
}
TEST(Engine, StepsMixingLogprobsAndPlainGreedyEqualAlone) {
    check_batched_equals_alone("stories260K-q8_0.gguf", 8, 24, 5, true, 3);
}

// Prompts split over several steps (chunk of 3 tokens) while other streams decode.
TEST(Engine, ChunkedPrefillEqualsAlone) { check_batched_equals_alone("stories260K-q8_0.gguf", 6, 24, 3); }

// A hybrid model: the recurrent state is per sequence.
TEST(Engine, HybridModelStreamsEqualEachAlone) { check_batched_equals_alone("tiny-lfm2-f16.gguf", 5, 16, 4); }

TEST(Engine, CancelledStreamFreesItsBlocksAndOthersContinue) {
    auto m = Model::load(test::shared_path("models/stories260K.gguf"));
    EngineOptions eo;
    eo.n_ctx = 2048;
    eo.n_parallel = 4;
    eo.n_threads = 2;
    Engine engine(*m, eo);
    const auto p0 = m->vocab().tokenize(kPrompts[0], true, false);
    const auto p1 = m->vocab().tokenize(kPrompts[1], true, false);
    Collector a, b;
    std::atomic<int> stop_after{5};
    engine.submit(greedy(p0, 100), a.callback(&stop_after));
    engine.submit(greedy(p1, 30), b.callback());
    a.wait();
    b.wait();
    EXPECT_EQ(a.finish, FinishReason::CANCELLED);
    EXPECT_EQ(a.tokens.size(), 5u);
    EXPECT_EQ(b.tokens, test::greedy_alone(*m, p1, 30));
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.requests_cancelled, 1u);
    EXPECT_EQ(st.kv_blocks_used, 0);
}

TEST(Engine, RejectsRequestsThatCanNeverFitAndFullQueues) {
    auto m = Model::load(test::shared_path("models/stories260K.gguf"));
    // The engine thread is held before its next step while the queue is probed (callbacks
    // no longer run on the engine thread, so a slow one cannot hold it).
    std::mutex hold_mu;
    std::condition_variable hold_cv;
    bool hold = false, held = false;
    EngineOptions eo;
    eo.n_ctx = 64;
    eo.n_parallel = 1;
    eo.max_queue = 1;
    eo.n_threads = 1;
    eo.before_step = [&] {
        std::unique_lock<std::mutex> lk(hold_mu);
        if (!hold) return;
        held = true;
        hold_cv.notify_all();
        hold_cv.wait(lk, [&] { return !hold; });
    };
    Engine engine(*m, eo);
    // Whatever happens below, the engine thread is let go before the engine is destroyed.
    struct Release {
        std::function<void()> f;
        ~Release() { f(); }
    } release{[&] {
        {
            std::lock_guard<std::mutex> lk(hold_mu);
            hold = false;
        }
        hold_cv.notify_all();
    }};
    const auto p = m->vocab().tokenize(kPrompts[0], true, false);
    EXPECT_THROW(engine.submit(greedy(p, 100), [](const TokenEvent&) { return true; }), Error);
    GenerationRequest bad = greedy({1, 99999}, 4);
    EXPECT_THROW(engine.submit(bad, [](const TokenEvent&) { return true; }), Error);
    // One running (slot taken) and one waiting fill the queue; the next is refused.
    Collector c1, c2;
    {
        std::lock_guard<std::mutex> lk(hold_mu);
        hold = true;
    }
    engine.submit(greedy(p, 40), c1.callback());
    {
        std::unique_lock<std::mutex> lk(hold_mu);
        ASSERT_TRUE(hold_cv.wait_for(lk, std::chrono::seconds(60), [&] { return held; }));
    }
    engine.submit(greedy(p, 40), c2.callback());
    bool refused = false;
    try {
        engine.submit(greedy(p, 40), [](const TokenEvent&) { return true; });
    } catch (const QueueFull&) {
        refused = true;
    }
    release.f();
    c1.wait();
    c2.wait();
    EXPECT_TRUE(refused);
    EXPECT_EQ(c1.tokens, c2.tokens);
}

// Delivery does not depend on the consumer's speed: while one request's callback is
// blocked, another request runs to its end; the blocked one is cancelled once it is
// max_pending_events behind (not waited for), and its blocks come back. The bound is above
// all the fast request will ever emit, so however late the OS runs its reader (a loaded
// CI machine), only the blocked request can overrun.
TEST(Engine, SlowConsumerIsCancelledAndDoesNotSlowOthers) {
    auto m = Model::load(test::shared_path("models/stories260K.gguf"));
    EngineOptions eo;
    eo.n_ctx = 2048;
    eo.n_parallel = 4;
    eo.n_threads = 2;
    eo.max_pending_events = 120;  // > the fast request's 100 tokens + its final event
    Engine engine(*m, eo);
    const auto p0 = m->vocab().tokenize(kPrompts[0], true, false);
    const auto p1 = m->vocab().tokenize(kPrompts[1], true, false);
    std::mutex gate_mu;
    std::condition_variable gate_cv;
    bool open = false;
    Collector slow, fast;
    auto slow_cb = slow.callback();
    GenerationRequest rs = greedy(p0, 200);
    rs.ignore_eos = true;
    engine.submit(rs, [&](const TokenEvent& ev) {
        std::unique_lock<std::mutex> lk(gate_mu);
        gate_cv.wait(lk, [&] { return open; });  // blocked until the fast request is done
        return slow_cb(ev);
    });
    // A stream consumer (pull) next to it.
    auto out = std::make_shared<EventStream>();
    GenerationRequest rf = greedy(p1, 100);
    rf.ignore_eos = true;
    engine.submit(rf, out);
    std::vector<int32_t> fast_tokens;
    FinishReason fast_finish = FinishReason::NONE;
    const auto until = EventStream::Clock::now() + std::chrono::seconds(120);
    while (fast_finish == FinishReason::NONE && EventStream::Clock::now() < until)
        for (const TokenEvent& ev : out->wait(until)) {
            if (ev.token >= 0) fast_tokens.push_back(ev.token);
            if (ev.done) fast_finish = ev.finish;
        }
    EXPECT_EQ(fast_finish, FinishReason::LENGTH) << "the fast request did not finish while the slow one was blocked";
    EXPECT_EQ(fast_tokens.size(), 100u);
    // The two ran side by side, so the blocked one is ~100 behind now: the gate stays shut
    // until it passes the bound (it would reach its 200 tokens otherwise).
    while (engine.stats().requests_overrun == 0 && EventStream::Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    {
        std::lock_guard<std::mutex> lk(gate_mu);
        open = true;
    }
    gate_cv.notify_all();
    slow.wait();
    EXPECT_EQ(slow.finish, FinishReason::CANCELLED);
    // What its delivery thread had taken (the whole queue at that moment) and nothing after
    // the overrun: never all 200.
    EXPECT_LT(slow.tokens.size(), 200u);
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.requests_overrun, 1u);
    EXPECT_EQ(st.requests_cancelled, 1u);
    EXPECT_EQ(st.kv_blocks_used, 0);
}

// Runner::forward_ids picks what greedy sampling picks from the host logits, row for row.
TEST(Runner, ForwardIdsAreTheArgmaxOfTheLogits) {
    auto m = Model::load(test::shared_path("models/stories260K-q8_0.gguf"));
    RunnerOptions ro;
    ro.n_ctx = 256;
    ro.n_threads = 2;
    Runner runner(*m, ro);
    const std::vector<int32_t> tokens = m->vocab().tokenize("Once upon a time there was", true, false);
    std::vector<int32_t> pos(tokens.size());
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int32_t>(i);
    ASSERT_TRUE(runner.pages().reserve(0, static_cast<int>(tokens.size())));
    StepInputs in;
    in.tokens = tokens.data();
    in.pos = pos.data();
    in.n_tokens = static_cast<int>(tokens.size());
    in.all_logits = true;
    const int V = m->profile().n_vocab;
    const float* l = runner.forward(in);
    std::vector<int32_t> want;
    for (size_t t = 0; t < tokens.size(); ++t) want.push_back(argmax(l + t * V, V));
    const int32_t* got = runner.forward_ids(in);
    EXPECT_EQ(std::vector<int32_t>(got, got + tokens.size()), want);
    EXPECT_THROW(
        {
            in.hidden = true;
            runner.forward_ids(in);
        },
        Error);
}
