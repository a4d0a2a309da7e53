#include "runtime/session.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "dispatch/executor.h"

namespace glia {

Session::Session(const Model& model, const SessionOptions& opt) : model_(model) {
    const ModelProfile& p = model.profile();
    n_ctx_ = opt.n_ctx > 0 ? opt.n_ctx : (p.n_ctx_train > 0 ? p.n_ctx_train : 4096);
    n_batch_ = std::max(1, opt.n_batch);
    std::vector<int> dk(p.n_layer), dv(p.n_layer);
    for (int il = 0; il < p.n_layer; ++il) {
        dk[il] = p.n_head_kv[il] * p.head_dim_k;
        dv[il] = p.n_head_kv[il] * p.head_dim_v;
    }
    cache_ = std::make_unique<KVCache>(dk, dv, n_ctx_, /*block_size=*/256, /*n_seq=*/1);
    std::vector<int> rs(p.n_layer, 0);
    bool any_state = false;
    for (int il = 0; il < p.n_layer; ++il)
        if (p.layer_kind[il] == LayerKind::RECURRENT && p.shortconv_l_cache > 1) {
            rs[il] = (p.shortconv_l_cache - 1) * p.n_embd;
            any_state = true;
        }
    if (any_state) state_ = std::make_unique<RecurrentState>(rs);
    cpu_ = std::make_unique<cpu::CpuBackend>(opt.n_threads);
    exec_ = std::make_unique<Executor>(*cpu_);
}

Session::~Session() = default;

void Session::reset() {
    n_past_ = 0;
    cache_->release(0);
    if (state_) state_->clear();
}

void Session::forward(const int32_t* tokens, int n, bool all_logits) {
    Graph g;
    ForwardInputs in;
    in.tokens = g.new_tensor(DType::I32, n, 1, 1, 1, "inp_tokens");
    in.pos = g.new_tensor(DType::I32, n, 1, 1, 1, "inp_pos");
    std::memcpy(in.tokens->data, tokens, sizeof(int32_t) * n);
    for (int i = 0; i < n; ++i) in.pos->ptr<int32_t>()[i] = n_past_ + i;
    in.cache = cache_.get();
    in.all_logits = all_logits;
    in.state = state_.get();
    if (forced_) {
        const int pos0 = n_past_;
        in.forced_experts = [this, pos0, n](int il) { return forced_(il, pos0, n); };
    }
    Tensor* logits = model_.forward(g, in);
    exec_->run(g);
    const size_t count = static_cast<size_t>(logits->n_elements());
    const size_t old = logits_.size();
    logits_.resize(old + count);
    std::memcpy(logits_.data() + old, logits->data, count * sizeof(float));
    n_past_ += n;
}

const std::vector<float>& Session::decode(const std::vector<int32_t>& tokens, bool all_logits) {
    if (tokens.empty()) fail("decode: no tokens");
    if (n_past_ + static_cast<int>(tokens.size()) > n_ctx_)
        fail("the sequence would reach ", n_past_ + tokens.size(), " tokens, past the context size of ", n_ctx_,
             " (use -c to raise it)");
    const int n_vocab = model_.profile().n_vocab;
    for (int32_t t : tokens)
        if (t < 0 || t >= n_vocab) fail("token id ", t, " is outside the vocabulary (", n_vocab, " tokens)");
    if (!cache_->reserve(0, n_past_ + static_cast<int>(tokens.size())))
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
