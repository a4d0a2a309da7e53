// How `glia serve` frames requests, over raw loopback sockets: a body that no handler
// reads (a GET with a body) is dropped, never run as the next request (request
// smuggling); Content-Length with chunked, lengths that disagree or are not numbers are
// refused with 400 and the connection closed; a 100 KB request line gets 414 and a huge
// header 431 (answered, not a silent close); /tokenize, /v1/responses and /v1/messages say
// where a body is not UTF-8 or not JSON.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include "raw_http.h"
#include "server_fixture.h"

namespace {

using namespace glia::test::server;

json body_of(const std::string& response) {
    const size_t at = response.find("\r\n\r\n");
    return at == std::string::npos ? json() : json::parse(response.substr(at + 4), nullptr, false);
}

const std::string kCompletion = R"({"prompt": "Once upon a time", "max_tokens": 2})";

std::string post(const std::string& path, const std::string& body) {
    return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
}

class ServerFraming : public ::testing::Test {
protected:
    static void SetUpTestSuite() { srv = new ServerProcess(stories(), {"-c", "256", "--max-body", "65536"}); }
    static void TearDownTestSuite() {
        delete srv;
        srv = nullptr;
    }
    void SetUp() override { ASSERT_TRUE(srv && srv->ok()) << (srv ? srv->log() : ""); }
    static ServerProcess* srv;
    // What one connection gets for `data`: one response, or with `closed` all until the
    // server closes (or `seconds` pass).
    static std::string exchange(const std::string& data, double seconds = 1.5, bool* closed = nullptr) {
        RawConn c(srv->port());
        EXPECT_TRUE(c.ok() && c.send(data));
        const std::string r = closed ? c.read_for(seconds) : c.read_responses(1, seconds);
        if (closed) *closed = c.closed();
        return r;
    }
};
ServerProcess* ServerFraming::srv = nullptr;

// Item 4: a GET whose Content-Length body holds a POST got two responses and the
// completion ran. The body is dropped: one response, nothing generated, and the
// connection still serves the next request.
TEST_F(ServerFraming, BodyOfAGetIsNotRunAsARequest) {
    const double before = metric(*srv, "glia_requests_total");
    const std::string inner = post("/v1/completions", kCompletion);
    for (const std::string& method : std::vector<std::string>{"GET /health", "GET /v1/models", "OPTIONS /v1/completions"}) {
        RawConn c(srv->port());
        ASSERT_TRUE(c.send(method + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(inner.size()) +
                           "\r\n\r\n" + inner));
        std::string r = c.read_for(1.5);
        EXPECT_EQ(RawConn::count_responses(r), 1) << method << ": " << r;
        EXPECT_EQ(r.find("text_completion"), std::string::npos) << method << ": " << r;
        // The connection is still in step: the next request is answered as itself.
        ASSERT_TRUE(c.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
        r = c.read_responses(1, 5.0);
        EXPECT_EQ(RawConn::status_of(r), 200) << method << ": " << r;
        EXPECT_EQ(body_of(r)["status"], "ok") << method << ": " << r;
    }
    // A chunked body on a GET: the same.
    RawConn c(srv->port());
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", inner.size());
    ASSERT_TRUE(c.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(size) +
                       inner + "\r\n0\r\n\r\n"));
    const std::string r = c.read_for(1.5);
    EXPECT_EQ(RawConn::count_responses(r), 1) << r;
    EXPECT_EQ(metric(*srv, "glia_requests_total"), before) << "the smuggled completion ran";
}

// A body longer than --max-body on a GET is not read: the connection closes after the
// answer (what follows cannot be trusted to start a request).
TEST_F(ServerFraming, OversizedUnreadBodyClosesTheConnection) {
    bool closed = false;
    const std::string r = exchange("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10000000\r\n\r\n" +
                                       post("/v1/completions", kCompletion), 3.0, &closed);
    EXPECT_EQ(RawConn::count_responses(r), 1) << r;
    EXPECT_EQ(RawConn::status_of(r), 200) << r;
    EXPECT_TRUE(closed);
}

// Item 4: framing that two parsers could read differently is refused with 400 (501 for
// an unknown coding), and the connection closed; the body is never run.
TEST_F(ServerFraming, AmbiguousFramingIsRefusedAndCloses) {
    const double before = metric(*srv, "glia_requests_total");
    const std::string inner = post("/v1/completions", kCompletion);
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", inner.size());
    const std::string chunks = std::string(size) + inner + "\r\n0\r\n\r\n";
    struct Case {
        std::string head;
        int status;
        const char* code;
    };
    const std::string start = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";
    const std::vector<Case> cases = {
        {start + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "ambiguous_framing"},
        {start + "Transfer-Encoding: chunked\r\nContent-Length: " + std::to_string(chunks.size()) + "\r\n\r\n", 400,
         "ambiguous_framing"},
        {start + "Content-Length: " + std::to_string(kCompletion.size()) + "\r\nContent-Length: 3\r\n\r\n", 400,
         "invalid_content_length"},
        {start + "Content-Length: +5\r\n\r\n", 400, "invalid_content_length"},
        {start + "Content-Length: 5 5\r\n\r\n", 400, "invalid_content_length"},
        {start + "Transfer-Encoding: gzip, chunked\r\n\r\n", 501, "unsupported_transfer_encoding"},
        {start + "Transfer-Encoding: chunked, identity\r\n\r\n", 400, "ambiguous_framing"},
        {start + "Content-Length : 5\r\n\r\n", 400, "malformed_header"},
        {"POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\n", 400, "missing_host"},
    };
    for (const Case& c : cases) {
        bool closed = false;
        const std::string r = exchange(c.head + chunks + inner, 1.5, &closed);
        EXPECT_EQ(RawConn::status_of(r), c.status) << c.head << r;
        EXPECT_EQ(body_of(r)["error"]["code"], c.code) << c.head << r;
        EXPECT_EQ(RawConn::count_responses(r), 1) << c.head << r;
        EXPECT_TRUE(closed) << c.head;
    }
    EXPECT_EQ(metric(*srv, "glia_requests_total"), before);
    // Repeated lengths that agree are one length.
    const std::string r = exchange(start + "Content-Length: " + std::to_string(kCompletion.size()) +
                                   "\r\nContent-Length: " + std::to_string(kCompletion.size()) + "\r\n\r\n" + kCompletion, 10.0);
    EXPECT_EQ(RawConn::status_of(r), 200) << r;
}

// Item 10: a 100 KB request line got no answer; a huge header a bare 400.
TEST_F(ServerFraming, LongRequestLineIs414AndHugeHeaderIs431) {
    bool closed = false;
    std::string r = exchange("GET /" + std::string(100000, 'a') + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 3.0, &closed);
    EXPECT_EQ(RawConn::status_of(r), 414) << r.substr(0, 300);
    EXPECT_EQ(body_of(r)["error"]["code"], "uri_too_long") << r;
    EXPECT_TRUE(closed);
    r = exchange("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(100000, 'b') + "\r\n\r\n", 3.0, &closed);
    EXPECT_EQ(RawConn::status_of(r), 431) << r.substr(0, 300);
    EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("X-Big"), std::string::npos) << r;
    EXPECT_TRUE(closed);
    std::string many = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (int i = 0; i < 3000; ++i) many += "X-" + std::to_string(i) + ": " + std::string(30, 'c') + "\r\n";
    r = exchange(many + "\r\n", 3.0, &closed);
    EXPECT_EQ(RawConn::status_of(r), 431) << r.substr(0, 300);
    EXPECT_EQ(body_of(r)["error"]["code"], "header_too_large") << r;
    // The refusals count in the metrics by status.
    auto c = srv->client();
    auto m = c.Get("/metrics");
    ASSERT_TRUE(m);
    EXPECT_NE(m->body.find("glia_http_responses_total{code=\"414\"}"), std::string::npos);
    EXPECT_NE(m->body.find("glia_http_responses_total{code=\"431\"}"), std::string::npos);
}

// Item 10: /tokenize said only "the request body must be a JSON object" for invalid UTF-8.
TEST_F(ServerFraming, TokenizeNamesTheFieldAndOffsetOfInvalidUtf8) {
    const std::string body = "{\"content\": \"ab\xff\xfe\"}";
    std::string r = exchange(post("/tokenize", body), 3.0);
    EXPECT_EQ(RawConn::status_of(r), 400) << r;
    json e = body_of(r)["error"];
    EXPECT_EQ(e["param"], "content") << r;
    EXPECT_EQ(e["code"], "invalid_utf8") << r;
    EXPECT_NE(e["message"].get<std::string>().find("offset 15"), std::string::npos) << r;
    EXPECT_NE(e["message"].get<std::string>().find("0xff"), std::string::npos) << r;
    // A lone surrogate escape: the field and the offset.
    r = exchange(post("/tokenize", R"({"add_special": true, "content": "x\ud800"})"), 3.0);
    EXPECT_EQ(RawConn::status_of(r), 400) << r;
    e = body_of(r)["error"];
    EXPECT_EQ(e["param"], "content") << r;
    EXPECT_NE(e["message"].get<std::string>().find("byte offset"), std::string::npos) << r;
    r = exchange(post("/detokenize", "{\"tokens\": [1, 2,]}"), 3.0);
    EXPECT_EQ(RawConn::status_of(r), 400) << r;
    EXPECT_EQ(body_of(r)["error"]["param"], "tokens[2]") << r;
}

// The Responses and Messages routes read their bodies as the other routes do
// (json_body.h): a syntax error's byte offset and field, invalid UTF-8's byte and offset.
TEST_F(ServerFraming, ResponsesAndMessagesBodiesSayWhere) {
    std::string r = exchange(post("/v1/responses", R"({"model": "m", "input": [1,]})"), 3.0);
    EXPECT_EQ(RawConn::status_of(r), 400) << r;
    json e = body_of(r)["error"];
    EXPECT_EQ(e["code"], "invalid_json") << r;
    EXPECT_EQ(e["param"], "input[1]") << r;
    EXPECT_NE(e["message"].get<std::string>().find("at byte offset 27"), std::string::npos) << r;
    r = exchange(post("/v1/messages", "{\"model\": \"m\xff\", \"max_tokens\": 8}"), 3.0);
    EXPECT_EQ(RawConn::status_of(r), 400) << r;
    EXPECT_EQ(body_of(r)["type"], "error") << r;  // Anthropic's shape
    EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("byte 0xff at offset 12"), std::string::npos) << r;
    r = exchange(post("/v1/messages/count_tokens", "[]"), 3.0);
    EXPECT_EQ(RawConn::status_of(r), 400) << r;
    EXPECT_NE(r.find("must be a JSON object, not array"), std::string::npos) << r;
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
