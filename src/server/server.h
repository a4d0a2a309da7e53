// The OpenAI-compatible HTTP server (`glia serve`): routes, authentication, limits,
// streaming and metrics over an Engine. Built only with the server packages
// (GLIA_HAVE_SERVER: cpp-httplib and nlohmann-json from Debian).
//
// Threads: httplib's pool of HTTP threads, one per connection being served (bounded by
// max_concurrent + a few for /health and /metrics); the engine thread, which only pushes
// each token into the request's queue. An HTTP thread drains its queue, detokenizes,
// matches stop strings and writes to its client, so a slow client never stalls
// generation for the others; a client that goes away cancels its request.
//
// Chat prompts are rendered with the model's chat template (tokenizer.chat_template).
// A model without one gets a plain fallback: "role: content\n" per message, then
// "assistant:" (see plain_chat_prompt in openai.h).
//
// Every response body is written by a chunked content provider (streamed or not), so a
// client that goes away is noticed while its request waits or runs, and the request is
// cancelled. The status is decided before generation starts: every 4xx/503 comes with its
// status; a failure after that (the --timeout limit, an engine error, shutdown) ends a
// stream with a `data: {"error": ...}` event before `data: [DONE]`, and a whole response
// with an error object in place of the completion.
//
// Stop strings cancel the engine request when they match (the engine counts it as
// cancelled); the response says finish_reason "stop". Prompts are tokenized with special
// tokens parsed (as the reference server does), so a client can send control tokens.
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
    double idle_timeout_s = 30;      // socket read/write and keep-alive idle limit
    std::string model_id;            // the served model's id (the file's stem)
    std::string model_path;          // also accepted as "model"
    std::string chat_template;       // "" : the plain role-prefixed fallback
    SamplerParams defaults;          // sampling values for fields a request leaves out
    bool verbose = false;            // one log line per request on stderr
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

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace glia::server
