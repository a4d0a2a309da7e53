// Streams of several choices (n > 1): each chunk names its choice (choices[].index), each
// choice has its role chunk, its text and its own finish_reason, the usage of all comes
// last; the texts are those of the same request answered whole. Read as raw SSE events.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "server_fixture.h"

using namespace glia::test::server;

namespace {

struct Choice {
    std::string text, finish;
    int role_chunks = 0, after_finish = 0;
};

// The choices of a raw SSE body, by index; `id` the ids seen, `usage` the usage chunk.
struct Streamed {
    std::map<int, Choice> choices;
    std::set<std::string> ids;
    json usage;
    bool done = false, usage_last = false;
    int malformed = 0;
};

Streamed read_stream(const std::string& body, bool chat) {
    Streamed s;
    const std::vector<std::string> events = sse_data(body);
    for (size_t e = 0; e < events.size(); ++e) {
        if (events[e] == "[DONE]") {
            s.done = e + 1 == events.size();
            continue;
        }
        const json j = json::parse(events[e], nullptr, false);
        if (j.is_discarded() || !j.contains("choices")) {
            ++s.malformed;
            continue;
        }
        s.ids.insert(j.value("id", std::string()));
        if (j["choices"].empty()) {
            s.usage = j["usage"];
            s.usage_last = e + 2 == events.size();
            continue;
        }
        if (j["choices"].size() != 1) ++s.malformed;
        const json& c = j["choices"][0];
        Choice& ch = s.choices[c["index"].get<int>()];
        if (!ch.finish.empty()) ++ch.after_finish;
        if (chat) {
            if (c["delta"].contains("role")) ++ch.role_chunks;
            if (c["delta"].contains("content") && c["delta"]["content"].is_string()) ch.text += c["delta"]["content"].get<std::string>();
        } else {
            ch.text += c["text"].get<std::string>();
        }
        if (c["finish_reason"].is_string()) ch.finish = c["finish_reason"];
    }
    return s;
}

}  // namespace

TEST(ServerStreamChoices, SeveralChoicesStreamInterleavedByIndex) {
    ServerProcess srv(stories_with_template(), {"-c", "2048", "--parallel", "4"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    // Chat, greedy: three equal choices, each as the whole answer's.
    json chat = {{"messages", json::array({{{"role", "user"}, {"content", "Once upon a time"}}})},
                 {"max_tokens", 10}, {"temperature", 0}, {"ignore_eos", true}, {"n", 3}};
    HttpResult whole = post(srv, "/v1/chat/completions", chat);
    ASSERT_EQ(whole.status, 200) << whole.body;
    chat["stream"] = true;
    chat["stream_options"] = {{"include_usage", true}};
    HttpResult raw = post(srv, "/v1/chat/completions", chat);
    ASSERT_EQ(raw.status, 200) << raw.body;
    Streamed s = read_stream(raw.body, true);
    EXPECT_TRUE(s.done) << raw.body;
    EXPECT_EQ(s.malformed, 0) << raw.body;
    EXPECT_EQ(s.ids.size(), 1u) << "one response, one id";
    ASSERT_EQ(s.choices.size(), 3u) << raw.body;
    for (int i = 0; i < 3; ++i) {
        const Choice& c = s.choices[i];
        EXPECT_EQ(c.role_chunks, 1) << i;
        EXPECT_EQ(c.finish, "length") << i;
        EXPECT_EQ(c.after_finish, 0) << i;
        EXPECT_EQ(c.text, whole.j["choices"][i]["message"]["content"]) << i;
    }
    EXPECT_TRUE(s.usage_last);
    EXPECT_EQ(s.usage["completion_tokens"], 30) << s.usage;
    EXPECT_EQ(s.usage["prompt_tokens"], whole.j["usage"]["prompt_tokens"]);
    EXPECT_EQ(s.usage["total_tokens"], whole.j["usage"]["total_tokens"]);

    // Completions, sampled with a seed: each streamed choice is the whole answer's choice.
    json comp = {{"prompt", "Lily and Tom went to the park"}, {"max_tokens", 12}, {"temperature", 1.0}, {"seed", 7},
                 {"ignore_eos", true}, {"n", 2}};
    whole = post(srv, "/v1/completions", comp);
    ASSERT_EQ(whole.status, 200) << whole.body;
    comp["stream"] = true;
    raw = post(srv, "/v1/completions", comp);
    ASSERT_EQ(raw.status, 200) << raw.body;
    s = read_stream(raw.body, false);
    EXPECT_TRUE(s.done);
    EXPECT_TRUE(s.usage.is_null()) << "no usage chunk unless asked";
    ASSERT_EQ(s.choices.size(), 2u) << raw.body;
    EXPECT_NE(whole.j["choices"][0]["text"], whole.j["choices"][1]["text"]) << "different seeds, different samples";
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(s.choices[i].text, whole.j["choices"][i]["text"]) << i;
        EXPECT_EQ(s.choices[i].finish, "length") << i;
        EXPECT_EQ(s.choices[i].after_finish, 0) << i;
    }
    // One token each: the first choice is over (its events read while the others were
    // started) before its stream begins; its text still goes out, before its end.
    for (json body : {json{{"prompt", "Once upon a time"}, {"max_tokens", 1}, {"temperature", 0}, {"n", 2}},
                      json{{"prompt", "Once upon a time"}, {"max_tokens", 2}, {"temperature", 0}, {"n", 3}}}) {
        whole = post(srv, "/v1/completions", body);
        ASSERT_EQ(whole.status, 200) << whole.body;
        body["stream"] = true;
        raw = post(srv, "/v1/completions", body);
        ASSERT_EQ(raw.status, 200) << raw.body;
        s = read_stream(raw.body, false);
        EXPECT_EQ(s.malformed, 0) << raw.body;
        ASSERT_EQ(s.choices.size(), whole.j["choices"].size()) << raw.body;
        for (size_t i = 0; i < s.choices.size(); ++i) {
            EXPECT_FALSE(s.choices[int(i)].text.empty()) << i << ": " << raw.body;
            EXPECT_EQ(s.choices[int(i)].text, whole.j["choices"][i]["text"]) << i << ": " << raw.body;
            EXPECT_EQ(s.choices[int(i)].after_finish, 0) << i;
        }
    }
    // The engine is idle afterwards: nothing running, no block held.
    for (int i = 0; i < 50 && metric(srv, "glia_kv_cache_blocks_used") != 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(metric(srv, "glia_kv_cache_blocks_used"), 0);
    EXPECT_EQ(metric(srv, "glia_http_requests_in_flight"), 0);
}
#endif  // GLIA_HAVE_SERVER
