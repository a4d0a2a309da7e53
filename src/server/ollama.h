// ollama's API on the server's port: /api/chat, /api/generate, /api/embed, /api/embeddings,
// /api/tags, /api/show, /api/ps, /api/version, so that ollama's clients (its npm and Python
// packages, editor plugins, chat front ends) work against `glia serve`.
//
// Generation and embeddings are the OpenAI routes' (relay.h): a request is validated here
// (400 naming the ollama field: "'options.temperature' must be a number"), translated
// into an OpenAI body and run by the shared handler; the answer comes back in ollama's
// shape: one object, or newline-delimited JSON objects when streamed (the default; "stream":
// false for one), the last with done, done_reason and the counts and durations
// (nanoseconds). Errors are {"error": "message"} with the HTTP status.
//
// Translation:
// - /api/chat: messages (role, content, tool_calls with arguments as objects, tool_name),
//   tools, format ("json", or a JSON schema: the structured-output grammar), options
//   (temperature, top_p, top_k, min_p, seed, num_predict, stop, repeat_penalty,
//   presence_penalty, frequency_penalty; the load-time ones such as num_ctx or num_gpu are
//   the server's and ignored), think (the template's enable_thinking), logprobs;
//   tool calls come back as message.tool_calls [{function: {name, arguments: {...}}}].
// - /api/generate: prompt with the optional system message through the chat template; raw
//   prompts as completions; a suffix makes it a fill-in-the-middle completion (infill.h).
//   A request with no prompt (or /api/chat with no messages) only "loads" the model:
//   done_reason "load".
// - Images, a template override or a context array are refused (400).
#pragma once
#if GLIA_HAVE_SERVER
#include <httplib.h>

#include <string>

#include "server/openai.h"
#include "server/relay.h"

namespace glia {
class Model;
}

namespace glia::server {

// What the routes say about the served model.
struct OllamaModel {
    const Model* model = nullptr;
    std::string id;             // the served model's id; listed as "<id>:latest"
    std::string chat_template;  // "" when none
    bool tools = false;         // the template's tool-call format is known
    bool fim = false;           // the vocabulary has fill-in-the-middle tokens
};

// The OpenAI body of an ollama /api/chat or /api/generate request; `ep` is set to the
// OpenAI route that runs it. Throws ApiError (400) naming the ollama field.
json ollama_chat_body(const json& req);
json ollama_generate_body(const json& req, Endpoint& ep);
// The request only loads the model (no messages, or an empty prompt): nothing to run.
bool ollama_load_only(const json& req, bool chat);
// A model name as ollama's clients send it ("name" or "name:latest"), as the server knows it.
std::string ollama_model_name(const std::string& name);
// OpenAI tool calls (arguments as JSON text) as ollama's: [{function: {name, arguments:
// an object}}].
json ollama_tool_calls(const json& openai_calls);
// The message of an inner (OpenAI) error, its field names put back as ollama names them
// ('max_tokens' -> 'options.num_predict', 'temperature' -> 'options.temperature' ...).
std::string ollama_error_text(const std::string& openai_message);

void add_ollama_routes(httplib::Server& http, OllamaModel model, InnerApi api);

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
