// Admission under the server's defaults (issue 26): streams that leave out max_tokens (what
// SDKs and the chat page send) are batched, not run one at a time; an embeddings request
// with many more inputs than the engine's queue is fed through it in parts and answers
// every input; afterwards /health and /metrics report nothing running.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>

#include "server_fixture.h"

namespace {

using namespace glia::test::server;

const char* kPrompts[] = {"Once upon a time", "The little dog", "Lily went to the park", "Tom had a red ball"};

// One streamed completion read event by event until `n_chunks` chunks of text have come,
// then dropped (the client is done: the request ends); `clock` orders the events of all
// streams.
struct Timeline {
    int first_token = -1;  // clock value when the first text arrived
    int finished = -1;     // clock value when the stream ended (finish reason, or the client left)
    std::string text;
    int chunks = 0;
};

Timeline stream_in_order(const ServerProcess& srv, const json& body, int n_chunks, std::atomic<int>& clock) {
    auto c = srv.client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    Timeline t;
    std::string buf;
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
        buf.append(data, len);
        size_t pos;
        while (t.chunks < n_chunks && (pos = buf.find("\n\n")) != std::string::npos) {
            const std::string ev = buf.substr(0, pos);
            buf.erase(0, pos + 2);
            if (ev.rfind("data: ", 0) != 0 || ev == "data: [DONE]") continue;
            const json j = json::parse(ev.substr(6), nullptr, false);
            if (!j.contains("choices") || j["choices"].empty()) continue;
            const json& ch = j["choices"][0];
            if (ch.contains("text") && ch["text"].is_string() && !ch["text"].get<std::string>().empty()) {
                if (t.first_token < 0) t.first_token = clock++;
                t.text += ch["text"].get<std::string>();
                ++t.chunks;
            }
            if (ch.contains("finish_reason") && ch["finish_reason"].is_string() && t.finished < 0) t.finished = clock++;
        }
        if (t.chunks >= n_chunks && t.finished < 0) t.finished = clock++;
        return t.finished < 0;
    };
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    c.send(req, res, err);
    return t;
}

// Four concurrent streams without max_tokens on -c 4096 --parallel 4 (the budget of each
// is then the whole context; stories260K does not stop by itself): every one gets its
// first token before any of them ends (the client reads 600 chunks, then leaves). Each
// request used to reserve the whole context, so they ran one after another. The text is
// what the same request gives alone.
TEST(ServerAdmission, StreamsWithoutMaxTokensRunTogether) {
    ServerProcess srv(stories(), {"-c", "4096", "--parallel", "4"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const int n = 600;
    std::vector<std::string> alone;
    for (const char* p : kPrompts) {
        HttpResult r = post(srv, "/v1/completions", json{{"prompt", p}, {"temperature", 0}, {"max_tokens", n}});
        ASSERT_EQ(r.status, 200) << r.body;
        alone.push_back(r.j["choices"][0]["text"]);
    }
    std::atomic<int> clock{0};
    std::vector<std::future<Timeline>> fs;
    for (const char* p : kPrompts)
        fs.push_back(std::async(std::launch::async, [&srv, &clock, p] {
            return stream_in_order(srv, json{{"prompt", p}, {"temperature", 0}, {"stream", true}}, n, clock);
        }));
    std::vector<Timeline> ts;
    for (auto& f : fs) ts.push_back(f.get());
    int last_first = -1, first_end = 1 << 30;
    for (size_t i = 0; i < ts.size(); ++i) {
        ASSERT_GE(ts[i].first_token, 0) << kPrompts[i];
        ASSERT_GE(ts[i].finished, 0) << kPrompts[i];
        EXPECT_EQ(ts[i].chunks, n) << kPrompts[i];
        // A chunk may carry several tokens (a client that reads slowly): the texts agree as far as both go.
        const size_t common = std::min(alone[i].size(), ts[i].text.size());
        EXPECT_GT(common, static_cast<size_t>(n)) << kPrompts[i];
        EXPECT_EQ(alone[i].substr(0, common), ts[i].text.substr(0, common)) << kPrompts[i];
        last_first = std::max(last_first, ts[i].first_token);
        first_end = std::min(first_end, ts[i].finished);
    }
    EXPECT_LT(last_first, first_end) << "a stream got its first token only after another had ended";
    // The streams the clients left are cancelled.
    double running = -1;
    for (int i = 0; i < 500 && running != 0; ++i) {
        running = metric(srv, "glia_requests_running");
        if (running != 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(running, 0);
}

std::vector<std::string> texts(int n) {
    const char* words[] = {"dog", "park", "ball", "tree", "cat", "sun", "boat", "bird", "cake", "frog", "moon"};
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i)
        out.push_back(std::string(kPrompts[i % 4]) + " " + words[i % 11] + " " + words[(i / 11) % 11] + " " +
                      std::to_string(i));
    return out;
}

// 100 and 300 inputs on an idle server (the engine's queue takes 64 waiting requests):
// 200, one vector per input in order, each the one the input gets alone. Beyond 2048
// inputs: a 400 naming 'input'. Nothing is left running afterwards.
TEST(ServerEmbeddings, ManyInputsAreFedThroughTheEngineInParts) {
    ServerProcess srv(stories(), {"-c", "2048", "--parallel", "4"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const std::vector<std::string> all = texts(300);
    std::vector<json> alone;
    for (const std::string& t : all) {
        HttpResult r = post(srv, "/v1/embeddings", json{{"input", t}});
        ASSERT_EQ(r.status, 200) << r.body;
        alone.push_back(r.j["data"][0]["embedding"]);
    }
    for (size_t n : {100u, 300u}) {
        const std::vector<std::string> in(all.begin(), all.begin() + n);
        HttpResult r = post(srv, "/v1/embeddings", json{{"input", in}});
        ASSERT_EQ(r.status, 200) << n << " inputs: " << r.body.substr(0, 300);
        ASSERT_EQ(r.j["data"].size(), n);
        for (size_t i = 0; i < n; ++i) {
            EXPECT_EQ(r.j["data"][i]["index"], i);
            EXPECT_EQ(r.j["data"][i]["embedding"], alone[i]) << n << " inputs: input " << i << " differs from alone";
        }
        EXPECT_GT(r.j["usage"]["prompt_tokens"].get<int>(), static_cast<int>(n));
    }
    HttpResult big = post(srv, "/v1/embeddings", json{{"input", std::vector<std::string>(2049, "a")}});
    EXPECT_EQ(big.status, 400) << big.body.substr(0, 300);
    EXPECT_EQ(big.j["error"]["param"], "input") << big.body.substr(0, 300);
    EXPECT_EQ(metric(srv, "glia_requests_running"), 0);
}

// After an embeddings call, /health and /metrics count nothing running or waiting (they
// used to keep the call's requests as running until the next generation).
TEST(ServerEmbeddings, NothingRunningAfterwards) {
    ServerProcess srv(stories(), {"-c", "2048", "--parallel", "4"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    HttpResult r = post(srv, "/v1/embeddings", json{{"input", json::array({"Once upon a time", "The little dog", "Lily"})}});
    ASSERT_EQ(r.status, 200) << r.body;
    auto c = srv.client();
    auto h = c.Get("/health");
    ASSERT_TRUE(h);
    const json hj = json::parse(h->body, nullptr, false);
    EXPECT_EQ(hj["running"], 0) << h->body;
    EXPECT_EQ(hj["waiting"], 0) << h->body;
    EXPECT_EQ(metric(srv, "glia_requests_running"), 0);
    EXPECT_EQ(metric(srv, "glia_queue_depth"), 0);
}

// Four greedy requests whose budgets together exceed a small cache (-c 256): they run
// together until the cache is full, then the youngest is paused and recomputed later
// (glia_requests_preempted_total counts it); every reply is the one it gets alone.
TEST(ServerAdmission, PreemptedRequestsAnswerAsAlone) {
    ServerProcess srv(stories(), {"-c", "256", "--parallel", "4"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    std::vector<std::string> alone;
    for (const char* p : kPrompts) {
        HttpResult r = post(srv, "/v1/completions", json{{"prompt", p}, {"temperature", 0}, {"max_tokens", 160}});
        ASSERT_EQ(r.status, 200) << r.body;
        alone.push_back(r.j["choices"][0]["text"]);
    }
    EXPECT_EQ(metric(srv, "glia_requests_preempted_total"), 0);
    std::vector<std::future<HttpResult>> fs;
    for (const char* p : kPrompts)
        fs.push_back(std::async(std::launch::async, [&srv, p] {
            return post(srv, "/v1/completions", json{{"prompt", p}, {"temperature", 0}, {"max_tokens", 160}});
        }));
    for (size_t i = 0; i < fs.size(); ++i) {
        const HttpResult r = fs[i].get();
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(r.j["choices"][0]["text"], alone[i]) << kPrompts[i];
        EXPECT_EQ(r.j["usage"]["completion_tokens"], 160) << kPrompts[i];
    }
    EXPECT_GT(metric(srv, "glia_requests_preempted_total"), 0);
    EXPECT_EQ(metric(srv, "glia_kv_cache_blocks_used"), 0);
}

}  // namespace
#endif
