// The newest families through the runtime: a recurrent layer's state is part of its
// sequence (carried across prompt chunks, zeroed on reset, one per slot when the engine
// batches several sequences), and a prompt split into steps gives what one batch gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "greedy_alone.h"
#include "test_util.h"
#include "tokenizer/vocab.h"

using namespace glia;

namespace {

// A golden's prompt, as token ids.
std::vector<int32_t> golden_prompt(const std::string& stem, const char* prompt_id) {
    const std::string path = test::shared_path("golden/" + stem + "/" + prompt_id + ".json");
    const auto j = nlohmann::json::parse(test::read_text(path));
    return j["prompt_tokens"].get<std::vector<int32_t>>();
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
    return m;
}

// All logits of `prompt` from one forward pass, and from steps of `chunk` tokens.
void expect_chunks_equal_one_batch(const std::string& stem, int chunk) {
    auto m = Model::load(test::shared_path("models/" + stem + ".gguf"));
    const std::vector<int32_t> prompt = golden_prompt(stem, "p3_punct_digits");
    const int V = m->profile().n_vocab;
    SessionOptions so;
    so.n_ctx = 256;
    so.n_threads = 2;
    Session s(*m, so);
    const std::vector<float> batch = s.decode(prompt, true);
    ASSERT_EQ(batch.size(), prompt.size() * V);

    s.reset();
    std::vector<float> chunked;
    for (size_t i = 0; i < prompt.size(); i += chunk) {
        const std::vector<int32_t> part(prompt.begin() + i, prompt.begin() + std::min(prompt.size(), i + chunk));
        const std::vector<float>& l = s.decode(part, true);
        chunked.insert(chunked.end(), l.begin(), l.end());
    }
    ASSERT_EQ(chunked.size(), batch.size());
    const double d = max_abs_diff(batch, chunked);
    EXPECT_LE(d, 0.05) << stem << ": chunks of " << chunk << " differ from one batch by " << d;

    // The state must really be carried: a chunk run from a reset state (as if the state
    // were lost between steps) is far from the batch.
    s.reset();
    const std::vector<int32_t> tail(prompt.begin() + chunk, prompt.begin() + 2 * chunk);
    const std::vector<float> fresh = s.decode(tail, true);
    const std::vector<float> carried(batch.begin() + chunk * V, batch.begin() + 2 * chunk * V);
    EXPECT_GT(max_abs_diff(fresh, carried), 0.5) << stem << ": the history makes no difference";
}

struct Collector {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int32_t> tokens;
    bool done = false;
    TokenCallback callback() {
        return [this](const TokenEvent& ev) {
            std::lock_guard<std::mutex> lk(mu);
            if (ev.token >= 0) tokens.push_back(ev.token);
            if (ev.done) {
                done = true;
                cv.notify_all();
            }
            return true;
        };
    }
    void wait() {
        std::unique_lock<std::mutex> lk(mu);
        ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(120), [&] { return done; })) << "request never finished";
    }
};

// 8 sequences at once in the serving engine (prompts prefilled in chunks of 5 while the
// others decode) give the tokens each gives alone.
void expect_engine_streams_equal_alone(const std::string& stem) {
    static const char* kPrompts[] = {
        "Once upon a time", "Lily and Tom went to the park", "The little dog",  "One day, a girl named Sue",
        "The sun was hot",  "Tim had a big red ball",        "Mom said",        "In the forest there was a tree",
    };
    auto m = Model::load(test::shared_path("models/" + stem + ".gguf"));
    EngineOptions eo;
    eo.n_ctx = 1024;
    eo.n_parallel = 8;
    eo.n_threads = 2;
    eo.prefill_chunk = 5;
    Engine engine(*m, eo);
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::unique_ptr<Collector>> col;
    for (const char* text : kPrompts) {
        prompts.push_back(m->vocab().tokenize(text, true, false));
        col.push_back(std::make_unique<Collector>());
        GenerationRequest r;
        r.prompt = prompts.back();
        r.max_tokens = 20;
        r.sampling.temperature = 0;
        engine.submit(r, col.back()->callback());
    }
    size_t distinct = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
        col[i]->wait();
        const std::vector<int32_t> alone = test::greedy_alone(*m, prompts[i], 20);
        EXPECT_EQ(col[i]->tokens, alone) << stem << " sequence " << i;
        if (i > 0 && alone != test::greedy_alone(*m, prompts[0], 20)) ++distinct;
    }
    EXPECT_GT(distinct, 3u) << stem << ": the prompts should lead to different continuations";
    EXPECT_EQ(engine.stats().requests_finished, prompts.size());
}

}  // namespace

TEST(HybridRuntime, Qwen35ChunksOfSevenEqualOneBatch) { expect_chunks_equal_one_batch("tiny-qwen35-f16", 7); }
TEST(HybridRuntime, Gemma4ChunksOfSevenEqualOneBatch) { expect_chunks_equal_one_batch("tiny-gemma4-f16", 7); }

TEST(HybridRuntime, KimiK3ChunksOfSevenEqualOneBatch) { expect_chunks_equal_one_batch("tiny-kimi-k3-f16", 7); }

TEST(HybridRuntime, Qwen35EightEngineStreamsEqualEachAlone) { expect_engine_streams_equal_alone("tiny-qwen35-f16"); }
TEST(HybridRuntime, KimiK3EightEngineStreamsEqualEachAlone) { expect_engine_streams_equal_alone("tiny-kimi-k3-f16"); }
