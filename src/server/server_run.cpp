// An accepted generation request: its events from the engine turned into the reply's text,
// whole or as a stream of chunks (n > 1: several choices in one stream).
#if GLIA_HAVE_SERVER
#include "server/server_impl.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "server/json_depth.h"
#include "server/infill.h"
#include "server/ollama.h"
#include "server/relay.h"
#include "server/json_schema.h"
#include "server/lora_api.h"
#include "server/tool_calls.h"
#include "server/browser_gate.h"
#include "server/connection.h"
#include "server/json_body.h"
#include "server/anthropic.h"
#include "server/responses.h"
#include "server/openai.h"
#include "server/reasoning.h"
#include "server/request_text.h"
#include "server/text_stream.h"
#include "server/web_assets.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/vocab.h"

namespace glia::server {

using namespace http_detail;

HttpServer::Impl::Run::Run(Impl& srv, Job j, std::shared_ptr<Channel> c, uint64_t i, int np, std::shared_ptr<void> sl)
    : s(srv), job(std::move(j)), ch(std::move(c)), id(i), n_prompt(np), slot(std::move(sl)),
      rid(new_response_id(job.endpoint, srv.opt.model_id)), text(job.stop),
      deadline(Clock::now() + std::chrono::milliseconds(static_cast<long long>(srv.opt.timeout_s * 1000))) {
    if (job.endpoint == Endpoint::COMPLETION && job.echo && !job.prompt_is_ids) echo = job.prompt;
    tools = !job.tools.is_null() && job.tool_choice != "none" && srv.tool_format != ToolFormat::NONE;
    constrained = job.format != ResponseFormat::TEXT || job.tool_choice == "required" || job.tool_choice == "function";
    if (job.endpoint == Endpoint::CHAT && !srv.think.empty() && job.reasoning_format != ReasoningFormat::NONE) {
        split.emplace(srv.think, job.thought_open);
        raw = job.reasoning_format == ReasoningFormat::RAW;
        if (raw && job.thought_open) raw_prefix = srv.think.open;
    }
}

// A token's text in the reply: control tokens are dropped, except a tool call's
// markers and what a grammar chose for its text.
std::string HttpServer::Impl::Run::piece(int32_t tok) const {
    const bool special = constrained || (tools && s.tool_marker_ids.count(tok)) ||
                         (job.endpoint == Endpoint::CHAT && s.think_marker_ids.count(tok));
    return s.vocab.token_to_piece(tok, special);
}

json HttpServer::Impl::Run::tool_calls_json(const std::vector<ToolCall>& calls, bool with_index) {
    json a = json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        json c = json::object();
        if (with_index) c["index"] = i;  // stream deltas say which call they extend
        c["id"] = calls[i].id;
        c["type"] = "function";
        c["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
        a.push_back(std::move(c));
    }
    return a;
}

void HttpServer::Impl::Run::cancel() {
    if (finished) return;
    finished = true;
    ch->close();
    s.engine.cancel(id);
}

// A stop string ended the text: the engine need not go on, and the request counts
// as finished (not cancelled) in its statistics.
void HttpServer::Impl::Run::stop_early() {
    if (finished) return;
    finished = true;
    s.engine.finish_early(id);  // first: a token declined after close() is then still a stop
    ch->close();
}

TokenLogprob HttpServer::Impl::Run::logprob_of(const TokenEvent& ev) const {
    TokenLogprob t;
    t.text = s.vocab.token_to_piece(ev.token, false);
    t.logprob = ev.logprob;
    for (const auto& [tid, lp] : ev.top) t.top.emplace_back(s.vocab.token_to_piece(tid, false), lp);
    return t;
}

// Waits up to `wait` (100 ms) for the engine's events and applies them to the text; the
// request may end (finish_reason), or fail (error: shutdown, --timeout, an engine
// error, the model file changed underneath). Returns the logprobs of new tokens.
std::vector<TokenLogprob> HttpServer::Impl::Run::step(std::chrono::milliseconds wait) {
    std::vector<TokenLogprob> lps;
    const auto now = Clock::now();
    if (s.stopping) {
        cancel();
        error = ApiError{503, "the server is shutting down; the request was cancelled", "server_error", "",
                         "shutting_down"};
        return lps;
    }
    if (now >= deadline) {
        cancel();
        std::lock_guard<std::mutex> lk(s.stats_mutex);
        ++s.timeouts;
        error = ApiError{504, "the request took longer than the server's limit of " + json(s.opt.timeout_s).dump() +
                                  " s (--timeout) and was cancelled",
                         "server_error", "", "timeout"};
        return lps;
    }
    std::deque<TokenEvent> events = ch->wait(std::min(deadline, now + wait));
    // Tokens computed from a file that changed underneath are not the model's.
    if (const std::string why = s.model.file().changed(); !why.empty()) {
        cancel();
        error = ApiError{500, why, "server_error", "", "model_file_changed"};
        return lps;
    }
    for (const TokenEvent& ev : events) {
        if (finish_reason) break;
        if (ev.token >= 0) {
            ++n_generated;
            if (job.logprobs) lps.push_back(logprob_of(ev));
            if (!s.vocab.is_eog(ev.token) && text.append(piece(ev.token))) {
                finish_reason = "stop";
                stop_early();
                break;
            }
        }
        n_generated = std::max(n_generated, ev.n_generated);
        n_cached = ev.n_cached;
        if (ev.done) {
            finished = true;
            if (ev.finish == FinishReason::STOP) finish_reason = "stop";
            else if (ev.finish == FinishReason::LENGTH) finish_reason = "length";
            else if (ev.finish == FinishReason::ERROR)
                error = ApiError{500, "generation failed: " + ev.error, "server_error", "", "generation_error"};
            else if (!ev.error.empty())  // the client read too slowly
                error = ApiError{503, "the request was cancelled: " + ev.error, "server_error", "", "slow_consumer"};
            else
                error = ApiError{503, "the request was cancelled by the server (shutting down)", "server_error", "",
                                 "cancelled"};
        }
    }
    return lps;
}

void HttpServer::Impl::Run::count_disconnect() {
    cancel();
    std::lock_guard<std::mutex> lk(s.stats_mutex);
    ++s.disconnects;
}

// Whole responses: runs the request to its end. False when the client went away
// meanwhile (the request is then cancelled).
bool HttpServer::Impl::Run::collect(const Connection* conn) {
    while (!over()) {
        for (TokenLogprob& t : step()) all_lp.push_back(std::move(t));
        if (conn && conn->peer_gone()) {
            count_disconnect();
            return false;
        }
    }
    return true;
}

json HttpServer::Impl::Run::whole() const {
    const Usage usage{n_prompt, n_generated, n_cached};
    const std::vector<TokenLogprob>* lp = job.logprobs ? &all_lp : nullptr;
    SplitReply reply{"", text.text()};
    if (split) {
        reply = split_reasoning(text.text(), s.think, job.thought_open);
        if (raw) reply.content = raw_prefix + text.text();
    }
    json j;
    const ParsedReply r = tools ? parse_tool_calls(s.tool_format, reply.content) : ParsedReply{};
    if (!r.calls.empty())
        j = chat_response(rid, r.content, "tool_calls", lp, usage, tool_calls_json(r.calls, false), &reply.reasoning);
    else if (job.endpoint == Endpoint::CHAT)
        j = chat_response(rid, reply.content, finish_reason, lp, usage, json(), &reply.reasoning);
    else
        j = completion_response(rid, echo + text.text(), finish_reason, lp, echo.size(), usage);
    // The stop string that ended the reply (as vLLM's stop_reason).
    if (!text.matched().empty()) j["choices"][0]["stop_reason"] = text.matched();
    return j;
}

// The reply's content so far: the text, less the thought when it is split off.
std::string HttpServer::Impl::Run::content_so_far() const {
    if (!split) return text.text();
    return raw ? raw_prefix + text.text() : split->content();
}

// Tools, streamed: the content that can be sent now (never the start of a call;
// whole UTF-8 characters).
std::string HttpServer::Impl::Run::tool_content_delta() {
    const std::string all = content_so_far();
    const size_t upto = utf8_complete_prefix(all, content_prefix(s.tool_format, all));
    if (upto <= shown) return "";
    std::string d = all.substr(shown, upto - shown);
    shown = upto;
    return d;
}

// New text and logprobs of this choice as one chunk. False when the client went away.
bool HttpServer::Impl::Run::stream_step(httplib::DataSink& sink, int index, std::chrono::milliseconds wait) {
    const bool chat = job.endpoint == Endpoint::CHAT;
    // A choice may be over before its first chunk: start_more reads the first
    // choice's events until its first token, and a short reply ends in that read.
    std::vector<TokenLogprob> lps = over() ? std::vector<TokenLogprob>{} : step(wait);
    if (!all_lp.empty()) {  // tokens read before the stream began (start_more)
        lps.insert(lps.begin(), std::make_move_iterator(all_lp.begin()), std::make_move_iterator(all_lp.end()));
        all_lp.clear();
    }
    if (error) return true;
    if (!sink.is_writable()) return false;
    std::string delta = text.take(finish_reason != nullptr);
    std::string thought;  // reasoning_content, when the thought is split off
    if (split) {
        split->append(delta, finish_reason != nullptr);
        thought = split->take_reasoning();
        if (!raw) delta = split->take_content();
        else if (!raw_prefix.empty() && text_offset == 0) delta = raw_prefix + delta;
    }
    if (tools) delta = tool_content_delta();
    if (delta.empty() && thought.empty() && lps.empty()) return true;
    const std::vector<TokenLogprob>* lp = job.logprobs ? &lps : nullptr;
    json d = json::object();
    if (!thought.empty()) d["reasoning_content"] = thought;
    if (!delta.empty() || thought.empty()) d["content"] = delta;
    const bool ok = chat ? write_event(sink, chat_chunk(rid, d, nullptr, lp, job.include_usage, index))
                         : write_event(sink, completion_chunk(rid, delta, nullptr, lp, text_offset, job.include_usage, index));
    text_offset += delta.size();
    return ok;
}

// The end of a choice that finished well: the rest of a reply with tool calls, its
// calls, and the chunk with its finish_reason.
bool HttpServer::Impl::Run::stream_end(httplib::DataSink& sink, int index) {
    ended = true;
    const json empty = json::object();
    const char* reason = finish_reason;
    bool ok = true;
    if (tools) {
        // The reply is whole: the rest of the content, then its calls.
        const std::string all = content_so_far();
        const ParsedReply r = parse_tool_calls(s.tool_format, all);
        std::string rest;
        if (r.calls.empty()) rest = all.substr(std::min(shown, all.size()));
        else if (r.content.size() > shown && r.content.compare(0, shown, all, 0, shown) == 0)
            rest = r.content.substr(shown);
        if (!rest.empty())
            ok = write_event(sink, chat_chunk(rid, json{{"content", rest}}, nullptr, nullptr, job.include_usage, index));
        if (ok && !r.calls.empty()) {
            ok = write_event(sink, chat_chunk(rid, json{{"tool_calls", tool_calls_json(r.calls, true)}}, nullptr, nullptr,
                                              job.include_usage, index));
            reason = "tool_calls";
        }
    }
    json last = job.endpoint == Endpoint::CHAT
                    ? chat_chunk(rid, empty, reason, nullptr, job.include_usage, index)
                    : completion_chunk(rid, "", finish_reason, nullptr, text_offset, job.include_usage, index);
    if (!text.matched().empty()) last["choices"][0]["stop_reason"] = text.matched();  // as in whole()
    return ok && write_event(sink, last);
}

// Streams the choices of one request to their end; true when the stream was
// complete (sink.done() called), false when the client went away (all cancelled).
bool HttpServer::Impl::Run::stream(std::vector<std::shared_ptr<Run>>& runs, httplib::DataSink& sink) {
    Run& first = *runs[0];
    const Job& job = first.job;
    const std::vector<TokenLogprob> none;
    bool ok = true;
    for (size_t i = 0; i < runs.size() && ok; ++i) {
        Run& r = *runs[i];
        r.rid = first.rid;  // one response: one id
        r.text_offset = r.echo.size();
        if (job.endpoint == Endpoint::CHAT)
            ok = r.write_event(sink, chat_chunk(r.rid, json{{"role", "assistant"}, {"content", ""}}, nullptr,
                                                job.logprobs ? &none : nullptr, job.include_usage, int(i)));
        else if (!r.echo.empty())
            ok = r.write_event(sink, completion_chunk(r.rid, r.echo, nullptr, nullptr, 0, job.include_usage, int(i)));
    }
    const ApiError* error = nullptr;
    while (ok && !error) {
        size_t running = 0;
        for (const auto& r : runs) running += !r->ended;
        if (running == 0) break;
        // One wait of about 100 ms a round, shared among the running choices.
        const auto wait = std::chrono::milliseconds(std::max<long>(1, 100 / long(running)));
        for (size_t i = 0; i < runs.size() && ok && !error; ++i) {
            Run& r = *runs[i];
            if (r.ended) continue;
            ok = r.stream_step(sink, int(i), wait);  // (a choice already over sends what is left)
            if (r.error) error = &*r.error;
            else if (ok && r.over()) ok = r.stream_end(sink, int(i));
        }
    }
    if (error && !sink.is_writable()) ok = false;  // cancelled because its client went away
    if (!ok || error)
        for (auto& r : runs) r->cancel();
    // The request ends here: it stops counting as in flight before its last bytes
    // go out, so that a client that read them finds its next request admitted.
    for (auto& r : runs) r->slot.reset();
    if (!ok) {  // the client went away
        first.count_disconnect();
        return false;
    }
    if (error) {
        first.write_event(sink, error_json(*error));
        first.write(sink, "data: [DONE]\n\n");
        sink.done();
        return true;
    }
    if (job.include_usage) {
        Usage u{first.n_prompt, 0, first.n_cached};
        for (const auto& r : runs) u.completion_tokens += r->n_generated;
        ok = first.write_event(sink, usage_chunk(first.rid, job.endpoint, u));
    }
    if (ok) ok = first.write(sink, "data: [DONE]\n\n");
    if (ok) sink.done();
    return ok;
}
}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
