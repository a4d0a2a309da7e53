// libFuzzer target for the OpenAI request layer: a request body (JSON) -> the validated
// Job (parse_request), and what the server then derives from a Job without a model: the
// plain chat prompt, the response_format's JSON-schema grammar, the tools' call grammar
// in every tool-call format (with a matcher fed the body's bytes), and the tool-call
// parser on the body as a model's reply. The first input byte picks the endpoint (even:
// chat, odd: completions; with bit 1 set, the body is an Anthropic Messages request, with
// bit 3 set (and not bit 1) an OpenAI Responses request, translated into a chat body
// first); the rest is the body. The body as a reply is also
// split into thought and answer (reasoning.h), whole and in 3-byte pieces, which must agree.
//
// parse_request must return a Job whose values are in range or throw ApiError (400);
// the grammar compilers must return a grammar or throw ApiError. Anything else (another
// exception, a crash, UB) is a finding.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "grammar/json_grammar.h"
#include "server/anthropic.h"
#include "server/json_schema.h"
#include "server/openai.h"
#include "server/reasoning.h"
#include "server/responses.h"
#include "server/tool_calls.h"

using namespace glia;
using namespace glia::server;

namespace {

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "fuzz_openai: %s\n", what);
    std::abort();
}

void feed(const std::shared_ptr<grammar::Grammar>& g, const std::string& bytes) {
    grammar::Matcher m(g);
    for (size_t i = 0; i < bytes.size(); i += 7) {
        (void)m.feed(std::string_view(bytes).substr(i, 7));
        (void)m.accepting();
        (void)m.complete();
    }
}

void check(const Job& j) {
    const SamplerParams& s = j.sampling;
    if (!std::isfinite(s.temperature) || s.temperature < 0) die("temperature out of range");
    if (!std::isfinite(s.top_p) || !std::isfinite(s.min_p) || !std::isfinite(s.repeat_penalty) ||
        !std::isfinite(s.presence_penalty) || !std::isfinite(s.frequency_penalty))
        die("a sampling value is not finite");
    if (j.n < 1) die("n < 1");
    if (j.top_logprobs < 0 || j.top_logprobs > 20) die("top_logprobs out of range");
    if (j.max_tokens && *j.max_tokens < 0) die("negative max_tokens");
    for (const auto& [id, b] : j.logit_bias)
        if (id < 0 || !(b >= -100 && b <= 100)) die("logit_bias out of range");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    Endpoint ep = data[0] & 1 ? Endpoint::COMPLETION : Endpoint::CHAT;
    std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
    {
        // A reply split into thought and answer: the same whole and in pieces.
        const ThinkMarkers think{"<think>", "</think>"};
        const bool opened = data[0] & 4;
        const SplitReply whole = split_reasoning(body, think, opened);
        ReasoningStream s(think, opened);
        std::string r, c;
        for (size_t i = 0; i < body.size() || i == 0; i += 3) {
            s.append(body.substr(std::min(i, body.size()), 3), i + 3 >= body.size());
            r += s.take_reasoning();
            c += s.take_content();
        }
        if (r != whole.reasoning || c != whole.content) die("the streamed reasoning split differs from the whole one");
    }
    if (data[0] & 2) {  // a Messages request: its translation must be a valid chat body, or a 400
        try {
            body = anthropic::translate_request(body, false).chat.dump();
            ep = Endpoint::CHAT;
        } catch (const ApiError& e) {
            if (e.status != 400) die("translate_request failed with a status other than 400");
            return 0;
        }
    } else if (data[0] & 8) {  // a Responses request: the same (a 404 for the stored response or item it names)
        try {
            body = responses::translate_request(body, nullptr).chat.dump();
            ep = Endpoint::CHAT;
        } catch (const ApiError& e) {
            if (e.status != 400 && !(e.status == 404 && (e.param == "previous_response_id" || e.param.rfind("input[", 0) == 0)))
                die("responses::translate_request failed with a status other than 400");
            return 0;
        }
    }
    Job job;
    try {
        job = parse_request(body, ep, SamplerParams{});
    } catch (const ApiError& e) {
        if (e.status != 400) die("parse_request failed with a status other than 400");
        (void)dump(error_json(e));
        return 0;
    }
    check(job);
    if (ep == Endpoint::CHAT) {
        try {
            (void)plain_chat_prompt(job.messages);
        } catch (const ApiError&) {
        }
    }
    if (job.format == ResponseFormat::JSON_SCHEMA) {
        try {
            feed(compile_schema(job.schema, "response_format.json_schema.schema"), body);
        } catch (const ApiError&) {
        }
    }
    if (!job.tools.is_null()) {
        for (ToolFormat f : {ToolFormat::HERMES, ToolFormat::LLAMA3, ToolFormat::MISTRAL, ToolFormat::MISTRAL_ARRAY}) {
            try {
                feed(tool_call_grammar(f, job.tools, job.tool_choice_name), body);
            } catch (const ApiError&) {
            }
        }
    }
    for (ToolFormat f : {ToolFormat::HERMES, ToolFormat::LLAMA3, ToolFormat::MISTRAL, ToolFormat::MISTRAL_ARRAY}) {
        (void)parse_tool_calls(f, body);
        (void)content_prefix(f, body);
    }
    return 0;
}
