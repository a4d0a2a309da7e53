// The OpenAI-compatible request and response shapes: parsing and validating a
// /v1/chat/completions or /v1/completions body into a generation job, and building the
// JSON that goes back (whole responses, stream chunks, errors). No HTTP here: this layer
// is pure and unit-tested on its own (tests/server/test_openai.cpp).
//
// Built only with the server packages (GLIA_HAVE_SERVER; nlohmann-json3-dev).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/sampler.h"

namespace glia::server {

using json = nlohmann::ordered_json;

// An error reported to the client in OpenAI's shape:
// {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;  // the offending field, "" for none
    std::string code;   // machine-readable code, "" for none
};
[[noreturn]] void throw_api(int status, std::string message, std::string param = "", std::string code = "",
                            std::string type = "");
json error_json(const ApiError& e);
// Dumps without throwing on invalid UTF-8 (replaced by U+FFFD).
std::string dump(const json& j);
// "a string", "an object", ...: what a JSON value is, for error messages.
const char* json_kind(const json& v);
// A 400 naming the field: "'field' must be WANT, got KIND" (code invalid_type).
[[noreturn]] void wrong_type(const std::string& field, const char* want, const json& got);
// A 400 naming the field: "'field' WHAT" (code invalid_value).
[[noreturn]] void invalid_value(const std::string& field, const std::string& what);
// body[name] as a finite number in [lo, hi], else a 400 naming it (the field must be present).
double number_between(const json& body, const char* name, double lo, double hi);

enum class Endpoint { CHAT, COMPLETION };

enum class ResponseFormat { TEXT, JSON_OBJECT, JSON_SCHEMA };

// reasoning_format: where a thought goes (server/reasoning.h).
enum class ReasoningFormat { AUTO, NONE, RAW };

// One validated request, before tokenization.
struct Job {
    Endpoint endpoint = Endpoint::CHAT;
    std::string model;                 // as given ("" when absent)
    json messages;                     // chat: the messages array, as given
    std::string prompt;                // completion: the prompt text
    std::vector<int32_t> prompt_ids;   // completion: a prompt given as token ids
    bool prompt_is_ids = false;
    std::optional<int> max_tokens;     // max_tokens / max_completion_tokens
    SamplerParams sampling;
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;        // stream_options.include_usage
    bool logprobs = false;
    int top_logprobs = 0;              // 0..20
    bool echo = false;                 // completion: prepend the prompt to the text
    std::optional<std::string> suffix; // completion: the text after the gap (fill in the middle, infill.h)
    bool ignore_eos = false;           // extension (as llama.cpp's server): generate past end-of-generation
    std::vector<std::pair<int32_t, float>> logit_bias;  // token id -> bias in [-100, 100]
    int n = 1;                         // choices (streamed interleaved, by choices[].index)
    json tools;                        // chat: the tools array (null when none)
    std::string tool_choice = "auto";  // "none", "auto", "required", or "function" (tool_choice_name)
    std::string tool_choice_name;      // the named function
    ResponseFormat format = ResponseFormat::TEXT;  // response_format
    json schema;                       // JSON_SCHEMA: response_format.json_schema.schema
    ReasoningFormat reasoning_format = ReasoningFormat::AUTO;  // chat: reasoning_format
    json template_kwargs;              // chat: chat_template_kwargs, variables for the template (null when none)
    bool thought_open = false;         // set by the server: the rendered prompt opened a thought (reasoning.h)
    json lora;                         // "lora": this request's LoRA adapters, checked by lora_api.h (null: absent)
};

// Parses and validates a request body. `defaults` gives the sampling values of fields
// the request leaves out (the server's --temp, --top-k ... options). Throws ApiError
// (400) for malformed JSON, wrong types or out-of-range values, naming the field.
Job parse_request(const std::string& body, Endpoint endpoint, const SamplerParams& defaults);

// The prompt text of a chat conversation for a model without a chat template:
// "role: content\n" for every message, then "assistant:" as the generation prompt.
std::string plain_chat_prompt(const json& messages);

// One generated token with its log-probabilities, for the "logprobs" fields.
struct TokenLogprob {
    std::string text;   // the token's piece (bytes)
    float logprob = 0;
    std::vector<std::pair<std::string, float>> top;  // alternatives (piece, logprob)
};

struct Usage {
    int prompt_tokens = 0, completion_tokens = 0;
    int cached_tokens = 0;  // prompt tokens taken from the prefix cache (prompt_tokens_details)
};
json usage_json(const Usage& u);

// Chat: choices[].logprobs = {"content": [{token, logprob, bytes, top_logprobs}]}.
json chat_logprobs_json(const std::vector<TokenLogprob>& lp);
// Completion (legacy): {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
json completion_logprobs_json(const std::vector<TokenLogprob>& lp, size_t text_offset0);

// Identity of one response: "chatcmpl-..." / "cmpl-...", creation time, model id.
struct ResponseId {
    std::string id;
    int64_t created = 0;
    std::string model;
};
ResponseId new_response_id(Endpoint e, const std::string& model);

// Whole (non-streaming) responses.
// `tool_calls` (OpenAI's message.tool_calls) when the reply called tools: content is
// then null when empty. `reasoning` (message.reasoning_content) when the model thought.
json chat_response(const ResponseId& r, const std::string& text, const char* finish_reason,
                   const std::vector<TokenLogprob>* logprobs, const Usage& u, const json& tool_calls = json(),
                   const std::string* reasoning = nullptr);
json completion_response(const ResponseId& r, const std::string& text, const char* finish_reason,
                         const std::vector<TokenLogprob>* logprobs, size_t text_offset0, const Usage& u);

// Stream chunks. `finish_reason` null while running; `usage` only in the usage chunk;
// `index` the choice the chunk extends (n > 1 streams interleave their choices).
json chat_chunk(const ResponseId& r, const json& delta, const char* finish_reason,
                const std::vector<TokenLogprob>* logprobs, bool include_usage_field, int index = 0);
json completion_chunk(const ResponseId& r, const std::string& text, const char* finish_reason,
                      const std::vector<TokenLogprob>* logprobs, size_t text_offset0, bool include_usage_field,
                      int index = 0);
// The final chunk of a stream with include_usage: empty choices and the usage.
json usage_chunk(const ResponseId& r, Endpoint e, const Usage& u);

}  // namespace glia::server
