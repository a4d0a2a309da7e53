// ollama's API (server/ollama.h): requests translated into OpenAI bodies, every malformed
// field refused with a 400 that names it (in ollama's terms), tool calls shaped as ollama
// shapes them; over HTTP, the errors' {"error"} shape, a model "load" request and the
// newline-delimited stream. The protocol against ollama's own client: test_ollama_node.cpp.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include "server/ollama.h"
#include "server_fixture.h"

namespace {

using namespace glia::test::server;
using glia::server::ApiError;
using glia::server::Endpoint;
using ojson = glia::server::json;

TEST(OllamaRequest, ChatBody) {
    const ojson req = ojson::parse(R"({
        "model": "m:latest", "format": "json", "keep_alive": "5m", "think": false,
        "options": {"temperature": 0.5, "top_k": 7, "top_p": 0.9, "min_p": 0.1, "seed": 3, "num_predict": 12,
                    "stop": ["\n\n"], "repeat_penalty": 1.1, "num_ctx": 8192, "use_mmap": true},
        "messages": [{"role": "user", "content": "hi"},
                     {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
                     {"role": "tool", "tool_name": "f", "content": "2"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]})");
    const ojson b = glia::server::ollama_chat_body(req);
    EXPECT_EQ(b["model"], "m");
    EXPECT_EQ(b["stream"], true) << "ollama streams unless told not to";
    EXPECT_EQ(b["stream_options"]["include_usage"], true);
    EXPECT_EQ(b["temperature"], 0.5);
    EXPECT_EQ(b["top_k"], 7);
    EXPECT_EQ(b["top_p"], 0.9);
    EXPECT_EQ(b["min_p"], 0.1);
    EXPECT_EQ(b["seed"], 3);
    EXPECT_EQ(b["max_tokens"], 12);
    EXPECT_EQ(b["stop"], ojson::array({"\n\n"}));
    EXPECT_EQ(b["repeat_penalty"], 1.1);
    EXPECT_FALSE(b.contains("num_ctx"));
    EXPECT_EQ(b["response_format"]["type"], "json_object");
    EXPECT_EQ(b["chat_template_kwargs"]["enable_thinking"], false);
    ASSERT_EQ(b["messages"].size(), 3u);
    EXPECT_EQ(b["messages"][1]["tool_calls"][0]["function"]["arguments"]["x"], 1);
    EXPECT_EQ(b["messages"][2]["tool_name"], "f");
    EXPECT_EQ(b["tools"][0]["function"]["name"], "f");

    ojson schema = req;
    schema["format"] = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
    schema["stream"] = false;
    schema["options"] = {{"num_predict", -1}};
    const ojson s = glia::server::ollama_chat_body(schema);
    EXPECT_EQ(s["response_format"]["type"], "json_schema");
    EXPECT_EQ(s["response_format"]["json_schema"]["schema"], schema["format"]);
    EXPECT_EQ(s["stream"], false);
    EXPECT_FALSE(s.contains("stream_options"));
    EXPECT_FALSE(s.contains("max_tokens")) << "-1: no limit";
}

TEST(OllamaRequest, GenerateBodies) {
    Endpoint ep = Endpoint::COMPLETION;
    const ojson chat = glia::server::ollama_generate_body(ojson{{"model", "m"}, {"prompt", "p"}, {"system", "s"}}, ep);
    EXPECT_EQ(ep, Endpoint::CHAT);
    EXPECT_EQ(chat["messages"], ojson::parse(R"([{"role":"system","content":"s"},{"role":"user","content":"p"}])"));
    const ojson raw = glia::server::ollama_generate_body(ojson{{"model", "m"}, {"prompt", "p"}, {"raw", true}}, ep);
    EXPECT_EQ(ep, Endpoint::COMPLETION);
    EXPECT_EQ(raw["prompt"], "p");
    ep = Endpoint::CHAT;
    const ojson fim = glia::server::ollama_generate_body(ojson{{"model", "m"}, {"prompt", "def f("}, {"suffix", "\n    return x"}}, ep);
    EXPECT_EQ(ep, Endpoint::COMPLETION);
    EXPECT_EQ(fim["prompt"], "def f(");
    EXPECT_EQ(fim["suffix"], "\n    return x");
    EXPECT_TRUE(glia::server::ollama_load_only(ojson{{"model", "m"}}, false));
    EXPECT_TRUE(glia::server::ollama_load_only(ojson{{"model", "m"}, {"messages", ojson::array()}}, true));
    EXPECT_FALSE(glia::server::ollama_load_only(ojson{{"model", "m"}, {"prompt", "x"}}, false));
}

// Every malformed field: a 400 naming it.
TEST(OllamaRequest, MalformedFieldsAreNamed) {
    const ojson ok = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}, {"prompt", "x"}};
    struct Case {
        const char* patch;  // merged into `ok`
        const char* field;
        bool chat;
    };
    const Case cases[] = {
        {R"({"model": null})", "model", true},
        {R"({"model": 5})", "model", false},
        {R"({"stream": "yes"})", "stream", true},
        {R"({"options": []})", "options", true},
        {R"({"options": {"temperature": "hot"}})", "options.temperature", true},
        {R"({"options": {"top_k": 1.5}})", "options.top_k", false},
        {R"({"options": {"num_predict": 0}})", "options.num_predict", true},
        {R"({"options": {"num_predict": "many"}})", "options.num_predict", false},
        {R"({"options": {"stop": [1]}})", "options.stop[0]", true},
        {R"({"options": {"num_ctx": "big"}})", "options.num_ctx", true},
        {R"({"options": {"use_mmap": 1}})", "options.use_mmap", true},
        {R"({"format": "xml"})", "format", true},
        {R"({"format": 3})", "format", false},
        {R"({"keep_alive": []})", "keep_alive", true},
        {R"({"think": 1})", "think", true},
        {R"({"messages": "hi"})", "messages", true},
        {R"({"messages": [3]})", "messages[0]", true},
        {R"({"messages": [{"content": "x"}]})", "messages[0].role", true},
        {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content", true},
        {R"({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]})", "messages[0].images", true},
        {R"({"messages": [{"role": "assistant", "tool_calls": {}}]})", "messages[0].tool_calls", true},
        {R"({"messages": [{"role": "assistant", "tool_calls": [{"name": "f"}]}]})", "messages[0].tool_calls[0].function", true},
        {R"({"tools": {}})", "tools", true},
        {R"({"prompt": 5})", "prompt", false},
        {R"({"system": []})", "system", false},
        {R"({"raw": "no"})", "raw", false},
        {R"({"suffix": 1})", "suffix", false},
        {R"({"images": ["aGk="]})", "images", false},
        {R"({"template": "{{ .Prompt }}"})", "template", false},
        {R"({"context": [1, 2]})", "context", false},
    };
    for (const Case& c : cases) {
        ojson req = ok;
        req.merge_patch(ojson::parse(c.patch));
        try {
            Endpoint ep;
            if (c.chat) glia::server::ollama_chat_body(req);
            else glia::server::ollama_generate_body(req, ep);
            ADD_FAILURE() << c.patch << ": accepted";
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 400) << c.patch;
            EXPECT_EQ(e.param, c.field) << c.patch << ": " << e.message;
            EXPECT_NE(e.message.find(c.field), std::string::npos) << c.patch << ": " << e.message;
        }
    }
}

TEST(OllamaRequest, ToolCallsAndErrorsInOllamaTerms) {
    const ojson calls = ojson::parse(R"([{"id": "call_1", "type": "function", "index": 0,
                                          "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}])");
    EXPECT_EQ(glia::server::ollama_tool_calls(calls),
              ojson::parse(R"([{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}])"));
    EXPECT_EQ(glia::server::ollama_error_text("'max_tokens' is 9000 but this server allows at most 4096"),
              "'options.num_predict' is 9000 but this server allows at most 4096");
    EXPECT_EQ(glia::server::ollama_error_text("'top_p' must be between 0 and 1, got 7"), "'options.top_p' must be between 0 and 1, got 7");
    EXPECT_EQ(glia::server::ollama_model_name("tiny:latest"), "tiny");
    EXPECT_EQ(glia::server::ollama_model_name("tiny:q4"), "tiny:q4");
}

TEST(ServerOllama, ErrorsLoadAndNdjsonStream) {
    ServerProcess srv(stories_with_template(), {"-c", "512", "--parallel", "2"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const std::string model = "glia_server_stories_chat";

    // Errors: {"error": "..."} naming the field.
    auto bad = post(srv, "/api/chat", std::string("{\"model\": "));
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_TRUE(bad.j["error"].is_string()) << bad.body;
    bad = post(srv, "/api/chat", json{{"model", model}, {"messages", {{{"role", "user"}, {"content", "x"}}}},
                                      {"options", {{"num_predict", 100000}}}, {"stream", false}});
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_NE(bad.j["error"].get<std::string>().find("options.num_predict"), std::string::npos) << bad.body;
    bad = post(srv, "/api/embed", json{{"model", model}, {"input", {1, 2}}});
    EXPECT_EQ(bad.status, 400) << bad.body;
    EXPECT_NE(bad.j["error"].get<std::string>().find("input[0]"), std::string::npos) << bad.body;
    bad = post(srv, "/api/show", json{{"model", "other"}});
    EXPECT_EQ(bad.status, 404) << bad.body;
    bad = post(srv, "/api/generate", json{{"model", model}, {"prompt", "a"}, {"suffix", "b"}, {"stream", false}});
    EXPECT_EQ(bad.status, 400) << "stories260K has no FIM tokens: " << bad.body;

    // A request without a prompt loads the model.
    const auto load = post(srv, "/api/generate", json{{"model", model}});
    ASSERT_EQ(load.status, 200) << load.body;
    EXPECT_EQ(load.j["done"], true);
    EXPECT_EQ(load.j["done_reason"], "load");

    // The stream: one JSON object a line, the last one done with its counts.
    auto c = srv.client();
    auto res = c.Post("/api/generate", json{{"model", model}, {"prompt", "Once upon a time"}, {"raw", true},
                                           {"options", {{"temperature", 0}, {"num_predict", 5}}}}.dump(), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/x-ndjson");
    std::vector<json> lines;
    for (size_t at = 0, nl; (nl = res->body.find('\n', at)) != std::string::npos; at = nl + 1)
        lines.push_back(json::parse(res->body.substr(at, nl - at)));
    ASSERT_GE(lines.size(), 2u) << res->body;
    EXPECT_EQ(res->body.back(), '\n');
    for (size_t i = 0; i + 1 < lines.size(); ++i) EXPECT_EQ(lines[i]["done"], false) << res->body;
    EXPECT_EQ(lines.back()["done"], true);
    EXPECT_EQ(lines.back()["eval_count"], 5);
    EXPECT_EQ(lines.back()["done_reason"], "length");
    const auto whole = post(srv, "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 5}, {"temperature", 0}});
    std::string text;
    for (const json& l : lines) text += l["response"].get<std::string>();
    EXPECT_EQ(text, whole.j["choices"][0]["text"]) << "the same engine and text as /v1/completions";
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
