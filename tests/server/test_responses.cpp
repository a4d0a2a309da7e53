// The Responses API's translation (server/responses.h): requests into chat completions
// bodies, with a 400 naming the field for malformed ones and a 404 for an unknown
// previous_response_id; chat completions (whole and streamed) back into response objects
// and their events; the bounded store of responses (server/responses_store.h).
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/responses.h"

namespace {

using namespace glia::server;
using glia::server::json;
namespace rs = glia::server::responses;

std::string body(const std::string& extra, const std::string& input = R"("hi")") {
    return R"({"model": "m", "input": )" + input + extra + "}";
}

TEST(ResponsesRequest, TranslatesAConversation) {
    const std::string b = body(R"(, "instructions": "Be brief.",
        "tools": [{"type": "function", "name": "get_weather", "description": "d", "parameters": {"type": "object"}, "strict": true},
                  {"type": "function", "name": "now"}],
        "tool_choice": {"type": "function", "name": "get_weather"}, "temperature": 0.5, "top_p": 0.9, "max_output_tokens": 32,
        "stream": true, "store": false, "reasoning": {"effort": "none"}, "stop": ["END"], "metadata": {"k": "v"},
        "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}, "strict": true}})",
                               R"([{"role": "developer", "content": "Use tools."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}, {"type": "input_text", "text": "Now."}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "hmm"}]},
            {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
             "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"},
            {"type": "function_call", "call_id": "call_2", "name": "now", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "18 C"},
            {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "noon"}]},
            {"role": "user", "content": "And tomorrow?"}])");
    const rs::Translated t = rs::translate_request(b, nullptr);
    const json& c = t.chat;
    EXPECT_TRUE(t.stream);
    EXPECT_FALSE(t.store);
    EXPECT_EQ(c["model"], "m");
    EXPECT_EQ(c["max_tokens"], 32);
    ASSERT_EQ(c["messages"].size(), 7u) << c["messages"].dump();
    EXPECT_EQ(c["messages"][0], json({{"role", "system"}, {"content", "Be brief."}}));
    EXPECT_EQ(c["messages"][1], json({{"role", "system"}, {"content", "Use tools."}}));
    EXPECT_EQ(c["messages"][2], json({{"role", "user"}, {"content", "Weather?\nNow."}}));
    const json& a = c["messages"][3];
    EXPECT_EQ(a["role"], "assistant");
    EXPECT_EQ(a["content"], "Let me look.");
    EXPECT_EQ(a["reasoning_content"], "hmm");
    ASSERT_EQ(a["tool_calls"].size(), 2u);
    EXPECT_EQ(a["tool_calls"][0]["id"], "call_1");
    EXPECT_EQ(a["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(a["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Oslo\"}");
    EXPECT_EQ(c["messages"][4], json({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "18 C"}}));
    EXPECT_EQ(c["messages"][5], json({{"role", "tool"}, {"tool_call_id", "call_2"}, {"content", "noon"}}));
    EXPECT_EQ(c["messages"][6], json({{"role", "user"}, {"content", "And tomorrow?"}}));
    // The history is the conversation without the instructions.
    EXPECT_EQ(t.history.size(), 6u);
    EXPECT_EQ(t.history[0]["content"], "Use tools.");
    ASSERT_EQ(c["tools"].size(), 2u);
    EXPECT_EQ(c["tools"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(c["tools"][0]["function"]["parameters"], json({{"type", "object"}}));
    EXPECT_EQ(c["tools"][1]["function"]["parameters"]["type"], "object");
    EXPECT_EQ(c["tool_choice"]["function"]["name"], "get_weather");
    EXPECT_EQ(c["temperature"], 0.5);
    EXPECT_EQ(c["top_p"], 0.9);
    EXPECT_EQ(c["stop"], json::array({"END"}));
    EXPECT_EQ(c["stream_options"]["include_usage"], true);
    EXPECT_EQ(c["chat_template_kwargs"]["enable_thinking"], false);
    EXPECT_EQ(c["response_format"]["type"], "json_schema");
    EXPECT_EQ(c["response_format"]["json_schema"]["name"], "w");
    EXPECT_EQ(c["response_format"]["json_schema"]["schema"], json({{"type", "object"}}));
    EXPECT_EQ(c["response_format"]["json_schema"]["strict"], true);
    // What the response object repeats.
    EXPECT_EQ(t.echo["instructions"], "Be brief.");
    EXPECT_EQ(t.echo["tools"][0]["name"], "get_weather");
    EXPECT_EQ(t.echo["tools"][0]["strict"], true);
    EXPECT_EQ(t.echo["metadata"]["k"], "v");
    EXPECT_EQ(t.echo["max_output_tokens"], 32);

    // A string input is one user message; json_object and text formats; tool_choice strings.
    const rs::Translated s = rs::translate_request(body(R"(, "text": {"format": {"type": "json_object"}})"), nullptr);
    EXPECT_EQ(s.chat["messages"], json::array({{{"role", "user"}, {"content", "hi"}}}));
    EXPECT_EQ(s.chat["response_format"], json({{"type", "json_object"}}));
    EXPECT_TRUE(s.store);
    EXPECT_FALSE(s.stream);
    EXPECT_FALSE(rs::translate_request(body(R"(, "text": {"format": {"type": "text"}})"), nullptr).chat.contains("response_format"));
    EXPECT_EQ(rs::translate_request(body(R"(, "tools": [{"type": "function", "name": "f"}], "tool_choice": "required")"), nullptr)
                  .chat["tool_choice"], "required");
    EXPECT_EQ(rs::translate_request(body(R"(, "reasoning": {"effort": "high"})"), nullptr).chat["chat_template_kwargs"]["enable_thinking"],
              true);
}

TEST(ResponsesRequest, PreviousResponseContinuesItsConversation) {
    rs::Store store;
    const json earlier = json::array({{{"role", "user"}, {"content", "Weather?"}},
                                      {{"role", "assistant"}, {"content", ""},
                                       {"tool_calls", json::array({{{"id", "call_1"}, {"type", "function"},
                                                                    {"function", {{"name", "f"}, {"arguments", "{}"}}}}})}}});
    store.put("resp_1", {json{{"id", "resp_1"}}, earlier});
    const rs::Translated t = rs::translate_request(
        body(R"(, "previous_response_id": "resp_1", "instructions": "New rules.")",
             R"([{"type": "function_call_output", "call_id": "call_1", "output": "18 C"}])"),
        &store);
    ASSERT_EQ(t.chat["messages"].size(), 4u);
    EXPECT_EQ(t.chat["messages"][0]["content"], "New rules.");
    EXPECT_EQ(t.chat["messages"][1], earlier[0]);
    EXPECT_EQ(t.chat["messages"][2], earlier[1]);
    EXPECT_EQ(t.chat["messages"][3]["role"], "tool");
    EXPECT_EQ(t.history.size(), 3u);
    EXPECT_EQ(t.echo["previous_response_id"], "resp_1");
    // item_reference: an output item of a stored response, by its id.
    store.put("resp_abc", {json{{"id", "resp_abc"},
                                {"output", json::array({{{"id", "msg_abc"}, {"type", "message"}, {"role", "assistant"},
                                                         {"content", json::array({{{"type", "output_text"}, {"text", "Hello."}}})}},
                                                        {{"id", "fc_abc_1"}, {"type", "function_call"}, {"call_id", "call_9"},
                                                         {"name", "f"}, {"arguments", "{}"}}})}},
                           json::array()});
    const rs::Translated r = rs::translate_request(
        body("", R"([{"role": "user", "content": "Hi"}, {"type": "item_reference", "id": "msg_abc"},
                     {"type": "item_reference", "id": "fc_abc_1"}, {"type": "function_call_output", "call_id": "call_9", "output": "ok"}])"),
        &store);
    ASSERT_EQ(r.chat["messages"].size(), 3u) << r.chat.dump();
    EXPECT_EQ(r.chat["messages"][1]["content"], "Hello.");
    EXPECT_EQ(r.chat["messages"][1]["tool_calls"][0]["id"], "call_9");
    for (const char* id : {"msg_zzz", "fc_abc_2", "nounderscore"}) {
        try {
            rs::translate_request(body("", std::string(R"([{"type": "item_reference", "id": ")") + id + "\"}]"), &store);
            ADD_FAILURE() << "an unknown item was accepted: " << id;
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 404);
            EXPECT_EQ(e.param, "input[0].id");
        }
    }

    // With no input the stored conversation alone is the prompt.
    EXPECT_EQ(rs::translate_request(R"({"model": "m", "previous_response_id": "resp_1"})", &store).chat["messages"].size(), 2u);

    // An unknown id: 404 naming the field.
    for (const rs::Store* s : std::vector<const rs::Store*>{&store, nullptr}) {
        try {
            rs::translate_request(body(R"(, "previous_response_id": "resp_gone")"), s);
            ADD_FAILURE() << "an unknown previous_response_id was accepted";
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 404);
            EXPECT_EQ(e.param, "previous_response_id");
            EXPECT_NE(e.message.find("resp_gone"), std::string::npos) << e.message;
            const json j = error_json(e);
            EXPECT_EQ(j["error"]["param"], "previous_response_id");
            EXPECT_EQ(j["error"]["code"], "previous_response_not_found");
        }
    }
}

TEST(ResponsesRequest, MalformedRequestsNameTheField) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"({"input": "x"})", "model"},
        {R"({"model": 5, "input": "x"})", "model"},
        {R"({"model": "m"})", "input"},
        {body("", "[]"), "input"},
        {body("", "7"), "input"},
        {body("", "[5]"), "input[0]"},
        {body("", R"([{"role": "robot", "content": "x"}])"), "input[0].role"},
        {body("", R"([{"content": "x"}])"), "input[0].role"},
        {body("", R"([{"role": "user"}])"), "input[0].content"},
        {body("", R"([{"role": "user", "content": 3}])"), "input[0].content"},
        {body("", R"([{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                      {"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}])"), "input[2].content[0].type"},
        {body("", R"([{"role": "user", "content": [{"text": "no type"}]}])"), "input[0].content[0].type"},
        {body("", R"([{"role": "user", "content": [{"type": "input_text"}]}])"), "input[0].content[0].text"},
        {body("", R"([{"role": "user", "content": [{"type": "refusal", "refusal": "no"}]}])"), "input[0].content[0].type"},
        {body("", R"([{"type": "computer_call", "id": "cu_1"}])"), "input[0].type"},
        {body("", R"([{"type": "item_reference"}])"), "input[0].id"},
        {body("", R"([{"type": "function_call", "name": "f", "arguments": "{}"}])"), "input[0].call_id"},
        {body("", R"([{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}])"), "input[0].arguments"},
        {body("", R"([{"type": "function_call_output", "call_id": "c"}])"), "input[0].output"},
        {body("", R"([{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_file"}]}])"), "input[0].output[0].type"},
        {body("", R"([{"type": "reasoning", "summary": [{"type": "other", "text": "x"}]}])"), "input[0].summary[0].type"},
        {body(R"(, "instructions": 1)"), "instructions"},
        {body(R"(, "tools": {})"), "tools"},
        {body(R"(, "tools": [{"name": "f"}])"), "tools[0].type"},
        {body(R"(, "tools": [{"type": "web_search"}])"), "tools[0].type"},
        {body(R"(, "tools": [{"type": "function"}])"), "tools[0].name"},
        {body(R"(, "tools": [{"type": "function", "name": "bad name"}])"), "tools[0].name"},
        {body(R"(, "tools": [{"type": "function", "name": "f"}, {"type": "function", "name": "f"}])"), "tools[1].name"},
        {body(R"(, "tools": [{"type": "function", "name": "f", "parameters": [1]}])"), "tools[0].parameters"},
        {body(R"(, "tools": [{"type": "function", "name": "f", "function": {"name": "f"}, "strict": "yes"}])"), "tools[0].strict"},
        {body(R"(, "tool_choice": "required")"), "tool_choice"},
        {body(R"(, "tool_choice": "sometimes")"), "tool_choice"},
        {body(R"(, "tool_choice": 1)"), "tool_choice"},
        {body(R"(, "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "g"})"), "tool_choice.name"},
        {body(R"(, "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "file_search"})"), "tool_choice.type"},
        {body(R"(, "text": 1)"), "text"},
        {body(R"(, "text": {"format": {"type": "xml"}})"), "text.format.type"},
        {body(R"(, "text": {"format": {"type": "json_schema", "name": "x"}})"), "text.format.schema"},
        {body(R"(, "text": {"format": {"type": "json_schema", "schema": "x"}})"), "text.format.schema"},
        {body(R"(, "text": {"format": {"type": "json_schema", "schema": {}, "strict": 1}})"), "text.format.strict"},
        {body(R"(, "max_output_tokens": 0)"), "max_output_tokens"},
        {body(R"(, "max_output_tokens": "8")"), "max_output_tokens"},
        {body(R"(, "max_output_tokens": 1e30)"), "max_output_tokens"},
        {body(R"(, "temperature": 2.5)"), "temperature"},
        {body(R"(, "top_p": "x")"), "top_p"},
        {body(R"(, "stream": "yes")"), "stream"},
        {body(R"(, "store": 1)"), "store"},
        {body(R"(, "background": true)"), "background"},
        {body(R"(, "previous_response_id": 5)"), "previous_response_id"},
        {body(R"(, "metadata": [])"), "metadata"},
        {body(R"(, "reasoning": {"effort": 1})"), "reasoning.effort"},
        {body(R"(, "chat_template_kwargs": 1)"), "chat_template_kwargs"},
        {"[1, 2]", ""},
        {"{not json", ""},
    };
    for (const auto& [text, field] : cases) {
        try {
            rs::translate_request(text, nullptr);
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
    EXPECT_THROW(rs::translate_request(body(R"(, "metadata": )" + std::string(500, '[') + std::string(500, ']')), nullptr), ApiError);
}

// The body is read as every route reads it (json_body.h): a syntax error names its byte
// offset and the field it is in, invalid UTF-8 the byte, its offset and the field.
TEST(ResponsesRequest, BodyErrorsSayWhere) {
    try {
        rs::translate_request(R"({"model": "m", "input": [1,]})", nullptr);
        ADD_FAILURE() << "accepted a trailing comma";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.code, "invalid_json");
        EXPECT_EQ(e.param, "input[1]") << e.message;
        EXPECT_NE(e.message.find("at byte offset 27"), std::string::npos) << e.message;
    }
    try {
        rs::translate_request("{\"model\": \"m\", \"input\": \"ab\xff\"}", nullptr);
        ADD_FAILURE() << "accepted invalid UTF-8";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.code, "invalid_utf8");
        EXPECT_EQ(e.param, "input") << e.message;
        EXPECT_NE(e.message.find("byte 0xff at offset 27"), std::string::npos) << e.message;
    }
    try {
        rs::translate_request("[1, 2]", nullptr);
        ADD_FAILURE() << "accepted an array";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.code, "invalid_json");
        EXPECT_NE(e.message.find("must be a JSON object, not array"), std::string::npos) << e.message;
    }
}

json chat_reply(const json& message, const char* finish) {
    return json{{"id", "chatcmpl-abc"}, {"created", 1700000000}, {"model", "m"},
                {"choices", json::array({{{"index", 0}, {"message", message}, {"finish_reason", finish}}})},
                {"usage", {{"prompt_tokens", 12}, {"completion_tokens", 5}, {"total_tokens", 17}}}};
}

TEST(ResponsesResponse, WholeResponse) {
    const rs::Translated t = rs::translate_request(body(R"(, "instructions": "Be brief.", "max_output_tokens": 5,
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}])"), nullptr);
    const json chat = chat_reply({{"role", "assistant"}, {"content", "Looking."}, {"reasoning_content", "think"},
                                  {"tool_calls", json::array({{{"id", "call_1"}, {"type", "function"},
                                                               {"function", {{"name", "f"}, {"arguments", "{\"a\": 1}"}}}}})}},
                                 "tool_calls");
    const json r = rs::response_from_chat(chat, t);
    EXPECT_EQ(r["id"], "resp_abc");
    EXPECT_EQ(r["object"], "response");
    EXPECT_EQ(r["created_at"], 1700000000);
    EXPECT_EQ(r["status"], "completed");
    EXPECT_TRUE(r["incomplete_details"].is_null());
    EXPECT_EQ(r["instructions"], "Be brief.");
    EXPECT_EQ(r["max_output_tokens"], 5);
    EXPECT_EQ(r["tools"][0]["name"], "f");
    ASSERT_EQ(r["output"].size(), 3u) << r.dump();
    EXPECT_EQ(r["output"][0]["type"], "reasoning");
    EXPECT_EQ(r["output"][0]["content"][0], json({{"type", "reasoning_text"}, {"text", "think"}}));
    EXPECT_EQ(r["output"][1]["type"], "message");
    EXPECT_EQ(r["output"][1]["id"], "msg_abc");
    EXPECT_EQ(r["output"][1]["role"], "assistant");
    EXPECT_EQ(r["output"][1]["content"][0]["type"], "output_text");
    EXPECT_EQ(r["output"][1]["content"][0]["text"], "Looking.");
    EXPECT_EQ(r["output"][2]["type"], "function_call");
    EXPECT_EQ(r["output"][2]["call_id"], "call_1");
    EXPECT_EQ(r["output"][2]["name"], "f");
    EXPECT_EQ(r["output"][2]["arguments"], "{\"a\": 1}");
    EXPECT_EQ(r["usage"]["input_tokens"], 12);
    EXPECT_EQ(r["usage"]["output_tokens"], 5);
    EXPECT_EQ(r["usage"]["total_tokens"], 17);

    // Cut by max_output_tokens: incomplete.
    const json cut = rs::response_from_chat(chat_reply({{"role", "assistant"}, {"content", "Once"}}, "length"), t);
    EXPECT_EQ(cut["status"], "incomplete");
    EXPECT_EQ(cut["incomplete_details"]["reason"], "max_output_tokens");
    ASSERT_EQ(cut["output"].size(), 1u);
    EXPECT_EQ(cut["output"][0]["status"], "incomplete");
    // The reply kept for the conversation is a chat message.
    EXPECT_EQ(rs::assistant_message(chat)["tool_calls"][0]["id"], "call_1");
    EXPECT_EQ(rs::assistant_message(chat)["reasoning_content"], "think");
}

// The events of "event: X\ndata: {...}\n\n" text; each event's name is its type.
std::vector<json> events(const std::string& s) {
    std::vector<json> out;
    size_t pos = 0;
    while ((pos = s.find("event: ", pos)) != std::string::npos) {
        const size_t nl = s.find('\n', pos);
        const std::string name = s.substr(pos + 7, nl - pos - 7);
        const size_t end = s.find("\n\n", nl);
        json d = json::parse(s.substr(nl + 7, end - nl - 7));
        EXPECT_EQ(d["type"], name);
        EXPECT_EQ(d["sequence_number"], out.size());
        out.push_back(d);
        pos = end;
    }
    return out;
}

json chunk(const json& delta, const json& finish = nullptr) {
    return json{{"id", "chatcmpl-x"}, {"created", 5}, {"model", "m"},
                {"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}};
}

TEST(ResponsesResponse, StreamEventsAndTheStoredResponse) {
    auto store = std::make_shared<rs::Store>();
    const rs::Translated t = rs::translate_request(body(R"(, "stream": true, "tools": [{"type": "function", "name": "f"}])"), store.get());
    auto shaper = rs::stream_shaper(t, store);
    std::string out;
    out += shaper->event(chunk({{"role", "assistant"}, {"content", ""}}));
    out += shaper->event(chunk({{"reasoning_content", "hm"}}));
    out += shaper->event(chunk({{"reasoning_content", "m"}}));
    out += shaper->event(chunk({{"content", "Hi"}}));
    out += shaper->event(chunk({{"content", " there"}}));
    out += shaper->event(chunk({{"tool_calls", json::array({{{"index", 0}, {"id", "call_1"}, {"type", "function"},
                                                              {"function", {{"name", "f"}, {"arguments", "{}"}}}}})}}));
    out += shaper->event(chunk(json::object(), "tool_calls"));
    out += shaper->event(json{{"id", "chatcmpl-x"}, {"choices", json::array()}, {"usage", {{"prompt_tokens", 9}, {"completion_tokens", 4}}}});
    out += shaper->end();
    const std::vector<json> ev = events(out);
    std::vector<std::string> types;
    for (const json& e : ev) types.push_back(e["type"]);
    const std::vector<std::string> want = {
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta", "response.reasoning_text.delta",
        "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done", "response.completed"};
    ASSERT_EQ(types, want) << out;
    EXPECT_EQ(ev[0]["response"]["id"], "resp_x");
    EXPECT_EQ(ev[0]["response"]["status"], "in_progress");
    EXPECT_TRUE(ev[0]["response"]["output"].empty());
    EXPECT_EQ(ev[2]["item"]["type"], "reasoning");
    EXPECT_EQ(ev[5]["delta"], "m");
    EXPECT_EQ(ev[6]["text"], "hmm");
    EXPECT_EQ(ev[9]["output_index"], 1);
    EXPECT_EQ(ev[9]["item"]["type"], "message");
    EXPECT_EQ(ev[9]["item"]["status"], "in_progress");
    EXPECT_EQ(ev[10]["part"]["text"], "");
    EXPECT_EQ(ev[11]["item_id"], ev[9]["item"]["id"]);
    EXPECT_EQ(ev[12]["delta"], " there");
    EXPECT_EQ(ev[13]["text"], "Hi there");
    EXPECT_EQ(ev[15]["item"]["content"][0]["text"], "Hi there");
    EXPECT_EQ(ev[16]["output_index"], 2);
    EXPECT_EQ(ev[16]["item"]["arguments"], "");
    EXPECT_EQ(ev[17]["delta"], "{}");
    EXPECT_EQ(ev[18]["name"], "f");
    const json& r = ev.back()["response"];
    EXPECT_EQ(r["status"], "completed");
    ASSERT_EQ(r["output"].size(), 3u);
    EXPECT_EQ(r["output"][2]["call_id"], "call_1");
    EXPECT_EQ(r["usage"]["input_tokens"], 9);
    EXPECT_EQ(r["usage"]["total_tokens"], 13);

    // Kept: the response as sent, and the conversation that a next request continues.
    const auto kept = store->get("resp_x");
    ASSERT_TRUE(kept.has_value());
    EXPECT_EQ(kept->response, r);
    ASSERT_EQ(kept->messages.size(), 2u);
    EXPECT_EQ(kept->messages[1]["content"], "Hi there");
    EXPECT_EQ(kept->messages[1]["reasoning_content"], "hmm");
    EXPECT_EQ(kept->messages[1]["tool_calls"][0]["id"], "call_1");
    EXPECT_FALSE(kept->messages[1]["tool_calls"][0].contains("index"));

    // store: false is not kept; a reply cut by the token limit ends in response.incomplete.
    const rs::Translated nt = rs::translate_request(body(R"(, "stream": true, "store": false)"), store.get());
    auto ns = rs::stream_shaper(nt, store);
    std::string n = ns->event(json{{"id", "chatcmpl-y"}, {"model", "m"}, {"choices", json::array({{{"index", 0}, {"delta", {{"content", "a"}}}}})}});
    n += ns->event(json{{"id", "chatcmpl-y"}, {"choices", json::array({{{"index", 0}, {"delta", json::object()}, {"finish_reason", "length"}}})}});
    n += ns->end();
    const std::vector<json> ne = events(n);
    EXPECT_EQ(ne.back()["type"], "response.incomplete");
    EXPECT_EQ(ne.back()["response"]["incomplete_details"]["reason"], "max_output_tokens");
    EXPECT_EQ(ne.back()["response"]["output"][0]["status"], "incomplete");
    EXPECT_FALSE(store->get("resp_y").has_value());
    EXPECT_EQ(store->count(), 1u);

    // A failure after the stream began: an error event, then nothing.
    auto failing = rs::stream_shaper(t, store);
    std::string f = failing->event(chunk({{"content", "a"}}));
    f += failing->event(json{{"error", {{"message", "the request took too long"}, {"code", "timeout"}}}});
    f += failing->end();
    const std::vector<json> fe = events(f);
    ASSERT_FALSE(fe.empty());
    EXPECT_EQ(fe.back()["type"], "error");
    EXPECT_EQ(fe.back()["message"], "the request took too long");
    EXPECT_EQ(fe.back()["code"], "timeout");
}

TEST(ResponsesStore, BoundedInCountAndBytes) {
    rs::Store by_count(3, size_t(1) << 20);
    for (int i = 0; i < 5; ++i) by_count.put("r" + std::to_string(i), {json{{"i", i}}, json::array()});
    EXPECT_EQ(by_count.count(), 3u);
    EXPECT_FALSE(by_count.get("r0") || by_count.get("r1"));  // the oldest went first
    ASSERT_TRUE(by_count.get("r4").has_value());
    EXPECT_EQ(by_count.get("r4")->response["i"], 4);
    by_count.put("r5", {json{{"output", json::array({{{"id", "msg_5"}, {"type", "message"}}, {{"id", "fc_5"}, {"type", "function_call"}}})}},
                        json::array()});
    ASSERT_TRUE(by_count.output_item("r5", "fc_5").has_value());
    EXPECT_EQ((*by_count.output_item("r5", "fc_5"))["type"], "function_call");
    EXPECT_FALSE(by_count.output_item("r5", "fc_6") || by_count.output_item("r9", "fc_5"));
    EXPECT_TRUE(by_count.erase("r3"));
    EXPECT_FALSE(by_count.erase("r3"));
    EXPECT_EQ(by_count.count(), 2u);

    rs::Store by_bytes(100, 1000);
    const std::string text(300, 'x');
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(by_bytes.put("r" + std::to_string(i), {json{{"t", text}}, json::array()}));
    EXPECT_LE(by_bytes.bytes(), 1000u);
    EXPECT_EQ(by_bytes.count(), 3u);
    EXPECT_TRUE(by_bytes.get("r4") && by_bytes.get("r2"));
    EXPECT_FALSE(by_bytes.get("r1"));
    // One larger than the whole bound is not kept (and drops nothing).
    EXPECT_FALSE(by_bytes.put("big", {json{{"t", std::string(2000, 'y')}}, json::array()}));
    EXPECT_EQ(by_bytes.count(), 3u);
    // Kept again under the same id: replaced, not doubled.
    by_bytes.put("r4", {json{{"t", "short"}}, json::array()});
    EXPECT_EQ(by_bytes.count(), 3u);
    EXPECT_EQ(by_bytes.get("r4")->response["t"], "short");
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
