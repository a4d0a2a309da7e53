#include "runtime/engine.h"

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

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::STOP: return "stop";
        case FinishReason::LENGTH: return "length";
        case FinishReason::CANCELLED: return "cancelled";
        case FinishReason::ERROR: return "error";
        case FinishReason::NONE: break;
    }
    return "none";
}

namespace {

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

}  // namespace

EventStream::Push EventStream::push(TokenEvent ev, size_t capacity) {
    {
        std::lock_guard<std::mutex> lk(m_);
        if (!ev.done) {
            if (closed_) return Push::CLOSED;
            if (q_.size() >= capacity) return Push::FULL;
        }
        q_.push_back(std::move(ev));
    }
    cv_.notify_one();
    return Push::OK;
}

std::deque<TokenEvent> EventStream::wait(Clock::time_point until) {
    std::unique_lock<std::mutex> lk(m_);
    cv_.wait_until(lk, until, [&] { return !q_.empty(); });
    std::deque<TokenEvent> out;
    out.swap(q_);
    return out;
}

std::deque<TokenEvent> EventStream::wait() {
    std::unique_lock<std::mutex> lk(m_);
    cv_.wait(lk, [&] { return !q_.empty(); });
    std::deque<TokenEvent> out;
    out.swap(q_);
    return out;
}

void EventStream::close() {
    std::lock_guard<std::mutex> lk(m_);
    closed_ = true;
}

bool EventStream::closed() const {
    std::lock_guard<std::mutex> lk(m_);
    return closed_;
}

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

    Impl(const Model& m, const EngineOptions& o) : model(m), opt(o) {
        if (const char* e = std::getenv("GLIA_GREEDY_IDS"); e && *e == '0') opt.greedy_ids = false;
        RunnerOptions ro;
        ro.n_ctx = opt.n_ctx;
        ro.n_slots = opt.n_parallel;
        ro.block_size = opt.block_size;
        ro.n_threads = opt.n_threads;
        ro.placement = opt.placement;
        ro.devices = opt.devices;
        ro.cpu_ops = opt.cpu_ops;
        ro.tp = opt.tp;
        ro.lora = opt.lora;
        runner = std::make_unique<Runner>(m, ro);
        for (int s = opt.n_parallel - 1; s >= 0; --s) free_slots.push_back(s);
        st.kv_blocks_total = runner->pages().n_pages();
        recurrent = runner->slot_state_bytes() > 0;
        if (opt.spec_draft && opt.spec_draft_max <= 0)
            fail("speculative decoding with a draft model needs --draft-max of at least 1, not ", opt.spec_draft_max);
        if (opt.spec_draft_max > 0 && recurrent)
            fail("speculative decoding needs to drop the drafted tokens a sequence rejects, but ", m.file().path(), " (",
                 m.profile().arch, ") has recurrent layers whose state cannot be rolled back; serve it without ",
                 opt.spec_draft ? "--model-draft" : "--spec-ngram");
        if (opt.spec_draft) {
            EngineDraftOptions dopt;
            dopt.n_ctx = runner->pages().n_cells();
            dopt.n_slots = opt.n_parallel;
            dopt.block_size = opt.block_size;
            dopt.n_threads = opt.n_threads;
            dopt.chunk = opt.prefill_chunk;
            dopt.p_min = opt.spec_draft_p_min;
            drafter = std::make_unique<EngineDrafter>(m, *opt.spec_draft, dopt);
        }
        thread = std::thread([this] { loop(); });
    }

    ~Impl() {
        {
            std::lock_guard<std::mutex> lk(mu);
            stop = true;
        }
        cv.notify_all();
        thread.join();
        for (auto& s : running) finish(*s, FinishReason::CANCELLED);
        for (auto& s : waiting) finish(*s, FinishReason::CANCELLED);
        std::lock_guard<std::mutex> lk(deliver_mu);
        for (auto& d : deliverers) d.thread.join();
    }

    // Hands an event to the request's consumer. False when the request must end: its
    // consumer is gone, or has left max_pending_events untaken (overrun: cancelled).
    bool deliver(Sequence& s, TokenEvent ev) {
        switch (s.out->push(std::move(ev), static_cast<size_t>(opt.max_pending_events))) {
            case EventStream::Push::OK: return true;
            case EventStream::Push::FULL: s.overrun = true; return false;
            case EventStream::Push::CLOSED: return false;
        }
        return false;
    }

    void finish(Sequence& s, FinishReason r, const std::string& err = "") {
        TokenEvent ev;
        ev.request_id = s.id;
        ev.done = true;
        ev.finish = r;
        ev.error = err;
        if (r == FinishReason::CANCELLED && s.overrun && err.empty())
            ev.error = cat("the consumer fell more than ", opt.max_pending_events,
                           " events behind and the request was cancelled");
        ev.n_prompt = static_cast<int>(s.req.prompt.size());
        ev.n_generated = s.n_generated;
        ev.n_cached = s.n_reused;
        deliver(s, std::move(ev));
    }

    // Runs a callback request's deliveries on a thread of its own until its final event.
    void start_deliverer(uint64_t id, std::shared_ptr<EventStream> out, TokenCallback cb) {
        auto done = std::make_shared<std::atomic<bool>>(false);
        std::lock_guard<std::mutex> lk(deliver_mu);
        for (auto it = deliverers.begin(); it != deliverers.end();) {  // reap the finished ones
            if (it->done->load()) {
                it->thread.join();
                it = deliverers.erase(it);
            } else {
                ++it;
            }
        }
        deliverers.push_back(Deliverer{std::thread([this, id, out, cb = std::move(cb), done] {
                                           bool declined = false;
                                           for (bool more = true; more;) {
                                               for (const TokenEvent& ev : out->wait()) {
                                                   if (ev.done) {
                                                       cb(ev);
                                                       more = false;
                                                       break;
                                                   }
                                                   if (declined) continue;
                                                   if (!cb(ev)) {
                                                       declined = true;
                                                       out->close();
                                                       cancel(id, false);
                                                   }
                                               }
                                           }
                                           done->store(true);
                                       }),
                                       done});
    }

    // A waiting request ends at once (its final event is queued: no consumer code runs
    // here), so it stops counting against the queue; a running one at the next step.
    void cancel(uint64_t id, bool stopped) {
        std::lock_guard<std::mutex> lk(mu);
        for (auto it = waiting.begin(); it != waiting.end(); ++it)
            if ((*it)->id == id) {
                finish(**it, stopped ? FinishReason::STOP : FinishReason::CANCELLED);
                ++(stopped ? st.requests_finished : st.requests_cancelled);
                waiting.erase(it);
                st.waiting = static_cast<int>(waiting.size());
                return;
            }
        cancel_ids.emplace_back(id, stopped);
        cv.notify_all();
    }

    // Moves waiting requests into free slots, oldest first, while the pages their prompt
    // needs now are there, with a page to spare for the running sequences' growth when any
    // run. A sequence then grows page by page as it decodes (grow()). A preempted one is at
    // the front of the queue and recomputes its prompt and the tokens it had generated, from
    // the prefix cache where its pages are still cached.
    void admit() {
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
    void grow() {
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

    // Prompt lookup for the decoding sequences that can speculate, once every running
    // sequence has the pages of its next token: a draft is kept only where its pages are
    // free as well (it never preempts anyone). With a draft model this only says how many
    // tokens each may draft (spec_k): the draft model runs outside the lock (draft_by_model()).
    void draft() {
        PageTable& pages = runner->pages();
        for (auto& up : running) {
            Sequence& s = *up;
            s.drafts.clear();
            s.draft_q.clear();
            s.spec_k = 0;
            if (opt.spec_draft_max <= 0 || s.n_prompt_done < s.n_target || s.next < 0 || s.matcher ||
                !s.req.logit_bias.empty() || s.req.logprobs || s.req.top_logprobs > 0 || s.req.embed != Pooling::NONE)
                continue;
            const int room = pages.n_cells() - static_cast<int>(s.history.size());
            const int k = std::min({opt.spec_draft_max, s.req.max_tokens - s.n_generated - 1, room});
            if (k <= 0) continue;
            if (drafter) {
                s.spec_k = k;
                continue;
            }
            if (!s.ngram) s.ngram = std::make_unique<NgramDraft>(opt.spec_ngram_min, opt.spec_ngram_max);
            s.drafts = s.ngram->draft(s.history, k);
            if (static_cast<int>(s.drafts.size()) < opt.spec_draft_min) s.drafts.clear();
            const int need = static_cast<int>(s.history.size() + s.drafts.size());
            if (!s.drafts.empty() && (!pages.can_reserve(s.slot, need) || !pages.reserve(s.slot, need))) s.drafts.clear();
        }
    }

    // Preemption by recompute: the youngest running sequence gives back its slot and pages
    // (published pages stay in the prefix cache) and waits at the front of the queue; its
    // sampler (and RNG), grammar state, event stream and counts stay as they are, and on
    // resuming it computes its prompt and generated tokens again (by the same kernels, in
    // prompt-sized steps), so its client only sees a pause.
    void preempt_youngest() {
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

    void release(Sequence& s) {
        runner->pages().release(s.slot);
        if (drafter) drafter->release(s.slot);
        s.draft_cached.clear();  // drafts from scratch when it runs again
        free_slots.push_back(s.slot);
        s.slot = -1;
    }

    // The draft model's drafts for the sequences draft() chose, all of them batched
    // (runtime/engine_draft.h); each kept where it is long enough (spec_draft_min) and the
    // target's pages for it are free. Runs on the engine thread outside the lock (only
    // this thread touches running sequences' drafting state and the page tables). False
    // when the draft's forward pass failed (every request has been ended).
    bool draft_by_model() {
        std::vector<DraftJob> jobs;
        std::vector<Sequence*> seqs;
        for (auto& up : running) {
            Sequence& s = *up;
            if (s.spec_k <= 0 || s.cancelled) continue;
            DraftJob j;
            j.slot = s.slot;
            j.text = &s.history;
            j.k = s.spec_k;
            j.sampler = s.sampler.get();
            j.cached = &s.draft_cached;
            j.draft_sampler = &s.draft_sampler;
            j.drafts = &s.drafts;
            j.q = &s.draft_q;
            jobs.push_back(j);
            seqs.push_back(&s);
        }
        if (jobs.empty()) return true;
        try {
            drafter->draft(jobs);
        } catch (const std::exception& e) {
            std::lock_guard<std::mutex> lk(mu);
            for (auto& s : running) {
                release(*s);
                finish(*s, FinishReason::ERROR, std::string("draft model: ") + e.what());
            }
            running.clear();
            st.running = 0;
            return false;
        }
        PageTable& pages = runner->pages();
        for (Sequence* s : seqs) {
            s->spec_k = 0;
            const int need = static_cast<int>(s->history.size() + s->drafts.size());
            if (static_cast<int>(s->drafts.size()) < std::max(1, opt.spec_draft_min) || !pages.can_reserve(s->slot, need) ||
                !pages.reserve(s->slot, need)) {
                s->drafts.clear();
                s->draft_q.clear();
            }
        }
        return true;
    }

    void loop() {
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

    // One forward pass over every running sequence: a prompt chunk for those still
    // reading their prompt, the last sampled token for the others.
    void step(uint64_t& window_tokens) {
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
            std::lock_guard<std::mutex> lk(mu);
            for (auto& s : running) {
                release(*s);
                finish(*s, FinishReason::ERROR, e.what());
            }
            running.clear();
            st.running = 0;
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

    // A speculating sequence's rows: the target's pick after `next` and after each drafted
    // token (ids, or logits to sample from). Drafted tokens are kept while the pick agrees
    // (greedy; with sampling, by the acceptance rule of runtime/spec_accept.h), then one
    // token of the target's own; each is emitted as a one-token step would. The cells of
    // the drafts not kept are written over by the next step (attention reads only the
    // positions up to each query's own, and only whole pages below the emitted tokens are
    // published).
    void verify(Sequence& s, const int32_t* ids, const float* logits, int V, uint64_t& window_tokens) {
        const std::vector<int32_t> drafts = std::move(s.drafts);
        const std::vector<TokenDist> q_model = std::move(s.draft_q);  // the draft model's (sampled)
        s.drafts.clear();
        s.draft_q.clear();
        size_t kept = 0;
        for (size_t j = 0; j <= drafts.size(); ++j) {
            const float* l = logits ? logits + j * static_cast<size_t>(V) : nullptr;
            int32_t tok = ids ? ids[j] : -1;
            if (!ids && (j == drafts.size() || s.sampler->params().temperature <= 0)) {
                tok = s.sampler->sample(l, V, s.history);
            } else if (!ids) {
                s.sampler->distribution(l, V, s.history, spec_p.ids, spec_p.p);
                // Prompt lookup's draft is certain: q is 1 at the drafted token.
                TokenDist lookup;
                if (j >= q_model.size()) lookup.one_hot(drafts[j]);
                tok = spec_accept(spec_p, j < q_model.size() ? q_model[j] : lookup, drafts[j], s.sampler->rng()).token;
            }
            const bool agrees = j < drafts.size() && tok == drafts[j];
            kept += agrees;
            emit(s, tok, l, V, window_tokens);
            if (!agrees || s.cancelled) break;
        }
        st.spec_drafted += drafts.size();
        st.spec_accepted += kept;
    }

    // Delivers sequence s's new token `tok` (logits l, when the step brought them back, for
    // logprobs) and ends the sequence at end-of-generation or its token limit. Under mu.
    void emit(Sequence& s, int32_t tok, const float* l, int V, uint64_t& window_tokens) {
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

    void update_block_stats() {
        const PageTable& pages = runner->pages();
        st.kv_blocks_used = pages.pages_used();
        st.kv_blocks_cached = pages.pages_cached();
        st.draft_kv_blocks_used = drafter ? drafter->pages_used() : 0;
        st.prefix_evictions = pages.evictions();
    }

    // One forward pass over the embedding requests' next prompt chunks (their own step: it
    // outputs hidden states, not logits); finished ones get their vector. False when the
    // pass failed (every request has been ended).
    bool step_embeddings() {
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
            std::lock_guard<std::mutex> lk(mu);
            for (auto& s : running) {
                release(*s);
                finish(*s, FinishReason::ERROR, e.what());
            }
            running.clear();
            st.running = 0;
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

    // For models with recurrent state a prompt chunk ends on a page boundary where it can
    // (a checkpoint is only possible there): before the prompt's last whole page, and at
    // whole pages when the chunk is cut short anyway.
    int chunk_to_boundary(int done, int n, int n_prompt) const {
        const int bs = runner->pages().block_size();
        const int end = done + n;
        const int last_full = n_prompt / bs * bs;
        if (end == n_prompt) return last_full > done && last_full < end ? last_full - done : n;
        const int aligned = end / bs * bs;
        return aligned > done ? aligned - done : n;
    }

    // After a step: every sequence's newly written whole pages become findable by their
    // prefix (with the recurrent state at the page boundary when the step ended there).
    void publish() {
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

    // The logits with every token the grammar refuses at -inf (in `masked`); nullptr when
    // the value is whole (why empty: the request ends normally) or nothing can follow
    // (why says so).
    const float* constrain(Sequence& s, const float* l, int V, std::string& why) {
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

    void end_by_grammar(Sequence& s) {
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

    void fail_by_grammar(Sequence& s, const std::string& why) {
        finish(s, FinishReason::ERROR, "structured output: " + why);
        ++st.requests_finished;
        s.cancelled = true;
        s.n_generated = -1;
    }

    // LoRA: each token's scales, from the sequence its slot runs (StepInputs::lora_scales).
    std::vector<float> lora_buf;
    const float* lora_rows(const std::vector<int32_t>& seq) {
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

    // The prefix-cache namespace of a set of LoRA scales (their exact bits): 0 for every
    // scale +0 (or no adapter); requests computed with other scales share no pages. Past
    // kMaxNamespaces distinct sets, a new one gets none (its request skips the cache).
    static constexpr size_t kMaxNamespaces = 4096;
    std::map<std::vector<uint32_t>, uint32_t> namespaces;
    std::optional<uint32_t> cache_namespace(const std::vector<float>& scales) {
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

    static void fill_logprobs(const float* l, int V, int32_t tok, int top, TokenEvent& ev) {
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
};

Engine::Engine(const Model& model, const EngineOptions& opt) : model_(model), opt_(opt) {
    if (opt.n_parallel <= 0) fail("--parallel must be at least 1");
    if (opt.prefill_chunk <= 0) fail("prefill chunk must be at least 1");
    if (opt.max_pending_events <= 0) fail("max_pending_events must be at least 1");
    impl_ = std::make_unique<Impl>(model, opt);
}

Engine::~Engine() = default;

uint64_t Engine::submit(GenerationRequest req, std::shared_ptr<EventStream> out) {
    std::vector<std::pair<GenerationRequest, std::shared_ptr<EventStream>>> one;
    one.emplace_back(std::move(req), std::move(out));
    return submit_batch(std::move(one)).front();
}

uint64_t Engine::submit(GenerationRequest req, TokenCallback cb) {
    std::vector<std::pair<GenerationRequest, TokenCallback>> one;
    one.emplace_back(std::move(req), std::move(cb));
    return submit_batch(std::move(one)).front();
}

std::vector<uint64_t> Engine::submit_batch(std::vector<std::pair<GenerationRequest, TokenCallback>> reqs) {
    std::vector<std::pair<GenerationRequest, std::shared_ptr<EventStream>>> with_streams;
    std::vector<std::pair<std::shared_ptr<EventStream>, TokenCallback>> cbs;
    with_streams.reserve(reqs.size());
    for (auto& [req, cb] : reqs) {
        auto out = std::make_shared<EventStream>();
        with_streams.emplace_back(std::move(req), out);
        cbs.emplace_back(std::move(out), std::move(cb));
    }
    std::vector<uint64_t> ids = submit_batch(std::move(with_streams));
    for (size_t i = 0; i < ids.size(); ++i) impl_->start_deliverer(ids[i], std::move(cbs[i].first), std::move(cbs[i].second));
    return ids;
}

std::vector<uint64_t> Engine::submit_batch(std::vector<std::pair<GenerationRequest, std::shared_ptr<EventStream>>> reqs) {
    const int V = model_.profile().n_vocab;
    std::vector<std::unique_ptr<Sequence>> seqs;
    seqs.reserve(reqs.size());
    for (auto& [req, out] : reqs) {
        if (!out) fail("submit: no event stream");
        if (req.prompt.empty()) fail("the prompt is empty");
        for (int32_t t : req.prompt)
            if (t < 0 || t >= V) fail("token id ", t, " is outside the vocabulary (", V, " tokens)");
        if (req.embed == Pooling::NONE && req.max_tokens < 1) fail("max_tokens must be at least 1");
        for (const auto& [id, b] : req.logit_bias)
            if (id < 0 || id >= V) fail("logit_bias names token ", id, ", outside the vocabulary (", V, " tokens)");
        if (req.embed != Pooling::NONE) req.max_tokens = 0;
        if (req.lora_scales.empty())
            for (const LoraAdapter* ad : opt_.lora) req.lora_scales.push_back(ad->scale);
        if (req.lora_scales.size() != opt_.lora.size())
            fail("lora: ", req.lora_scales.size(), " scales given for ", opt_.lora.size(), " loaded adapter",
                 opt_.lora.size() == 1 ? "" : "s");
        for (float sc : req.lora_scales)
            if (!std::isfinite(sc)) fail("lora: scale ", sc, " is not a finite number");
        const int need = static_cast<int>(req.prompt.size()) + req.max_tokens;
        if (need > impl_->runner->pages().n_cells())
            fail("the prompt (", req.prompt.size(), " tokens) plus max_tokens (", req.max_tokens, ") needs ", need,
                 " tokens, more than the context of ", impl_->runner->pages().n_cells(), " tokens");
        auto s = std::make_unique<Sequence>();
        s->req = std::move(req);
        s->out = std::move(out);
        s->sampler = std::make_unique<Sampler>(s->req.sampling);
        if (s->req.grammar) {
            std::call_once(impl_->index_once,
                           [&] { impl_->index = std::make_unique<grammar::TokenIndex>(model_.vocab()); });
            s->matcher = std::make_unique<grammar::Matcher>(s->req.grammar);
        }
        s->history = s->req.prompt;
        s->n_target = static_cast<int>(s->history.size());
        seqs.push_back(std::move(s));
    }
    std::vector<uint64_t> ids;
    ids.reserve(seqs.size());
    std::lock_guard<std::mutex> lk(impl_->mu);
    // Requests that will start at the engine's next step (free slots, and slots that
    // pending cancellations are about to free) do not count as waiting: a client that
    // keeps within n_parallel + max_queue requests in flight is never refused because the
    // engine has not yet moved on from a request that just ended.
    // Preempted requests waiting to resume were accepted long ago: they do not count either.
    const size_t starting = impl_->free_slots.size() + impl_->cancel_ids.size();
    size_t queued = 0;
    for (const auto& w : impl_->waiting) queued += !w->preempted;
    if (queued + seqs.size() > static_cast<size_t>(opt_.max_queue) + starting) {
        impl_->st.requests_rejected += seqs.size();
        if (seqs.size() == 1)
            throw QueueFull(cat("the queue is full (", opt_.max_queue, " requests waiting); retry later"));
        throw QueueFull(cat("the queue cannot take ", seqs.size(), " more requests (", queued,
                            " waiting, at most ", opt_.max_queue, "); retry later"));
    }
    for (auto& s : seqs) {
        const std::optional<uint32_t> ns = impl_->cache_namespace(s->req.lora_scales);
        if (ns) s->cache_ns = *ns;
        else s->req.prefix_cache = false;
        s->id = impl_->next_id++;
        ids.push_back(s->id);
        ++impl_->st.requests_total;
        impl_->st.prompt_tokens_total += s->req.prompt.size();
        impl_->waiting.push_back(std::move(s));
    }
    impl_->st.waiting = static_cast<int>(impl_->waiting.size());
    impl_->cv.notify_all();
    return ids;
}

void Engine::cancel(uint64_t id) { impl_->cancel(id, false); }

void Engine::finish_early(uint64_t id) { impl_->cancel(id, true); }

EngineStats Engine::stats() const {
    std::lock_guard<std::mutex> lk(impl_->mu);
    return impl_->st;
}

}  // namespace glia
