// OpenAI's Responses API on the same port: POST /v1/responses (whole or streamed),
// GET /v1/responses/{id}, DELETE /v1/responses/{id} and GET /v1/responses/{id}/input_items
// (responses_items.h), for the `openai` package's
// client.responses and the tools built on it (the AI SDK's OpenAI provider ...).
//
// A request is validated here (a 400 in OpenAI's error shape names the field, e.g.
// "input[2].content[0].type") and translated into a chat completions body that the
// server's own chat route runs (relay.h): template, tool calls, structured output,
// reasoning and batching are all the chat route's.
// - instructions become the system message; input (a string, or a list of items: messages
//   of role user / assistant / system / developer with a string or input_text /
//   output_text parts, function_call, function_call_output and reasoning items, and
//   item_reference to an output item of a stored response) becomes the conversation;
//   previous_response_id puts a stored response's conversation first;
// - tools {type: function, name, description, parameters} become functions; tool_choice
//   none / auto / required / {type: function, name}; text.format text / json_object /
//   json_schema {name, schema, strict} becomes response_format; max_output_tokens,
//   temperature, top_p; reasoning.effort "none" turns the template's thinking off; the
//   chat route's stop, seed, top_k, min_p and chat_template_kwargs pass through.
// The reply is a response object whose output holds a reasoning item (when the model
// thought), a message with output_text, and function_call items; status is completed, or
// incomplete when max_output_tokens ended it. A stream is the event sequence
// response.created, response.in_progress, then per item output_item.added, its
// content_part / text / argument events and output_item.done, then response.completed
// (or response.incomplete); a failure after it began is an `error` event.
// Responses are kept (responses_store.h) unless the request says store: false.
#pragma once
#if GLIA_HAVE_SERVER
#include <memory>
#include <string>

#include "server/relay.h"
#include "server/responses_store.h"

namespace glia::server::responses {

// A Responses request as a chat completions request.
struct Translated {
    json chat;     // the /v1/chat/completions body
    json history;  // its conversation without the instructions (what a stored response keeps)
    json input_items = json::array();  // its own input as items, without ids yet (responses_items.h)
    json echo;     // the request's settings as the response object repeats them
    bool stream = false;
    bool store = true;
};

// Validates and translates a /v1/responses body; previous_response_id is looked up in
// `store` (none: every id is unknown). Throws ApiError: 400 naming the field, 404 for an
// unknown previous_response_id.
Translated translate_request(const std::string& body, const Store* store);

// The response object of a whole chat.completion (the chat route's answer).
json response_from_chat(const json& chat, const Translated& t);

// The assistant's chat message of a chat.completion (kept as the end of the conversation).
json assistant_message(const json& chat);

// Shapes a chat completion stream into the Responses events; at its end the response is
// kept in `store` (when not null and the request allows).
std::shared_ptr<StreamShaper> stream_shaper(const Translated& t, std::shared_ptr<Store> store);

// Registers POST /v1/responses, GET and DELETE /v1/responses/{id} and
// GET /v1/responses/{id}/input_items, with a store of its own.
void add_routes(httplib::Server& http, InnerApi inner, std::shared_ptr<Store> store = std::make_shared<Store>());

}  // namespace glia::server::responses

#endif  // GLIA_HAVE_SERVER
