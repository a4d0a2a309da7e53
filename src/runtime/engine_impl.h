// The serving engine's state and the parts of its work (engine.h is the public face). One
// struct, its member functions in files by concern (each group below names its file).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "grammar/token_mask.h"
#include "runtime/engine.h"
#include "runtime/engine_draft.h"
#include "runtime/ngram_draft.h"
#include "runtime/runner.h"
#include "runtime/spec_accept.h"

namespace glia {

// A request inside the engine.
struct Sequence {
    uint64_t id = 0;
    GenerationRequest req;
    std::shared_ptr<EventStream> out;
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<grammar::Matcher> matcher;  // structured output
    std::vector<int32_t> history;  // prompt + generated
    int slot = -1;                 // KV / recurrent-state slot
    // Tokens of `history` to compute before the next sample: the prompt, or after a
    // preemption the prompt and every token generated so far (recomputed on resuming).
    int n_target = 0;
    int n_prompt_done = 0;         // of those, the tokens already in the cache
    int n_written = 0;             // positions whose K/V (and state) are computed
    int n_reused = 0;              // prompt tokens shared from the prefix cache (first admission)
    bool preempted = false;        // admitted before (waiting again: preempted, resumes)
    int n_generated = 0;
    int32_t next = -1;             // sampled token not yet fed back
    bool cancelled = false;
    bool stopped = false;  // cancelled because the caller saw a stop string
    bool overrun = false;  // cancelled because the consumer fell too far behind
    std::vector<double> pooled;    // embeddings: the sum (MEAN) or the last row (LAST)
    std::unique_ptr<NgramDraft> ngram;  // speculative decoding (EngineOptions::spec_draft_max)
    std::vector<int32_t> drafts;        // this step's drafted tokens, after `next`
    // Draft model (EngineOptions::spec_draft): the tokens drafted at most this step (0: it
    // does not speculate now), the draft's distribution of each drafted token (sampled
    // requests), what the draft's cache of this slot holds, and the draft-side sampler.
    int spec_k = 0;
    std::vector<TokenDist> draft_q;
    std::vector<int32_t> draft_cached;
    std::unique_ptr<Sampler> draft_sampler;
    uint32_t cache_ns = 0;              // prefix-cache namespace of its LoRA scales
};

struct Engine::Impl {
    const Model& model;
    EngineOptions opt;
    std::unique_ptr<Runner> runner;
    std::unique_ptr<EngineDrafter> drafter;  // the draft model (EngineOptions::spec_draft)

    mutable std::mutex mu;
    std::condition_variable cv;
    std::deque<std::unique_ptr<Sequence>> waiting;
    std::vector<std::unique_ptr<Sequence>> running;
    std::vector<std::pair<uint64_t, bool>> cancel_ids;  // (id, ended normally: a stop string)
    std::vector<int> free_slots;
    uint64_t next_id = 1;
    bool stop = false;
    EngineStats st;
    bool recurrent = false;             // the model has per-slot recurrent state
    std::vector<uint8_t> state_buf;     // a slot's recurrent state (checkpoints)
    // Structured output: the vocabulary's trie (built on first use, by the submitting
    // thread), the step's mask and masked logits.
    std::once_flag index_once;
    std::unique_ptr<grammar::TokenIndex> index;
    grammar::TokenMask mask;
    std::vector<float> masked;
    TokenDist spec_p;  // a speculating sequence's target distribution (sampling)
    std::thread thread;
    // Callback requests: one delivery thread each (joined when done, or at the end).
    struct Deliverer {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> done;
    };
    std::mutex deliver_mu;
    std::vector<Deliverer> deliverers;


    // LoRA: each token's scales, from the sequence its slot runs (StepInputs::lora_scales).
    std::vector<float> lora_buf;
    // The prefix-cache namespace of a set of LoRA scales (their exact bits): 0 for every
    // scale +0 (or no adapter); requests computed with other scales share no pages. Past
    // kMaxNamespaces distinct sets, a new one gets none (its request skips the cache).
    static constexpr size_t kMaxNamespaces = 4096;
    std::map<std::vector<uint32_t>, uint32_t> namespaces;

    Impl(const Model& m, const EngineOptions& o);
    ~Impl();

    // --- engine.cpp (construction, delivery of events, cancellation)
    bool deliver(Sequence& s, TokenEvent ev);
    void finish(Sequence& s, FinishReason r, const std::string& err = "");
    void start_deliverer(uint64_t id, std::shared_ptr<EventStream> out, TokenCallback cb);
    void cancel(uint64_t id, bool stopped);
    void fail_running(const std::string& why);

    // --- engine_schedule.cpp (the loop: admission, pages, preemption, statistics)
    void admit();
    void grow();
    void preempt_youngest();
    void release(Sequence& s);
    void loop();
    void update_block_stats();
    int chunk_to_boundary(int done, int n, int n_prompt) const;
    void publish();
    std::optional<uint32_t> cache_namespace(const std::vector<float>& scales);

    // --- engine_step.cpp (one step of the running sequences: inputs, sampling, events)
    void step(uint64_t& window_tokens);
    void emit(Sequence& s, int32_t tok, const float* l, int V, uint64_t& window_tokens);
    const float* constrain(Sequence& s, const float* l, int V, std::string& why);
    void end_by_grammar(Sequence& s);
    void fail_by_grammar(Sequence& s, const std::string& why);
    const float* lora_rows(const std::vector<int32_t>& seq);
    static void fill_logprobs(const float* l, int V, int32_t tok, int top, TokenEvent& ev);

    // --- engine_speculative.cpp (drafts and their verification)
    void draft();
    bool draft_by_model();
    void verify(Sequence& s, const int32_t* ids, const float* logits, int V, uint64_t& window_tokens);

    // --- engine_embeddings.cpp (embedding requests)
    bool step_embeddings();
};

}  // namespace glia
