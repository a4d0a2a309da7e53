// A session: one sequence being evaluated on a model, with its KV cache and the
// backend that runs its graphs.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/kv_cache.h"
#include "runtime/recurrent_state.h"

namespace glia {
namespace cpu { class CpuBackend; }
class Executor;

struct SessionOptions {
    int n_ctx = 0;        // 0: the model's training context (at least 512 if unknown)
    int n_threads = 0;    // 0: all cores
    int n_batch = 512;    // tokens per forward pass when decoding a long prompt with only last logits
};

class Session {
public:
    Session(const Model& model, const SessionOptions& opt);
    ~Session();

    // Evaluates `tokens` at positions n_past() ... and appends them to the sequence.
    // Returns logits: n_vocab floats per token when all_logits, else for the last one.
    // The whole call is one forward pass when all_logits (the golden setting).
    const std::vector<float>& decode(const std::vector<int32_t>& tokens, bool all_logits = false);

    int n_past() const { return n_past_; }
    int n_ctx() const { return n_ctx_; }
    int n_vocab() const { return model_.profile().n_vocab; }
    void reset();
    const Model& model() const { return model_; }
    Executor& executor() { return *exec_; }
    // Testing: force the MoE routing (see ForwardInputs::forced_experts).
    void set_forced_experts(std::function<const int32_t*(int il, int pos0, int n_tokens)> f) { forced_ = std::move(f); }

private:
    void forward(const int32_t* tokens, int n, bool all_logits);
    const Model& model_;
    int n_ctx_;
    int n_batch_;
    int n_past_ = 0;
    std::unique_ptr<KVCache> cache_;
    std::unique_ptr<RecurrentState> state_;
    std::unique_ptr<cpu::CpuBackend> cpu_;
    std::unique_ptr<Executor> exec_;
    std::vector<float> logits_;
    std::function<const int32_t*(int, int, int)> forced_;
};

}  // namespace glia
