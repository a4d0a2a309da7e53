// More of the protocol: n > 1 (the other choices reuse the prompt's pages), logit_bias,
// /tokenize and /detokenize, /props.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <set>

#include "server_fixture.h"

using namespace glia::test::server;

TEST(ServerProtocol, SeveralChoicesShareThePromptsPages) {
    ServerProcess srv(stories(), {"-c", "4096", "--parallel", "4"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const std::string prompt = "Once upon a time there was a little girl named Lily who loved to play in the park";
    const double hits0 = metric(srv, "glia_prefix_cache_hits_total");
    HttpResult r = post(srv, "/v1/completions", json{{"prompt", prompt}, {"max_tokens", 12}, {"n", 3}, {"temperature", 1.0},
                                                      {"seed", 9}, {"ignore_eos", true}});
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_EQ(r.j["choices"].size(), 3u);
    std::set<std::string> texts;
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(r.j["choices"][i]["index"], i);
        texts.insert(r.j["choices"][i]["text"].get<std::string>());
    }
    EXPECT_GT(texts.size(), 1u) << "different seeds, different samples";
    EXPECT_EQ(r.j["usage"]["completion_tokens"], 36);
    EXPECT_EQ(metric(srv, "glia_prefix_cache_hits_total") - hits0, 2) << "the 2nd and 3rd choices reuse the prompt";
    // Greedy: all choices equal.
    r = post(srv, "/v1/chat/completions", json{{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                                               {"max_tokens", 8}, {"n", 2}, {"temperature", 0}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.j["choices"][0]["message"]["content"], r.j["choices"][1]["message"]["content"]);
    EXPECT_EQ(post(srv, "/v1/completions", json{{"prompt", "a"}, {"n", 2}, {"stream", true}}).status, 200);  // test_stream_choices.cpp
    EXPECT_EQ(post(srv, "/v1/completions", json{{"prompt", "a"}, {"n", 0}}).status, 400);
}

TEST(ServerProtocol, LogitBiasTokenizeDetokenizeProps) {
    ServerProcess srv(stories(), {"-c", "1024", "--parallel", "1"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    HttpResult t = post(srv, "/tokenize", json{{"content", "Once upon a time"}, {"add_special", true}});
    ASSERT_EQ(t.status, 200) << t.body;
    const json ids = t.j["tokens"];
    EXPECT_EQ(ids.size(), 5u);  // BOS + 4 (the goldens' p1_short)
    HttpResult d = post(srv, "/detokenize", json{{"tokens", json(std::vector<int>(ids.begin() + 1, ids.end()))}});
    ASSERT_EQ(d.status, 200) << d.body;
    EXPECT_NE(d.j["content"].get<std::string>().find("Once upon a time"), std::string::npos) << d.body;
    EXPECT_EQ(post(srv, "/detokenize", json{{"tokens", json::array({1, 100000})}}).status, 400);
    EXPECT_EQ(post(srv, "/tokenize", json{{"text", "x"}}).status, 400);
    HttpResult wp = post(srv, "/tokenize", json{{"content", "Lily"}, {"with_pieces", true}});
    EXPECT_EQ(wp.j["tokens"][0]["id"], 317);

    // logit_bias: +100 on one token makes greedy pick it every time; -100 bans the
    // token everywhere.
    const json base = {{"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}};
    HttpResult g = post(srv, "/v1/completions", base);
    ASSERT_EQ(g.status, 200);
    json forced = base;
    forced["logit_bias"] = {{"317", 100}};
    HttpResult f = post(srv, "/v1/completions", forced);
    ASSERT_EQ(f.status, 200) << f.body;
    EXPECT_EQ(f.j["choices"][0]["text"], " Lily Lily Lily Lily") << f.body;  // 317 is "▁Lily"
    EXPECT_NE(f.j["choices"][0]["text"], g.j["choices"][0]["text"]);
    // -100 on the greedy choice: another token comes first.
    const std::string prompt2 = "Once upon a time, there was a girl named";
    HttpResult before = post(srv, "/v1/completions", json{{"prompt", prompt2}, {"max_tokens", 1}, {"temperature", 0}});
    ASSERT_EQ(before.status, 200);
    const std::string first = before.j["choices"][0]["text"];
    // The vocabulary adds the leading space itself (SentencePiece's space prefix).
    const std::string word = !first.empty() && first[0] == ' ' ? first.substr(1) : first;
    const json first_ids = post(srv, "/tokenize", json{{"content", word}}).j["tokens"];
    ASSERT_EQ(first_ids.size(), 1u) << first;
    json ban = {{"prompt", prompt2}, {"max_tokens", 1}, {"temperature", 0}};
    ban["logit_bias"] = {{std::to_string(first_ids[0].get<int>()), -100}};
    HttpResult banned = post(srv, "/v1/completions", ban);
    ASSERT_EQ(banned.status, 200);
    EXPECT_NE(banned.j["choices"][0]["text"], first);
    json bad = base;
    bad["logit_bias"] = {{"317", 101}};
    EXPECT_EQ(post(srv, "/v1/completions", bad).status, 400);
    bad["logit_bias"] = {{"99999", 1}};
    EXPECT_EQ(post(srv, "/v1/completions", bad).status, 400);
    bad["logit_bias"] = {{"x", 1}};
    EXPECT_EQ(post(srv, "/v1/completions", bad).status, 400);

    auto c = srv.client();
    auto p = c.Get("/props");
    ASSERT_TRUE(p);
    const json props = json::parse(p->body);
    EXPECT_EQ(props["n_ctx"], 1024);
    EXPECT_EQ(props["n_vocab"], 512);
    EXPECT_EQ(props["architecture"], "llama");
    EXPECT_EQ(props["prefix_cache"], true);
}
#endif
