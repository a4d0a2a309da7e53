// `glia serve` against clients that misbehave at the HTTP level, over raw loopback
// sockets: idle and trickling connections must not keep /health from answering, a slow
// request is cut at --read-timeout, connections beyond --max-connections get 503 at once,
// --max-body holds for chunked bodies and lying lengths, pipelined requests are all
// answered, and the statuses are the outcome's (504 for a whole response past --timeout,
// 400 for a number JSON cannot hold, no wait for a POST without a body).
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <memory>

#include "raw_http.h"
#include "server_fixture.h"

namespace {

using namespace glia::test::server;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// GET /health on a fresh connection; the status (0: no answer) and how long it took.
std::pair<int, double> health(const ServerProcess& s, double timeout_s) {
    const auto t0 = Clock::now();
    RawConn c(s.port());
    if (!c.ok() || !c.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")) return {0, seconds_since(t0)};
    const std::string r = c.read_responses(1, timeout_s);
    return {RawConn::status_of(r), seconds_since(t0)};
}

const std::string kPartial = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n";

std::string post_raw(const std::string& path, const std::string& body, const std::string& content_type = "application/json") {
    return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: " + content_type +
           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string chunked(const std::string& data) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    return size + data + "\r\n";
}

json body_of(const std::string& response) {
    const size_t at = response.find("\r\n\r\n");
    return at == std::string::npos ? json() : json::parse(response.substr(at + 4), nullptr, false);
}

// Item: one client blocks the whole server. 100 connections that send nothing and 100
// that trickle a header line every 0.5 s (as the default limits stand) while /health is
// asked three times: every answer within 2 s.
TEST(ServerConnections, IdleAndTricklingClientsDoNotBlockHealth) {
    ServerProcess srv(stories(), {"-c", "256"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    std::vector<std::unique_ptr<RawConn>> idle, trickle;
    for (int i = 0; i < 100; ++i) {
        idle.push_back(std::make_unique<RawConn>(srv.port()));
        trickle.push_back(std::make_unique<RawConn>(srv.port()));
        ASSERT_TRUE(idle.back()->ok() && trickle.back()->ok());
        ASSERT_TRUE(trickle.back()->send(kPartial));
    }
    for (int round = 0; round < 3; ++round) {
        for (auto& c : trickle) EXPECT_TRUE(c->send("X-a: b\r\n"));
        const auto [status, took] = health(srv, 2.0);
        EXPECT_EQ(status, 200) << "round " << round;
        EXPECT_LT(took, 2.0) << "round " << round;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    EXPECT_GE(metric(srv, "glia_http_connections_open"), 200);
}

// A request that does not arrive whole within --read-timeout is cut, trickling or silent.
TEST(ServerConnections, SlowRequestIsCutAtTheReadTimeout) {
    ServerProcess srv(stories(), {"-c", "256", "--read-timeout", "1"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    RawConn silent(srv.port()), slow(srv.port());
    ASSERT_TRUE(slow.send(kPartial));
    const auto t0 = Clock::now();
    while (!slow.closed() && seconds_since(t0) < 4) {
        slow.send("X-a: b\r\n");
        slow.read_for(0.3);
    }
    EXPECT_TRUE(slow.closed());
    EXPECT_LT(seconds_since(t0), 3.0);
    silent.read_for(1.5);
    EXPECT_TRUE(silent.closed());
    // A request sent in time on a new connection is served.
    EXPECT_EQ(health(srv, 2.0).first, 200);
}

// Beyond --max-connections a connection is answered 503 at once (and counted); once the
// others close, the server answers again.
TEST(ServerConnections, ConnectionsBeyondTheLimitGet503) {
    ServerProcess srv(stories(), {"-c", "256", "--max-connections", "4"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    std::vector<std::unique_ptr<RawConn>> held;
    for (int i = 0; i < 4; ++i) held.push_back(std::make_unique<RawConn>(srv.port()));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // all four accepted
    RawConn extra(srv.port());
    const auto t0 = Clock::now();
    const std::string r = extra.read_responses(1, 2.0);
    EXPECT_LT(seconds_since(t0), 1.0);
    EXPECT_EQ(RawConn::status_of(r), 503) << r;
    EXPECT_EQ(body_of(r)["error"]["code"], "too_many_connections") << r;
    held.clear();
    std::pair<int, double> h{0, 0};
    for (int i = 0; i < 50 && h.first != 200; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        h = health(srv, 2.0);
    }
    EXPECT_EQ(h.first, 200);
    EXPECT_GE(metric(srv, "glia_http_connections_refused_total"), 1);
}

class ServerBodies : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        srv = new ServerProcess(stories(), {"-c", "256", "--max-body", "4096", "--max-tokens-limit", "64"});
    }
    static void TearDownTestSuite() {
        delete srv;
        srv = nullptr;
    }
    void SetUp() override { ASSERT_TRUE(srv && srv->ok()) << (srv ? srv->log() : ""); }
    static ServerProcess* srv;
};
ServerProcess* ServerBodies::srv = nullptr;

const std::string kChunkedHead =
    "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";

// Item: --max-body is not enforced on chunked bodies.
TEST_F(ServerBodies, ChunkedBodyOverTheLimitIs413AtOnce) {
    // 8 KiB of an unfinished chunked body: the answer comes without the rest.
    RawConn c(srv->port());
    ASSERT_TRUE(c.send(kChunkedHead + chunked("{\"prompt\": \"" + std::string(8192, 'a'))));
    const std::string r = c.read_responses(1, 2.0);
    EXPECT_EQ(RawConn::status_of(r), 413) << r;
    EXPECT_EQ(body_of(r)["error"]["code"], "body_too_large") << r;
    EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("4096"), std::string::npos) << r;

    // A whole 10 MB chunked JSON body: 413, not read, tokenized and answered.
    RawConn big(srv->port());
    std::string body = kChunkedHead + chunked("{\"max_tokens\": 1, \"prompt\": \"");
    const std::string piece(65536, 'a');
    for (int i = 0; i < 160; ++i) body += chunked(piece);
    body += chunked("\"}") + "0\r\n\r\n";
    big.send(body);  // the server may stop reading early; what it answers is what counts
    const std::string rb = big.read_responses(1, 5.0);
    EXPECT_EQ(RawConn::status_of(rb), 413) << rb.substr(0, 300);

    // A small chunked body is served.
    RawConn small(srv->port());
    ASSERT_TRUE(small.send(kChunkedHead + chunked(R"({"prompt": "Once upon", "max_tokens": 2})") + "0\r\n\r\n"));
    const std::string rs = small.read_responses(1, 10.0);
    EXPECT_EQ(RawConn::status_of(rs), 200) << rs;
    EXPECT_EQ(body_of(rs)["usage"]["completion_tokens"], 2) << rs;
}

TEST_F(ServerBodies, LyingLengthsAndMissingBodiesAnswerAtOnce) {
    // A Content-Length past the limit is refused before any byte of the body is sent.
    RawConn c(srv->port());
    ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 200000000\r\n\r\n"));
    auto t0 = Clock::now();
    const std::string r = c.read_responses(1, 2.0);
    EXPECT_LT(seconds_since(t0), 1.0);
    EXPECT_EQ(RawConn::status_of(r), 413) << r;
    // Item: a POST with neither Content-Length nor chunks has no body: 400 at once.
    RawConn none(srv->port());
    ASSERT_TRUE(none.send("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    t0 = Clock::now();
    const std::string rn = none.read_responses(1, 2.0);
    EXPECT_LT(seconds_since(t0), 1.0);
    EXPECT_EQ(RawConn::status_of(rn), 400) << rn;
    EXPECT_EQ(body_of(rn)["error"]["code"], "invalid_json") << rn;
}

// Item: a form-encoded body (what `curl -d` sends) is the same JSON, limited by --max-body
// only, and a 413 quotes that limit.
TEST_F(ServerBodies, FormEncodedBodiesAreJsonUnderTheSameLimit) {
    const std::string form = "application/x-www-form-urlencoded";
    RawConn c(srv->port());
    // ("user" is a field the server ignores: room for the size without a longer prompt)
    const std::string ok_body = json{{"prompt", "Once upon a time"}, {"max_tokens", 1}, {"user", std::string(3000, 'u')}}.dump();
    ASSERT_TRUE(c.send(post_raw("/v1/completions", ok_body, form)));
    const std::string r = c.read_responses(1, 10.0);
    EXPECT_EQ(RawConn::status_of(r), 200) << r;
    RawConn big(srv->port());
    ASSERT_TRUE(big.send(post_raw("/v1/completions", json{{"prompt", std::string(5000, 'a')}}.dump(), form)));
    const std::string rb = big.read_responses(1, 2.0);
    EXPECT_EQ(RawConn::status_of(rb), 413) << rb;
    EXPECT_NE(body_of(rb)["error"]["message"].get<std::string>().find("4096 bytes (--max-body)"), std::string::npos) << rb;
}

TEST(ServerStatuses, FormBodyOver8KiBUnderALargerLimit) {
    ServerProcess srv(stories(), {"-c", "256", "--max-body", "65536"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    RawConn c(srv.port());
    const std::string body = json{{"prompt", "Once upon a time"}, {"max_tokens", 1}, {"user", std::string(10000, 'u')}}.dump();
    ASSERT_TRUE(c.send(post_raw("/v1/completions", body, "application/x-www-form-urlencoded")));
    const std::string r = c.read_responses(1, 10.0);
    EXPECT_EQ(RawConn::status_of(r), 200) << r.substr(0, 400);
}

// Item: three pipelined requests on one connection get three answers, in order.
TEST_F(ServerBodies, PipelinedRequestsAreAllAnswered) {
    RawConn c(srv->port());
    ASSERT_TRUE(c.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" +
                       post_raw("/v1/completions", R"({"prompt": "Once upon", "max_tokens": 3})") +
                       "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    const std::string r = c.read_responses(3, 10.0);
    ASSERT_EQ(RawConn::count_responses(r), 3) << r;
    const size_t second = r.find("HTTP/1.1", 1), third = r.find("HTTP/1.1", second + 1);
    EXPECT_NE(body_of(r.substr(0, second)).value("status", ""), "");
    EXPECT_EQ(body_of(r.substr(second, third - second))["usage"]["completion_tokens"], 3);
    EXPECT_EQ(body_of(r.substr(third))["object"], "list");
}

// Item: "temperature": 1e400 is a number JSON cannot hold: 400, not 500.
TEST_F(ServerBodies, HugeNumberIs400) {
    HttpResult r = post(*srv, "/v1/completions", std::string(R"({"prompt": "x", "temperature": 1e400})"));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.j["error"]["code"], "invalid_json") << r.body;
}

// Item: a whole response that hits --timeout gets 504 (its status is the outcome's).
TEST(ServerStatuses, WholeResponsePastTheTimeoutIs504) {
    ServerProcess srv(stories(), {"-c", "16384", "--parallel", "1", "--timeout", "0.3", "--max-tokens-limit", "16000"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    HttpResult r = post(srv, "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 16000}, {"ignore_eos", true}});
    EXPECT_EQ(r.status, 504) << r.body;
    EXPECT_EQ(r.j["error"]["code"], "timeout") << r.body;
    EXPECT_EQ(metric(srv, "glia_requests_timed_out_total"), 1);
    EXPECT_EQ(post(srv, "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 2}}).status, 200);
}

// A whole response is awaited before anything is sent; a client that leaves meanwhile
// is still noticed, and its request cancelled.
TEST(ServerStatuses, ClientLeavingAWholeResponseCancelsIt) {
    ServerProcess srv(stories(), {"-c", "16384", "--parallel", "1", "--max-tokens-limit", "16000"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    {
        RawConn c(srv.port());
        ASSERT_TRUE(c.send(post_raw("/v1/completions", R"({"prompt": "Once", "max_tokens": 16000, "ignore_eos": true})")));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }  // closed before the answer
    double gone = 0, used = -1;
    for (int i = 0; i < 250 && (gone < 1 || used != 0); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        gone = metric(srv, "glia_client_disconnects_total");
        used = metric(srv, "glia_kv_cache_blocks_used");
    }
    EXPECT_EQ(gone, 1);
    EXPECT_EQ(used, 0);
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
