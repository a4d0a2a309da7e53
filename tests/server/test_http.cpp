// `glia serve` over raw HTTP: the routes, every error status in OpenAI's error shape
// (and the server still serving afterwards), API keys, stop strings, streaming shapes,
// logprobs. The model is stories260K (and a copy of it with a chat template).
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <atomic>
#include <future>

#include "server_fixture.h"

namespace {

using namespace glia::test::server;

void expect_error(const HttpResult& r, int status, const std::string& param_or_code = "") {
    EXPECT_EQ(r.status, status) << r.body;
    ASSERT_TRUE(r.j.is_object()) << r.body;
    ASSERT_TRUE(r.j.contains("error")) << r.body;
    const json& e = r.j["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.body;
    EXPECT_TRUE(e["type"].is_string()) << r.body;
    EXPECT_TRUE(e.contains("param") && e.contains("code")) << r.body;
    if (!param_or_code.empty()) {
        EXPECT_TRUE(e["param"] == param_or_code || e["code"] == param_or_code) << r.body;
    }
}

json chat_body(const std::string& content, int max_tokens = 12) {
    return json{{"model", "glia_server_stories_chat"},
                {"messages", json::array({json{{"role", "user"}, {"content", content}}})},
                {"max_tokens", max_tokens},
                {"temperature", 0}};
}

json completion_body(const std::string& prompt, int max_tokens = 12) {
    return json{{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

class ServerHttp : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        srv = new ServerProcess(stories_with_template(),
                                {"-c", "256", "--parallel", "4", "--max-body", "4096", "--max-tokens-limit", "200"});
    }
    static void TearDownTestSuite() {
        delete srv;
        srv = nullptr;
    }
    void SetUp() override { ASSERT_TRUE(srv && srv->ok()) << (srv ? srv->log() : ""); }
    static ServerProcess* srv;
};
ServerProcess* ServerHttp::srv = nullptr;

TEST_F(ServerHttp, HealthModelsMetrics) {
    auto c = srv->client();
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    EXPECT_EQ(json::parse(h->body)["status"], "ok");
    auto m = c.Get("/v1/models");
    ASSERT_TRUE(m);
    const json mj = json::parse(m->body);
    EXPECT_EQ(mj["object"], "list");
    EXPECT_EQ(mj["data"][0]["id"], "glia_server_stories_chat");
    EXPECT_EQ(mj["data"][0]["object"], "model");
    auto one = c.Get("/v1/models/glia_server_stories_chat");
    ASSERT_TRUE(one);
    EXPECT_EQ(one->status, 200);
    auto met = c.Get("/metrics");
    ASSERT_TRUE(met);
    for (const char* name : {"glia_requests_total", "glia_requests_finished_total", "glia_requests_cancelled_total",
                             "glia_requests_rejected_total", "glia_prompt_tokens_total", "glia_generated_tokens_total",
                             "glia_queue_depth", "glia_requests_running", "glia_decode_tokens_per_second",
                             "glia_kv_cache_blocks_used", "glia_kv_cache_blocks_total"})
        EXPECT_NE(met->body.find(std::string("\n") + name + " "), std::string::npos) << name << "\n" << met->body;
    EXPECT_GT(metric(*srv, "glia_kv_cache_blocks_total"), 0);
}

TEST_F(ServerHttp, ChatAndCompletionShapes) {
    HttpResult r = post(*srv, "/v1/chat/completions", chat_body("Tell me a story"));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.j["object"], "chat.completion");
    EXPECT_EQ(r.j["model"], "glia_server_stories_chat");
    EXPECT_EQ(r.j["choices"][0]["message"]["role"], "assistant");
    EXPECT_TRUE(r.j["choices"][0]["message"]["content"].is_string());
    const std::string fr = r.j["choices"][0]["finish_reason"];
    EXPECT_TRUE(fr == "stop" || fr == "length") << fr;
    const json& u = r.j["usage"];
    EXPECT_GT(u["prompt_tokens"].get<int>(), 3);
    EXPECT_GE(u["completion_tokens"].get<int>(), 1);
    EXPECT_LE(u["completion_tokens"].get<int>(), 12);
    EXPECT_EQ(u["total_tokens"].get<int>(), u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());

    HttpResult c = post(*srv, "/v1/completions", completion_body("Once upon a time", 20));
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_EQ(c.j["object"], "text_completion");
    EXPECT_TRUE(c.j["choices"][0]["text"].is_string());
    EXPECT_EQ(c.j["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(c.j["usage"]["completion_tokens"], 20);
    EXPECT_FALSE(c.j["choices"][0]["text"].get<std::string>().empty());

    // The model may be named by its path too, or left out.
    json by_path = completion_body("Once upon a time", 20);
    by_path["model"] = stories_with_template();
    EXPECT_EQ(post(*srv, "/v1/completions", by_path).j["choices"][0]["text"], c.j["choices"][0]["text"]);
}

TEST_F(ServerHttp, ChatUsesTheModelsTemplate) {
    // The fixture's template renders "{bos}User: ...\nAssistant:"; a completion of that text
    // (BOS added by the vocabulary) must continue the same way, with one BOS only.
    json chat = chat_body("Tell me a story", 16);
    chat["ignore_eos"] = true;
    HttpResult c = post(*srv, "/v1/chat/completions", chat);
    json comp = completion_body("User: Tell me a story\nAssistant:", 16);
    comp["ignore_eos"] = true;
    HttpResult p = post(*srv, "/v1/completions", comp);
    ASSERT_EQ(c.status, 200) << c.body;
    ASSERT_EQ(p.status, 200) << p.body;
    EXPECT_EQ(c.j["choices"][0]["message"]["content"], p.j["choices"][0]["text"]);
    EXPECT_EQ(c.j["usage"]["prompt_tokens"], p.j["usage"]["prompt_tokens"]);
}

TEST_F(ServerHttp, StreamingEqualsWholeAndEndsWithDone) {
    const json body = completion_body("Once upon a time", 24);
    HttpResult whole = post(*srv, "/v1/completions", body);
    ASSERT_EQ(whole.status, 200);
    json sb = body;
    sb["stream"] = true;
    sb["stream_options"] = {{"include_usage", true}};
    StreamResult s = stream(*srv, "/v1/completions", sb);
    EXPECT_EQ(s.status, 200);
    EXPECT_TRUE(s.done);
    EXPECT_EQ(s.text, whole.j["choices"][0]["text"].get<std::string>());
    EXPECT_EQ(s.finish_reason, "length");
    ASSERT_FALSE(s.chunks.empty());
    EXPECT_EQ(s.chunks.back()["usage"]["completion_tokens"], 24);
    EXPECT_TRUE(s.chunks.back()["choices"].empty());
    for (size_t i = 0; i + 1 < s.chunks.size(); ++i) {
        EXPECT_EQ(s.chunks[i]["object"], "text_completion");
        EXPECT_TRUE(s.chunks[i]["usage"].is_null());
    }

    const json cb = chat_body("Tell me a story", 16);
    HttpResult cw = post(*srv, "/v1/chat/completions", cb);
    json csb = cb;
    csb["stream"] = true;
    StreamResult cs = stream(*srv, "/v1/chat/completions", csb);
    EXPECT_TRUE(cs.done);
    EXPECT_EQ(cs.text, cw.j["choices"][0]["message"]["content"].get<std::string>());
    ASSERT_GE(cs.chunks.size(), 2u);
    EXPECT_EQ(cs.chunks[0]["object"], "chat.completion.chunk");
    EXPECT_EQ(cs.chunks[0]["choices"][0]["delta"]["role"], "assistant");
    EXPECT_FALSE(cs.chunks.back().contains("usage"));  // no include_usage
    EXPECT_EQ(cs.finish_reason, cw.j["choices"][0]["finish_reason"]);
}

TEST_F(ServerHttp, StopStrings) {
    HttpResult whole = post(*srv, "/v1/completions", completion_body("Once upon a time", 40));
    const std::string text = whole.j["choices"][0]["text"];
    ASSERT_GT(text.size(), 20u) << text;
    const std::string stop = text.substr(12, 4);
    const std::string expect = text.substr(0, text.find(stop));
    json b = completion_body("Once upon a time", 40);
    b["stop"] = json::array({"\x01never", stop});
    HttpResult r = post(*srv, "/v1/completions", b);
    EXPECT_EQ(r.j["choices"][0]["text"], expect);
    EXPECT_EQ(r.j["choices"][0]["finish_reason"], "stop");
    b["stream"] = true;
    StreamResult s = stream(*srv, "/v1/completions", b);
    EXPECT_EQ(s.text, expect);
    EXPECT_EQ(s.finish_reason, "stop");
    EXPECT_TRUE(s.done);
}

// A request ended by a stop string is a finished request in /metrics, not a cancelled one.
TEST_F(ServerHttp, StopStringCountsAsFinished) {
    HttpResult whole = post(*srv, "/v1/completions", completion_body("Once upon a time", 40));
    const std::string text = whole.j["choices"][0]["text"];
    ASSERT_GT(text.size(), 20u) << text;
    json b = completion_body("Once upon a time", 40);
    b["stop"] = json::array({text.substr(8, 4)});
    const double finished0 = metric(*srv, "glia_requests_finished_total");
    const double cancelled0 = metric(*srv, "glia_requests_cancelled_total");
    HttpResult r = post(*srv, "/v1/completions", b);
    ASSERT_EQ(r.j["choices"][0]["finish_reason"], "stop");
    // The engine applies the early stop at its next step: wait for the counter to move.
    double finished = finished0;
    for (int i = 0; i < 200 && finished == finished0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        finished = metric(*srv, "glia_requests_finished_total");
    }
    EXPECT_EQ(finished, finished0 + 1);
    EXPECT_EQ(metric(*srv, "glia_requests_cancelled_total"), cancelled0);
}

TEST_F(ServerHttp, Logprobs) {
    json b = chat_body("Tell me a story", 6);
    b["logprobs"] = true;
    b["top_logprobs"] = 3;
    b["ignore_eos"] = true;
    HttpResult r = post(*srv, "/v1/chat/completions", b);
    ASSERT_EQ(r.status, 200) << r.body;
    const json& content = r.j["choices"][0]["logprobs"]["content"];
    ASSERT_EQ(content.size(), 6u) << r.body;
    std::string joined;
    for (const json& t : content) {
        EXPECT_TRUE(t["token"].is_string());
        EXPECT_LE(t["logprob"].get<double>(), 1e-4);
        EXPECT_TRUE(t["bytes"].is_array());
        ASSERT_EQ(t["top_logprobs"].size(), 3u);
        // Greedy: the chosen token is the most likely one.
        EXPECT_NEAR(t["top_logprobs"][0]["logprob"].get<double>(), t["logprob"].get<double>(), 1e-4);
        joined += t["token"].get<std::string>();
    }
    EXPECT_EQ(joined, r.j["choices"][0]["message"]["content"]);
    json cb = completion_body("Once upon a time", 5);
    cb["logprobs"] = 2;
    HttpResult c = post(*srv, "/v1/completions", cb);
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_EQ(c.j["choices"][0]["logprobs"]["tokens"].size(), 5u);
    EXPECT_EQ(c.j["choices"][0]["logprobs"]["top_logprobs"][0].size(), 2u);
}

TEST_F(ServerHttp, ErrorsHaveTheRightStatusAndShape) {
    expect_error(post(*srv, "/v1/chat/completions", std::string("{\"messages\": [")), 400, "invalid_json");
    expect_error(post(*srv, "/v1/chat/completions", std::string("")), 400, "invalid_json");
    json b = chat_body("hi");
    b["temperature"] = "hot";
    HttpResult wt = post(*srv, "/v1/chat/completions", b);
    expect_error(wt, 400, "temperature");
    EXPECT_NE(wt.j["error"]["message"].get<std::string>().find("temperature"), std::string::npos);
    b = chat_body("hi");
    b["messages"] = "hi";
    expect_error(post(*srv, "/v1/chat/completions", b), 400, "messages");
    b = chat_body("hi");
    b["n"] = 17;  // at most 16 choices
    expect_error(post(*srv, "/v1/chat/completions", b), 400, "n");
    b = chat_body("hi");
    b["model"] = "gpt-4";
    HttpResult um = post(*srv, "/v1/chat/completions", b);
    expect_error(um, 404, "model_not_found");
    expect_error(post(*srv, "/v1/completions", json{{"prompt", "x"}, {"model", "nope"}}), 404, "model");

    // Prompt longer than the context (256 tokens).
    std::string long_prompt;
    for (int i = 0; i < 150; ++i) long_prompt += "the cat sat ";
    expect_error(post(*srv, "/v1/completions", completion_body(long_prompt, 4)), 400, "context_length_exceeded");
    expect_error(post(*srv, "/v1/completions", completion_body("Once", 201)), 400, "max_tokens");  // > --max-tokens-limit
    expect_error(post(*srv, "/v1/completions", completion_body(long_prompt.substr(0, 600), 200)), 400,
                 "context_length_exceeded");
    expect_error(post(*srv, "/v1/completions", json{{"prompt", json::array({1, 99999999})}}), 400, "prompt");

    // Body larger than --max-body 4096.
    expect_error(post(*srv, "/v1/completions", completion_body(std::string(5000, 'a'))), 413, "body_too_large");
    // Unknown route.
    auto c = srv->client();
    auto nf = c.Get("/v1/nothing");
    ASSERT_TRUE(nf);
    EXPECT_EQ(nf->status, 404);
    EXPECT_TRUE(json::parse(nf->body).contains("error"));

    // ... and the server keeps serving.
    HttpResult ok = post(*srv, "/v1/completions", completion_body("Once upon a time", 4));
    EXPECT_EQ(ok.status, 200) << ok.body;
    EXPECT_GT(metric(*srv, "glia_requests_rejected_total"), 5);
}

TEST(ServerAuth, ApiKeyOnV1Routes) {
    ServerProcess srv(stories(), {"-c", "256", "--api-key", "s3cret"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    expect_error(post(srv, "/v1/completions", completion_body("Once", 2)), 401, "missing_api_key");
    expect_error(post(srv, "/v1/completions", completion_body("Once", 2), {{"Authorization", "Bearer wrong"}}), 401,
                 "invalid_api_key");
    auto c = srv.client();
    auto m = c.Get("/v1/models");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->status, 401);
    EXPECT_EQ(post(srv, "/v1/completions", completion_body("Once", 2), {{"Authorization", "Bearer s3cret"}}).status, 200);
    // Chat on a model without a template: the plain fallback.
    json chat = chat_body("Once upon a time", 4);
    chat.erase("model");
    HttpResult r = post(srv, "/v1/chat/completions", chat, {{"Authorization", "Bearer s3cret"}});
    EXPECT_EQ(r.status, 200) << r.body;
    auto h = c.Get("/health");  // not a /v1 route: open
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
}

TEST(ServerLimits, QueueFullGives503AndOthersFinish) {
    // One sequence at a time, one waiting: of 6 long requests at once some are refused.
    ServerProcess srv(stories(), {"-c", "512", "--parallel", "1", "--max-queue", "1", "--max-concurrent", "100"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    std::vector<std::future<HttpResult>> fs;
    for (int i = 0; i < 6; ++i) {
        fs.push_back(std::async(std::launch::async, [&srv] {
            json b = completion_body("Once upon a time", 200);
            b["ignore_eos"] = true;
            return post(srv, "/v1/completions", b);
        }));
    }
    int n200 = 0, n503 = 0;
    for (auto& f : fs) {
        HttpResult r = f.get();
        if (r.status == 200) {
            ++n200;
            EXPECT_EQ(r.j["usage"]["completion_tokens"], 200);
        } else {
            expect_error(r, 503);
            ++n503;
        }
    }
    EXPECT_GE(n200, 1);
    EXPECT_GE(n503, 1);
    EXPECT_EQ(n200 + n503, 6);
    // The server-side concurrency limit answers 503 the same way.
    ServerProcess srv2(stories(), {"-c", "4096", "--parallel", "1", "--max-concurrent", "1"});
    ASSERT_TRUE(srv2.ok()) << srv2.log();
    std::atomic<bool> seen_busy{false}, streaming{false};
    auto slow = std::async(std::launch::async, [&] {
        // A long stream, dropped once the 503 was seen.
        json b = completion_body("Once upon a time", 3000);
        b["ignore_eos"] = true;
        b["stream"] = true;
        auto c = srv2.client();
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body = b.dump();
        req.set_header("Content-Type", "application/json");
        req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
            streaming = true;
            return !seen_busy.load();
        };
        httplib::Response res;
        httplib::Error err = httplib::Error::Success;
        c.send(req, res, err);
    });
    while (!streaming) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    HttpResult busy = post(srv2, "/v1/completions", completion_body("Once", 2));
    seen_busy = true;
    expect_error(busy, 503, "server_busy");
    slow.get();
    // The slot is given back once the stream is dropped.
    HttpResult again;
    for (int i = 0; i < 200 && again.status != 200; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        again = post(srv2, "/v1/completions", completion_body("Once", 2));
    }
    EXPECT_EQ(again.status, 200) << again.body;
}

TEST(ServerLimits, TotalTimeoutCancels) {
    ServerProcess srv(stories(), {"-c", "16384", "--parallel", "1", "--timeout", "0.3", "--max-tokens-limit", "16000"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    json b = completion_body("Once upon a time", 16000);
    b["ignore_eos"] = true;
    b["stream"] = true;
    StreamResult s = stream(srv, "/v1/completions", b);
    EXPECT_TRUE(s.done);
    ASSERT_FALSE(s.chunks.empty());
    EXPECT_EQ(s.chunks.back()["error"]["code"], "timeout");
    for (int i = 0; i < 100 && metric(srv, "glia_kv_cache_blocks_used") != 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(metric(srv, "glia_kv_cache_blocks_used"), 0);
    EXPECT_EQ(metric(srv, "glia_requests_timed_out_total"), 1);
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
