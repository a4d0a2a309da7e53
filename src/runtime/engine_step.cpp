// One engine step over the running sequences: their tokens in one batch, sampling under
// grammars and LoRA scales, and the events each new token makes.
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

// One forward pass over every running sequence: a prompt chunk for those still
// reading their prompt, the last sampled token for the others.
void Engine::Impl::step(uint64_t& window_tokens) {
    if (!step_embeddings()) return;
    if (drafter && !draft_by_model()) return;
    std::vector<int32_t> tokens, pos, seq, out_ids;
    std::vector<Sequence*> out_seq;
    std::vector<int> out_row;  // each of out_seq's first output row (a speculating one has 1 + drafts)
    for (auto& up : running) {
        Sequence& s = *up;
        if (s.req.embed != Pooling::NONE) continue;
        if (s.n_prompt_done < s.n_target) {
            int n = std::min(opt.prefill_chunk, s.n_target - s.n_prompt_done);
            if (recurrent && opt.prefix_cache) n = chunk_to_boundary(s.n_prompt_done, n, s.n_target);
            for (int i = 0; i < n; ++i) {
                tokens.push_back(s.history[s.n_prompt_done + i]);
                pos.push_back(s.n_prompt_done + i);
                seq.push_back(s.slot);
            }
            s.n_prompt_done += n;
            if (s.n_prompt_done == s.n_target) {
                out_row.push_back(static_cast<int>(out_ids.size()));
                out_ids.push_back(static_cast<int32_t>(tokens.size()) - 1);
                out_seq.push_back(&s);
            }
        } else {
            // The last sampled token and the drafted ones after it, each with its logits.
            out_row.push_back(static_cast<int>(out_ids.size()));
            out_seq.push_back(&s);
            for (size_t j = 0; j <= s.drafts.size(); ++j) {
                tokens.push_back(j == 0 ? s.next : s.drafts[j - 1]);
                pos.push_back(static_cast<int32_t>(s.history.size() - 1 + j));
                seq.push_back(s.slot);
                out_ids.push_back(static_cast<int32_t>(tokens.size()) - 1);
            }
        }
    }
    if (tokens.empty()) return;  // only embedding requests are running
    // A step of prompt chunks only still runs (it fills the cache); one row of logits
    // is computed and ignored, which keeps the graph shapes non-empty.
    const bool any_out = !out_ids.empty();
    if (!any_out) out_ids.push_back(static_cast<int32_t>(tokens.size()) - 1);
    StepInputs in = StepInputs::of(tokens, pos, seq, out_ids);
    in.lora_scales = lora_rows(seq);
    // Only ids are needed when every output is a plain greedy pick.
    bool ids_only = opt.greedy_ids;
    for (const Sequence* s : out_seq)
        ids_only = ids_only && s->sampler->plain_greedy() && !s->matcher && s->req.logit_bias.empty() &&
                   !s->req.logprobs && s->req.top_logprobs == 0;
    // The logits (or ids) stay in the runner's memory until the next step: read them in place.
    const float* logits = nullptr;
    const int32_t* picked = nullptr;
    try {
        if (ids_only) picked = runner->forward_ids(in);
        else logits = runner->forward(in);
        if (!any_out) logits = nullptr, picked = nullptr;
    } catch (const std::exception& e) {
        fail_running(e.what());
        return;
    }
    const int V = model.profile().n_vocab;
    std::lock_guard<std::mutex> lk(mu);
    publish();
    for (size_t i = 0; i < out_seq.size(); ++i) {
        Sequence& s = *out_seq[i];
        const size_t row = static_cast<size_t>(out_row[i]);
        if (s.cancelled) continue;
        if (!s.drafts.empty()) {
            verify(s, picked ? picked + row : nullptr, logits ? logits + row * V : nullptr, V, window_tokens);
            continue;
        }
        if (picked) {
            emit(s, picked[row], nullptr, V, window_tokens);
            continue;
        }
        const float* l = &logits[row * V];
        const float* pick = l;
        if (s.matcher) {
            std::string why;
            pick = constrain(s, l, V, why);
            if (!pick) {
                if (why.empty()) end_by_grammar(s);
                else fail_by_grammar(s, why);
                continue;
            }
        }
        if (!s.req.logit_bias.empty()) {
            if (pick == l) {
                masked.assign(l, l + V);
                pick = masked.data();
            }
            for (const auto& [id, b] : s.req.logit_bias) masked[id] += b;
        }
        const int32_t tok = s.sampler->sample(pick, V, s.history);
        if (s.matcher && !model.vocab().is_eog(tok) && !s.matcher->feed(index->bytes(tok))) {
            fail_by_grammar(s, "the sampled token " + std::to_string(tok) + " does not continue the grammar");
            continue;
        }
        emit(s, tok, l, V, window_tokens);
    }
    for (auto it = running.begin(); it != running.end();) {
        Sequence& s = **it;
        if (s.cancelled && s.n_generated == -1) {
            release(s);
            it = running.erase(it);
        } else {
            ++it;
        }
    }
    update_block_stats();
    st.running = static_cast<int>(running.size());
}

// Delivers sequence s's new token `tok` (logits l, when the step brought them back, for
// logprobs) and ends the sequence at end-of-generation or its token limit. Under mu.
void Engine::Impl::emit(Sequence& s, int32_t tok, const float* l, int V, uint64_t& window_tokens) {
    TokenEvent ev;
    ev.request_id = s.id;
    ev.token = tok;
    ev.n_prompt = static_cast<int>(s.req.prompt.size());
    ev.n_cached = s.n_reused;
    if (l && (s.req.logprobs || s.req.top_logprobs > 0)) fill_logprobs(l, V, tok, s.req.top_logprobs, ev);
    s.history.push_back(tok);
    s.next = tok;
    ++s.n_generated;
    ++st.generated_tokens_total;
    ++window_tokens;
    ev.n_generated = s.n_generated;
    const bool eog = model.vocab().is_eog(tok) && !s.req.ignore_eos;
    if (eog) {
        ev.token = -1;  // end-of-generation tokens are not part of the text
        ev.done = true;
        ev.finish = FinishReason::STOP;
    } else if (s.n_generated >= s.req.max_tokens) {
        ev.done = true;
        ev.finish = FinishReason::LENGTH;
    }
    const bool done = ev.done;
    if (!deliver(s, std::move(ev)) && !done) s.cancelled = true;
    if (done) {
        ++st.requests_finished;
        s.cancelled = true;  // removed by the step
        s.n_generated = -1;  // marker: finished normally
    }
}

// The logits with every token the grammar refuses at -inf (in `masked`); nullptr when
// the value is whole (why empty: the request ends normally) or nothing can follow
// (why says so).
const float* Engine::Impl::constrain(Sequence& s, const float* l, int V, std::string& why) {
    if (s.matcher->complete()) return nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    index->mask(*s.matcher, mask);
    st.grammar_mask_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++st.grammar_masks;
    masked.resize(V);
    int allowed = 0;
    for (int i = 0; i < V; ++i) {
        const bool ok = i < index->n_vocab() && mask.test(i);
        masked[i] = ok ? l[i] : -INFINITY;
        allowed += ok;
    }
    if (allowed == 0) {
        // A whole value with no end-of-generation token in the vocabulary ends here.
        if (s.matcher->accepting()) return nullptr;
        why = "the grammar allows no token of this vocabulary here";
        return nullptr;
    }
    return masked.data();
}

void Engine::Impl::end_by_grammar(Sequence& s) {
    TokenEvent ev;
    ev.request_id = s.id;
    ev.done = true;
    ev.finish = FinishReason::STOP;
    ev.n_prompt = static_cast<int>(s.req.prompt.size());
    ev.n_generated = s.n_generated;
    ev.n_cached = s.n_reused;
    deliver(s, std::move(ev));
    ++st.requests_finished;
    s.cancelled = true;
    s.n_generated = -1;  // finished normally: removed after the step
}

void Engine::Impl::fail_by_grammar(Sequence& s, const std::string& why) {
    finish(s, FinishReason::ERROR, "structured output: " + why);
    ++st.requests_finished;
    s.cancelled = true;
    s.n_generated = -1;
}

const float* Engine::Impl::lora_rows(const std::vector<int32_t>& seq) {
    const size_t n_ad = opt.lora.size();
    if (n_ad == 0) return nullptr;
    std::vector<const Sequence*> by_slot(static_cast<size_t>(opt.n_parallel), nullptr);
    for (const auto& up : running)
        if (up->slot >= 0) by_slot[static_cast<size_t>(up->slot)] = up.get();
    lora_buf.assign(seq.size() * n_ad, 0.0f);
    for (size_t t = 0; t < seq.size(); ++t)
        if (const Sequence* s = by_slot[static_cast<size_t>(seq[t])])
            std::copy(s->req.lora_scales.begin(), s->req.lora_scales.end(), lora_buf.begin() + t * n_ad);
    return lora_buf.data();
}

void Engine::Impl::fill_logprobs(const float* l, int V, int32_t tok, int top, TokenEvent& ev) {
    const float mx = *std::max_element(l, l + V);
    double sum = 0;
    for (int i = 0; i < V; ++i) sum += std::exp(double(l[i]) - mx);
    const double lse = mx + std::log(sum);
    ev.logprob = static_cast<float>(l[tok] - lse);
    if (top <= 0) return;
    top = std::min(top, V);
    std::vector<int32_t> ids(V);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + top, ids.end(),
                      [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    for (int i = 0; i < top; ++i) ev.top.emplace_back(ids[i], static_cast<float>(l[ids[i]] - lse));
}

}  // namespace glia
