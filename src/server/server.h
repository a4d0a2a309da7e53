// The OpenAI-compatible HTTP server (`glia serve`): routes, authentication, limits,
// streaming and metrics over an Engine. Built only with the server packages
// (GLIA_HAVE_SERVER: cpp-httplib and nlohmann-json from Debian).
//
// Connections: each is served on a thread of its own, at most --max-connections at once
// (503 beyond); a request must arrive whole within --read-timeout; pipelined requests are
// answered in order (connection.h says why this is not httplib's own loop). The engine
// thread only pushes each token into the request's bounded queue (EventStream); the
// connection's thread drains it, detokenizes, matches stop strings and writes to its
// client, so a slow client never stalls generation for the others; one that falls
// EngineOptions::max_pending_events behind is cancelled (503 "slow_consumer" in its
// stream, counted in glia_requests_overrun_total); a client that goes away cancels its
// request.
//
// Bodies are read by the handlers, at most --max-body bytes whatever their framing
// (Content-Length, chunked; none means empty), 413 beyond. The framing itself is decided
// and checked by the connection layer before httplib parses a request (request_head.h:
// 400 for ambiguous framing, 414, 431); a body no handler read is dropped, never parsed
// as a request. Host and Origin headers are checked before routing (browser_policy.h).
//
// Chat prompts are rendered with the model's chat template (tokenizer.chat_template).
// A model without one gets a plain fallback: "role: content\n" per message, then
// "assistant:" (see plain_chat_prompt in openai.h). Special tokens are parsed in the
// template's own text only; message contents are text (tok::PromptTokenizer).
// Completion prompts are tokenized with special tokens parsed (as the reference server
// does), so a client can send control tokens there.
//
// Statuses: every 4xx/503 is decided before generation starts. A whole (non-streamed)
// response is awaited before anything is sent, so its status is the outcome's: 200, 504
// when --timeout cancelled it, 500 when generation failed, 503 on shutdown. A stream's
// status (200) is sent first; a failure after that ends it with a
// `data: {"error": ...}` event before `data: [DONE]`. A client that goes away while its
// request waits or runs is noticed and the request cancelled.
//
// The model file: if it is truncated or modified while served (gguf::File::changed), the
// running requests fail (500, "model_file_changed"), later ones get 503 and /health
// answers 503 with the reason; the process does not crash.
//
// The chat page: GET / (and its files under /web/) is a browser chat client embedded in
// the binary (src/server/web/, web_assets.h), served with a Content-Security-Policy that
// keeps it to this server; it is not behind --api-key (it asks for the key on a 401).
//
// Stop strings cancel the engine request when they match (the engine counts it as
// finished); the response says finish_reason "stop".
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "runtime/sampler.h"

namespace glia {
class Engine;
class Model;
}  // namespace glia

namespace glia::server {

struct ServerOptions {
    std::string host = "127.0.0.1";  // loopback unless asked otherwise
    int port = 8080;                 // 0: any free port (see HttpServer::port())
    std::string api_key;             // when set: "Authorization: Bearer KEY" on every /v1 route
    size_t max_body = 1 << 20;       // request body limit in bytes (413 beyond)
    int max_tokens_limit = 4096;     // generated tokens per request at most (400 beyond)
    int max_concurrent = 0;          // generation requests in flight at most (503 beyond); 0: parallel + queue
    double timeout_s = 600;          // total time for one request (then cancelled)
    double idle_timeout_s = 30;      // keep-alive idle limit; also the limit for one write
    double request_timeout_s = 10;   // to receive one whole request (line, headers, body)
    int max_connections = 0;         // connections served at once (503 beyond); 0: max(256, max_concurrent + 64)
    std::string model_id;            // the served model's id (the file's stem)
    std::string model_path;          // also accepted as "model"
    std::string chat_template;       // "" : the plain role-prefixed fallback
    std::string chat_template_file;  // the --template file chat_template was read from; "" : the model's own
    SamplerParams defaults;          // sampling values for fields a request leaves out
    bool verbose = false;            // one log line per request on stderr
    // Browser safety (browser_policy.h): comma lists or "*". allowed_hosts: Host names
    // accepted besides loopback ones (the Host check is on by default for a loopback
    // bind, "*" turns it off); cors_origin: cross-origin pages allowed (CORS).
    std::string allowed_hosts;
    std::string cors_origin;
};

class HttpServer {
public:
    HttpServer(Engine& engine, const Model& model, ServerOptions opt);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds the listening socket; throws glia::Error naming host and port on failure.
    void bind();
    int port() const;
    // Serves until stop() (from any thread). Call after bind().
    void run();
    void stop();
    // Serves one connected socket on the calling thread until the connection ends, then
    // closes it. Call after bind(); for fuzzing the HTTP front end with raw bytes.
    void serve_connection(int fd);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace glia::server
