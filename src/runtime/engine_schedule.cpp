// The engine's loop: admission of waiting requests, KV pages grown or freed, preemption
// of the youngest when pages run out, and the statistics published after each step.
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

// Moves waiting requests into free slots, oldest first, while the pages their prompt
// needs now are there, with a page to spare for the running sequences' growth when any
// run. A sequence then grows page by page as it decodes (grow()). A preempted one is at
// the front of the queue and recomputes its prompt and the tokens it had generated, from
// the prefix cache where its pages are still cached.
void Engine::Impl::admit() {
    PageTable& pages = runner->pages();
    while (!waiting.empty() && !free_slots.empty()) {
        Sequence& s = *waiting.front();
        const int slot = free_slots.back();
        runner->reset_slot(slot);
        if (drafter) drafter->release(slot);
        // The longest cached prefix, leaving at least the last token to compute (its
        // logits give the next token, and a shared page is never written).
        const int n_prompt = static_cast<int>(s.req.prompt.size());
        const bool cache = opt.prefix_cache && s.req.prefix_cache && s.req.embed == Pooling::NONE;
        const int shared =
            cache ? pages.share_prefix(slot, s.history.data(), s.n_target - 1, recurrent, s.cache_ns) : 0;
        const int spare = running.empty() ? 0 : pages.block_size();
        if (!pages.can_reserve(slot, s.n_target + spare) || !pages.reserve(slot, s.n_target)) {
            pages.release(slot);  // wait for pages to free up
            break;
        }
        if (shared > 0 && recurrent) runner->load_slot_state(slot, *pages.checkpoint_before(slot, shared));
        free_slots.pop_back();
        s.slot = slot;
        s.n_prompt_done = s.n_written = shared;
        if (cache && !s.preempted) {
            s.n_reused = shared;
            ++st.prefix_lookups;
            st.prefix_hits += shared > 0;
            st.prefix_tokens_total += n_prompt;
            st.prefix_tokens_reused += shared;
        }
        s.preempted = false;
        running.push_back(std::move(waiting.front()));
        waiting.pop_front();
    }
}

// Gives every running sequence the pages its next step writes, oldest first. When too
// few are left, the youngest running sequence (admitted last) is preempted until the
// older ones fit: the sequence that needs the page may be the one preempted. One that
// does not fit alone ends as when its context is full (submit() refuses requests whose
// prompt and max_tokens exceed the cache, so this is a safeguard, never a deadlock).
void Engine::Impl::grow() {
    PageTable& pages = runner->pages();
    for (size_t i = 0; i < running.size();) {
        Sequence& s = *running[i];
        const int need = s.n_prompt_done < s.n_target ? s.n_target : static_cast<int>(s.history.size());
        bool self = false;  // s itself was the youngest, and is preempted
        while (!self && !pages.can_reserve(s.slot, need) && running.size() > 1) {
            self = running.back().get() == &s;
            preempt_youngest();
        }
        if (self) break;
        if (!pages.reserve(s.slot, need)) {
            finish(s, FinishReason::LENGTH);
            ++st.requests_finished;
            release(s);
            running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
            continue;
        }
        ++i;
    }
    draft();
}

// Preemption by recompute: the youngest running sequence gives back its slot and pages
// (published pages stay in the prefix cache) and waits at the front of the queue; its
// sampler (and RNG), grammar state, event stream and counts stay as they are, and on
// resuming it computes its prompt and generated tokens again (by the same kernels, in
// prompt-sized steps), so its client only sees a pause.
void Engine::Impl::preempt_youngest() {
    std::unique_ptr<Sequence> up = std::move(running.back());
    running.pop_back();
    Sequence& v = *up;
    release(v);
    v.n_target = static_cast<int>(v.history.size());  // the prompt, and what it generated
    v.n_prompt_done = v.n_written = 0;
    v.pooled.clear();  // embeddings start over
    v.drafts.clear();
    v.draft_q.clear();
    v.spec_k = 0;
    v.preempted = true;
    ++st.preemptions;
    waiting.push_front(std::move(up));
}

void Engine::Impl::release(Sequence& s) {
    runner->pages().release(s.slot);
    if (drafter) drafter->release(s.slot);
    s.draft_cached.clear();  // drafts from scratch when it runs again
    free_slots.push_back(s.slot);
    s.slot = -1;
}

void Engine::Impl::loop() {
    using Clock = std::chrono::steady_clock;
    auto window_start = Clock::now();
    uint64_t window_tokens = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(mu);
            cv.wait(lk, [&] { return stop || !running.empty() || (!waiting.empty() && !free_slots.empty()); });
            if (stop) return;
            for (const auto& [id, stopped] : cancel_ids) {
                // A stop may arrive after the request's callback already declined a
                // token (its stream was closed on the stop string): still a stop.
                for (auto& s : running)
                    if (s->id == id) {
                        s->cancelled = true;
                        s->stopped = s->stopped || stopped;
                    }
                for (auto it = waiting.begin(); it != waiting.end(); ++it)
                    if ((*it)->id == id) {
                        finish(**it, stopped ? FinishReason::STOP : FinishReason::CANCELLED);
                        ++(stopped ? st.requests_finished : st.requests_cancelled);
                        waiting.erase(it);
                        break;
                    }
            }
            cancel_ids.clear();
            for (auto it = running.begin(); it != running.end();) {
                if ((*it)->cancelled) {
                    release(**it);
                    finish(**it, (*it)->stopped ? FinishReason::STOP : FinishReason::CANCELLED);
                    ++((*it)->stopped ? st.requests_finished : st.requests_cancelled);
                    st.requests_overrun += (*it)->overrun && !(*it)->stopped;
                    it = running.erase(it);
                } else {
                    ++it;
                }
            }
            grow();
            admit();
            st.running = static_cast<int>(running.size());
            st.waiting = static_cast<int>(waiting.size());
            update_block_stats();
            if (running.empty()) continue;
        }
        if (opt.before_step) opt.before_step();
        step(window_tokens);
        const double el = std::chrono::duration<double>(Clock::now() - window_start).count();
        if (el > 2.0) {
            std::lock_guard<std::mutex> lk(mu);
            st.decode_tokens_per_second = window_tokens / el;
            window_start = Clock::now();
            window_tokens = 0;
        }
    }
}

void Engine::Impl::update_block_stats() {
    const PageTable& pages = runner->pages();
    st.kv_blocks_used = pages.pages_used();
    st.kv_blocks_cached = pages.pages_cached();
    st.draft_kv_blocks_used = drafter ? drafter->pages_used() : 0;
    st.prefix_evictions = pages.evictions();
}

// For models with recurrent state a prompt chunk ends on a page boundary where it can
// (a checkpoint is only possible there): before the prompt's last whole page, and at
// whole pages when the chunk is cut short anyway.
int Engine::Impl::chunk_to_boundary(int done, int n, int n_prompt) const {
    const int bs = runner->pages().block_size();
    const int end = done + n;
    const int last_full = n_prompt / bs * bs;
    if (end == n_prompt) return last_full > done && last_full < end ? last_full - done : n;
    const int aligned = end / bs * bs;
    return aligned > done ? aligned - done : n;
}

// After a step: every sequence's newly written whole pages become findable by their
// prefix (with the recurrent state at the page boundary when the step ended there).
void Engine::Impl::publish() {
    if (!opt.prefix_cache) return;
    PageTable& pages = runner->pages();
    const int bs = pages.block_size();
    for (auto& up : running) {
        Sequence& s = *up;
        s.n_written = s.n_prompt_done < s.n_target ? s.n_prompt_done : static_cast<int>(s.history.size());
        if (!s.req.prefix_cache || s.req.embed != Pooling::NONE) continue;
        const bool boundary = s.n_written % bs == 0 && s.n_written > 0;
        if (recurrent && boundary) runner->save_slot_state(s.slot, state_buf);
        pages.publish(s.slot, s.history.data(), s.n_written, recurrent && boundary ? &state_buf : nullptr,
                      s.cache_ns);
    }
}

std::optional<uint32_t> Engine::Impl::cache_namespace(const std::vector<float>& scales) {
    std::vector<uint32_t> bits(scales.size());
    bool zero = true;
    for (size_t i = 0; i < scales.size(); ++i) {
        std::memcpy(&bits[i], &scales[i], 4);
        zero = zero && bits[i] == 0;
    }
    if (zero) return 0;
    if (auto it = namespaces.find(bits); it != namespaces.end()) return it->second;
    if (namespaces.size() >= kMaxNamespaces) return std::nullopt;
    const uint32_t ns = static_cast<uint32_t>(namespaces.size()) + 1;
    namespaces.emplace(std::move(bits), ns);
    return ns;
}

}  // namespace glia
