// The request/response layer without HTTP: parsing and validation of request bodies
// (every error names its field), response shapes, and the text stream's stop-string and
// UTF-8 hold-back rules.
#include <gtest/gtest.h>

#include "server/text_stream.h"

#if GLIA_HAVE_SERVER
#include "server/openai.h"

namespace {

using namespace glia::server;

ApiError parse_error(const std::string& body, Endpoint e = Endpoint::CHAT) {
    try {
        parse_request(body, e, {});
    } catch (const ApiError& err) {
        return err;
    }
    ADD_FAILURE() << "no error for " << body;
    return {};
}

const std::string kMsgs = R"("messages":[{"role":"user","content":"hi"}])";

TEST(OpenAIParse, ChatDefaultsAndFields) {
    glia::SamplerParams d;
    d.temperature = 0.5f;
    Job j = parse_request("{" + kMsgs + R"(,"model":"m","max_tokens":7,"top_k":3,"stop":"x","stream":true,
        "stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":2,"seed":5})",
                          Endpoint::CHAT, d);
    EXPECT_EQ(j.model, "m");
    EXPECT_EQ(j.max_tokens, 7);
    EXPECT_EQ(j.sampling.temperature, 0.5f);
    EXPECT_EQ(j.sampling.top_k, 3);
    EXPECT_EQ(j.sampling.seed, 5u);
    ASSERT_EQ(j.stop.size(), 1u);
    EXPECT_TRUE(j.stream && j.include_usage && j.logprobs);
    EXPECT_EQ(j.top_logprobs, 2);
    EXPECT_EQ(j.messages[0]["content"], "hi");
    Job k = parse_request("{" + kMsgs + R"(,"max_completion_tokens":9,"temperature":0})", Endpoint::CHAT, d);
    EXPECT_EQ(k.max_tokens, 9);
    EXPECT_EQ(k.sampling.temperature, 0.0f);
}

TEST(OpenAIParse, ContentParts) {
    Job j = parse_request(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})",
                          Endpoint::CHAT, {});
    EXPECT_EQ(j.messages[0]["content"], "ab");
    EXPECT_EQ(parse_error(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})").param,
              "messages[0].content[0].type");
}

TEST(OpenAIParse, CompletionPrompts) {
    EXPECT_EQ(parse_request(R"({"prompt":"abc"})", Endpoint::COMPLETION, {}).prompt, "abc");
    EXPECT_EQ(parse_request(R"({"prompt":["abc"]})", Endpoint::COMPLETION, {}).prompt, "abc");
    Job ids = parse_request(R"({"prompt":[1,2,3],"logprobs":2,"echo":true})", Endpoint::COMPLETION, {});
    EXPECT_TRUE(ids.prompt_is_ids);
    EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_TRUE(ids.logprobs);
    EXPECT_EQ(ids.top_logprobs, 2);
    EXPECT_EQ(parse_error(R"({"prompt":["a","b"]})", Endpoint::COMPLETION).param, "prompt");
    EXPECT_EQ(parse_error(R"({"prompt":5})", Endpoint::COMPLETION).param, "prompt");
    EXPECT_EQ(parse_error(R"({})", Endpoint::COMPLETION).code, "missing_field");
}

TEST(OpenAIParse, ErrorsNameTheField) {
    struct Case { std::string body, param; };
    const std::vector<Case> cases = {
        {R"({"messages":[{"role":"user","content":"hi"}],"temperature":"hot"})", "temperature"},
        {R"({"messages":[{"role":"user","content":"hi"}],"temperature":3})", "temperature"},
        {R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":"5"})", "max_tokens"},
        {R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":0})", "max_tokens"},
        {R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":1.5})", "max_tokens"},
        {R"({"messages":[{"role":"user","content":"hi"}],"top_p":0})", "top_p"},
        {R"({"messages":[{"role":"user","content":"hi"}],"top_k":-1})", "top_k"},
        {R"({"messages":[{"role":"user","content":"hi"}],"stream":"yes"})", "stream"},
        {R"({"messages":[{"role":"user","content":"hi"}],"stop":5})", "stop"},
        {R"({"messages":[{"role":"user","content":"hi"}],"stop":["a",1]})", "stop[1]"},
        {R"({"messages":[{"role":"user","content":"hi"}],"n":17})", "n"},
        {R"({"messages":[{"role":"user","content":"hi"}],"model":3})", "model"},
        {R"({"messages":[{"role":"user","content":"hi"}],"presence_penalty":9})", "presence_penalty"},
        {R"({"messages":[{"role":"user","content":"hi"}],"top_logprobs":2})", "top_logprobs"},
        {R"({"messages":[{"role":"user","content":"hi"}],"top_logprobs":21,"logprobs":true})", "top_logprobs"},
        {R"({"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":1}})", "stream_options.include_usage"},
        {R"({"messages":"hi"})", "messages"},
        {R"({"messages":[]})", "messages"},
        {R"({"messages":[{"content":"hi"}]})", "messages[0].role"},
        {R"({"messages":[{"role":"user","content":7}]})", "messages[0].content"},
        {R"({})", "messages"},
    };
    for (const auto& c : cases) {
        const ApiError e = parse_error(c.body);
        EXPECT_EQ(e.status, 400) << c.body;
        EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
        EXPECT_NE(e.message.find(c.param.substr(0, c.param.find('['))), std::string::npos) << e.message;
    }
    EXPECT_EQ(parse_error("{not json").code, "invalid_json");
    EXPECT_EQ(parse_error("[1,2]").code, "invalid_json");
}

// Roles: OpenAI's six; any other is refused, naming the message and the roles allowed.
TEST(OpenAIParse, UnknownRolesAreRefused) {
    for (const char* role : {"system", "developer", "user", "assistant", "tool", "function"})
        EXPECT_NO_THROW(parse_request(std::string(R"({"messages":[{"role":")") + role + R"(","content":"x"}]})", Endpoint::CHAT, {}))
            << role;
    for (const char* role : {"User", "bot", "", "ipython"}) {
        const ApiError e = parse_error(std::string(R"({"messages":[{"role":"user","content":"a"},{"role":")") + role +
                                       R"(","content":"x"}]})");
        EXPECT_EQ(e.status, 400) << role;
        EXPECT_EQ(e.param, "messages[1].role") << role;
        EXPECT_NE(e.message.find("messages[1].role"), std::string::npos) << e.message;
        EXPECT_NE(e.message.find("\"developer\""), std::string::npos) << e.message;
        EXPECT_NE(e.message.find("\"function\""), std::string::npos) << e.message;
    }
}

// Tool names: 1 to 64 of [A-Za-z0-9_.-], no two alike; descriptions are strings.
TEST(OpenAIParse, ToolNamesAreCheckedAndUnique) {
    auto with_tools = [](const std::string& tools) { return "{" + kMsgs + R"(,"tools":)" + tools + "}"; };
    auto tool = [](const std::string& name) {
        return R"({"type":"function","function":{"name":")" + name + R"(","parameters":{"type":"object"}}})";
    };
    Job ok = parse_request(with_tools("[" + tool("get_weather") + "," + tool("ns.read-file_2") + "," + tool(std::string(64, 'a')) + "]"),
                           Endpoint::CHAT, {});
    EXPECT_EQ(ok.tools.size(), 3u);
    struct Case {
        std::string tools, param;
    };
    const std::vector<Case> cases = {
        {"[" + tool("get_weather") + "," + tool("get_weather") + "]", "tools[1].function.name"},
        {"[" + tool("a") + "," + tool("b") + "," + tool("a") + "]", "tools[2].function.name"},
        {"[" + tool("</s>") + "]", "tools[0].function.name"},
        {"[" + tool("get weather") + "]", "tools[0].function.name"},
        {"[" + tool("f(x)") + "]", "tools[0].function.name"},
        {"[" + tool("caf\\u00e9") + "]", "tools[0].function.name"},
        {"[" + tool(std::string(65, 'a')) + "]", "tools[0].function.name"},
        {"[" + tool("") + "]", "tools[0].function.name"},
        {R"([{"type":"function","function":{"name":"f","description":5}}])", "tools[0].function.description"},
    };
    for (const Case& c : cases) {
        const ApiError e = parse_error(with_tools(c.tools));
        EXPECT_EQ(e.status, 400) << c.tools;
        EXPECT_EQ(e.param, c.param) << c.tools << " -> " << e.message;
        EXPECT_NE(e.message.find(c.param), std::string::npos) << e.message;
    }
}

// n > 1 streams: accepted; every chunk names its choice.
TEST(OpenAIParse, SeveralChoicesMayStream) {
    Job j = parse_request("{" + kMsgs + R"(,"n":3,"stream":true})", Endpoint::CHAT, {});
    EXPECT_EQ(j.n, 3);
    EXPECT_TRUE(j.stream);
    const ResponseId r = new_response_id(Endpoint::CHAT, "m");
    EXPECT_EQ(chat_chunk(r, json{{"content", "x"}}, nullptr, nullptr, false, 2)["choices"][0]["index"], 2);
    EXPECT_EQ(completion_chunk(r, "x", "stop", nullptr, 0, false, 1)["choices"][0]["index"], 1);
    EXPECT_EQ(chat_chunk(r, json{{"content", "x"}}, nullptr, nullptr, false)["choices"][0]["index"], 0);
}

TEST(OpenAIShapes, ErrorAndResponses) {
    ApiError e{404, "nope", "not_found_error", "model", "model_not_found"};
    const json j = error_json(e);
    EXPECT_EQ(j["error"]["message"], "nope");
    EXPECT_EQ(j["error"]["param"], "model");
    EXPECT_EQ(j["error"]["code"], "model_not_found");
    EXPECT_TRUE(error_json(ApiError{400, "x", "invalid_request_error", "", ""})["error"]["param"].is_null());

    ResponseId r = new_response_id(Endpoint::CHAT, "m");
    EXPECT_EQ(r.id.rfind("chatcmpl-", 0), 0u);
    std::vector<TokenLogprob> lp = {{"a", -0.5f, {{"a", -0.5f}, {"b", -1.5f}}}};
    json c = chat_response(r, "hello", "stop", &lp, {3, 2});
    EXPECT_EQ(c["object"], "chat.completion");
    EXPECT_EQ(c["choices"][0]["message"]["content"], "hello");
    EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(c["usage"]["total_tokens"], 5);
    EXPECT_EQ(c["choices"][0]["logprobs"]["content"][0]["bytes"], json::array({97}));
    EXPECT_EQ(c["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 2u);
    json t = completion_response(new_response_id(Endpoint::COMPLETION, "m"), "xy", "length", &lp, 4, {1, 1});
    EXPECT_EQ(t["object"], "text_completion");
    EXPECT_EQ(t["choices"][0]["logprobs"]["text_offset"][0], 4);
    json ch = chat_chunk(r, json{{"content", "x"}}, nullptr, nullptr, true);
    EXPECT_TRUE(ch["usage"].is_null());
    EXPECT_TRUE(ch["choices"][0]["finish_reason"].is_null());
    EXPECT_EQ(usage_chunk(r, Endpoint::CHAT, {1, 2})["choices"].size(), 0u);
    // Invalid UTF-8 never makes dumping throw.
    EXPECT_NO_THROW(dump(json{{"x", std::string("\xff\xfe")}}));
}

TEST(OpenAIShapes, PlainChatFallback) {
    const json m = json::parse(R"([{"role":"system","content":"S"},{"role":"user","content":"U"}])");
    EXPECT_EQ(plain_chat_prompt(m), "system: S\nuser: U\nassistant:");
}

}  // namespace
#endif  // GLIA_HAVE_SERVER

namespace {

using glia::server::TextStream;

TEST(TextStream, HoldsBackPartialStopAndCuts) {
    TextStream t({"STOP"});
    EXPECT_FALSE(t.append("hello S"));
    EXPECT_EQ(t.take(), "hello ");  // "S" may start "STOP"
    EXPECT_FALSE(t.append("T"));
    EXPECT_EQ(t.take(), "");
    EXPECT_FALSE(t.append("x"));  // "STx" is no stop: released
    EXPECT_EQ(t.take(), "STx");
    EXPECT_FALSE(t.append(" aSTO"));
    EXPECT_TRUE(t.append("P tail"));
    EXPECT_TRUE(t.stopped());
    EXPECT_EQ(t.take(), " a");
    EXPECT_EQ(t.text(), "hello STx a");
}

TEST(TextStream, StopSpanningPiecesAndEarliestWins) {
    TextStream t({"cd", "bcx"});
    EXPECT_FALSE(t.append("ab"));
    EXPECT_TRUE(t.append("cdx"));
    EXPECT_EQ(t.text(), "ab");
    EXPECT_EQ(t.take(), "ab");
}

TEST(TextStream, Utf8HoldBack) {
    TextStream t;
    const std::string euro = "\xE2\x82\xAC";
    t.append("a" + euro.substr(0, 1));
    EXPECT_EQ(t.take(), "a");
    t.append(euro.substr(1, 1));
    EXPECT_EQ(t.take(), "");
    t.append(euro.substr(2));
    EXPECT_EQ(t.take(), euro);
    t.append("\xF0\x9F");
    EXPECT_EQ(t.take(), "");
    EXPECT_EQ(t.take(true), "\xF0\x9F");  // at the end everything goes out
}

TEST(TextStream, NoStopPassesEverything) {
    TextStream t;
    EXPECT_FALSE(t.append("abc"));
    EXPECT_EQ(t.take(), "abc");
    EXPECT_EQ(t.take(), "");
}

}  // namespace
