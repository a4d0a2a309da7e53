// Browser-facing safety of `glia serve` (browser_policy.h): without --api-key a page of
// any origin could make the server generate (a text/plain POST needs no preflight), and a
// rebound host name reached it (DNS rebinding). Foreign Origins and, on a loopback bind,
// non-loopback Host names get 403; --cors-origin and --allowed-hosts open them, with CORS
// preflights answered. Clients without Origin (SDKs, curl) are not affected.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include "raw_http.h"
#include "server_fixture.h"

namespace {

using namespace glia::test::server;

const std::string kCompletion = R"({"prompt": "Once upon a time", "max_tokens": 2})";

// One request on a fresh connection with these extra header lines; the whole response.
std::string request(const ServerProcess& s, const std::string& method, const std::string& path, const std::string& headers,
                    const std::string& body = "") {
    RawConn c(s.port());
    std::string req = method + " " + path + " HTTP/1.1\r\n" + headers + "Connection: close\r\n";
    if (!body.empty()) req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    if (!c.send(req + "\r\n" + body)) return "";
    return c.read_for(10.0);
}

json body_of(const std::string& response) {
    const size_t at = response.find("\r\n\r\n");
    return at == std::string::npos ? json() : json::parse(response.substr(at + 4), nullptr, false);
}

// The value of a response header ("" when absent).
std::string header(const std::string& response, const std::string& name) {
    const std::string head = response.substr(0, response.find("\r\n\r\n"));
    const size_t at = head.find("\r\n" + name + ": ");
    if (at == std::string::npos) return "";
    const size_t from = at + name.size() + 4;
    return head.substr(from, head.find("\r\n", from) - from);
}

TEST(ServerBrowserSafety, ForeignOriginsAndHostsAreRefusedByDefault) {
    ServerProcess srv(stories(), {"-c", "256"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const std::string self = "127.0.0.1:" + std::to_string(srv.port());
    // A page of another origin posting text/plain (no preflight): refused, nothing runs.
    std::string r = request(srv, "POST", "/v1/completions",
                            "Host: " + self + "\r\nOrigin: http://evil.example\r\nContent-Type: text/plain\r\n", kCompletion);
    EXPECT_EQ(RawConn::status_of(r), 403) << r;
    EXPECT_EQ(body_of(r)["error"]["code"], "origin_not_allowed") << r;
    EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("--cors-origin"), std::string::npos) << r;
    EXPECT_EQ(header(r, "Access-Control-Allow-Origin"), "");
    EXPECT_EQ(metric(srv, "glia_requests_total"), 0) << "the foreign page's completion ran";
    // Its preflight gets no CORS permission either.
    r = request(srv, "OPTIONS", "/v1/chat/completions",
                "Host: " + self + "\r\nOrigin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\n");
    EXPECT_EQ(RawConn::status_of(r), 403) << r;
    // A rebound name (DNS rebinding): the browser's Origin matches its Host; the Host is refused.
    r = request(srv, "POST", "/v1/completions",
                "Host: rebind.example:" + std::to_string(srv.port()) + "\r\nOrigin: http://rebind.example:" +
                    std::to_string(srv.port()) + "\r\nContent-Type: application/json\r\n", kCompletion);
    EXPECT_EQ(RawConn::status_of(r), 403) << r;
    EXPECT_EQ(body_of(r)["error"]["code"], "host_not_allowed") << r;
    EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("--allowed-hosts"), std::string::npos) << r;
    r = request(srv, "GET", "/", "Host: rebind.example\r\n");
    EXPECT_EQ(RawConn::status_of(r), 403) << r;
    EXPECT_EQ(metric(srv, "glia_requests_total"), 0);

    // Same origin (the chat page), loopback names, and clients without Origin: served.
    r = request(srv, "POST", "/v1/completions",
                "Host: " + self + "\r\nOrigin: http://" + self + "\r\nContent-Type: application/json\r\n", kCompletion);
    EXPECT_EQ(RawConn::status_of(r), 200) << r;
    const std::string port = std::to_string(srv.port());
    for (const std::string& host : std::vector<std::string>{"localhost:" + port, "localhost", "127.0.0.1", "[::1]:" + port, "127.0.0.2:" + port}) {
        r = request(srv, "GET", "/health", "Host: " + host + "\r\n");
        EXPECT_EQ(RawConn::status_of(r), 200) << host << r;
    }
    r = request(srv, "POST", "/v1/completions",
                "Host: localhost:" + port + "\r\nOrigin: http://localhost:" + port + "\r\nContent-Type: application/json\r\n",
                kCompletion);
    EXPECT_EQ(RawConn::status_of(r), 200) << r;
    EXPECT_EQ(post(srv, "/v1/completions", kCompletion).status, 200);  // httplib's client: no Origin
    EXPECT_EQ(metric(srv, "glia_requests_total"), 3);
}

TEST(ServerBrowserSafety, CorsOriginAllowsListedPagesWithPreflight) {
    ServerProcess srv(stories(), {"-c", "256", "--cors-origin", "http://app.example:3000", "--api-key", "k"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const std::string host = "Host: 127.0.0.1:" + std::to_string(srv.port()) + "\r\n";
    // The preflight: not behind --api-key, answers the methods and headers asked for.
    std::string r = request(srv, "OPTIONS", "/v1/chat/completions",
                            host + "Origin: http://app.example:3000\r\nAccess-Control-Request-Method: POST\r\n"
                                   "Access-Control-Request-Headers: authorization, content-type, x-stainless-os\r\n");
    EXPECT_EQ(RawConn::status_of(r), 204) << r;
    EXPECT_EQ(header(r, "Access-Control-Allow-Origin"), "http://app.example:3000") << r;
    EXPECT_NE(header(r, "Access-Control-Allow-Methods").find("POST"), std::string::npos) << r;
    EXPECT_EQ(header(r, "Access-Control-Allow-Headers"), "authorization, content-type, x-stainless-os") << r;
    // The request itself carries the header; so does its 401 (the page can read why).
    r = request(srv, "POST", "/v1/completions",
                host + "Origin: http://app.example:3000\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\n",
                kCompletion);
    EXPECT_EQ(RawConn::status_of(r), 200) << r;
    EXPECT_EQ(header(r, "Access-Control-Allow-Origin"), "http://app.example:3000") << r;
    r = request(srv, "POST", "/v1/completions", host + "Origin: http://app.example:3000\r\nContent-Type: application/json\r\n",
                kCompletion);
    EXPECT_EQ(RawConn::status_of(r), 401) << r;
    EXPECT_EQ(header(r, "Access-Control-Allow-Origin"), "http://app.example:3000") << r;
    // Another origin: still refused.
    r = request(srv, "POST", "/v1/completions",
                host + "Origin: http://app.example:4000\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\n",
                kCompletion);
    EXPECT_EQ(RawConn::status_of(r), 403) << r;
}

TEST(ServerBrowserSafety, WildcardsAndAllowedHosts) {
    ServerProcess any(stories(), {"-c", "256", "--cors-origin", "*", "--allowed-hosts", "*"});
    ASSERT_TRUE(any.ok()) << any.log();
    std::string r = request(any, "POST", "/v1/completions",
                            "Host: whatever.example\r\nOrigin: http://page.example\r\nContent-Type: application/json\r\n",
                            kCompletion);
    EXPECT_EQ(RawConn::status_of(r), 200) << r;
    EXPECT_EQ(header(r, "Access-Control-Allow-Origin"), "http://page.example") << r;

    ServerProcess named(stories(), {"-c", "256", "--allowed-hosts", "box.lan,llm.test"});
    ASSERT_TRUE(named.ok()) << named.log();
    EXPECT_EQ(RawConn::status_of(request(named, "GET", "/health", "Host: llm.test:8080\r\n")), 200);
    EXPECT_EQ(RawConn::status_of(request(named, "GET", "/health", "Host: localhost\r\n")), 200);
    EXPECT_EQ(RawConn::status_of(request(named, "GET", "/health", "Host: other.test\r\n")), 403);
    // Same origin under an allowed name.
    r = request(named, "GET", "/v1/models", "Host: box.lan:8080\r\nOrigin: http://box.lan:8080\r\n");
    EXPECT_EQ(RawConn::status_of(r), 200) << r;

    // A malformed list is refused at start, naming the option.
    ServerProcess bad(stories(), {"-c", "256", "--cors-origin", "localhost:3000"});
    EXPECT_FALSE(bad.ok());
    EXPECT_NE(bad.log().find("--cors-origin"), std::string::npos) << bad.log();
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
