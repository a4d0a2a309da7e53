// The serving engine's draft model (speculative decoding, EngineOptions::spec_draft): a
// smaller model with the target's vocabulary, on its own Runner (its own KV pages, one
// slot per engine slot, the same slot numbers), on the CPU. Each engine step, before the
// target's step, draft() proposes up to k tokens for every sequence that speculates, all
// sequences together: one draft step brings each sequence's draft cache up to its text
// (the tokens the target accepted since, or the whole prompt, in chunks) and gives its
// first drafted token, then one step per further token feeds every sequence's latest
// draft at once. The target verifies the drafts in its own step (runtime/engine.cpp);
// what it rejected is cut from the draft's cache at the next draft() (the cache keeps
// only the longest run that agrees with the text), and its own extra token is fed then.
// A sequence's draft pages are freed with its slot (release()): a preempted or finished
// sequence drafts from scratch when it runs again.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/sampler.h"
#include "runtime/spec_accept.h"

namespace glia {

class Model;
class Runner;

struct EngineDraftOptions {
    int n_ctx = 4096;      // the draft's KV cells, all slots together
    int n_slots = 1;       // the engine's slots
    int block_size = 16;   // cells per KV page
    int n_threads = 0;     // CPU threads (0: all cores)
    int chunk = 256;       // text tokens per sequence per draft step while catching up
    // Greedy drafting stops at a token the draft gives less than this probability (0: never).
    float p_min = 0.0f;
};

// One sequence's drafting for this step. The sequence's sampler supplies the parameters
// (the draft picks as the target would: greedy, or sampled from its own distribution q
// with the sampler's generator) and text is what the target has (prompt and generated
// tokens; the last one is what the target evaluates next).
struct DraftJob {
    int slot = -1;
    const std::vector<int32_t>* text = nullptr;
    int k = 0;                            // tokens to draft at most
    Sampler* sampler = nullptr;           // the sequence's own (its generator draws sampled drafts)
    std::vector<int32_t>* cached = nullptr;  // the tokens in the draft's cache of this slot (kept up to date)
    std::unique_ptr<Sampler>* draft_sampler = nullptr;  // the sequence's draft-side sampler (made on first use)
    std::vector<int32_t>* drafts = nullptr;  // out: the drafted tokens (may be fewer than k, or none)
    std::vector<TokenDist>* q = nullptr;     // out: the draft's distribution of each (sampled requests only)
};

class EngineDrafter {
public:
    // Fails when the draft's vocabulary is not the target's (naming the first differing
    // token) or when the draft has recurrent state (it cannot drop rejected tokens).
    EngineDrafter(const Model& target, const Model& draft, const EngineDraftOptions& opt);
    ~EngineDrafter();
    EngineDrafter(const EngineDrafter&) = delete;
    EngineDrafter& operator=(const EngineDrafter&) = delete;

    // Drafts for every job, all sequences' draft steps batched. A job whose draft cache
    // cannot get the pages it needs drafts nothing this time. Throws what the draft's
    // forward pass throws.
    void draft(std::vector<DraftJob>& jobs);
    // Frees a slot's draft pages (its sequence ended, was preempted, or a new one starts).
    void release(int slot);
    int pages_used() const;
    const Model& model() const { return draft_; }

private:
    const Model& draft_;
    EngineDraftOptions opt_;
    std::unique_ptr<Runner> runner_;
    int n_vocab_target_ = 0;
    std::vector<int32_t> hist_;  // a sequence's text and drafts so far (the sampler's penalties read it)
};

}  // namespace glia
