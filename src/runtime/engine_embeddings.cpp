// Embedding requests in the engine: prompts run to their pooled vectors, no sampling.
#include "runtime/engine_impl.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <string>

#include "core/error.h"
#include "gguf/gguf.h"
#include "grammar/token_mask.h"
#include "model/model.h"
#include "runtime/engine_draft.h"
#include "runtime/ngram_draft.h"
#include "runtime/runner.h"
#include "runtime/spec_accept.h"
#include "tokenizer/vocab.h"

namespace glia {

// One forward pass over the embedding requests' next prompt chunks (their own step: it
// outputs hidden states, not logits); finished ones get their vector. False when the
// pass failed (every request has been ended).
bool Engine::Impl::step_embeddings() {
    std::vector<int32_t> tokens, pos, seq, out_ids;
    std::vector<std::pair<Sequence*, int>> rows;  // (sequence, first output row of its chunk)
    for (auto& up : running) {
        Sequence& s = *up;
        if (s.req.embed == Pooling::NONE || s.cancelled) continue;
        const int n_prompt = static_cast<int>(s.req.prompt.size());
        const int n = std::min(opt.prefill_chunk, n_prompt - s.n_prompt_done);
        rows.emplace_back(&s, static_cast<int>(out_ids.size()));
        for (int i = 0; i < n; ++i) {
            tokens.push_back(s.req.prompt[s.n_prompt_done + i]);
            pos.push_back(s.n_prompt_done + i);
            seq.push_back(s.slot);
            // Mean pooling reads every row; last-token pooling the prompt's last one.
            if (s.req.embed == Pooling::MEAN || s.n_prompt_done + i == n_prompt - 1)
                out_ids.push_back(static_cast<int32_t>(tokens.size()) - 1);
        }
        s.n_prompt_done += n;
    }
    if (tokens.empty()) return true;
    const bool any_out = !out_ids.empty();
    if (!any_out) out_ids.push_back(static_cast<int32_t>(tokens.size()) - 1);
    StepInputs in = StepInputs::of(tokens, pos, seq, out_ids);
    in.lora_scales = lora_rows(seq);
    in.hidden = true;
    const float* h = nullptr;
    try {
        h = runner->forward(in);
    } catch (const std::exception& e) {
        fail_running(e.what());
        return false;
    }
    const int D = runner->n_embd();
    std::lock_guard<std::mutex> lk(mu);
    for (size_t k = 0; k < rows.size(); ++k) {
        Sequence& s = *rows[k].first;
        const int r0 = rows[k].second;
        const int r1 = k + 1 < rows.size() ? rows[k + 1].second : (any_out ? in.n_out : 0);
        s.pooled.resize(D, 0.0);
        for (int r = r0; r < r1; ++r)
            for (int d = 0; d < D; ++d) {
                const double x = h[static_cast<size_t>(r) * D + d];
                s.pooled[d] = s.req.embed == Pooling::MEAN ? s.pooled[d] + x : x;
            }
        const int n_prompt = static_cast<int>(s.req.prompt.size());
        if (s.n_prompt_done < n_prompt) continue;
        TokenEvent ev;
        ev.request_id = s.id;
        ev.done = true;
        ev.finish = FinishReason::STOP;
        ev.n_prompt = n_prompt;
        double norm = 0;
        for (double& x : s.pooled) {
            if (s.req.embed == Pooling::MEAN) x /= n_prompt;
            norm += x * x;
        }
        norm = std::sqrt(norm);
        ev.embedding.resize(D);
        for (int d = 0; d < D; ++d) ev.embedding[d] = static_cast<float>(norm > 0 ? s.pooled[d] / norm : 0.0);
        deliver(s, std::move(ev));
        ++st.requests_finished;
        s.cancelled = true;
        s.n_generated = -1;  // finished normally: removed below
    }
    for (auto it = running.begin(); it != running.end();) {
        if ((*it)->req.embed != Pooling::NONE && (*it)->cancelled && (*it)->n_generated == -1) {
            release(**it);
            it = running.erase(it);
        } else {
            ++it;
        }
    }
    // Counted here, under the lock the final events went out under: a consumer that
    // has its vector and asks for the stats finds it gone (the loop only recounts when
    // there is more work).
    st.running = static_cast<int>(running.size());
    update_block_stats();
    return true;
}

}  // namespace glia
