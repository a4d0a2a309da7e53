// The HTTP front end's pure parts: the request-head check (request_head.h), the end of a
// chunked body, the browser policy (browser_policy.h) and JSON body errors (json_body.h).
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include "server/browser_policy.h"
#include "server/json_body.h"
#include "server/request_head.h"

namespace {

using namespace glia::server;

RequestHead head_of(const std::string& s, HeadLimits limits = {}) {
    HeadReader r(limits);
    RequestHead h;
    EXPECT_EQ(r.scan(s, h), HeadReader::DONE) << s;
    return h;
}

TEST(RequestHead, FramingOfGoodRequests) {
    RequestHead h = head_of("GET /health HTTP/1.1\r\nHost: a\r\n\r\nGET /next");
    EXPECT_EQ(h.status, 0) << h.message;
    EXPECT_EQ(h.method, "GET");
    EXPECT_EQ(h.head_bytes, 33u);
    EXPECT_EQ(h.framing, BodyFraming::NONE);
    h = head_of("POST /x HTTP/1.1\r\nHost: a\r\ncontent-length:  12 \r\n\r\n");
    EXPECT_EQ(h.framing, BodyFraming::LENGTH);
    EXPECT_EQ(h.length, 12u);
    h = head_of("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\nContent-Length: 007\r\n\r\n");
    EXPECT_EQ(h.status, 0) << "repeated lengths that agree";
    EXPECT_EQ(h.length, 7u);
    h = head_of("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n");
    EXPECT_EQ(h.framing, BodyFraming::CHUNKED);
    h = head_of("GET / HTTP/1.0\r\n\r\n");
    EXPECT_EQ(h.status, 0) << "HTTP/1.0 needs no Host";
}

TEST(RequestHead, AmbiguousFramingIsRefused) {
    struct Case {
        const char* head;
        int status;
        const char* code;
    };
    const Case cases[] = {
        {"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "ambiguous_framing"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400, "ambiguous_framing"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400, "invalid_content_length"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", 400, "invalid_content_length"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", 400, "invalid_content_length"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400, "invalid_content_length"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n", 400, "invalid_content_length"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", 400, "invalid_content_length"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", 400, "invalid_content_length"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "ambiguous_framing"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n", 400, "ambiguous_framing"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "unsupported_transfer_encoding"},
        {"POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "ambiguous_framing"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n", 400, "malformed_header"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nX: y\r\n Content-Length: 5\r\n\r\n", 400, "malformed_header"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nX: y\nContent-Length: 5\r\n\r\n", 400, "malformed_request"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", 400, "malformed_request"},
        {"POST /x HTTP/1.1\r\nHost: a\r\nno colon\r\n\r\n", 400, "malformed_header"},
        {"GET /x HTTP/1.1\r\n\r\n", 400, "missing_host"},
        {"GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "malformed_header"},
        {"GET /x HTTP/2.0\r\nHost: a\r\n\r\n", 505, "http_version_not_supported"},
        {"GET  /x HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed_request"},
        {"GET /x\r\nHost: a\r\n\r\n", 400, "malformed_request"},
        {"GET /x HTTP/1.1\n\n", 400, "malformed_request"},
    };
    for (const Case& c : cases) {
        const RequestHead h = head_of(c.head);
        EXPECT_EQ(h.status, c.status) << c.head << " -> " << h.message;
        EXPECT_EQ(h.code, c.code) << c.head << " -> " << h.message;
        EXPECT_FALSE(h.message.empty());
    }
}

TEST(RequestHead, LimitsAreAnsweredBeforeTheLineEnds) {
    HeadReader r;
    RequestHead h;
    // A request line past 8 KiB: 414 without waiting for its end.
    std::string line = "GET /" + std::string(9000, 'a');
    EXPECT_EQ(r.scan(line.substr(0, 4000), h), HeadReader::NEED_MORE);
    EXPECT_EQ(r.scan(line, h), HeadReader::DONE);
    EXPECT_EQ(h.status, 414);
    // One header field past 8 KiB: 431 naming it.
    HeadReader r2;
    RequestHead h2;
    EXPECT_EQ(r2.scan("GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(9000, 'b'), h2), HeadReader::DONE);
    EXPECT_EQ(h2.status, 431);
    EXPECT_NE(h2.message.find("X-Big"), std::string::npos) << h2.message;
    // Many small fields past 64 KiB in all: 431.
    std::string many = "GET / HTTP/1.1\r\nHost: a\r\n";
    for (int i = 0; i < 2000; ++i) many += "X-" + std::to_string(i) + ": " + std::string(30, 'c') + "\r\n";
    const RequestHead h3 = head_of(many);
    EXPECT_EQ(h3.status, 431) << h3.message;
    // Fed a byte at a time, the reader still finds the head (and does not rescan).
    const std::string ok = "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc";
    HeadReader r4;
    RequestHead h4;
    size_t n = 1;
    while (r4.scan(std::string_view(ok).substr(0, n), h4) == HeadReader::NEED_MORE) ++n;
    EXPECT_EQ(h4.status, 0);
    EXPECT_EQ(n, ok.size() - 3);
    EXPECT_EQ(h4.head_bytes, n);
}

TEST(RequestHead, ChunkedBodyEnd) {
    const std::string body = "5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nTrailer: x\r\n\r\n";
    ChunkedEnd e;
    EXPECT_EQ(e.feed((body + "GET /next").data(), body.size() + 9), body.size());
    EXPECT_TRUE(e.done());
    ChunkedEnd byte;  // a byte at a time
    size_t i = 0;
    for (; i < body.size() && !byte.done(); ++i) EXPECT_EQ(byte.feed(body.data() + i, 1), 1u);
    EXPECT_TRUE(byte.done());
    EXPECT_EQ(i, body.size());
    ChunkedEnd bad;
    bad.feed("zz\r\n", 4);
    EXPECT_TRUE(bad.bad());
}

TEST(BrowserPolicy, HostAndOriginChecks) {
    const BrowserPolicy local = make_browser_policy("127.0.0.1", "", "");
    EXPECT_TRUE(local.check_host);
    for (const char* h : {"localhost", "localhost:8080", "127.0.0.1:8080", "127.1.2.3", "[::1]:8080", "[::1]", "LOCALHOST",
                          "app.localhost:1"})
        EXPECT_EQ(check_browser_request(local, h, false, "").status, 0) << h;
    for (const char* h : {"evil.example", "evil.example:8080", "127.0.0.1.evil.example", "1.2.3.4", "localhost.evil", "[::2]"}) {
        const BrowserVerdict v = check_browser_request(local, h, false, "");
        EXPECT_EQ(v.status, 403) << h;
        EXPECT_EQ(v.code, "host_not_allowed") << h;
    }
    // Same origin passes, with or without the default port; others are refused.
    EXPECT_EQ(check_browser_request(local, "127.0.0.1:8080", true, "http://127.0.0.1:8080").status, 0);
    EXPECT_EQ(check_browser_request(local, "localhost", true, "http://localhost").status, 0);
    EXPECT_EQ(check_browser_request(local, "localhost:80", true, "http://localhost").status, 0);
    EXPECT_TRUE(check_browser_request(local, "127.0.0.1:8080", true, "http://127.0.0.1:8080").allow_origin.empty());
    for (const char* o : {"http://evil.example", "http://127.0.0.1:8081", "null", "http://localhost:8080", "file://"}) {
        const BrowserVerdict v = check_browser_request(local, "127.0.0.1:8080", true, o);
        EXPECT_EQ(v.status, 403) << o;
        EXPECT_EQ(v.code, "origin_not_allowed") << o;
        EXPECT_NE(v.message.find("--cors-origin"), std::string::npos) << v.message;
    }
    // A non-loopback bind checks no Host, but still the Origin.
    const BrowserPolicy any_if = make_browser_policy("0.0.0.0", "", "");
    EXPECT_FALSE(any_if.check_host);
    EXPECT_EQ(check_browser_request(any_if, "myhost:8080", false, "").status, 0);
    EXPECT_EQ(check_browser_request(any_if, "myhost:8080", true, "http://myhost:8080").status, 0);
    EXPECT_EQ(check_browser_request(any_if, "myhost:8080", true, "http://evil.example").status, 403);
    // --allowed-hosts opens names (on any bind); '*' turns the check off.
    const BrowserPolicy named = make_browser_policy("0.0.0.0", "box.lan, Example.TEST", "");
    EXPECT_TRUE(named.check_host);
    EXPECT_EQ(check_browser_request(named, "example.test:9", false, "").status, 0);
    EXPECT_EQ(check_browser_request(named, "localhost", false, "").status, 0);
    EXPECT_EQ(check_browser_request(named, "other.lan", false, "").status, 403);
    EXPECT_EQ(check_browser_request(make_browser_policy("127.0.0.1", "*", ""), "anything", false, "").status, 0);
    // --cors-origin allows listed origins, with the CORS header; '*' any.
    const BrowserPolicy cors = make_browser_policy("127.0.0.1", "", "http://localhost:3000, https://app.example/");
    BrowserVerdict v = check_browser_request(cors, "127.0.0.1:8080", true, "http://localhost:3000");
    EXPECT_EQ(v.status, 0);
    EXPECT_EQ(v.allow_origin, "http://localhost:3000");
    EXPECT_EQ(check_browser_request(cors, "127.0.0.1:8080", true, "https://app.example:443").status, 0);
    EXPECT_EQ(check_browser_request(cors, "127.0.0.1:8080", true, "http://app.example").status, 403);
    v = check_browser_request(make_browser_policy("127.0.0.1", "", "*"), "127.0.0.1", true, "http://x.example");
    EXPECT_EQ(v.status, 0);
    EXPECT_EQ(v.allow_origin, "http://x.example");
    // Malformed options name the option.
    EXPECT_THROW(make_browser_policy("127.0.0.1", "", "localhost:3000"), std::invalid_argument);
    EXPECT_THROW(make_browser_policy("127.0.0.1", "", "*, http://a"), std::invalid_argument);
    EXPECT_THROW(make_browser_policy("127.0.0.1", "bad host", ""), std::invalid_argument);
    try {
        make_browser_policy("127.0.0.1", "", "ftp://x");
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("--cors-origin"), std::string::npos);
    }
    EXPECT_EQ(preflight_allow_headers("authorization, content-type, x-stainless-os"),
              "authorization, content-type, x-stainless-os");
    EXPECT_EQ(preflight_allow_headers("bad\r\nheader"), "Authorization, Content-Type");
}

TEST(JsonBody, ErrorsSayWhere) {
    EXPECT_EQ(invalid_utf8_offset("abc"), std::string_view::npos);
    EXPECT_EQ(invalid_utf8_offset("a\xc3\xa9z"), std::string_view::npos);
    EXPECT_EQ(invalid_utf8_offset("ab\xff"), 2u);
    EXPECT_EQ(invalid_utf8_offset("a\xc0\x80"), 1u);          // overlong
    EXPECT_EQ(invalid_utf8_offset("a\xed\xa0\x80"), 1u);      // surrogate
    EXPECT_EQ(invalid_utf8_offset("a\xf4\x90\x80\x80"), 1u);  // past U+10FFFF
    EXPECT_EQ(invalid_utf8_offset("a\xe2\x82"), 1u);          // cut short
    try {
        parse_body_object("{\"content\": \"ab\xff\"}");
        FAIL() << "no error";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.param, "content");
        EXPECT_EQ(e.code, "invalid_utf8");
        EXPECT_NE(e.message.find("offset 15"), std::string::npos) << e.message;
        EXPECT_NE(e.message.find("0xff"), std::string::npos) << e.message;
    }
    try {
        parse_body_object("{\"a\": [1, {\"b\": \"\\ud800\"}]}");
        FAIL() << "no error";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.param, "a[1].b") << e.message;
        EXPECT_NE(e.message.find("byte offset"), std::string::npos) << e.message;
    }
    try {
        parse_body_object(std::string(1000, '['));
        FAIL() << "no error";
    } catch (const ApiError& e) {
        EXPECT_NE(e.message.find("deeper than 128 levels (passed at byte offset 128)"), std::string::npos) << e.message;
    }
    EXPECT_THROW(parse_body_object("[1]"), ApiError);
    EXPECT_EQ(parse_body_object("{\"content\": \"x\"}")["content"], "x");
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
