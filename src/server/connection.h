// How the HTTP server turns sockets into requests: one thread per connection, a bound on
// open connections, a deadline for receiving each request, and one buffered stream per
// connection. Request parsing, routing and response writing stay cpp-httplib's.
//
// Why not httplib's own loop (Debian's 0.11): it serves each connection on a thread of a
// fixed pool and applies its read timeout to each read, not to the request. A client that
// connects and sends nothing, or sends a header line every few seconds, keeps its thread
// as long as it likes; as many such clients as threads (about 75 with the default limits)
// and no request is answered, /health included. None of its options fixes that: any fixed
// pool is filled by as many idle sockets, and a read timeout short enough to matter still
// lets a line every (timeout - 1) s through. Its loop also makes a new stream for every
// request, dropping what the previous one had buffered: pipelined requests were lost.
//
// ConnectionServer overrides the per-connection function (process_and_close_socket, a
// virtual of httplib::Server) and keeps httplib's process_request for each request:
//  - connections are served by an elastic pool: a thread per connection, made on demand
//    and ended after a while idle; at most max_connections are served at once, and one
//    beyond that is answered 503 at once and closed (a few spare threads write those);
//  - a request (request line, headers and body) must arrive within request_timeout_s,
//    counted from its first byte, or for a connection's first request from the accept; a
//    slower client is disconnected;
//  - each request's head is read and checked here first (request_head.h): too long a
//    request line is answered 414, too large a header 431, ambiguous framing (both
//    Content-Length and chunked, lengths that disagree ...) 400, all with a JSON body and
//    the connection closed. The framing found bounds what httplib may read for this
//    request: it never reads into the next one, and a body it did not read (a GET with a
//    body, a request refused before its body) is read and dropped after the response
//    (at most max_body bytes, else the connection closes), never parsed as a request;
//  - between requests a connection may stay idle idle_timeout_s (keep-alive);
//  - one stream per connection with its read buffer, so pipelined requests are answered
//    in order.
// Handlers reach their connection through Connection::current() (same thread), to close
// it after the response (a body left unread) or to notice that the client went away.
#pragma once
#if GLIA_HAVE_SERVER
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "server/request_head.h"

namespace glia::server {

struct ConnectionLimits {
    int max_connections = 256;      // connections served at once (503 beyond)
    double request_timeout_s = 10;  // to receive one whole request
    double idle_timeout_s = 30;     // keep-alive idle limit; also the limit for one write
    uint64_t max_body = 1 << 20;    // an unread body is dropped up to this size, else the connection closes
    HeadLimits head;                // request line, header field and head sizes (414, 431 beyond)
    std::string busy_body;          // JSON body of the 503 sent beyond max_connections
};

// The body of a refusal made here (a malformed head): given the status, a message and a
// code; returns a JSON body. Also where the server counts these responses.
using RefusalBody = std::function<std::string(int status, const std::string& message, const std::string& code)>;

class ConnectionServer;

// The connection a handler runs on (valid during the handler and its content provider).
class Connection final : public httplib::Stream {
public:
    using Clock = std::chrono::steady_clock;
    Connection(socket_t sock, const ConnectionServer& server);

    // The thread's current connection, nullptr outside a request.
    static Connection* current();

    // Close the connection once this response is written (e.g. a body was not read).
    void close_after_response() { close_ = true; }
    bool closing() const { return close_; }
    // The client closed or reset its side (data it sent ahead, pipelined, is not a close).
    bool peer_gone() const;
    // A read failed because the request's deadline (request_timeout_s) had passed.
    bool deadline_passed() const { return deadline_hit_; }

    // httplib::Stream
    bool is_readable() const override;
    bool is_writable() const override;
    ssize_t read(char* ptr, size_t size) override;
    ssize_t write(const char* ptr, size_t size) override;
    void get_remote_ip_and_port(std::string& ip, int& port) const override;
    void get_local_ip_and_port(std::string& ip, int& port) const override;
    socket_t socket() const override { return sock_; }

private:
    friend class ConnectionServer;
    enum class Head { READY, REFUSED, GONE };
    bool buffered() const { return off_ < in_.size(); }
    // Waits until the socket is readable or `until`, in slices (a stopping server is seen).
    bool wait_readable(Clock::time_point until) const;
    void begin_request(Clock::time_point deadline);
    // Receives more bytes after those buffered (or in their place when all were read).
    bool fill();
    // Receives the request's head and checks it; READY leaves it buffered for httplib.
    Head read_head(const HeadLimits& limits, RequestHead& head);
    // The current request was read whole (head and body, by its framing).
    bool message_done() const;
    // Reads and drops the rest of the request's body; false when it cannot (more than
    // max_bytes, malformed chunks, the deadline): the connection must close.
    bool finish_body(uint64_t max_bytes);

    socket_t sock_;
    const ConnectionServer& server_;
    std::string in_;  // received bytes; those before off_ were read
    size_t off_ = 0;
    Clock::time_point deadline_;
    bool deadline_hit_ = false;
    bool close_ = false;
    // The current request: head bytes httplib has still to read, then its body's framing.
    size_t head_left_ = 0;
    BodyFraming framing_ = BodyFraming::NONE;
    uint64_t body_left_ = 0;  // LENGTH
    ChunkedEnd chunks_;       // CHUNKED
};

class ConnectionServer : public httplib::Server {
public:
    explicit ConnectionServer(ConnectionLimits limits);
    // Call after binding (bind_to_port / bind_to_any_port): widens the listen backlog.
    void after_bind();
    const ConnectionLimits& limits() const { return limits_; }
    int open_connections() const { return open_.load(); }
    uint64_t refused_connections() const { return refused_.load(); }
    bool stopping() const { return svr_sock_ == INVALID_SOCKET; }
    // Serves one connection on the calling thread until it ends, then closes it (the
    // server must be bound; fuzzing feeds raw bytes this way).
    bool serve_socket(socket_t sock) { return process_and_close_socket(sock); }
    // Set before serving: the JSON body of the refusals made here (else plain text).
    void set_refusal_body(RefusalBody fn) { refusal_body_ = std::move(fn); }

private:
    bool process_and_close_socket(socket_t sock) override;
    void serve(Connection& c);
    // Answers a refused head and marks the connection to close.
    void refuse(Connection& c, const RequestHead& head);
    ConnectionLimits limits_;
    RefusalBody refusal_body_;
    std::atomic<int> open_{0};
    std::atomic<uint64_t> refused_{0};
};

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
