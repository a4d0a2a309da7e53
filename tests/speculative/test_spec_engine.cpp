// Speculation in the serving engine: each sequence's drafted tokens are verified in the
// same step as the other sequences' tokens, and every greedy answer is still the one the
// prompt gets alone without speculation.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "greedy_alone.h"
#include "model/model.h"
#include "engine_requests.h"
#include "runtime/engine.h"
#include "test_util.h"

using namespace glia;
using glia::test::Collector;
using glia::test::kPrompts;

namespace {


// 16 requests at once (every other one sampled when `mixed`): the greedy ones answer as alone.
void check_concurrent(bool mixed, bool prefix_cache) {
    auto m = Model::load(test::shared_path("models/stories260K.gguf"));
    EngineOptions eo;
    eo.n_ctx = 4096;
    eo.n_parallel = 16;
    eo.n_threads = 2;
    eo.spec_draft_max = 6;
    eo.prefix_cache = prefix_cache;
    Engine engine(*m, eo);
    const int n_tokens = 48;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::unique_ptr<Collector>> col;
    std::vector<std::pair<GenerationRequest, TokenCallback>> reqs;
    for (size_t i = 0; i < std::size(kPrompts); ++i) {
        prompts.push_back(m->vocab().tokenize(kPrompts[i], true, false));
        GenerationRequest r;
        r.prompt = prompts.back();
        r.max_tokens = n_tokens;
        r.sampling.temperature = mixed && i % 2 ? 0.8f : 0.0f;
        r.sampling.seed = i;
        col.push_back(std::make_unique<Collector>());
        reqs.emplace_back(r, col.back()->callback());
    }
    engine.submit_batch(std::move(reqs));
    for (size_t i = 0; i < col.size(); ++i) {
        col[i]->wait();
        ASSERT_TRUE(col[i]->finish == FinishReason::LENGTH || col[i]->finish == FinishReason::STOP)
            << "request " << i << ": " << finish_reason_name(col[i]->finish);
        if (mixed && i % 2) {
            EXPECT_FALSE(col[i]->tokens.empty()) << "request " << i;
            EXPECT_LE(col[i]->tokens.size(), static_cast<size_t>(n_tokens)) << "request " << i;
            continue;
        }
        EXPECT_EQ(col[i]->tokens, test::greedy_alone(*m, prompts[i], n_tokens)) << "request " << i;
    }
    const EngineStats st = engine.stats();
    std::printf("[ spec     ] engine, 16 requests%s: drafted %llu, accepted %llu\n", mixed ? " (8 sampled)" : "",
                static_cast<unsigned long long>(st.spec_drafted), static_cast<unsigned long long>(st.spec_accepted));
    EXPECT_GT(st.spec_accepted, 0u);
    EXPECT_LT(st.spec_accepted, st.spec_drafted);  // rejections happened, and were rolled back
    EXPECT_EQ(st.requests_finished, col.size());
    EXPECT_EQ(st.kv_blocks_used, 0);
}

TEST(SpecEngine, SixteenConcurrentGreedyRequestsAnswerAsAlone) { check_concurrent(false, false); }
TEST(SpecEngine, WithSampledNeighboursAndThePrefixCache) { check_concurrent(true, true); }

TEST(SpecEngine, RecurrentModelsAreRefused) {
    auto m = Model::load(test::shared_path("models/tiny-lfm2-q8_0.gguf"));
    EngineOptions eo;
    eo.n_ctx = 256;
    eo.n_parallel = 2;
    eo.n_threads = 2;
    eo.spec_draft_max = 4;
    const std::string err = test::error_of([&] { Engine e(*m, eo); });
    EXPECT_NE(err.find("recurrent layers"), std::string::npos) << err;
}

}  // namespace
