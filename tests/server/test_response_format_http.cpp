// response_format through `glia serve`: json_schema output parses and validates on every
// run at temperature 1 (the grammar is enforced while sampling, not suggested in the
// prompt), json_object gives an object, schemas the server cannot enforce are a 400 that
// names the keyword, and /metrics counts the masks.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <future>
#include <set>

#include "server_fixture.h"

namespace {

using namespace glia::test::server;

const json kSchema = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 10},
    "age": {"type": "integer"},
    "mood": {"enum": ["happy", "sad"]},
    "friends": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 2}
  },
  "required": ["name", "age", "mood"],
  "additionalProperties": false
})");

bool validates(const json& v) {
    if (!v.is_object()) return false;
    for (const char* k : {"name", "age", "mood"})
        if (!v.contains(k)) return false;
    for (const auto& [k, x] : v.items()) {
        if (k == "name") {
            if (!x.is_string() || x.get<std::string>().empty()) return false;
            size_t cps = 0;
            for (unsigned char c : x.get<std::string>()) cps += (c & 0xC0) != 0x80;
            if (cps > 10) return false;
        } else if (k == "age") {
            if (!x.is_number_integer()) return false;
        } else if (k == "mood") {
            if (x != "happy" && x != "sad") return false;
        } else if (k == "friends") {
            if (!x.is_array() || x.size() > 2) return false;
            for (const json& f : x) {
                if (!f.is_string()) return false;
                size_t cps = 0;
                for (unsigned char c : f.get<std::string>()) cps += (c & 0xC0) != 0x80;
                if (cps > 6) return false;
            }
        } else {
            return false;
        }
    }
    return true;
}

json chat(const json& response_format, double temperature, int seed) {
    return {{"messages", json::array({{{"role", "user"}, {"content", "Describe a person as JSON."}}})},
            {"max_tokens", 1000},
            {"temperature", temperature},
            {"seed", seed},
            {"response_format", response_format}};
}

}  // namespace

TEST(ServerResponseFormat, JsonSchemaOutputAlwaysValidatesAtTemperatureOne) {
    ServerProcess srv(stories_with_template(), {"-c", "4096", "--parallel", "4"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const json rf = {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"schema", kSchema}, {"strict", true}}}};
    std::vector<std::future<HttpResult>> fs;
    for (int i = 0; i < 50; ++i)
        fs.push_back(std::async(std::launch::async, [&srv, &rf, i] { return post(srv, "/v1/chat/completions", chat(rf, 1.0, i)); }));
    int distinct = 0;
    std::set<std::string> seen;
    for (auto& f : fs) {
        HttpResult r = f.get();
        ASSERT_EQ(r.status, 200) << r.body;
        const std::string text = r.j["choices"][0]["message"]["content"];
        EXPECT_EQ(r.j["choices"][0]["finish_reason"], "stop") << text;
        const json v = json::parse(text, nullptr, false);
        ASSERT_FALSE(v.is_discarded()) << "not JSON: " << text;
        EXPECT_TRUE(validates(v)) << text;
        distinct += seen.insert(text).second;
    }
    EXPECT_GT(distinct, 10) << "temperature 1 should give varied documents";
    EXPECT_GT(metric(srv, "glia_grammar_masks_total"), 50);

    // Streamed: the concatenated deltas validate too.
    StreamResult s = stream(srv, "/v1/chat/completions", [&] {
        json b = chat(rf, 1.0, 99);
        b["stream"] = true;
        return b;
    }());
    EXPECT_EQ(s.status, 200);
    EXPECT_EQ(s.finish_reason, "stop");
    EXPECT_TRUE(validates(json::parse(s.text, nullptr, false))) << s.text;

    // json_object: any object. Its strings are unbounded, so this weak model runs out of
    // tokens inside one (finish "length"); a reply that ended parses as an object, and
    // every token of every reply was sampled under a mask.
    const double masks0 = metric(srv, "glia_grammar_masks_total");
    int tokens = 0;
    for (int seed = 0; seed < 4; ++seed) {
        HttpResult r = post(srv, "/v1/chat/completions", [&] {
            json b = chat(json{{"type", "json_object"}}, 1.0, seed);
            b["max_tokens"] = 60;
            return b;
        }());
        ASSERT_EQ(r.status, 200) << r.body;
        const std::string text = r.j["choices"][0]["message"]["content"];
        EXPECT_EQ(text.substr(0, 1), "{");
        tokens += r.j["usage"]["completion_tokens"].get<int>();
        if (r.j["choices"][0]["finish_reason"] == "stop") {
            EXPECT_TRUE(json::parse(text, nullptr, false).is_object()) << text;
        }
    }
    EXPECT_EQ(metric(srv, "glia_grammar_masks_total") - masks0, tokens);
}

TEST(ServerResponseFormat, UnenforceableSchemasAreA400NamingTheKeyword) {
    ServerProcess srv(stories_with_template(), {"-c", "2048", "--parallel", "1"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const json schema = json::parse(R"({"type":"object","properties":{"id":{"type":"string","pattern":"^(?=x)[a-z]+$"}}})");
    HttpResult r = post(srv, "/v1/chat/completions",
                        chat({{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}, 0, 1));
    EXPECT_EQ(r.status, 400);
    const std::string msg = r.j["error"]["message"];
    EXPECT_NE(msg.find("'pattern'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("properties.id"), std::string::npos) << msg;
    EXPECT_EQ(r.j["error"]["param"], "response_format.json_schema.schema");
    r = post(srv, "/v1/chat/completions", chat({{"type", "yaml"}}, 0, 1));
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.j["error"]["param"], "response_format.type");
    r = post(srv, "/v1/chat/completions", chat({{"type", "json_schema"}}, 0, 1));
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.j["error"]["param"], "response_format.json_schema");
}
#endif
