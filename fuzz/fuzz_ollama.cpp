// libFuzzer target for the request layers of ollama's API and /infill: a body (JSON) ->
// ollama's translation into an OpenAI body -> parse_request on that body, and /infill's
// fields. The first input byte picks the route (bit 0: /api/chat or /api/generate; bit 1:
// /infill instead); the rest is the body. The body is also read as OpenAI tool calls and
// as an error message to rename (the answer side's helpers).
//
// The translation must return a body or throw ApiError (400); the body it returns must
// parse into a Job or throw ApiError; anything else (another exception, a crash, UB) is a
// finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "server/infill.h"
#include "server/json_body.h"
#include "server/ollama.h"
#include "server/openai.h"

using namespace glia;
using namespace glia::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
    (void)ollama_error_text(body);
    json req;
    try {
        req = parse_body_object(body);
    } catch (const ApiError&) {
        return 0;
    }
    (void)ollama_tool_calls(req.value("tool_calls", json()));
    if (data[0] & 2) {
        try {
            const InfillInput in = parse_infill(req);
            const json* extra = req.contains("input_extra") ? &req["input_extra"] : nullptr;
            if (in.extra.size() != (extra && extra->is_array() ? extra->size() : 0)) std::abort();  // one per file
        } catch (const ApiError&) {
        }
        return 0;
    }
    const bool chat = !(data[0] & 1);
    json translated;
    Endpoint ep = Endpoint::CHAT;
    try {
        (void)ollama_load_only(req, chat);
        translated = chat ? ollama_chat_body(req) : ollama_generate_body(req, ep);
    } catch (const ApiError& e) {
        if (e.status != 400) std::abort();
        return 0;
    }
    try {
        (void)parse_request(dump(translated), ep, SamplerParams{});
    } catch (const ApiError& e) {
        if (e.status != 400) {
            std::fprintf(stderr, "fuzz_ollama: status %d: %s\n", e.status, e.message.c_str());
            std::abort();
        }
    }
    return 0;
}
