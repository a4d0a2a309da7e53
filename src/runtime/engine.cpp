// The serving engine: construction, events handed to their consumers, cancellation, and
// the public Engine calls. The rest of Engine::Impl is in the files engine_impl.h lists.
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

Engine::Impl::Impl(const Model& m, const EngineOptions& o) : model(m), opt(o) {
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

Engine::Impl::~Impl() {
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
bool Engine::Impl::deliver(Sequence& s, TokenEvent ev) {
    switch (s.out->push(std::move(ev), static_cast<size_t>(opt.max_pending_events))) {
        case EventStream::Push::OK: return true;
        case EventStream::Push::FULL: s.overrun = true; return false;
        case EventStream::Push::CLOSED: return false;
    }
    return false;
}

void Engine::Impl::finish(Sequence& s, FinishReason r, const std::string& err) {
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
void Engine::Impl::start_deliverer(uint64_t id, std::shared_ptr<EventStream> out, TokenCallback cb) {
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
void Engine::Impl::cancel(uint64_t id, bool stopped) {
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

// A step failed: every running sequence ends with its error (its pages released).
void Engine::Impl::fail_running(const std::string& why) {
    std::lock_guard<std::mutex> lk(mu);
    for (auto& s : running) {
        release(*s);
        finish(*s, FinishReason::ERROR, why);
    }
    running.clear();
    st.running = 0;
}

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
