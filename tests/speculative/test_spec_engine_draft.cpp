// Speculation with a draft model in the serving engine (EngineOptions::spec_draft): every
// sequence's draft steps run batched on the draft model, the target verifies them in its
// shared step, and every greedy answer is still the one the prompt gets alone without
// speculation, through concurrency, sampled neighbours, the prefix cache, preemption and
// cancellation; the draft's pages go back when sequences end.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "greedy_alone.h"
#include "model/model.h"
#include "cli_util.h"
#include "other_vocab.h"
#include "engine_requests.h"
#include "runtime/engine.h"
#include "spec_util.h"
#include "test_util.h"

using namespace glia;
using glia::test::Collector;
using glia::test::kPrompts;

namespace {


struct Models {
    std::unique_ptr<Model> target = Model::load(test::shared_path("models/stories260K.gguf"));
    std::unique_ptr<Model> draft = Model::load(test::shared_path("models/stories260K-q4_0.gguf"));
};

EngineOptions draft_options(const Model& draft, int n_ctx, int n_parallel, int draft_max) {
    EngineOptions eo;
    eo.n_ctx = n_ctx;
    eo.n_parallel = n_parallel;
    eo.n_threads = 2;
    eo.spec_draft_max = draft_max;
    eo.spec_draft = &draft;
    return eo;
}

GenerationRequest request(const std::vector<int32_t>& prompt, int n, float temperature, uint64_t seed) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = n;
    r.sampling.temperature = temperature;
    r.sampling.seed = seed;
    return r;
}

// Runs the requests at once; returns each one's tokens (after checking it finished
// normally, or was cancelled where `cancelled` says so).
std::vector<std::vector<int32_t>> run_all(Engine& engine, const std::vector<GenerationRequest>& reqs,
                                          std::vector<bool> cancelled = {}) {
    std::vector<std::unique_ptr<Collector>> col;
    std::vector<std::pair<GenerationRequest, TokenCallback>> batch;
    for (size_t i = 0; i < reqs.size(); ++i) {
        col.push_back(std::make_unique<Collector>());
        batch.emplace_back(reqs[i], col.back()->callback());
    }
    engine.submit_batch(std::move(batch));
    std::vector<std::vector<int32_t>> out;
    for (size_t i = 0; i < col.size(); ++i) {
        col[i]->wait();
        if (i < cancelled.size() && cancelled[i]) EXPECT_EQ(col[i]->finish, FinishReason::CANCELLED) << "request " << i;
        else
            EXPECT_TRUE(col[i]->finish == FinishReason::LENGTH || col[i]->finish == FinishReason::STOP)
                << "request " << i << ": " << finish_reason_name(col[i]->finish);
        out.push_back(col[i]->tokens);
    }
    return out;
}

void print_stats(const char* what, const EngineStats& st) {
    std::printf("[ spec     ] draft model, %s: drafted %llu, accepted %llu\n", what,
                static_cast<unsigned long long>(st.spec_drafted), static_cast<unsigned long long>(st.spec_accepted));
}

// 16 requests at once (every other one sampled when `mixed`): the greedy ones answer as
// alone; the sampled ones are what the same seed gives on a fresh engine alone.
void check_concurrent(bool mixed, bool prefix_cache) {
    Models ms;
    const int n_tokens = 48;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<GenerationRequest> reqs;
    for (size_t i = 0; i < std::size(kPrompts); ++i) {
        prompts.push_back(ms.target->vocab().tokenize(kPrompts[i], true, false));
        reqs.push_back(request(prompts.back(), n_tokens, mixed && i % 2 ? 0.8f : 0.0f, 100 + i));
    }
    EngineOptions eo = draft_options(*ms.draft, 4096, 16, 6);
    eo.prefix_cache = prefix_cache;
    Engine engine(*ms.target, eo);
    const auto got = run_all(engine, reqs);
    for (size_t i = 0; i < got.size(); ++i) {
        if (mixed && i % 2) {
            EXPECT_FALSE(got[i].empty()) << "request " << i;
            EXPECT_LE(got[i].size(), static_cast<size_t>(n_tokens)) << "request " << i;
            for (int32_t t : got[i]) EXPECT_TRUE(t >= 0 && t < ms.target->profile().n_vocab) << t;
            continue;
        }
        EXPECT_EQ(got[i], test::greedy_alone(*ms.target, prompts[i], n_tokens)) << "request " << i;
    }
    const EngineStats st = engine.stats();
    print_stats(mixed ? "16 requests (8 sampled)" : "16 requests", st);
    EXPECT_GT(st.spec_accepted, 0u);
    EXPECT_LT(st.spec_accepted, st.spec_drafted);  // rejections happened, and were rolled back
    EXPECT_EQ(st.requests_finished, reqs.size());
    EXPECT_EQ(st.kv_blocks_used, 0);
    EXPECT_EQ(st.draft_kv_blocks_used, 0);
    if (!mixed) return;
    // A seeded sampled request draws the same tokens alone as among the others (its draft
    // and target rows have the same bits, and its generator is its own).
    for (size_t i = 1; i < reqs.size(); i += 4) {
        Engine solo(*ms.target, draft_options(*ms.draft, 4096, 1, 6));
        EXPECT_EQ(run_all(solo, {reqs[i]})[0], got[i]) << "sampled request " << i << " alone";
    }
}

TEST(SpecEngineDraft, SixteenConcurrentGreedyRequestsAnswerAsAlone) { check_concurrent(false, false); }
TEST(SpecEngineDraft, WithSampledNeighboursAndThePrefixCache) { check_concurrent(true, true); }

// The drafted and accepted counts depend on each sequence's own text only: the same
// requests alone and together count the same.
TEST(SpecEngineDraft, CountsAreTheSameAloneAndTogether) {
    Models ms;
    std::vector<GenerationRequest> reqs;
    for (size_t i = 0; i < 4; ++i)
        reqs.push_back(request(ms.target->vocab().tokenize(kPrompts[i], true, false), 40, 0.0f, 1));
    Engine engine(*ms.target, draft_options(*ms.draft, 4096, 4, 8));
    std::vector<std::vector<int32_t>> alone;
    for (const auto& r : reqs) alone.push_back(run_all(engine, {r})[0]);
    const EngineStats a = engine.stats();
    EXPECT_EQ(run_all(engine, reqs), alone);
    const EngineStats b = engine.stats();
    EXPECT_GT(a.spec_accepted, 0u);
    EXPECT_EQ(b.spec_drafted, 2 * a.spec_drafted);
    EXPECT_EQ(b.spec_accepted, 2 * a.spec_accepted);
}

// The engine drafts what glia run's Speculator drafts for the same text (the draft's cache
// follows what the target accepted: a stale or misplaced one drafts other tokens), and a
// seeded sampled request draws what the Speculator draws (the same acceptance rule, the
// same generator order): the same tokens and the same drafted and accepted counts, with
// the four requests running together. p_min: greedy drafting stops at an unsure token.
void check_as_speculator(float temperature, float p_min = 0.0f) {
    Models ms;
    const int n = 40;
    SpecOptions o;
    o.draft = ms.draft.get();
    o.draft_max = 6;
    o.draft_p_min = p_min;
    std::vector<GenerationRequest> reqs;
    std::vector<std::vector<int32_t>> want;
    SpecStats total;
    for (size_t i = 0; i < 4; ++i) {
        SamplerParams sp;
        sp.temperature = temperature;
        sp.seed = 7 + i;
        GenerationRequest r;
        r.prompt = ms.target->vocab().tokenize(kPrompts[i], true, false);
        r.max_tokens = n;
        r.ignore_eos = true;  // as generate_speculative goes on past end of generation
        r.sampling = sp;
        reqs.push_back(r);
        SpecStats st;
        want.push_back(test::generate_speculative(*ms.target, r.prompt, n, 256, o, &st, sp));
        total.drafted += st.drafted;
        total.accepted += st.accepted;
    }
    EngineOptions eo = draft_options(*ms.draft, 4096, 4, 6);
    eo.spec_draft_p_min = p_min;
    Engine engine(*ms.target, eo);
    EXPECT_EQ(run_all(engine, reqs), want);
    const EngineStats st = engine.stats();
    print_stats(temperature > 0 ? "4 sampled requests" : p_min > 0 ? "4 requests, p-min" : "4 requests", st);
    EXPECT_GT(st.spec_accepted, 0u);
    EXPECT_EQ(st.spec_drafted, static_cast<uint64_t>(total.drafted));
    EXPECT_EQ(st.spec_accepted, static_cast<uint64_t>(total.accepted));
}

TEST(SpecEngineDraft, GreedyDraftsAsRunsSpeculator) { check_as_speculator(0.0f); }
TEST(SpecEngineDraft, SampledDrawsAsRunsSpeculator) { check_as_speculator(0.8f); }
TEST(SpecEngineDraft, DraftPMinDraftsAsRunsSpeculator) { check_as_speculator(0.0f, 0.6f); }

// A cache far smaller than the requests' budgets: sequences are preempted (their draft
// pages freed, their drafting started over when they resume) and still answer as alone.
TEST(SpecEngineDraft, PreemptedSequencesAnswerAsAlone) {
    Models ms;
    const int n_tokens = 80;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<GenerationRequest> reqs;
    for (size_t i = 0; i < 6; ++i) {
        prompts.push_back(ms.target->vocab().tokenize(kPrompts[i], true, false));
        reqs.push_back(request(prompts.back(), n_tokens, 0.0f, 1));
        reqs.back().ignore_eos = true;
    }
    Engine engine(*ms.target, draft_options(*ms.draft, 256, 6, 6));
    const auto got = run_all(engine, reqs);
    for (size_t i = 0; i < got.size(); ++i) {
        SessionOptions so;
        so.n_ctx = 256;
        so.n_threads = 2;
        Session s(*ms.target, so);
        std::vector<int32_t> want;
        std::vector<float> l = s.decode(prompts[i], false);
        for (int t = 0; t < n_tokens; ++t) {  // end of generation ignored, as the requests do
            want.push_back(argmax(l.data(), s.n_vocab()));
            if (t + 1 < n_tokens) l = s.decode({want.back()}, false);
        }
        EXPECT_EQ(got[i], want) << "request " << i;
    }
    const EngineStats st = engine.stats();
    print_stats("6 requests in 256 cells", st);
    EXPECT_GT(st.preemptions, 0u);
    EXPECT_GT(st.spec_accepted, 0u);
    EXPECT_EQ(st.kv_blocks_used, 0);
    EXPECT_EQ(st.draft_kv_blocks_used, 0);
}

// Requests cancelled mid-answer (before the engine's fourth step: at most 1 + 3 x 7
// tokens of their 48 are out): they end, their draft pages go back, and the others still
// answer as alone.
TEST(SpecEngineDraft, CancelledRequestsFreeTheDraftPages) {
    Models ms;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<GenerationRequest> reqs;
    for (size_t i = 0; i < 4; ++i) {
        prompts.push_back(ms.target->vocab().tokenize(kPrompts[i], true, false));
        reqs.push_back(request(prompts.back(), 48, 0.0f, 1));
        reqs.back().ignore_eos = true;
    }
    EngineOptions eo = draft_options(*ms.draft, 4096, 4, 6);
    Engine* eng = nullptr;
    int steps = 0;
    eo.before_step = [&] {
        if (++steps == 4) {  // a fresh engine numbers its requests from 1
            eng->cancel(1);
            eng->cancel(3);
        }
    };
    Engine engine(*ms.target, eo);
    eng = &engine;
    const auto got = run_all(engine, reqs, {true, false, true, false});
    EXPECT_LT(got[0].size(), 48u);
    EXPECT_LT(got[2].size(), 48u);
    for (size_t i : {size_t(1), size_t(3)}) {
        const std::vector<int32_t> want = test::greedy_alone(*ms.target, prompts[i], 48);
        EXPECT_EQ(std::vector<int32_t>(got[i].begin(), got[i].begin() + static_cast<long>(want.size())), want);
    }
    const EngineStats st = engine.stats();
    EXPECT_EQ(st.requests_cancelled, 2u);
    EXPECT_EQ(st.kv_blocks_used, 0);
    EXPECT_EQ(st.draft_kv_blocks_used, 0);
}

// Token 300's text changed in the draft: refused, naming the token and both texts.
TEST(SpecEngineDraft, ADraftWithAnotherVocabularyIsRefused) {
    Models ms;
    const test::ScratchDir scratch("other-vocab");
    const std::string file = test::with_token_renamed(test::shared_path("models/stories260K-q4_0.gguf"),
                                                      scratch.file(""), 300, "<renamed>");
    auto other = Model::load(file);
    const std::string err = test::error_of([&] { Engine e(*ms.target, draft_options(*other, 256, 2, 4)); });
    EXPECT_NE(err.find("does not share the target's vocabulary: token 300 is '<renamed>' in the draft but '" +
                       ms.target->vocab().raw_piece(300) + "' in the target"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find(file), std::string::npos) << err;
}

// tiny-lfm2 shares stories260K's vocabulary but has recurrent layers: refused as a draft.
TEST(SpecEngineDraft, RecurrentDraftsAreRefused) {
    Models ms;
    auto lfm2 = Model::load(test::shared_path("models/tiny-lfm2-q8_0.gguf"));
    const std::string err = test::error_of([&] { Engine e(*ms.target, draft_options(*lfm2, 256, 2, 4)); });
    EXPECT_NE(err.find("the draft model"), std::string::npos) << err;
    EXPECT_NE(err.find("recurrent layers"), std::string::npos) << err;
}

TEST(SpecEngineDraft, RecurrentTargetsAreRefused) {
    auto m = Model::load(test::shared_path("models/tiny-lfm2-q8_0.gguf"));
    const std::string err = test::error_of([&] { Engine e(*m, draft_options(*m, 256, 2, 4)); });
    EXPECT_NE(err.find("recurrent layers"), std::string::npos) << err;
    EXPECT_NE(err.find("--model-draft"), std::string::npos) << err;
}

TEST(SpecEngineDraft, ADraftModelNeedsADraftMax) {
    Models ms;
    const std::string err = test::error_of([&] { Engine e(*ms.target, draft_options(*ms.draft, 256, 2, 0)); });
    EXPECT_NE(err.find("--draft-max"), std::string::npos) << err;
}

}  // namespace
