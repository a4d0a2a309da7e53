// The serving engine: a continuous-batching scheduler over a paged KV cache.
// Requests are submitted from any thread; one engine thread runs every active sequence
// in one forward step per iteration (new requests join between steps, finished ones
// leave; long prompts are processed in chunks so running streams keep flowing).
// Events are delivered through the request's callback on the engine thread: the
// callback must not block (copy the event into a queue and return).
#pragma once
#include <atomic>
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

struct EngineOptions {
    int n_ctx = 4096;          // KV-cache capacity in tokens, shared by all sequences
    int n_parallel = 4;        // sequences decoded together at most
    int n_threads = 0;         // CPU threads (0: all cores)
    int block_size = 16;       // KV-cache block (page) size in tokens
    int max_queue = 64;        // waiting requests beyond which submit() refuses (QueueFull)
    int prefill_chunk = 256;   // prompt tokens per sequence per step
    Placement placement;       // empty: everything on the CPU
    std::vector<Backend*> devices;  // backends for placement.devices[1..]
    std::vector<Op> cpu_ops;              // ops forced to the CPU
    // Automatic prefix caching: KV pages of earlier and running sequences are shared by
    // token prefix (runtime/pages.h); a request computes only what is not cached. Models
    // with recurrent layers checkpoint their state at page boundaries for it.
    bool prefix_cache = true;
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

// Return false to cancel the request (e.g. the client went away).
using TokenCallback = std::function<bool(const TokenEvent&)>;

struct EngineStats {
    uint64_t requests_total = 0, requests_finished = 0, requests_cancelled = 0, requests_rejected = 0;
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
