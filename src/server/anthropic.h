// Anthropic's Messages API on the same port: POST /v1/messages (whole or streamed) and
// POST /v1/messages/count_tokens, for @anthropic-ai/sdk and the tools built on it.
//
// A Messages request is validated here (a 400 names the field, in Anthropic's error shape
// {"type": "error", "error": {"type", "message"}}) and translated into a chat completions
// body that the server's own chat route runs (relay.h): the file's chat template, tool
// calls and their grammar, reasoning, the engine's batching are all the chat route's.
// - system (a string or text blocks) becomes the system message; user text and
//   tool_result blocks become user and tool messages; assistant text, tool_use and
//   thinking blocks become the assistant's content, tool_calls and reasoning_content;
// - tools {name, description, input_schema} become functions; tool_choice auto / any /
//   tool / none becomes auto / required / the named function / none;
// - max_tokens (required), stop_sequences, temperature (0 to 1), top_p, top_k, stream;
//   thinking {type: enabled | disabled} sets the template's enable_thinking; the chat
//   route's chat_template_kwargs are accepted too.
// The reply comes back as content blocks: thinking (the model's thought), text, tool_use;
// stop_reason end_turn, max_tokens, stop_sequence (with the sequence) or tool_use; usage
// input_tokens (the whole prompt) and output_tokens. A stream is the event sequence
// message_start, content_block_start / _delta / _stop per block, message_delta (stop
// reason, usage), message_stop; a failure after it began is an `error` event.
#pragma once
#if GLIA_HAVE_SERVER
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/relay.h"

namespace glia::server::anthropic {

// A Messages request as a chat completions request.
struct Translated {
    json chat;  // the /v1/chat/completions body
    bool stream = false;
};

// Validates and translates a /v1/messages body; `count_only` (count_tokens) does not
// need max_tokens. Throws ApiError (400) naming the field.
Translated translate_request(const std::string& body, bool count_only);

// Anthropic's error type for an HTTP status ("invalid_request_error", "not_found_error" ...).
const char* error_type(int status);
// {"type": "error", "error": {"type", "message"}}.
json error_body(int status, const std::string& message);

// A whole chat.completion (the chat route's answer) as a Message.
json message_from_chat(const json& chat);

// Shapes a chat completion stream into the Messages events; `input_tokens` is the
// prompt's size, told in message_start.
std::shared_ptr<StreamShaper> stream_shaper(int input_tokens);

// What the routes need from the server besides the chat route.
struct Hooks {
    InnerApi inner;
    // The prompt tokens of a chat completions body (its rendered template); throws ApiError.
    std::function<int(const std::string& chat_body)> count_tokens;
};

// Registers POST /v1/messages and POST /v1/messages/count_tokens.
void add_routes(httplib::Server& http, Hooks hooks);

}  // namespace glia::server::anthropic

#endif  // GLIA_HAVE_SERVER
