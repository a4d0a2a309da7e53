// The server's own OpenAI routes, reused by the routes of other APIs (ollama's /api/*, the
// reference server's /infill): such a route translates its request into an OpenAI body,
// runs the OpenAI handler on it (validation, templates, tool calls, structured output,
// the engine's batching: all of it shared), and reshapes what comes back. A whole response
// is handed over as parsed JSON with its status; a stream's server-sent events are
// translated one by one as the engine produces them, so the other API streams as live as
// the OpenAI one, and a client that goes away still cancels its request.
#pragma once
#if GLIA_HAVE_SERVER
#include <httplib.h>

#include <functional>
#include <memory>
#include <string>

#include "server/openai.h"

namespace glia::server {

// What the other APIs' routes need from the server.
struct InnerApi {
    // Runs /v1/chat/completions or /v1/completions on `body`, into `res` (a status and
    // JSON body, or a stream of server-sent events).
    std::function<void(const std::string& body, Endpoint ep, httplib::Response& res)> generate;
    // Runs /v1/embeddings on `body`, into `res`.
    std::function<void(const std::string& body, httplib::Response& res)> embeddings;
    // Reads a request's body within the server's limits; throws ApiError (413, 400 ...).
    std::function<std::string(const httplib::Request&, httplib::Response&, const httplib::ContentReader&)> read_body;
};

// Translates the events of an OpenAI stream into another API's stream.
class StreamShaper {
public:
    virtual ~StreamShaper() = default;
    // One event: a chunk, or {"error": {...}} when the request failed after it started.
    // Returns the bytes to send ("" for none).
    virtual std::string event(const json& e) = 0;
    // The stream ended ("[DONE]"): the bytes to send last.
    virtual std::string end() { return ""; }
};

// A whole response of the inner route: its status and parsed body (an object; a body that
// does not parse is {}).
using WholeShaper = std::function<void(int status, const json& body, httplib::Response& out)>;

// Moves what the inner handler left in `inner` into `out`: a stream goes out as
// `content_type` through `shaper`; a whole response goes to `whole`.
void relay(httplib::Response& inner, httplib::Response& out, const std::string& content_type,
           std::shared_ptr<StreamShaper> shaper, const WholeShaper& whole);

// The message of an OpenAI error body ({"error": {"message"}}), or `fallback`.
std::string error_message(const json& body, const std::string& fallback);

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
