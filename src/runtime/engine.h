// The serving engine: a continuous-batching scheduler over a paged KV cache.
// Requests are submitted from any thread; one engine thread runs every active sequence
// in one forward step per iteration (new requests join between steps, finished ones
// leave; long prompts are processed in chunks so running streams keep flowing).
// A request is admitted when the KV pages its prompt needs are free; a running sequence
// takes pages one at a time as it grows. When a step finds too few, the sequence admitted
// last is preempted: it gives its pages back and waits at the front of the queue, and on
// resuming recomputes its prompt and generated tokens (the same kernels, in prompt-sized
// steps) with its sampler, grammar and event stream untouched.
// Events go to each request's EventStream, a bounded queue its consumer drains at its own
// pace: the engine never calls the consumer's code and never waits for it. A consumer that
// leaves more than max_pending_events untaken is cancelled (its final event says why), so
// one slow stream cannot slow the others or hold memory without bound. Callbacks (the
// submit overloads taking a TokenCallback) run on a delivery thread of their request's own.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "placement/placement.h"
#include "runtime/sampler.h"

namespace glia {

namespace grammar {
class Grammar;
}

class Model;
class Backend;
class LoraAdapter;

struct EngineOptions {
    int n_ctx = 4096;          // KV-cache capacity in tokens, shared by all sequences
    int n_parallel = 4;        // sequences decoded together at most
    int n_threads = 0;         // CPU threads (0: all cores)
    int block_size = 16;       // KV-cache block (page) size in tokens
    int max_queue = 64;        // waiting requests beyond which submit() refuses (QueueFull); requests
                               // that start at the next step (free or freeing slots) and preempted
                               // ones waiting to resume do not count
    int prefill_chunk = 256;   // prompt tokens per sequence per step
    Placement placement;       // empty: everything on the CPU
    std::vector<Backend*> devices;  // backends for placement.devices[1..]
    std::vector<Op> cpu_ops;              // ops forced to the CPU
    int tp = 1;                           // tensor-parallel ranks (RunnerOptions::tp)
    // LoRA adapters (model/lora.h; owned by the caller, living longer than the engine).
    // Every request gives each one a scale (GenerationRequest::lora_scales); requests with
    // different scales share steps, each row computed with its request's own.
    std::vector<const LoraAdapter*> lora;
    // Automatic prefix caching: KV pages of earlier and running sequences are shared by
    // token prefix (runtime/pages.h); a request computes only what is not cached. Models
    // with recurrent layers checkpoint their state at page boundaries for it.
    bool prefix_cache = true;
    // A step whose every output is a plain greedy pick (no temperature, penalties, grammar,
    // logit bias or logprobs) takes only the token ids back from the runner: the argmax
    // runs where the logits are, and a GPU sends ids over the bus instead of vocabulary-sized
    // rows. The same ids either way. $GLIA_GREEDY_IDS=0 turns it off.
    bool greedy_ids = true;
    // Speculative decoding by prompt lookup (runtime/ngram_draft.h): up to this many tokens
    // drafted per sequence and step, verified in the same step as the other sequences'
    // tokens (0: off). Greedy answers stay bit for bit what they are without it; requests
    // with a grammar, logit bias or log-probabilities decode one token a step. Refused
    // for models with recurrent state.
    int spec_draft_max = 0;
    int spec_draft_min = 0;  // a shorter draft is not verified
    int spec_ngram_min = 1, spec_ngram_max = 4;
    // Speculative decoding with a draft model instead of prompt lookup (runtime/engine_draft.h):
    // a smaller model with the target's vocabulary (owned by the caller, living longer than
    // the engine) drafts up to spec_draft_max tokens per sequence and step, every
    // sequence's draft steps batched together, on the CPU with n_threads; its KV cache
    // holds n_ctx cells too. A vocabulary that differs is refused (naming the first
    // differing token), and so are draft models with recurrent state. Sampled requests
    // are accepted by the rule of runtime/spec_accept.h with the draft's distribution.
    const Model* spec_draft = nullptr;
    float spec_draft_p_min = 0.0f;  // greedy drafting stops at a token the draft gives less than this
    // Events a request's consumer may leave untaken; one more cancels the request.
    int max_pending_events = 1024;
    // Tests: runs on the engine thread before each step, outside its lock (e.g. to hold
    // the engine while a test probes the queue).
    std::function<void()> before_step;
};

enum class FinishReason { NONE, STOP, LENGTH, CANCELLED, ERROR };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"

// Embeddings: the prompt's final hidden states pooled into one vector (L2-normalised).
enum class Pooling { NONE, MEAN, LAST };

struct GenerationRequest {
    std::vector<int32_t> prompt;  // token ids (template and tokenizer applied by the caller)
    int max_tokens = 256;         // generated tokens at most
    SamplerParams sampling;
    bool ignore_eos = false;
    bool logprobs = false;        // report each token's log-probability (TokenEvent::logprob)
    bool prefix_cache = true;     // may reuse cached pages (false: computes the whole prompt)
    // Structured output: only text this grammar accepts is sampled (a token mask per
    // step); the request ends (STOP) when the value is whole and nothing can follow.
    std::shared_ptr<const grammar::Grammar> grammar;
    int top_logprobs = 0;         // 0..20: alternatives reported with each token (implies logprobs)
    // Not NONE: an embedding request. Nothing is generated (max_tokens is ignored); the
    // final event carries the pooled vector.
    Pooling embed = Pooling::NONE;
    // Added to these tokens' logits before sampling (OpenAI's logit_bias).
    std::vector<std::pair<int32_t, float>> logit_bias;
    // The scale of each of the engine's LoRA adapters, in their order (0: not used);
    // empty: every adapter at its own scale (LoraAdapter::scale, read at submit()).
    // Requests with other scales never share prefix-cache pages.
    std::vector<float> lora_scales;
};

struct TokenEvent {
    uint64_t request_id = 0;
    int32_t token = -1;           // -1 on the final event when no token came with it
    float logprob = 0;            // log-probability of `token` under the raw distribution (when asked for)
    std::vector<std::pair<int32_t, float>> top;  // top_logprobs alternatives (id, logprob)
    bool done = false;            // last event of this request
    FinishReason finish = FinishReason::NONE;
    std::string error;            // when finish == ERROR
    int n_prompt = 0;             // prompt tokens (for usage)
    int n_generated = 0;          // tokens generated so far
    int n_cached = 0;             // prompt tokens taken from the prefix cache (not computed)
    std::vector<float> embedding; // embedding requests, on the final event
};

// Return false to cancel the request (e.g. the client went away): later token events
// are not delivered, the final one is.
using TokenCallback = std::function<bool(const TokenEvent&)>;

// A request's events on their way from the engine thread to the request's consumer: a
// queue bounded by EngineOptions::max_pending_events. The engine's push never blocks; a
// consumer that falls further behind has its request cancelled (the final event is always
// queued, past the bound, with FinishReason::CANCELLED and an error saying so).
class EventStream {
public:
    using Clock = std::chrono::steady_clock;
    // Waits until events are queued or `until`; returns every queued event, oldest first
    // (none when the time ran out).
    std::deque<TokenEvent> wait(Clock::time_point until);
    // Waits (without a time limit) until events are queued and returns them.
    std::deque<TokenEvent> wait();
    // The consumer wants no more tokens (it went away): later token events are dropped
    // and the engine cancels the request at its next token; the final event is still
    // queued. Engine::cancel() frees the request at once.
    void close();
    bool closed() const;

private:
    friend class Engine;
    enum class Push { OK, FULL, CLOSED };
    // Queues an event unless the queue holds `capacity` (FULL) or the consumer closed it
    // (CLOSED); a final event (done) is always queued.
    Push push(TokenEvent ev, size_t capacity);
    mutable std::mutex m_;
    std::condition_variable cv_;
    std::deque<TokenEvent> q_;
    bool closed_ = false;
};

struct EngineStats {
    uint64_t requests_total = 0, requests_finished = 0, requests_cancelled = 0, requests_rejected = 0;
    uint64_t requests_overrun = 0;        // cancelled because their consumer fell too far behind
    // Running sequences set back to waiting because the cache ran out of pages (they resume
    // by recomputing what they had; their clients see a pause).
    uint64_t preemptions = 0;
    uint64_t prompt_tokens_total = 0, generated_tokens_total = 0;
    int running = 0, waiting = 0;
    int kv_blocks_total = 0, kv_blocks_used = 0;
    int kv_blocks_cached = 0;             // held by no sequence, kept for prefix reuse
    // Prefix cache: admitted requests, those that reused a prefix, the prompt tokens they
    // brought and how many of those were not computed; cached pages evicted.
    uint64_t prefix_lookups = 0, prefix_hits = 0;
    uint64_t prefix_tokens_total = 0, prefix_tokens_reused = 0;
    uint64_t prefix_evictions = 0;
    uint64_t grammar_masks = 0;           // token masks computed (structured output)
    double grammar_mask_seconds = 0;      // time spent computing them
    double decode_tokens_per_second = 0;  // recent generation throughput (all sequences)
    // Speculative decoding: drafted tokens verified, and of those kept (prompt lookup or a
    // draft model); the draft model's KV pages in use.
    uint64_t spec_drafted = 0, spec_accepted = 0;
    int draft_kv_blocks_used = 0;
};

class QueueFull : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Engine {
public:
    Engine(const Model& model, const EngineOptions& opt);
    ~Engine();  // stops the engine thread; pending requests finish with CANCELLED
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Queues a request; returns its id. Throws QueueFull when the queue is at its limit,
    // glia::Error when the request can never fit (prompt + max_tokens > n_ctx, bad ids).
    // Events go to `out`, which the caller drains (EventStream::wait).
    uint64_t submit(GenerationRequest req, std::shared_ptr<EventStream> out);
    std::vector<uint64_t> submit_batch(std::vector<std::pair<GenerationRequest, std::shared_ptr<EventStream>>> reqs);
    // Events go to `cb`, called on a thread of the request's own (in order; the final
    // event last). A callback that blocks delays only its own request, which is cancelled
    // when it falls max_pending_events behind.
    uint64_t submit(GenerationRequest req, TokenCallback cb);
    // Queues several requests at once, all or none (same checks as submit(); QueueFull
    // when they do not all fit the queue); returns their ids in order. They become visible
    // to the engine thread together, so they are admitted in the same step when slots
    // and cache blocks allow (used by `glia bench --parallel`).
    std::vector<uint64_t> submit_batch(std::vector<std::pair<GenerationRequest, TokenCallback>> reqs);
    // Cancels a queued or running request; its blocks are freed at the next step.
    void cancel(uint64_t id);
    // Ends a request normally before its limits (the caller found a stop string): like
    // cancel() for the cache, but counted as finished, not cancelled, and its final
    // event says STOP.
    void finish_early(uint64_t id);
    EngineStats stats() const;
    const EngineOptions& options() const { return opt_; }
    const Model& model() const { return model_; }

private:
    struct Impl;
    const Model& model_;
    EngineOptions opt_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace glia
