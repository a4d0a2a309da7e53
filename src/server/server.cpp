// The HTTP server: construction, admission of generation requests (slots), statistics,
// /metrics and the error bodies; the rest of HttpServer::Impl is in the files
// server_impl.h lists.
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

namespace http_detail {

void set_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(dump(error_json(e)), "application/json");
}

bool has_token(std::string value, const char* token) {
    std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
    return value.find(token) != std::string::npos;
}

// The request comes with a body (a length, or chunks).
bool has_body(const httplib::Request& req) {
    return has_token(req.get_header_value("Transfer-Encoding"), "chunked") ||
           (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
}

void close_connection(httplib::Response& res) {
    if (Connection* c = Connection::current()) c->close_after_response();
    res.set_header("Connection", "close");
}

}  // namespace http_detail

namespace {

std::string base_name(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Fills in the options left to the server (0 = derived from the engine's).
ServerOptions resolve(ServerOptions o, const Engine& engine) {
    if (o.max_concurrent <= 0) o.max_concurrent = engine.options().n_parallel + engine.options().max_queue;
    if (o.max_connections <= 0) o.max_connections = std::max(256, o.max_concurrent + 64);
    return o;
}

ConnectionLimits limits_of(const ServerOptions& o) {
    ConnectionLimits l;
    l.max_connections = o.max_connections;
    l.request_timeout_s = o.request_timeout_s;
    l.idle_timeout_s = o.idle_timeout_s;
    l.max_body = o.max_body;
    l.busy_body = dump(error_json({503,
                                   "the server has " + std::to_string(o.max_connections) +
                                       " connections open, its limit (--max-connections); retry later",
                                   "server_overloaded", "", "too_many_connections"}));
    return l;
}

}  // namespace

HttpServer::Impl::Impl(Engine& e, const Model& m, ServerOptions o)
    : engine(e), model(m), vocab(m.vocab()), opt(resolve(std::move(o), e)), http(limits_of(opt)),
      prompt_tokenizer(vocab) {
    if (!opt.chat_template.empty()) tmpl.emplace(opt.chat_template);
    bos_text = vocab.bos() >= 0 ? vocab.token_to_piece(vocab.bos(), true) : "";
    eos_text = vocab.eos() >= 0 ? vocab.token_to_piece(vocab.eos(), true) : "";
    if (tmpl) tool_format = detect_tool_format(opt.chat_template);
    for (const std::string& m : tool_markers(tool_format))
        if (const int32_t id = vocab.find_token(m); id >= 0) tool_marker_ids.insert(id);
    if (tmpl) think = detect_think_markers(opt.chat_template);
    for (const std::string& m : {think.open, think.close})
        if (const int32_t id = m.empty() ? -1 : vocab.find_token(m); id >= 0) think_marker_ids.insert(id);
    setup();
}

// Cancels the requests whose client has gone (closed or reset its connection) and
// stops counting them; their handlers notice and end on their own. Returns how many.
int HttpServer::Impl::reclaim_gone() {
    std::vector<uint64_t> cancel;
    int n = 0;
    {
        std::lock_guard<std::mutex> lk(slots_mutex);
        for (Slot* sl : slots) {
            if (!sl->counted || !sl->conn || !sl->conn->peer_gone()) continue;
            sl->counted = false;
            --active;
            ++n;
            cancel.insert(cancel.end(), sl->ids.begin(), sl->ids.end());
        }
    }
    for (uint64_t id : cancel) engine.cancel(id);
    return n;
}

void HttpServer::Impl::count_status(int status) {
    std::lock_guard<std::mutex> lk(stats_mutex);
    ++http_status_counts[status];
}

json HttpServer::Impl::json_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    return json_body(read_body(req, res, reader));
}

json HttpServer::Impl::json_body(const std::string& text) {
    check_json_depth(text);  // before anything walks it recursively
    json b = json::parse(text, nullptr, false);
    if (b.is_discarded() || !b.is_object()) throw_api(400, "the request body must be a JSON object", "", "invalid_json");
    return b;
}

json HttpServer::Impl::model_json() const {
    return json{{"id", opt.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "glia"}};
}

bool HttpServer::Impl::known_model(const std::string& m) const {
    return m.empty() || m == opt.model_id || m == opt.model_path || m == base_name(opt.model_path);
}

ApiError HttpServer::Impl::unknown_model(const std::string& m) const {
    return {404, "the model '" + m + "' does not exist; this server serves '" + opt.model_id + "'", "invalid_request_error",
            "model", "model_not_found"};
}

void HttpServer::Impl::reject(httplib::Response& res, const ApiError& e) {
    {
        std::lock_guard<std::mutex> lk(stats_mutex);
        ++rejected_by_server;
    }
    set_error(res, e);
}

std::string HttpServer::Impl::metrics() {
    const EngineStats s = engine.stats();
    std::ostringstream o;
    auto metric = [&](const char* name, const char* type, const char* help, auto value) {
        o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n' << name << ' ' << value << '\n';
    };
    uint64_t rejected, timeouts_, disconnects_;
    std::map<int, uint64_t> statuses;
    {
        std::lock_guard<std::mutex> lk(stats_mutex);
        rejected = rejected_by_server;
        timeouts_ = timeouts;
        disconnects_ = disconnects;
        statuses = http_status_counts;
    }
    metric("glia_requests_total", "counter", "Generation requests accepted by the engine.", s.requests_total);
    metric("glia_requests_finished_total", "counter", "Generation requests that finished (stop or length).", s.requests_finished);
    metric("glia_requests_cancelled_total", "counter", "Generation requests cancelled (client gone, timeout).",
           s.requests_cancelled);
    metric("glia_requests_overrun_total", "counter",
           "Generation requests cancelled because their client read too slowly (max pending events).",
           s.requests_overrun);
    metric("glia_requests_rejected_total", "counter",
           "Generation requests refused (invalid, too long, queue full, over the concurrency limit).",
           s.requests_rejected + rejected);
    metric("glia_requests_timed_out_total", "counter", "Generation requests cancelled by the --timeout limit.", timeouts_);
    metric("glia_client_disconnects_total", "counter", "Generation requests whose client went away.", disconnects_);
    metric("glia_prompt_tokens_total", "counter", "Prompt tokens processed.", s.prompt_tokens_total);
    metric("glia_generated_tokens_total", "counter", "Tokens generated.", s.generated_tokens_total);
    metric("glia_requests_preempted_total", "counter",
           "Running requests paused to free KV-cache pages (recomputed when they resume).", s.preemptions);
    metric("glia_speculative_drafted_tokens_total", "counter",
           "Tokens drafted (prompt lookup, --spec-ngram, or a draft model, --model-draft) and verified.",
           s.spec_drafted);
    metric("glia_speculative_accepted_tokens_total", "counter",
           "Drafted tokens the model confirmed (each saved a decode step).", s.spec_accepted);
    metric("glia_queue_depth", "gauge", "Requests waiting for a slot.", s.waiting);
    metric("glia_requests_running", "gauge", "Requests being decoded.", s.running);
    metric("glia_http_requests_in_flight", "gauge", "Generation requests held by HTTP threads.", active.load());
    metric("glia_decode_tokens_per_second", "gauge", "Recent generation throughput over all sequences.",
           s.decode_tokens_per_second);
    metric("glia_kv_cache_blocks_used", "gauge", "KV-cache blocks in use.", s.kv_blocks_used);
    metric("glia_draft_kv_cache_blocks_used", "gauge", "The draft model's KV-cache blocks in use (--model-draft).",
           s.draft_kv_blocks_used);
    metric("glia_kv_cache_blocks_total", "gauge", "KV-cache blocks in all.", s.kv_blocks_total);
    metric("glia_kv_cache_blocks_cached", "gauge", "KV-cache blocks held by no request, kept for prefix reuse.",
           s.kv_blocks_cached);
    metric("glia_prefix_cache_requests_total", "counter", "Requests that looked up the prefix cache.",
           s.prefix_lookups);
    metric("glia_prefix_cache_hits_total", "counter", "Requests that reused a cached prefix.", s.prefix_hits);
    metric("glia_prefix_cache_prompt_tokens_total", "counter", "Prompt tokens of the requests that looked up the cache.",
           s.prefix_tokens_total);
    metric("glia_prefix_cache_reused_tokens_total", "counter", "Prompt tokens taken from the cache, not computed.",
           s.prefix_tokens_reused);
    metric("glia_prefix_cache_hit_rate", "gauge", "Reused prompt tokens over all looked-up prompt tokens.",
           s.prefix_tokens_total ? double(s.prefix_tokens_reused) / double(s.prefix_tokens_total) : 0.0);
    metric("glia_grammar_masks_total", "counter", "Token masks computed for structured output.", s.grammar_masks);
    metric("glia_grammar_mask_seconds_total", "counter", "Time spent computing those masks.", s.grammar_mask_seconds);
    metric("glia_prefix_cache_evictions_total", "counter", "Cached blocks evicted to make room.", s.prefix_evictions);
    metric("glia_http_connections_open", "gauge", "HTTP connections being served.", http.open_connections());
    metric("glia_http_connections_refused_total", "counter",
           "HTTP connections answered 503 at once (over --max-connections).", http.refused_connections());
    o << "# HELP glia_http_responses_total HTTP responses by status code.\n# TYPE glia_http_responses_total counter\n";
    for (const auto& [code, n] : statuses) o << "glia_http_responses_total{code=\"" << code << "\"} " << n << '\n';
    return o.str();
}

HttpServer::HttpServer(Engine& engine, const Model& model, ServerOptions opt)
    : impl_(std::make_unique<Impl>(engine, model, std::move(opt))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::bind() {
    Impl& s = *impl_;
    if (s.opt.port == 0) {
        s.port = s.http.bind_to_any_port(s.opt.host);
        if (s.port < 0) fail("cannot listen on ", s.opt.host, " (any port); check --host");
    } else {
        if (!s.http.bind_to_port(s.opt.host, s.opt.port))
            fail("cannot listen on ", s.opt.host, ":", s.opt.port, " (is the port in use? pick another with --port)");
        s.port = s.opt.port;
    }
    s.http.after_bind();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::run() { impl_->http.listen_after_bind(); }

void HttpServer::serve_connection(int fd) { impl_->http.serve_socket(fd); }

void HttpServer::stop() {
    if (!impl_) return;
    impl_->stopping = true;
    if (impl_->http.is_running()) impl_->http.stop();
}

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
