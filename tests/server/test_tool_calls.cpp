// Tool calling: the format of each template family, replies parsed into tool_calls (and
// what stays content), stream hold-back of a call's beginning, the grammar that forces a
// call, and the whole round trip through `glia serve` with a Qwen 2.5 template: tools in
// the prompt, a forced call parsed into tool_calls (whole and streamed), the call and the
// tool's result sent back.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include "server/tool_calls.h"
#include "server_fixture.h"

using namespace glia;
using namespace glia::server;
using namespace glia::test::server;

namespace {

std::string tmpl(const std::string& name) { return glia::test::read_text(glia::test::shared_path("templates/" + name + ".jinja")); }

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
   "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                  "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
   "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"], "additionalProperties": false}}}
])");

bool accepts(const std::shared_ptr<grammar::Grammar>& g, const std::string& text) {
    grammar::Matcher m(g);
    return m.feed(text) && m.accepting();
}

}  // namespace

TEST(ToolCalls, FormatOfEachTemplateFamily) {
    EXPECT_EQ(detect_tool_format(tmpl("Qwen-Qwen2.5-7B-Instruct")), ToolFormat::HERMES);
    EXPECT_EQ(detect_tool_format(tmpl("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use")), ToolFormat::HERMES);
    EXPECT_EQ(detect_tool_format(tmpl("NousResearch-Hermes-3-Llama-3.1-8B-tool_use")), ToolFormat::HERMES);
    EXPECT_EQ(detect_tool_format(tmpl("meta-llama-Llama-3.1-8B-Instruct")), ToolFormat::LLAMA3);
    EXPECT_EQ(detect_tool_format(tmpl("meta-llama-Llama-3.2-3B-Instruct")), ToolFormat::LLAMA3);
    EXPECT_EQ(detect_tool_format(tmpl("Mistral-Small-3.2-24B-Instruct-2506")), ToolFormat::MISTRAL);
    EXPECT_EQ(detect_tool_format(tmpl("unsloth-mistral-Devstral-Small-2507")), ToolFormat::MISTRAL);
    EXPECT_EQ(detect_tool_format(tmpl("Qwen3-Coder")), ToolFormat::NONE);  // XML parameters: not parsed
    EXPECT_EQ(detect_tool_format(tmpl("google-gemma-2-2b-it")), ToolFormat::NONE);
}

TEST(ToolCalls, RepliesParseIntoCallsAndContent) {
    ParsedReply r = parse_tool_calls(ToolFormat::HERMES,
                                     "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\"}}\n"
                                     "</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 1, \\\"b\\\": 2}\"}\n</tool_call>");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.content, "Let me check.");
    EXPECT_EQ(r.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(r.calls[0].arguments), json::parse(R"({"city":"Zürich"})"));
    EXPECT_EQ(json::parse(r.calls[1].arguments), json::parse(R"({"a":1,"b":2})"));
    EXPECT_EQ(r.calls[0].id.rfind("call_", 0), 0u);
    EXPECT_NE(r.calls[0].id, r.calls[1].id);
    // Not a call (broken JSON): the text stays.
    r = parse_tool_calls(ToolFormat::HERMES, "<tool_call>\n{\"name\": \"x\", \n</tool_call> ok");
    EXPECT_TRUE(r.calls.empty());
    EXPECT_NE(r.content.find("<tool_call>"), std::string::npos);

    r = parse_tool_calls(ToolFormat::LLAMA3, "<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].name, "add");
    EXPECT_EQ(r.content, "");
    r = parse_tool_calls(ToolFormat::LLAMA3, "{\"a\": 1} is a JSON object.");
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, "{\"a\": 1} is a JSON object.");

    r = parse_tool_calls(ToolFormat::MISTRAL, "Sure.[TOOL_CALLS]get_weather[CALL_ID]abc123[ARGS]{\"city\": \"Paris\"}"
                                              "[TOOL_CALLS]add[ARGS]{\"a\": 2, \"b\": 3}");
    ASSERT_EQ(r.calls.size(), 2u);
    EXPECT_EQ(r.content, "Sure.");
    EXPECT_EQ(r.calls[0].id, "abc123");
    EXPECT_EQ(r.calls[1].name, "add");
    r = parse_tool_calls(ToolFormat::MISTRAL_ARRAY, "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 1}}]");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(json::parse(r.calls[0].arguments)["b"], 1);
}

TEST(ToolCalls, StreamsHoldBackOnlyWhatMayBeginACall) {
    EXPECT_EQ(content_prefix(ToolFormat::HERMES, "Hello <tool_c"), 6u);
    EXPECT_EQ(content_prefix(ToolFormat::HERMES, "Hello <tool_call>\n{"), 6u);
    EXPECT_EQ(content_prefix(ToolFormat::HERMES, "a < b"), 5u);
    EXPECT_EQ(content_prefix(ToolFormat::MISTRAL, "Sure [TOOL"), 5u);
    EXPECT_EQ(content_prefix(ToolFormat::LLAMA3, "  {\"name\""), 0u);
    EXPECT_EQ(content_prefix(ToolFormat::LLAMA3, "<|pyth"), 0u);
    EXPECT_EQ(content_prefix(ToolFormat::LLAMA3, "The answer"), 10u);
}

TEST(ToolCalls, ForcedCallGrammarFollowsTheFormatAndTheParameters) {
    auto h = tool_call_grammar(ToolFormat::HERMES, kTools, "");
    EXPECT_TRUE(accepts(h, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
    EXPECT_TRUE(accepts(h, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": -2}}\n</tool_call>"));
    // The name first, then the arguments (a fixed order, as the reference's grammars have it).
    EXPECT_FALSE(accepts(h, "<tool_call>\n{\"arguments\": {\"a\": 1, \"b\": -2}, \"name\": \"add\"}\n</tool_call>"));
    EXPECT_FALSE(accepts(h, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>"));
    EXPECT_FALSE(accepts(h, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
    EXPECT_FALSE(accepts(h, "Sure! <tool_call>"));
    auto named = tool_call_grammar(ToolFormat::HERMES, kTools, "add");
    EXPECT_FALSE(accepts(named, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
    auto l = tool_call_grammar(ToolFormat::LLAMA3, kTools, "");
    EXPECT_TRUE(accepts(l, "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}"));
    auto m = tool_call_grammar(ToolFormat::MISTRAL, kTools, "");
    EXPECT_TRUE(accepts(m, "[TOOL_CALLS]add[ARGS]{\"a\": 1, \"b\": 2}"));
    EXPECT_FALSE(accepts(m, "[TOOL_CALLS]add[ARGS]{\"a\": 1}"));
    // Whatever the grammar accepts parses back into the call.
    const ParsedReply r = parse_tool_calls(ToolFormat::MISTRAL, "[TOOL_CALLS]add[ARGS]{\"a\": 1, \"b\": 2}");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_THROW(tool_call_grammar(ToolFormat::HERMES, kTools, "missing"), ApiError);
    EXPECT_THROW(tool_call_grammar(ToolFormat::NONE, kTools, ""), ApiError);
}

namespace {

// stories260K carrying a real Qwen 2.5 chat template (Hermes-style tool calls).
std::string stories_with_qwen_template() { return stories_with_chat_template("qwen", tmpl("Qwen-Qwen2.5-7B-Instruct")); }

json ask(const std::string& choice_or_name, bool stream) {
    json b = {{"messages", json::array({{{"role", "user"}, {"content", "What is the weather in Oslo?"}}})},
              {"tools", kTools}, {"max_tokens", 300}, {"temperature", 0.8}, {"seed", 3}};
    if (choice_or_name == "required" || choice_or_name == "auto" || choice_or_name == "none") b["tool_choice"] = choice_or_name;
    else b["tool_choice"] = {{"type", "function"}, {"function", {{"name", choice_or_name}}}};
    if (stream) b["stream"] = true;
    return b;
}

}  // namespace

TEST(ToolCalls, RoundTripThroughTheServer) {
    ServerProcess srv(stories_with_qwen_template(), {"-c", "4096", "--parallel", "2"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    // Forced: a call to one of the tools, arguments per its schema.
    HttpResult r = post(srv, "/v1/chat/completions", ask("required", false));
    ASSERT_EQ(r.status, 200) << r.body;
    const json msg = r.j["choices"][0]["message"];
    const int first_prompt = r.j["usage"]["prompt_tokens"];
    EXPECT_EQ(r.j["choices"][0]["finish_reason"], "tool_calls") << r.body;
    ASSERT_TRUE(msg["tool_calls"].is_array()) << r.body;
    ASSERT_EQ(msg["tool_calls"].size(), 1u);
    const json call = msg["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    const std::string name = call["function"]["name"];
    const json args = json::parse(call["function"]["arguments"].get<std::string>());
    if (name == "get_weather") EXPECT_TRUE(args["city"].is_string()) << args;
    else EXPECT_TRUE(name == "add" && args["a"].is_number_integer() && args["b"].is_number_integer()) << call;
    EXPECT_TRUE(msg["content"].is_null());

    // Named: that function.
    r = post(srv, "/v1/chat/completions", ask("add", false));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.j["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "add") << r.body;

    // Streamed: a tool_calls delta with index, id and the whole arguments; finish "tool_calls".
    StreamResult s = stream(srv, "/v1/chat/completions", ask("get_weather", true));
    ASSERT_EQ(s.status, 200);
    EXPECT_EQ(s.finish_reason, "tool_calls");
    json streamed;
    for (const json& c : s.chunks)
        if (c.contains("choices") && !c["choices"].empty() && c["choices"][0]["delta"].contains("tool_calls"))
            streamed = c["choices"][0]["delta"]["tool_calls"];
    ASSERT_TRUE(streamed.is_array());
    EXPECT_EQ(streamed[0]["index"], 0);
    EXPECT_EQ(streamed[0]["function"]["name"], "get_weather");
    EXPECT_TRUE(json::parse(streamed[0]["function"]["arguments"].get<std::string>())["city"].is_string());
    EXPECT_EQ(s.text.find("<tool_call>"), std::string::npos) << "the call's markup must not leak into content";

    // The call and the tool's result go back; the template renders them (the prompt grows).
    json back = ask("auto", false);
    back["messages"].push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
    back["messages"].push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", "{\"temperature\": 18}"}});
    HttpResult r2 = post(srv, "/v1/chat/completions", back);
    ASSERT_EQ(r2.status, 200) << r2.body;
    EXPECT_GT(r2.j["usage"]["prompt_tokens"].get<int>(), first_prompt + 10);

    // Errors name the field.
    json bad = ask("missing_fn", false);
    HttpResult e = post(srv, "/v1/chat/completions", bad);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.j["error"]["param"], "tool_choice");
    bad = ask("auto", false);
    bad["messages"].push_back({{"role", "assistant"}, {"tool_calls", json::array({{{"id", "x"}, {"type", "function"},
                                                                                   {"function", {{"name", "add"}, {"arguments", "{oops"}}}}})}});
    e = post(srv, "/v1/chat/completions", bad);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.j["error"]["param"], "messages[1].tool_calls[0].function.arguments");
}
#endif
