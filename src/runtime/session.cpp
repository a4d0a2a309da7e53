#include "runtime/session.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace glia {

Session::Session(const Model& model, const SessionOptions& opt) : model_(model) {
    const ModelProfile& p = model.profile();
    n_ctx_ = opt.n_ctx > 0 ? opt.n_ctx : (p.n_ctx_train > 0 ? p.n_ctx_train : 4096);
    n_batch_ = std::max(1, opt.n_batch);
    RunnerOptions ro;
    ro.n_ctx = n_ctx_;
    ro.n_slots = 1;
    ro.n_threads = opt.n_threads;
    ro.placement = opt.placement;
    ro.devices = opt.devices;
    ro.cpu_ops = opt.cpu_ops;
    ro.verbose = opt.verbose;
    ro.tp = opt.tp;
    ro.lora = opt.lora;
    runner_ = std::make_unique<Runner>(model, ro);
}

Session::~Session() = default;

void Session::reset() {
    n_past_ = 0;
    runner_->reset_slot(0);
}

bool Session::can_truncate() const { return runner_->slot_state_bytes() == 0; }

void Session::truncate(int n) {
    if (n < 0 || n > n_past_) fail("truncate: position ", n, " outside the sequence's ", n_past_, " tokens");
    if (n == n_past_) return;
    if (!can_truncate())
        fail("this model has recurrent layers: their state after a token cannot be taken back, so the sequence "
             "cannot be cut from ", n_past_, " to ", n, " tokens");
    n_past_ = n;
}

void Session::forward(const int32_t* tokens, int n, bool all_logits) {
    pos_.resize(n);
    for (int i = 0; i < n; ++i) pos_[i] = n_past_ + i;
    StepInputs in;
    in.tokens = tokens;
    in.pos = pos_.data();
    in.n_tokens = n;
    in.all_logits = all_logits;
    if (forced_) {
        const int L = model_.profile().n_layer;
        in.forced_experts.resize(L);
        for (int il = 0; il < L; ++il) in.forced_experts[il] = forced_(il, n_past_, n);
    }
    const float* logits = runner_->forward(in);
    const size_t count = static_cast<size_t>(runner_->n_outputs()) * model_.profile().n_vocab;
    logits_.insert(logits_.end(), logits, logits + count);  // no zero-filling pass before the copy
    n_past_ += n;
}

const std::vector<float>& Session::decode(const std::vector<int32_t>& tokens, bool all_logits) {
    if (tokens.empty()) fail("decode: no tokens");
    if (n_past_ + static_cast<int>(tokens.size()) > n_ctx_)
        fail("the sequence would reach ", n_past_ + tokens.size(), " tokens, past the context size of ", n_ctx_,
             " (use -c to raise it)");
    if (!runner_->pages().reserve(0, n_past_ + static_cast<int>(tokens.size())))
        fail("the KV cache cannot hold ", n_past_ + tokens.size(), " tokens");
    logits_.clear();
    if (all_logits) {
        forward(tokens.data(), static_cast<int>(tokens.size()), true);
    } else {
        // Long prompts go in chunks of n_batch; only the last chunk's last logits are kept.
        const int n = static_cast<int>(tokens.size());
        for (int i = 0; i < n; i += n_batch_) {
            logits_.clear();
            forward(tokens.data() + i, std::min(n_batch_, n - i), false);
        }
    }
    return logits_;
}

}  // namespace glia
