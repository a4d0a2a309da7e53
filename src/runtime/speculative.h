// Speculative decoding for one sequence (a Session): a drafter proposes the next k tokens
// (a smaller draft model sharing the vocabulary, or prompt lookup), the target evaluates
// the last emitted token and the k drafted ones as ONE many-token step, and keeps the
// longest prefix of the draft that its own sampling agrees with plus one token of its own.
// A k-token step gives the bits of k single steps (principle 6), so a greedy run emits
// exactly the tokens it emits without speculation; with temperature the acceptance rule
// of runtime/spec_accept.h leaves the output distribution unchanged. Drafted tokens the
// target rejects are cut from both sequences (Session::truncate): models with recurrent
// state are refused.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/ngram_draft.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/spec_accept.h"

namespace glia {

namespace tok { class Vocab; }

struct SpecOptions {
    bool ngram = false;            // prompt lookup
    int ngram_min = 1, ngram_max = 4;
    const Model* draft = nullptr;  // a draft model (not with ngram)
    SessionOptions draft_session;  // the draft's context, threads, placement
    int draft_max = 16;            // tokens drafted per step at most
    int draft_min = 0;             // a shorter draft is not verified (a plain step instead)
    // Greedy drafting by a draft model stops at a token whose draft probability is below
    // this (0: never); it does not change what is emitted, only how much is drafted.
    float draft_p_min = 0.0f;
};

struct SpecStats {
    long long steps = 0;       // target steps while generating
    long long drafted = 0;     // tokens proposed and verified
    long long accepted = 0;    // of those, kept
    long long emitted = 0;     // tokens produced by step()
    double draft_s = 0;        // time in the drafter
    double verify_s = 0;       // time in the target's steps and the acceptance
    double acceptance() const { return drafted > 0 ? double(accepted) / double(drafted) : 0.0; }
    double tokens_per_step() const { return steps > 0 ? double(emitted) / double(steps) : 0.0; }
};

// Fails with a message naming the first token whose text differs (or the sizes) when a
// draft's vocabulary is not the target's.
void check_draft_vocab(const tok::Vocab& target, const tok::Vocab& draft, const std::string& draft_name);

class Speculator {
public:
    // target: the sequence to extend; sampler: the target's (its parameters and generator
    // are used for every pick). Fails for models that cannot drop rejected tokens.
    Speculator(Session& target, Sampler& sampler, const SpecOptions& opt);
    ~Speculator();

    // text: the prompt and every token emitted so far; the target has evaluated all but
    // the last (target.n_past() == text.size() - 1). Returns the next 1..max_new tokens
    // (fewer when the context is nearly full), what sampling one token at a time would
    // give; the target has then evaluated all but the last of them. The caller appends
    // them to text (and may stop early: at end of generation, for instance).
    std::vector<int32_t> step(const std::vector<int32_t>& text, int max_new);
    const SpecStats& stats() const { return stats_; }
    // For a new text on the target after its reset(): forgets the drafter's text and the stats.
    void reset();
    // "prompt lookup" or "draft model"
    std::string kind() const;

private:
    void draft_tokens(const std::vector<int32_t>& text, int k);
    const std::vector<float>& sync_draft(const std::vector<int32_t>& text);  // the draft's last logits

    Session& target_;
    Sampler& sampler_;
    SpecOptions opt_;
    std::unique_ptr<NgramDraft> ngram_;
    std::unique_ptr<Session> draft_;
    std::unique_ptr<Sampler> draft_sampler_;
    std::vector<int32_t> drafts_;     // this step's draft
    std::vector<TokenDist> q_;        // the draft's distribution for each (sampling only)
    std::vector<int32_t> draft_text_; // what the draft session has evaluated
    std::vector<int32_t> batch_;
    std::vector<int32_t> hist_;
    TokenDist p_;
    SpecStats stats_;
};

}  // namespace glia
