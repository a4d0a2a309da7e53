// A session: one sequence being evaluated on a model, driving a Runner with one slot.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "runtime/runner.h"

namespace glia {

struct SessionOptions {
    int n_ctx = 0;        // 0: the model's training context (4096 if unknown)
    int n_threads = 0;    // 0: all cores
    int n_batch = 512;    // tokens per forward pass when decoding a long prompt with only last logits
    Placement placement;  // empty: everything on the CPU
    std::vector<Backend*> devices;  // backends for placement.devices[1..]
    std::vector<Op> cpu_ops;        // forced to the CPU
    bool verbose = false;           // describe the dispatch plans (glia run -v)
    int tp = 1;                     // tensor-parallel ranks (RunnerOptions::tp)
    std::vector<const LoraAdapter*> lora;  // applied at their own scales (RunnerOptions::lora)
};

class Session {
public:
    Session(const Model& model, const SessionOptions& opt);
    ~Session();

    // Evaluates `tokens` at positions n_past() ... and appends them to the sequence.
    // Returns logits: n_vocab floats per token when all_logits, else for the last one.
    // The whole call is one forward pass when all_logits (the golden setting).
    const std::vector<float>& decode(const std::vector<int32_t>& tokens, bool all_logits = false);

    // Drops the tokens at positions n and after (speculative decoding: the drafted tokens the
    // target did not accept). Their K/V cells are simply written again by what comes next:
    // attention reads only positions up to each query's own. Recurrent state cannot go back:
    // refused for models that have it (can_truncate()).
    void truncate(int n);
    bool can_truncate() const;
    int n_past() const { return n_past_; }
    int n_ctx() const { return n_ctx_; }
    int n_vocab() const { return model_.profile().n_vocab; }
    void reset();
    const Model& model() const { return model_; }
    Runner& runner() { return *runner_; }
    // Testing: force the MoE routing: f(il, pos0, n_tokens) gives [n_tokens][n_used] ids.
    void set_forced_experts(std::function<const int32_t*(int il, int pos0, int n_tokens)> f) { forced_ = std::move(f); }

private:
    void forward(const int32_t* tokens, int n, bool all_logits);
    const Model& model_;
    int n_ctx_;
    int n_batch_;
    int n_past_ = 0;
    std::unique_ptr<Runner> runner_;
    std::vector<float> logits_;
    std::vector<int32_t> pos_;
    std::function<const int32_t*(int, int, int)> forced_;
};

}  // namespace glia
