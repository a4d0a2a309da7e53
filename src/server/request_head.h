// The HTTP front end's own reading of a request's head (request line and header fields),
// done on the raw bytes before cpp-httplib parses them, and of where the request's body
// ends. It decides the framing once, by RFC 9112, and refuses what two parsers could read
// differently (request smuggling):
//  - a request line longer than max_line bytes: 414; a header field longer than
//    max_field, or a head larger than max_head: 431 (answered, not a silent close);
//  - lines must end with CR LF; no bare CR, no NUL, no obsolete line folding, no space
//    between a field name and its colon, no line without a colon: 400;
//  - Content-Length must be digits only; repeated, the values must agree: 400;
//  - Transfer-Encoding with Content-Length, on HTTP/1.0, or not ending in chunked: 400;
//    any coding besides chunked: 501. More than one Host, or none on HTTP/1.1: 400.
// The framing found (none, a length, chunked) bounds what the connection hands to the
// parser for this request (see Connection) and says what is left to discard when a
// handler did not read the body (a GET with a body, a refused request).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace glia::server {

struct HeadLimits {
    size_t max_line = 8192;     // request line, CR LF included (414 beyond)
    size_t max_field = 8192;    // one header field line, CR LF included (431 beyond)
    size_t max_head = 64 << 10; // the whole head (431 beyond)
};

enum class BodyFraming { NONE, LENGTH, CHUNKED };

struct RequestHead {
    std::string method;
    size_t head_bytes = 0;  // up to and including the empty line
    BodyFraming framing = BodyFraming::NONE;
    uint64_t length = 0;    // LENGTH: the body's bytes
    // A refusal: an HTTP status (0: none), a message naming what is wrong, a code.
    int status = 0;
    std::string message, code;
};

// Finds and checks the head in the bytes received so far; incremental: call again with
// the same bytes and more after them. NEED_MORE: no limit passed yet, the head is not
// whole; DONE: `out` holds the framing, or a refusal (out.status != 0).
class HeadReader {
public:
    enum Result { NEED_MORE, DONE };
    explicit HeadReader(HeadLimits limits = {}) : limits_(limits) {}
    Result scan(std::string_view data, RequestHead& out);

private:
    HeadLimits limits_;
    size_t pos_ = 0, line_start_ = 0;
};

// Checks a whole head (it ends with an empty line); fills `out`.
void check_head(std::string_view head, const HeadLimits& limits, RequestHead& out);

// Follows a chunked body byte by byte to find where it ends (after the last chunk and
// the trailer section), without keeping the data.
class ChunkedEnd {
public:
    // How many of the n bytes belong to the body; fewer than n once it has ended.
    size_t feed(const char* p, size_t n);
    bool done() const { return state_ == DONE; }
    bool bad() const { return state_ == BAD; }

private:
    enum State { SIZE, EXT, SIZE_LF, DATA, DATA_CR, DATA_LF, TRAILER, TRAILER_LF, LINE, LINE_LF, DONE, BAD };
    State state_ = SIZE;
    uint64_t left_ = 0;
    int digits_ = 0;
};

// The reason phrase of a status this front end sends.
const char* status_reason(int status);

}  // namespace glia::server
