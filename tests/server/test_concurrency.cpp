// `glia serve` under concurrency on stories260K: 16 simultaneous greedy streams each
// give the text the same request gives alone; a client that disconnects mid-stream
// leaves the others intact and its KV blocks freed (seen in /metrics); a bounded load
// run (200 requests, 32 at a time) has zero failures and reports its throughput.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <future>

#include "raw_http.h"
#include "server_fixture.h"

namespace {

using namespace glia::test::server;
using Clock = std::chrono::steady_clock;

const char* kPrompts[] = {
    "Once upon a time", "The little dog", "Lily went to the park", "Tom had a red ball", "One day, a bird",
    "The sun was hot", "Sam and Mia", "A big fish", "There was a girl named Sue", "The cat sat on",
    "Mom said", "In the garden", "Ben wanted a toy", "The boat", "It was a rainy day", "The old man",
};

json greedy(const std::string& prompt, int n, bool stream) {
    json b = {{"prompt", prompt}, {"max_tokens", n}, {"temperature", 0}, {"ignore_eos", true}};
    if (stream) b["stream"] = true;
    return b;
}

// Waits until the KV cache is empty (or 10 s).
double wait_blocks_free(const ServerProcess& s) {
    double used = -1;
    for (int i = 0; i < 500; ++i) {
        used = metric(s, "glia_kv_cache_blocks_used");
        if (used == 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return used;
}

TEST(ServerConcurrency, SixteenGreedyStreamsEqualEachAlone) {
    ServerProcess srv(stories(), {"-c", "4096", "--parallel", "16"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const int n = 48;
    std::vector<std::string> alone;
    for (const char* p : kPrompts) {
        HttpResult r = post(srv, "/v1/completions", greedy(p, n, false));
        ASSERT_EQ(r.status, 200) << r.body;
        alone.push_back(r.j["choices"][0]["text"]);
    }
    std::vector<std::future<StreamResult>> fs;
    for (const char* p : kPrompts)
        fs.push_back(std::async(std::launch::async, [&srv, p] { return stream(srv, "/v1/completions", greedy(p, n, true)); }));
    for (size_t i = 0; i < fs.size(); ++i) {
        StreamResult r = fs[i].get();
        EXPECT_EQ(r.status, 200);
        EXPECT_TRUE(r.done) << kPrompts[i];
        EXPECT_EQ(r.finish_reason, "length");
        EXPECT_EQ(r.text, alone[i]) << "prompt " << i << ": " << kPrompts[i];
    }
    EXPECT_EQ(wait_blocks_free(srv), 0);
}

// Item: with as many connections as --max-concurrent, requests were refused 503 "busy":
// a request whose client had gone still counted until its handler noticed, and a bad
// request was refused as busy instead of getting its 4xx. Now a request counts once it
// is valid, and admission over the limit first drops the requests of clients that went.
TEST(ServerConcurrency, InFlightLimitCountsOnlyValidRequestsOfLiveClients) {
    ServerProcess srv(stories(), {"-c", "4096", "--parallel", "2", "--max-concurrent", "2"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    auto long_stream = [&] {
        auto c = std::make_unique<RawConn>(srv.port());
        const std::string b = json{{"prompt", "Once upon a time"}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true}}.dump();
        c->send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                std::to_string(b.size()) + "\r\n\r\n" + b);
        c->read_for(0.05);
        return c;
    };
    auto wait_in_flight = [&](double n) {
        for (int i = 0; i < 200 && metric(srv, "glia_http_requests_in_flight") != n; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return metric(srv, "glia_http_requests_in_flight");
    };
    const json small = greedy("The cat sat on", 4, false);
    auto a = long_stream();
    auto b = long_stream();
    ASSERT_EQ(wait_in_flight(2), 2);
    HttpResult busy = post(srv, "/v1/completions", small);
    EXPECT_EQ(busy.status, 503) << busy.body;
    EXPECT_EQ(busy.j["error"]["code"], "server_busy") << busy.body;
    // Bad requests get their 4xx, busy or not.
    EXPECT_EQ(post(srv, "/v1/completions", std::string("{not json")).status, 400);
    EXPECT_EQ(post(srv, "/v1/completions", json{{"prompt", "x"}, {"max_tokens", -3}}).status, 400);
    EXPECT_EQ(post(srv, "/v1/chat/completions", json{{"messages", json::array({{{"role", "robot"}, {"content", "x"}}})}}).status, 400);
    // A client goes and at once sends its next request (on a new connection): admitted.
    for (int round = 0; round < 5; ++round) {
        ASSERT_EQ(wait_in_flight(2), 2) << round;
        a.reset();
        HttpResult r = post(srv, "/v1/completions", small);
        EXPECT_EQ(r.status, 200) << round << ": " << r.body;
        a = long_stream();
    }
    a.reset();
    b.reset();
    EXPECT_EQ(wait_in_flight(0), 0);
    EXPECT_EQ(wait_blocks_free(srv), 0);
}

TEST(ServerConcurrency, DisconnectMidStreamCancelsAndFreesBlocks) {
    ServerProcess srv(stories(), {"-c", "4096", "--parallel", "4"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const int n = 120;
    std::vector<std::string> alone;
    for (int i = 0; i < 3; ++i) alone.push_back(post(srv, "/v1/completions", greedy(kPrompts[i], n, false)).j["choices"][0]["text"]);
    const double cancelled0 = metric(srv, "glia_requests_cancelled_total");

    std::atomic<bool> quitter_started{false};
    auto quitter = std::async(std::launch::async, [&] {
        // Reads a few events of a long stream, then drops the connection.
        auto c = srv.client();
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body = greedy("The old man", 2000, true).dump();
        req.set_header("Content-Type", "application/json");
        int events = 0;
        std::string buf;
        req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
            buf.append(data, len);
            size_t pos;
            while ((pos = buf.find("\n\n")) != std::string::npos) {
                buf.erase(0, pos + 2);
                ++events;
                quitter_started = true;
            }
            return events < 4;
        };
        httplib::Response res;
        httplib::Error err = httplib::Error::Success;
        c.send(req, res, err);
        return events;
    });
    while (!quitter_started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<std::future<StreamResult>> fs;
    for (int i = 0; i < 3; ++i)
        fs.push_back(std::async(std::launch::async, [&srv, i] { return stream(srv, "/v1/completions", greedy(kPrompts[i], n, true)); }));
    EXPECT_GE(quitter.get(), 4);
    for (int i = 0; i < 3; ++i) {
        StreamResult r = fs[i].get();
        EXPECT_TRUE(r.done);
        EXPECT_EQ(r.text, alone[i]) << kPrompts[i];
    }
    EXPECT_EQ(wait_blocks_free(srv), 0);
    EXPECT_GE(metric(srv, "glia_client_disconnects_total"), 1);
    EXPECT_GE(metric(srv, "glia_requests_cancelled_total"), cancelled0 + 1);
    EXPECT_EQ(metric(srv, "glia_requests_running"), 0);
    // Still serving.
    EXPECT_EQ(post(srv, "/v1/completions", greedy("Once upon a time", 4, false)).status, 200);
}

TEST(ServerLoad, TwoHundredRequestsThirtyTwoAtATime) {
    ServerProcess srv(stories(), {"-c", "4096", "--parallel", "8"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const int total = 200, width = 32, n = 16;
    std::atomic<int> next{0}, failures{0};
    std::atomic<long> tokens{0};
    std::mutex err_mutex;
    std::string first_error;
    const auto t0 = Clock::now();
    std::vector<std::thread> workers;
    for (int w = 0; w < width; ++w) {
        workers.emplace_back([&] {
            for (int i; (i = next++) < total;) {
                const std::string prompt = std::string(kPrompts[i % 16]) + (i % 3 ? "" : " and");
                bool ok;
                std::string why;
                // A completed request ends with "length" (n tokens) or, should the model
                // emit end-of-text first, "stop"; anything else is a failure.
                if (i % 2) {
                    StreamResult r = stream(srv, "/v1/completions", greedy(prompt, n, true));
                    ok = r.status == 200 && r.done && (r.finish_reason == "length" || r.finish_reason == "stop");
                    why = "request " + std::to_string(i) + ": stream status " + std::to_string(r.status) +
                          ", done " + std::to_string(r.done) + ", finish_reason '" + r.finish_reason + "'";
                } else {
                    HttpResult r = post(srv, "/v1/completions", greedy(prompt, n, false));
                    try {
                        const std::string fr = r.j.at("choices").at(0).at("finish_reason").get<std::string>();
                        const int got = r.j.at("usage").at("completion_tokens").get<int>();
                        ok = r.status == 200 && ((fr == "length" && got == n) || (fr == "stop" && got <= n));
                    } catch (const std::exception&) {
                        ok = false;
                    }
                    why = "request " + std::to_string(i) + ": status " + std::to_string(r.status) + ", body " + r.body;
                }
                if (ok) tokens += n;
                else {
                    ++failures;
                    std::lock_guard<std::mutex> lk(err_mutex);
                    if (first_error.empty()) first_error = why;
                }
            }
        });
    }
    for (auto& t : workers) t.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(failures.load(), 0) << first_error;
    std::printf("[ load     ] %d requests, %d at a time, %d tokens each: %.2f s, %.1f requests/s, %.1f generated tokens/s\n",
                total, width, n, s, total / s, tokens.load() / s);
    ::testing::Test::RecordProperty("requests_per_second", std::to_string(total / s));
    EXPECT_EQ(wait_blocks_free(srv), 0);
    EXPECT_EQ(metric(srv, "glia_requests_finished_total"), total);
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
