// Speculative decoding never changes a greedy answer: with a draft model or prompt lookup,
// every token is the one that decoding one token a step gives. Verifying k drafted tokens
// is one k+1-token step, whose logits are those of k+1 single steps (principle 6); the
// drafted tokens the target rejects are cut from the sequence and written over.
#include <gtest/gtest.h>

#include <cstdio>

#include "cli_util.h"
#include "spec_util.h"
#include "synth/synth.h"

using namespace glia;

namespace {

constexpr int kTokens = 48;  // the goldens' greedy length

struct Totals {
    long long drafted = 0, accepted = 0, steps = 0, emitted = 0;
    void add(const SpecStats& s) {
        drafted += s.drafted;
        accepted += s.accepted;
        steps += s.steps;
        emitted += s.emitted;
    }
    void print(const std::string& what) const {
        std::printf("[ spec     ] %s: drafted %lld, accepted %lld (%.1f %%), %.2f tokens a target step\n", what.c_str(),
                    drafted, accepted, drafted ? 100.0 * accepted / drafted : 0.0,
                    steps ? double(emitted) / steps : 0.0);
    }
};

// Every golden prompt of `stem`, on `target`, with the options: same tokens as without.
Totals check_golden_prompts(const Model& target, const std::string& stem, const SpecOptions& o, bool with_long = false) {
    Totals t;
    for (const auto& [id, prompt] : test::golden_prompts(stem, with_long)) {
        const int n_ctx = static_cast<int>(prompt.size()) + kTokens + 1;
        const std::vector<int32_t> plain = test::generate_plain(target, prompt, kTokens, n_ctx);
        SpecStats st;
        const std::vector<int32_t> spec = test::generate_speculative(target, prompt, kTokens, n_ctx, o, &st);
        EXPECT_EQ(spec, plain) << stem << " " << id;
        t.add(st);
    }
    return t;
}

TEST(SpecIdentity, StoriesF32WithItsQ4_0AsDraft) {
    auto target = Model::load(test::shared_path("models/stories260K.gguf"));
    auto draft = Model::load(test::shared_path("models/stories260K-q4_0.gguf"));
    SpecOptions o;
    o.draft = draft.get();
    o.draft_max = 6;
    const Totals t = check_golden_prompts(*target, "stories260K", o);
    t.print("stories260K F32, Q4_0 draft");
    EXPECT_GT(t.accepted, 0);  // the pair agrees: drafts were kept, so many-token steps were used
}

TEST(SpecIdentity, PromptLookupOnTheGoldensPrompts) {
    for (const char* stem : {"stories260K", "tiny-llama-q8_0", "tiny-qwen3-q4_k_m", "tiny-gemma2-q8_0", "tiny-phi3-q8_0"}) {
        auto target = Model::load(test::shared_path("models/" + std::string(stem) + ".gguf"));
        SpecOptions o;
        o.ngram = true;
        o.draft_max = 8;
        // Not the 2,000-token prompt: on 2 cores its many-token steps at that depth take ~20 s
        // (a CPU attention cost, bench/LOG.md 2026-12-05); `check_golden_prompts(..., true)` runs it.
        const Totals t = check_golden_prompts(*target, stem, o);
        t.print(std::string(stem) + ", prompt lookup");
        EXPECT_GT(t.drafted, 0) << stem;
    }
}

// A draft that mostly disagrees: nearly every step rolls drafted tokens back.
TEST(SpecIdentity, UnrelatedDraftRollsBackAndChangesNothing) {
    auto target = Model::load(test::shared_path("models/stories260K.gguf"));
    auto draft = Model::load(test::shared_path("models/tiny-llama-q8_0.gguf"));
    SpecOptions o;
    o.draft = draft.get();
    o.draft_max = 5;
    const Totals t = check_golden_prompts(*target, "stories260K", o);
    t.print("stories260K F32, random-weight draft");
    EXPECT_LT(t.accepted, t.drafted);
}

// Greedy with a repetition penalty is deterministic too: acceptance compares the target's
// penalized pick, with the drafted tokens in the penalty window.
TEST(SpecIdentity, GreedyWithPenaltiesIsUnchanged) {
    auto target = Model::load(test::shared_path("models/stories260K.gguf"));
    SamplerParams sp = test::greedy_params();
    sp.repeat_penalty = 1.3f;
    sp.repeat_last_n = 16;
    sp.frequency_penalty = 0.2f;
    SpecOptions o;
    o.ngram = true;
    for (const auto& [id, prompt] : test::golden_prompts("stories260K")) {
        if (prompt.size() > 100) continue;
        const int n_ctx = static_cast<int>(prompt.size()) + 64 + 1;
        EXPECT_EQ(test::generate_speculative(*target, prompt, 64, n_ctx, o, nullptr, sp),
                  test::generate_plain(*target, prompt, 64, n_ctx, sp))
            << id;
    }
}

// A synthetic pair sharing weights: the same seed written at Q8_0 (target) and Q4_0 (draft).
TEST(SpecIdentity, SynthPairSharingWeights) {
    const test::ScratchDir dir("spec-synth");
    synth::Options so;
    so.shape = *synth::find_shape("tiny");
    so.vocab_path = test::shared_path("models/stories260K.gguf");
    so.seed = 7;
    so.n_threads = 2;
    so.progress = false;
    so.ftype = quant::FileType::Q8_0;
    synth::write_model(dir.file("t.gguf"), so);
    so.ftype = quant::FileType::Q4_0;
    synth::write_model(dir.file("d.gguf"), so);
    auto target = Model::load(dir.file("t.gguf"));
    auto draft = Model::load(dir.file("d.gguf"));
    SpecOptions o;
    o.draft = draft.get();
    o.draft_max = 6;
    const Totals t = check_golden_prompts(*target, "stories260K", o);
    t.print("synth tiny Q8_0, Q4_0 draft (seed 7)");
    EXPECT_GT(t.accepted, 0);
}

TEST(SpecIdentity, RecurrentModelsAreRefusedNamingWhy) {
    for (const char* file : {"tiny-lfm2-q8_0.gguf", "tiny-qwen35-q8_0.gguf"}) {
        auto m = Model::load(test::shared_path(std::string("models/") + file));
        Session s(*m, test::spec_session(64));
        Sampler sampler(test::greedy_params());
        SpecOptions o;
        o.ngram = true;
        const std::string err = test::error_of([&] { Speculator spec(s, sampler, o); });
        EXPECT_NE(err.find("recurrent layers"), std::string::npos) << file << ": " << err;
        EXPECT_NE(err.find(file), std::string::npos) << err;
    }
}

}  // namespace
