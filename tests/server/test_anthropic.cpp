// The Messages API's translation (server/anthropic.h): requests into chat completions
// bodies, with a 400 naming the field for malformed ones, and chat completions (whole and
// streamed) back into Messages and their events.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/anthropic.h"
#include "server/json_depth.h"

namespace {

using namespace glia::server;
using glia::server::json;

json body(const std::string& extra, const std::string& messages = R"([{"role": "user", "content": "hi"}])") {
    return json::parse(R"({"model": "m", "max_tokens": 8, "messages": )" + messages + extra + "}");
}

TEST(AnthropicRequest, TranslatesAConversation) {
    const json b = body(R"(, "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
        "tools": [{"name": "get_weather", "description": "d", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "tool", "name": "get_weather"}, "stop_sequences": ["END"], "temperature": 0.5, "top_k": 4,
        "stream": true, "thinking": {"type": "disabled"})",
        R"([{"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": ""},
                                              {"type": "text", "text": "Let me look."},
                                              {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18 C"}]},
                                         {"type": "text", "text": "And tomorrow?"}]}])");
    const anthropic::Translated t = anthropic::translate_request(b.dump(), false);
    const json& c = t.chat;
    EXPECT_TRUE(t.stream);
    EXPECT_EQ(c["model"], "m");
    EXPECT_EQ(c["max_tokens"], 8);
    ASSERT_EQ(c["messages"].size(), 5u);
    EXPECT_EQ(c["messages"][0], json({{"role", "system"}, {"content", "Be brief.\nBe kind."}}));
    EXPECT_EQ(c["messages"][1]["role"], "user");
    const json& a = c["messages"][2];
    EXPECT_EQ(a["role"], "assistant");
    EXPECT_EQ(a["content"], "Let me look.");
    EXPECT_EQ(a["reasoning_content"], "hmm");
    EXPECT_EQ(a["tool_calls"][0]["id"], "toolu_1");
    EXPECT_EQ(json::parse(a["tool_calls"][0]["function"]["arguments"].get<std::string>()), json({{"city", "Oslo"}}));
    EXPECT_EQ(c["messages"][3], json({{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "18 C"}}));
    EXPECT_EQ(c["messages"][4], json({{"role", "user"}, {"content", "And tomorrow?"}}));
    EXPECT_EQ(c["tools"][0]["function"]["parameters"], json({{"type", "object"}}));
    EXPECT_EQ(c["tool_choice"]["function"]["name"], "get_weather");
    EXPECT_EQ(c["stop"], json::array({"END"}));
    EXPECT_EQ(c["temperature"], 0.5);
    EXPECT_EQ(c["top_k"], 4);
    EXPECT_EQ(c["stream_options"]["include_usage"], true);
    EXPECT_EQ(c["chat_template_kwargs"]["enable_thinking"], false);

    EXPECT_EQ(anthropic::translate_request(body(R"(, "tools": [{"name": "f", "input_schema": {}}], "tool_choice": {"type": "any"})").dump(), false)
                  .chat["tool_choice"], "required");
    // count_tokens needs no max_tokens.
    EXPECT_NO_THROW(anthropic::translate_request(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})", true));
}

TEST(AnthropicRequest, MalformedRequestsNameTheField) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
        {R"({"model": "m", "max_tokens": 0, "messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
        {R"({"model": "m", "max_tokens": "8", "messages": [{"role": "user", "content": "x"}]})", "max_tokens"},
        {R"({"max_tokens": 8, "messages": [{"role": "user", "content": "x"}]})", "model"},
        {R"({"model": "m", "max_tokens": 8})", "messages"},
        {R"({"model": "m", "max_tokens": 8, "messages": []})", "messages"},
        {R"({"model": "m", "max_tokens": 8, "messages": {}})", "messages"},
        {body("", R"([{"role": "system", "content": "x"}])").dump(), "messages[0].role"},
        {body("", R"([{"role": "user"}])").dump(), "messages[0].content"},
        {body("", R"([{"role": "user", "content": 5}])").dump(), "messages[0].content"},
        {body("", R"([{"role": "user", "content": [{"type": "image", "source": {}}]}])").dump(), "messages[0].content[0].type"},
        {body("", R"([{"role": "user", "content": [{"text": "no type"}]}])").dump(), "messages[0].content[0].type"},
        {body("", R"([{"role": "user", "content": [{"type": "text"}]}])").dump(), "messages[0].content[0].text"},
        {body("", R"([{"role": "user", "content": [{"type": "tool_result"}]}])").dump(), "messages[0].content[0].tool_use_id"},
        {body("", R"([{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]}])").dump(),
         "messages[0].content[0].type"},
        {body("", R"([{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": [1]}]}])").dump(),
         "messages[0].content[0].input"},
        {body("", R"([{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "a"}]}])").dump(),
         "messages[0].content[0].type"},
        {body(R"(, "system": 7)").dump(), "system"},
        {body(R"(, "system": [{"type": "image"}])").dump(), "system[0].type"},
        {body(R"(, "temperature": 1.5)").dump(), "temperature"},
        {body(R"(, "top_p": 0)").dump(), "top_p"},
        {body(R"(, "top_k": -1)").dump(), "top_k"},
        {body(R"(, "stop_sequences": "END")").dump(), "stop_sequences"},
        {body(R"(, "stop_sequences": [1])").dump(), "stop_sequences[0]"},
        {body(R"(, "stream": "yes")").dump(), "stream"},
        {body(R"(, "tools": {})").dump(), "tools"},
        {body(R"(, "tools": [{"name": "f"}])").dump(), "tools[0].input_schema"},
        {body(R"(, "tools": [{"name": "bad name", "input_schema": {}}])").dump(), "tools[0].name"},
        {body(R"(, "tools": [{"name": "f", "input_schema": {}}, {"name": "f", "input_schema": {}}])").dump(), "tools[1].name"},
        {body(R"(, "tools": [{"type": "web_search_20250305", "name": "web_search"}])").dump(), "tools[0].type"},
        {body(R"(, "tool_choice": {"type": "any"})").dump(), "tool_choice"},
        {body(R"(, "tool_choice": "auto")").dump(), "tool_choice"},
        {body(R"(, "tools": [{"name": "f", "input_schema": {}}], "tool_choice": {"type": "tool", "name": "g"})").dump(), "tool_choice.name"},
        {body(R"(, "tools": [{"name": "f", "input_schema": {}}], "tool_choice": {"type": "maybe"})").dump(), "tool_choice.type"},
        {body(R"(, "thinking": {"type": "sometimes"})").dump(), "thinking.type"},
        {body(R"(, "thinking": true)").dump(), "thinking"},
        {body(R"(, "metadata": 1)").dump(), "metadata"},
        {"[1, 2]", ""},
        {"{not json", ""},
    };
    for (const auto& [text, field] : cases) {
        try {
            anthropic::translate_request(text, false);
            ADD_FAILURE() << "accepted: " << text;
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 400) << text;
            EXPECT_EQ(e.param, field) << text << ": " << e.message;
            if (!field.empty()) {
                EXPECT_NE(e.message.find("'" + field + "'"), std::string::npos) << e.message;
            }
        }
    }
    // Deep nesting is refused before anything walks it.
    EXPECT_THROW(anthropic::translate_request(body(R"(, "metadata": )" + std::string(500, '[') + std::string(500, ']')).dump(), false),
                 ApiError);
}

// The body is read as every route reads it (json_body.h): a syntax error names its byte
// offset and the field it is in, invalid UTF-8 the byte, its offset and the field.
TEST(AnthropicRequest, BodyErrorsSayWhere) {
    try {
        anthropic::translate_request(R"({"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x"},]})", false);
        ADD_FAILURE() << "accepted a trailing comma";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.code, "invalid_json");
        EXPECT_EQ(e.param, "messages[1]") << e.message;
        EXPECT_NE(e.message.find("at byte offset 78"), std::string::npos) << e.message;
    }
    try {
        anthropic::translate_request("{\"model\": \"m\xc0\", \"max_tokens\": 8}", false);
        ADD_FAILURE() << "accepted invalid UTF-8";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.code, "invalid_utf8");
        EXPECT_EQ(e.param, "model") << e.message;
        EXPECT_NE(e.message.find("byte 0xc0 at offset 12"), std::string::npos) << e.message;
    }
    try {
        anthropic::translate_request("\"hi\"", true);
        ADD_FAILURE() << "accepted a string";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.code, "invalid_json");
        EXPECT_NE(e.message.find("must be a JSON object, not string"), std::string::npos) << e.message;
    }
}

TEST(AnthropicResponse, ErrorShape) {
    const json e = anthropic::error_body(400, "'max_tokens' is required");
    EXPECT_EQ(e["type"], "error");
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
    EXPECT_EQ(e["error"]["message"], "'max_tokens' is required");
    EXPECT_STREQ(anthropic::error_type(401), "authentication_error");
    EXPECT_STREQ(anthropic::error_type(404), "not_found_error");
    EXPECT_STREQ(anthropic::error_type(503), "overloaded_error");
    EXPECT_STREQ(anthropic::error_type(500), "api_error");
}

TEST(AnthropicResponse, WholeMessage) {
    const json chat = json::parse(R"({"id": "chatcmpl-abc", "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": "Looking.", "reasoning_content": "think",
                    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}})");
    const json m = anthropic::message_from_chat(chat);
    EXPECT_EQ(m["id"], "msg_abc");
    EXPECT_EQ(m["type"], "message");
    EXPECT_EQ(m["stop_reason"], "tool_use");
    EXPECT_TRUE(m["stop_sequence"].is_null());
    ASSERT_EQ(m["content"].size(), 3u);
    EXPECT_EQ(m["content"][0]["type"], "thinking");
    EXPECT_EQ(m["content"][0]["thinking"], "think");
    EXPECT_EQ(m["content"][1], json({{"type", "text"}, {"text", "Looking."}}));
    EXPECT_EQ(m["content"][2]["input"], json({{"a", 1}}));
    EXPECT_EQ(m["usage"], json({{"input_tokens", 12}, {"output_tokens", 5}}));

    json stopped = chat;
    stopped["choices"][0]["finish_reason"] = "stop";
    stopped["choices"][0]["stop_reason"] = "END";
    EXPECT_EQ(anthropic::message_from_chat(stopped)["stop_reason"], "stop_sequence");
    EXPECT_EQ(anthropic::message_from_chat(stopped)["stop_sequence"], "END");
    stopped["choices"][0].erase("stop_reason");
    EXPECT_EQ(anthropic::message_from_chat(stopped)["stop_reason"], "end_turn");
    stopped["choices"][0]["finish_reason"] = "length";
    EXPECT_EQ(anthropic::message_from_chat(stopped)["stop_reason"], "max_tokens");
}

// The events' names and types, from "event: X\ndata: {...}\n\n" text.
std::vector<json> events(const std::string& s) {
    std::vector<json> out;
    size_t pos = 0;
    while ((pos = s.find("event: ", pos)) != std::string::npos) {
        const size_t nl = s.find('\n', pos);
        const std::string name = s.substr(pos + 7, nl - pos - 7);
        const size_t end = s.find("\n\n", nl);
        json d = json::parse(s.substr(nl + 7, end - nl - 7));
        EXPECT_EQ(d["type"], name);
        out.push_back(d);
        pos = end;
    }
    return out;
}

json chunk(const json& delta, const json& finish = nullptr) {
    return json{{"id", "chatcmpl-x"}, {"model", "m"}, {"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}};
}

TEST(AnthropicResponse, StreamEvents) {
    auto shaper = anthropic::stream_shaper(9);
    std::string out;
    out += shaper->event(chunk({{"role", "assistant"}, {"content", ""}}));
    out += shaper->event(chunk({{"reasoning_content", "hm"}}));
    out += shaper->event(chunk({{"reasoning_content", "m"}}));
    out += shaper->event(chunk({{"content", "Hi"}}));
    out += shaper->event(chunk({{"tool_calls", json::array({{{"index", 0}, {"id", "call_1"}, {"type", "function"},
                                                              {"function", {{"name", "f"}, {"arguments", "{}"}}}}})}}));
    out += shaper->event(chunk(json::object(), "tool_calls"));
    out += shaper->event(json{{"id", "chatcmpl-x"}, {"choices", json::array()}, {"usage", {{"prompt_tokens", 9}, {"completion_tokens", 4}}}});
    out += shaper->end();
    const std::vector<json> ev = events(out);
    std::vector<std::string> types;
    for (const json& e : ev) types.push_back(e["type"]);
    const std::vector<std::string> want = {"message_start", "content_block_start", "content_block_delta", "content_block_delta",
                                           "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop",
                                           "content_block_start", "content_block_delta", "content_block_stop", "message_delta",
                                           "message_stop"};
    ASSERT_EQ(types, want) << out;
    EXPECT_EQ(ev[0]["message"]["usage"]["input_tokens"], 9);
    EXPECT_EQ(ev[0]["message"]["id"], "msg_x");
    EXPECT_EQ(ev[1]["content_block"]["type"], "thinking");
    EXPECT_EQ(ev[3]["delta"], json({{"type", "thinking_delta"}, {"thinking", "m"}}));
    EXPECT_EQ(ev[5]["index"], 1);
    EXPECT_EQ(ev[6]["delta"], json({{"type", "text_delta"}, {"text", "Hi"}}));
    EXPECT_EQ(ev[8]["content_block"]["type"], "tool_use");
    EXPECT_EQ(ev[8]["content_block"]["id"], "call_1");
    EXPECT_EQ(ev[9]["delta"]["type"], "input_json_delta");
    EXPECT_EQ(ev[10]["index"], 2);
    EXPECT_EQ(ev[11]["delta"]["stop_reason"], "tool_use");
    EXPECT_EQ(ev[11]["usage"]["output_tokens"], 4);

    // A failure after the stream began: an error event, then nothing.
    auto failing = anthropic::stream_shaper(3);
    std::string f = failing->event(chunk({{"content", "a"}}));
    f += failing->event(json{{"error", {{"message", "the request took too long"}, {"code", "timeout"}}}});
    f += failing->end();
    const std::vector<json> fe = events(f);
    ASSERT_FALSE(fe.empty());
    EXPECT_EQ(fe.back()["type"], "error");
    EXPECT_EQ(fe.back()["error"]["message"], "the request took too long");
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
