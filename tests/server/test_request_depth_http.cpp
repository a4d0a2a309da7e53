// Deeply nested requests through `glia serve`: every one is a 400 naming the field and
// the limit, and the server stays up (before, a schema 5,000 levels deep overflowed the
// schema compiler's stack and killed the process). And schema keywords beyond the basics
// (bounds, formats, patterns, prefixItems, oneOf, nullable, big enums) hold in generated
// output.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <regex>

#include "raw_http.h"
#include "server_fixture.h"

namespace {

using namespace glia::test::server;

std::string nest(const std::string& open, const std::string& close, int levels, const std::string& inner) {
    std::string s;
    s.reserve((open.size() + close.size()) * levels + inner.size());
    for (int i = 0; i < levels; ++i) s += open;
    s += inner;
    for (int i = 0; i < levels; ++i) s += close;
    return s;
}

// A chat body whose response_format schema is `schema_text` (spliced in as text: a
// value this deep is not built here).
std::string with_schema(const std::string& schema_text) {
    return R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"response_format":{"type":"json_schema",)"
           R"("json_schema":{"name":"x","schema":)" + schema_text + "}}}";
}

void expect_400_and_alive(const ServerProcess& srv, const std::string& body, const std::string& what,
                          const std::string& needle) {
    HttpResult r = post(srv, "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 400) << what << ": " << r.body.substr(0, 300);
    const std::string msg = r.j.is_object() ? r.j["error"]["message"].get<std::string>() : "";
    EXPECT_NE(msg.find(needle), std::string::npos) << what << ": " << msg;
    auto c = srv.client();
    auto h = c.Get("/health");
    ASSERT_TRUE(h) << what << ": the server is gone";
    EXPECT_EQ(h->status, 200) << what;
}

}  // namespace

TEST(ServerRequestDepth, DeepRequestsAreA400AndTheServerStaysUp) {
    ServerProcess srv(stories_with_template(), {"-c", "1024", "--parallel", "1", "--max-body", "4194304"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const std::string limit = "128";
    expect_400_and_alive(srv, with_schema(nest(R"({"type":"array","items":)", "}", 5000, "{}")), "items x5000", limit);
    expect_400_and_alive(srv, with_schema(nest(R"({"type":"object","properties":{"a":)", "}}", 5000, "{}")), "properties x5000", limit);
    expect_400_and_alive(srv, with_schema(nest(R"({"anyOf":[)", "]}", 5000, "{}")), "anyOf x5000", limit);
    // Within the body's limit but past the schema's: named by the schema's field.
    HttpResult r = post(srv, "/v1/chat/completions", with_schema(nest(R"({"type":"array","items":)", "}", 100, "{}")));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.j["error"]["param"], "response_format.json_schema.schema");
    EXPECT_NE(r.j["error"]["message"].get<std::string>().find("64"), std::string::npos) << r.body;
    // A $ref chain: shallow JSON, deep recursion.
    std::string defs = "{";
    for (int i = 0; i < 3000; ++i) defs += "\"d" + std::to_string(i) + R"(":{"$ref":"#/$defs/d)" + std::to_string(i + 1) + "\"},";
    defs += R"("d3000":{"type":"integer"}})";
    expect_400_and_alive(srv, with_schema(R"({"$defs":)" + defs + R"(,"$ref":"#/$defs/d0"})"), "$ref chain", "$ref");
    // A recursive $ref is fine.
    r = post(srv, "/v1/chat/completions",
             with_schema(R"({"$defs":{"n":{"type":"object","properties":{"k":{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":1}},)"
                         R"("additionalProperties":false}},"$ref":"#/$defs/n"})"));
    EXPECT_EQ(r.status, 200) << r.body;
    // A tool's parameters.
    const std::string tools_body =
        R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"tools":[{"type":"function","function":{"name":"f","parameters":)" +
        nest(R"({"type":"object","properties":{"a":)", "}}", 5000, "{}") + "}}]}";
    expect_400_and_alive(srv, tools_body, "tool parameters x5000", limit);
    // Messages nested deep (what the chat template would walk), and a tool call's arguments
    // string (parsed from a string, so the body's depth does not show it).
    expect_400_and_alive(srv, R"({"messages":[{"role":"user","content":)" + nest("[", "]", 5000, "1") + "}]}", "content", limit);
    const std::string args = nest("[", "]", 5000, "1");
    json call_body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}},
                                                {{"role", "assistant"}, {"tool_calls", json::array({{{"id", "c"}, {"type", "function"},
                                                  {"function", {{"name", "f"}, {"arguments", args}}}}})}}})},
                      {"max_tokens", 4}};
    r = post(srv, "/v1/chat/completions", call_body);
    EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
    EXPECT_EQ(r.j["error"]["param"], "messages[1].tool_calls[0].function.arguments");
    // A raw body a million levels deep, on every JSON endpoint.
    const std::string million = nest("[", "]", 1000000, "");
    for (const char* path : {"/v1/chat/completions", "/v1/completions", "/tokenize", "/v1/embeddings"}) {
        HttpResult m = post(srv, path, million);
        EXPECT_EQ(m.status, 400) << path << ": " << m.body.substr(0, 200);
    }
    RawConn raw(srv.port());
    ASSERT_TRUE(raw.ok());
    const std::string unclosed(1000000, '[');
    raw.send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
             std::to_string(unclosed.size()) + "\r\n\r\n" + unclosed);
    EXPECT_EQ(RawConn::status_of(raw.read_responses(1, 30)), 400);
    auto c = srv.client();
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
}

TEST(ServerRequestDepth, RicherSchemasHoldInGeneratedOutput) {
    ServerProcess srv(stories_with_template(), {"-c", "2048", "--parallel", "2"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    json colors = json::array();
    for (int i = 0; i < 100; ++i) colors.push_back("c" + std::to_string(i));
    const json schema = {
        {"type", "object"},
        {"properties",
         {{"n", {{"type", "integer"}, {"minimum", -9007199254740991LL}, {"maximum", 9007199254740991LL}}},
          {"small", {{"type", "integer"}, {"minimum", 10}, {"exclusiveMaximum", 20}}},
          {"x", {{"type", "number"}, {"minimum", 0}, {"maximum", 1}}},
          {"day", {{"type", "string"}, {"format", "date"}}},
          {"code", {{"type", "string"}, {"pattern", "^[A-Z]{3}-[0-9]{2}$"}}},
          {"pair", {{"type", "array"}, {"prefixItems", json::array({{{"type", "boolean"}}, {{"const", "z"}}})}, {"items", false},
                    {"minItems", 2}}},
          {"color", {{"enum", colors}}},
          {"note", {{"type", "string"}, {"nullable", true}, {"maxLength", 5}}},
          {"either", {{"oneOf", json::array({{{"type", "integer"}, {"minimum", 0}}, {{"type", "null"}}})}}}}},
        {"required", json::array({"n", "small", "x", "day", "code", "pair", "color", "note", "either"})},
        {"additionalProperties", false}};
    const std::regex date(R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))"), code(R"([A-Z]{3}-[0-9]{2})");
    for (int seed = 0; seed < 6; ++seed) {
        const json body = {{"messages", json::array({{{"role", "user"}, {"content", "JSON please."}}})},
                           {"max_tokens", 400}, {"temperature", 1.0}, {"seed", seed},
                           {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "t"}, {"schema", schema}}}}}};
        HttpResult r = post(srv, "/v1/chat/completions", body);
        ASSERT_EQ(r.status, 200) << r.body;
        const std::string text = r.j["choices"][0]["message"]["content"];
        ASSERT_EQ(r.j["choices"][0]["finish_reason"], "stop") << text;
        const json v = json::parse(text, nullptr, false);
        ASSERT_TRUE(v.is_object()) << text;
        EXPECT_TRUE(v["n"].is_number_integer()) << text;
        EXPECT_TRUE(v["small"].is_number_integer() && v["small"] >= 10 && v["small"] < 20) << text;
        EXPECT_TRUE(v["x"].is_number() && v["x"].get<double>() >= 0 && v["x"].get<double>() <= 1) << text;
        EXPECT_TRUE(v["day"].is_string() && std::regex_match(v["day"].get<std::string>(), date)) << text;
        EXPECT_TRUE(v["code"].is_string() && std::regex_match(v["code"].get<std::string>(), code)) << text;
        EXPECT_TRUE(v["pair"].is_array() && v["pair"].size() == 2 && v["pair"][0].is_boolean() && v["pair"][1] == "z") << text;
        EXPECT_NE(std::find(colors.begin(), colors.end(), v["color"]), colors.end()) << text;
        EXPECT_TRUE(v["note"].is_null() || (v["note"].is_string() && v["note"].get<std::string>().size() <= 20)) << text;
        EXPECT_TRUE(v["either"].is_null() || (v["either"].is_number_integer() && v["either"] >= 0)) << text;
    }
}
#endif

#if GLIA_HAVE_SERVER
// An object of 70 properties (at most 64 were allowed): the reply holds the required ones
// in the order 'properties' lists them, then optional ones in that order, and no others.
TEST(ServerRequestDepth, SeventyPropertiesHoldInGeneratedOutput) {
    ServerProcess srv(stories_with_template(), {"-c", "2048", "--parallel", "1"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    json props = json::object();
    json required = json::array();
    std::vector<std::string> names;
    for (int i = 0; i < 70; ++i) {
        const std::string k = "k" + std::to_string(i);
        names.push_back(k);
        props[k] = {{"type", "integer"}, {"minimum", 0}, {"maximum", 9}};
        if (i % 3 == 0) required.push_back(k);
    }
    const json schema = {{"type", "object"}, {"properties", props}, {"required", required}};
    for (int seed = 0; seed < 2; ++seed) {
        const json body = {{"messages", json::array({{{"role", "user"}, {"content", "JSON please."}}})},
                           {"max_tokens", 1500}, {"temperature", 1.0}, {"seed", seed},
                           {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "t"}, {"schema", schema}}}}}};
        HttpResult r = post(srv, "/v1/chat/completions", body);
        ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
        const std::string text = r.j["choices"][0]["message"]["content"];
        ASSERT_EQ(r.j["choices"][0]["finish_reason"], "stop") << text;
        const json v = json::parse(text, nullptr, false);
        ASSERT_TRUE(v.is_object()) << text;
        for (const json& k : required) EXPECT_TRUE(v.contains(k.get<std::string>())) << k << " missing: " << text;
        // The order written: required ones first, then optional ones, each as listed.
        std::vector<std::string> expected;
        for (int want = 1; want >= 0; --want)
            for (int i = 0; i < 70; ++i)
                if ((i % 3 == 0) == bool(want) && v.contains(names[i])) expected.push_back(names[i]);
        std::vector<std::string> got;
        for (const auto& [k, x] : v.items()) {
            got.push_back(k);
            EXPECT_TRUE(x.is_number_integer() && x >= 0 && x <= 9) << k << ": " << text;
        }
        EXPECT_EQ(got, expected) << text;
    }
}

// A forced tool call on tiny-qwen3 (random weights that favour tabs) with the Qwen 2.5
// template: before, every gap of the call's JSON held 16 tabs; whitespace is now one
// space or a newline and indentation (as the reference's grammars allow), so a tab
// follows a newline (a tab inside a string would be an escape, not the character). And
// the arguments hold no keys beyond the parameters' properties (additionalProperties
// absent allows none, as in the reference's grammars; before, the model wrote other keys
// until max_tokens), so the call ends: tool_calls, finish_reason "tool_calls". The city's
// maxLength keeps the random model's string from running to max_tokens (it did on a CPU
// without AVX-512, whose kernels round differently and so sample other text).
TEST(ServerRequestDepth, ForcedToolCallIsNotPaddedWithWhitespace) {
    ServerProcess srv(glia::test::shared_path("models/tiny-qwen3-q8_0.gguf"),
                      {"-c", "2048", "--parallel", "1", "--template",
                       glia::test::shared_path("templates/Qwen-Qwen2.5-7B-Instruct.jinja")});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const json body = json::parse(R"({"messages":[{"role":"user","content":"What is the weather in Oslo?"}],
      "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather in a city.",
        "parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":24}},"required":["city"]}}}],
      "tool_choice":{"type":"function","function":{"name":"get_weather"}},"max_tokens":200})");
    for (int seed = 0; seed < 3; ++seed) {
        json b = body;
        b["seed"] = seed;
        HttpResult r = post(srv, "/v1/chat/completions", b);
        ASSERT_EQ(r.status, 200) << r.body;
        const json& msg = r.j["choices"][0]["message"];
        std::string text = msg["content"].is_string() ? msg["content"].get<std::string>() : "";
        EXPECT_EQ(r.j["choices"][0]["finish_reason"], "tool_calls") << r.body;
        ASSERT_TRUE(msg.contains("tool_calls")) << r.body;
        ASSERT_EQ(msg["tool_calls"].size(), 1u) << r.body;
        EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
        const json args = json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>(), nullptr, false);
        ASSERT_TRUE(args.is_object()) << r.body;
        EXPECT_EQ(args.size(), 1u) << args.dump();
        EXPECT_TRUE(args["city"].is_string()) << args.dump();
        text += msg["tool_calls"][0]["function"]["arguments"].get<std::string>();
        // Outside strings (where a raw tab cannot be), a tab only indents after a newline.
        bool indenting = false;
        for (char c : text) {
            if (c == '\t') {
                EXPECT_TRUE(indenting) << text;
            }
            indenting = c == '\n' || ((c == ' ' || c == '\t') && indenting);
        }
    }
}
#endif
