// Embedding requests in the engine: the vector is the LM head's input (so the head maps it
// to the logits, up to scale), L2-normalised, independent of batching and of prompt
// chunking (to rounding), and pooled as asked (last token or mean).
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <mutex>

#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/session.h"
#include "test_util.h"
#include "tokenizer/vocab.h"

using namespace glia;

namespace {

struct Vec {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<float> v;
    bool done = false;
    TokenCallback callback() {
        return [this](const TokenEvent& ev) {
            std::lock_guard<std::mutex> lk(mu);
            if (ev.done) {
                v = ev.embedding;
                done = true;
                cv.notify_all();
            }
            return true;
        };
    }
    std::vector<float> get() {
        std::unique_lock<std::mutex> lk(mu);
        EXPECT_TRUE(cv.wait_for(lk, std::chrono::seconds(60), [&] { return done; }));
        return v;
    }
};

std::vector<std::vector<float>> embed(const Model& m, const std::vector<std::vector<int32_t>>& prompts, Pooling p,
                                      int chunk, int n_parallel) {
    EngineOptions eo;
    eo.n_ctx = 2048;
    eo.n_parallel = n_parallel;
    eo.n_threads = 2;
    eo.prefill_chunk = chunk;
    Engine engine(m, eo);
    std::vector<std::unique_ptr<Vec>> out;
    std::vector<std::pair<GenerationRequest, TokenCallback>> batch;
    for (const auto& pr : prompts) {
        out.push_back(std::make_unique<Vec>());
        GenerationRequest g;
        g.prompt = pr;
        g.embed = p;
        batch.emplace_back(g, out.back()->callback());
    }
    engine.submit_batch(std::move(batch));
    std::vector<std::vector<float>> v;
    for (auto& o : out) v.push_back(o->get());
    EXPECT_EQ(engine.stats().kv_blocks_used, 0);
    return v;
}

const char* kTexts[] = {"Once upon a time", "The little dog ran to the park and played with a ball all day long",
                        "Lily", "Tom and Sue"};

}  // namespace

TEST(Embeddings, LastTokenIsTheHeadsInputNormalised) {
    auto m = Model::load(test::shared_path("models/stories260K.gguf"));
    std::vector<std::vector<int32_t>> prompts;
    for (const char* t : kTexts) prompts.push_back(m->vocab().tokenize(t, true, false));
    const auto v = embed(*m, prompts, Pooling::LAST, 256, 4);
    const Tensor* head = nullptr;
    for (const Tensor& w : m->weights().all())
        if (w.name == "output.weight" || (!head && w.name == "token_embd.weight")) head = &w;
    ASSERT_TRUE(head && head->type == DType::F32);
    const int D = m->profile().n_embd, V = m->profile().n_vocab;
    for (size_t i = 0; i < prompts.size(); ++i) {
        ASSERT_EQ(v[i].size(), size_t(D));
        double n = 0;
        for (float x : v[i]) n += double(x) * x;
        EXPECT_NEAR(n, 1.0, 1e-5);
        // The head applied to the vector is the logits divided by the hidden state's norm:
        // the cosine of the two is 1.
        SessionOptions so;
        so.n_threads = 2;
        Session s(*m, so);
        const std::vector<float> logits = s.decode(prompts[i], false);
        double dot = 0, a = 0, b = 0;
        for (int t = 0; t < V; ++t) {
            double y = 0;
            const float* row = reinterpret_cast<const float*>(head->row(t));
            for (int d = 0; d < D; ++d) y += double(row[d]) * v[i][d];
            dot += y * logits[t];
            a += y * y;
            b += double(logits[t]) * logits[t];
        }
        EXPECT_NEAR(dot / std::sqrt(a * b), 1.0, 1e-5) << kTexts[i];
    }
    EXPECT_NE(v[0], v[1]);
    // Alone, or chunked in 3-token steps: the same vectors (to float rounding: a prompt
    // in several steps goes through other kernel shapes).
    const auto alone = embed(*m, {prompts[1]}, Pooling::LAST, 3, 1);
    ASSERT_EQ(alone[0].size(), v[1].size());
    for (size_t d = 0; d < v[1].size(); ++d) EXPECT_NEAR(alone[0][d], v[1][d], 1e-4);
}

TEST(Embeddings, MeanPoolingIsTheSameWhateverTheChunks) {
    auto m = Model::load(test::shared_path("models/stories260K.gguf"));
    std::vector<std::vector<int32_t>> prompts;
    for (const char* t : kTexts) prompts.push_back(m->vocab().tokenize(t, true, false));
    const auto whole = embed(*m, prompts, Pooling::MEAN, 256, 4);
    const auto chunked = embed(*m, prompts, Pooling::MEAN, 5, 2);
    const auto last = embed(*m, prompts, Pooling::LAST, 256, 4);
    for (size_t i = 0; i < prompts.size(); ++i) {
        ASSERT_EQ(whole[i].size(), chunked[i].size());
        for (size_t d = 0; d < whole[i].size(); ++d) EXPECT_NEAR(whole[i][d], chunked[i][d], 1e-4);
        if (prompts[i].size() > 1) {
            EXPECT_NE(whole[i], last[i]);
        }
    }
}

// Once the last embedding request has its vector the engine reports nothing running or
// waiting, and no pages held (issue 26: /health and /metrics kept counting one as running).
TEST(Embeddings, StatsShowNothingRunningAfterwards) {
    auto m = Model::load(test::shared_path("models/stories260K.gguf"));
    EngineOptions eo;
    eo.n_ctx = 2048;
    eo.n_parallel = 4;
    eo.n_threads = 2;
    Engine engine(*m, eo);
    std::vector<std::unique_ptr<Vec>> out;
    std::vector<std::pair<GenerationRequest, TokenCallback>> batch;
    for (const char* t : kTexts) {
        out.push_back(std::make_unique<Vec>());
        GenerationRequest g;
        g.prompt = m->vocab().tokenize(t, true, false);
        g.embed = Pooling::LAST;
        batch.emplace_back(g, out.back()->callback());
    }
    engine.submit_batch(std::move(batch));
    for (auto& o : out) EXPECT_FALSE(o->get().empty());
    // The engine thread updates its counters when it ends the requests, before their
    // final events go out: nothing to wait for.
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.running, 0);
    EXPECT_EQ(st.waiting, 0);
    EXPECT_EQ(st.kv_blocks_used, 0);
    EXPECT_EQ(st.requests_finished, 4u);
}
