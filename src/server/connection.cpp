#if GLIA_HAVE_SERVER
#include "server/connection.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace glia::server {
namespace {

using Clock = Connection::Clock;

thread_local Connection* t_current = nullptr;

std::chrono::milliseconds ms(double seconds) {
    return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

// Milliseconds from now until `t`, at least 0 and at most `cap_ms`.
int ms_until(Clock::time_point t, int cap_ms) {
    const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(d, 0, cap_ms));
}

// Threads made on demand up to a maximum, each ending after a while without work (a few
// stay). httplib hands it one job per accepted connection.
class ElasticPool final : public httplib::TaskQueue {
public:
    explicit ElasticPool(size_t max_threads) : max_(max_threads) {}
    ~ElasticPool() override { shutdown(); }

    void enqueue(std::function<void()> fn) override {
        std::lock_guard<std::mutex> lk(m_);
        jobs_.push_back(std::move(fn));
        if (jobs_.size() > idle_ && threads_ < max_) {
            ++threads_;
            std::thread([this] { work(); }).detach();
        }
        cv_.notify_one();
    }

    // Runs what is queued, then waits until every thread has ended.
    void shutdown() override {
        std::unique_lock<std::mutex> lk(m_);
        stop_ = true;
        cv_.notify_all();
        done_.wait(lk, [&] { return threads_ == 0; });
    }

private:
    static constexpr size_t kKeep = 4;  // threads kept while idle
    void work() {
        std::unique_lock<std::mutex> lk(m_);
        for (;;) {
            if (jobs_.empty()) {
                if (stop_) break;
                ++idle_;
                const bool woke = cv_.wait_for(lk, std::chrono::seconds(10), [&] { return stop_ || !jobs_.empty(); });
                --idle_;
                if (!woke && threads_ > kKeep) break;
                continue;
            }
            std::function<void()> fn = std::move(jobs_.front());
            jobs_.pop_front();
            lk.unlock();
            fn();
            fn = nullptr;
            lk.lock();
        }
        --threads_;
        done_.notify_all();
    }

    std::mutex m_;
    std::condition_variable cv_, done_;
    std::deque<std::function<void()>> jobs_;
    size_t max_, threads_ = 0, idle_ = 0;
    bool stop_ = false;
};

// Sends what fits without blocking (a refusal is small; the socket buffer takes it).
void send_now(socket_t sock, const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
        const ssize_t n = ::send(sock, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
    }
}

// Closes after a response while the client may still be sending (a refused body): stop
// writing, then read and drop what arrives until the client closes, `linger` passes or
// 16 MiB were dropped. Closing at once with unread data would reset the connection, and
// the client could lose the response before reading it.
void lingering_close(socket_t sock, std::chrono::milliseconds linger) {
    ::shutdown(sock, SHUT_WR);
    const auto until = Clock::now() + linger;
    char drop[16384];
    for (size_t dropped = 0; dropped < (16u << 20);) {
        const int wait = ms_until(until, 100);
        if (wait <= 0) break;
        pollfd p{sock, POLLIN, 0};
        const int r = ::poll(&p, 1, wait);
        if (r < 0 && errno != EINTR) break;
        if (r <= 0) continue;
        const ssize_t n = ::recv(sock, drop, sizeof drop, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
        if (n > 0) dropped += static_cast<size_t>(n);
    }
    ::close(sock);
}

void address_of(socket_t sock, bool peer, std::string& ip, int& port) {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    const int r = peer ? getpeername(sock, reinterpret_cast<sockaddr*>(&a), &len)
                       : getsockname(sock, reinterpret_cast<sockaddr*>(&a), &len);
    if (r != 0) return;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
        ip = host;
        port = std::atoi(serv);
    }
}

}  // namespace

Connection::Connection(socket_t sock, const ConnectionServer& server) : sock_(sock), server_(server) {}

Connection* Connection::current() { return t_current; }

bool Connection::wait_readable(Clock::time_point until) const {
    for (;;) {
        if (server_.stopping()) return false;
        const int wait = ms_until(until, 100);
        pollfd p{sock_, POLLIN, 0};
        const int r = ::poll(&p, 1, wait);
        if (r > 0) return true;  // data, end of stream or an error: the read says which
        if (r < 0 && errno != EINTR) return false;
        if (wait == 0 && r == 0) return false;
    }
}

void Connection::begin_request(Clock::time_point deadline) {
    deadline_ = deadline;
    deadline_hit_ = false;
    close_ = false;
    head_left_ = 0;
    framing_ = BodyFraming::NONE;
    body_left_ = 0;
    chunks_ = ChunkedEnd{};
}

bool Connection::fill() {
    if (!buffered()) {
        in_.clear();
        off_ = 0;
    }
    if (!wait_readable(deadline_)) {
        if (Clock::now() >= deadline_) deadline_hit_ = true;
        return false;
    }
    char buf[16384];
    for (;;) {
        const ssize_t n = ::recv(sock_, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            in_.append(buf, static_cast<size_t>(n));
            return true;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!wait_readable(deadline_)) {
                if (Clock::now() >= deadline_) deadline_hit_ = true;
                return false;
            }
            continue;
        }
        return false;  // end of stream or error
    }
}

Connection::Head Connection::read_head(const HeadLimits& limits, RequestHead& head) {
    HeadReader reader(limits);
    size_t skipped = 0;
    for (;;) {
        // Empty lines before a request line are skipped (RFC 9112, 2.2).
        while (buffered() && (in_[off_] == '\r' || in_[off_] == '\n') && skipped <= limits.max_head) {
            ++off_;
            ++skipped;
        }
        if (skipped > limits.max_head) {
            head.status = 400;
            head.message = "the connection sent only empty lines";
            head.code = "malformed_request";
            return Head::REFUSED;
        }
        if (buffered()) {
            if (off_ > 0) {  // the head starts the buffer (the reader counts from there)
                in_.erase(0, off_);
                off_ = 0;
            }
            if (reader.scan(in_, head) == HeadReader::DONE) {
                if (head.status != 0) return Head::REFUSED;
                head_left_ = head.head_bytes;
                framing_ = head.framing;
                body_left_ = head.length;
                return Head::READY;
            }
        }
        if (!fill()) return Head::GONE;
    }
}

bool Connection::message_done() const {
    if (head_left_ > 0) return false;
    switch (framing_) {
        case BodyFraming::LENGTH: return body_left_ == 0;
        case BodyFraming::CHUNKED: return chunks_.done();
        default: return true;
    }
}

bool Connection::finish_body(uint64_t max_bytes) {
    if (message_done()) return true;
    if (head_left_ > 0 || chunks_.bad()) return false;
    if (framing_ == BodyFraming::LENGTH && body_left_ > max_bytes) return false;
    char drop[16384];
    for (uint64_t dropped = 0; !message_done();) {
        const ssize_t n = read(drop, sizeof drop);
        if (n <= 0 || chunks_.bad()) return false;
        dropped += static_cast<uint64_t>(n);
        if (dropped > max_bytes) return false;
    }
    return true;
}

bool Connection::is_readable() const { return !message_done() && (buffered() || wait_readable(deadline_)); }

bool Connection::is_writable() const {
    pollfd p{sock_, static_cast<short>(POLLOUT | POLLRDHUP), 0};
    const int r = ::poll(&p, 1, static_cast<int>(ms(server_.limits().idle_timeout_s).count()));
    return r > 0 && (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP | POLLRDHUP));
}

bool Connection::peer_gone() const {
    pollfd p{sock_, static_cast<short>(POLLRDHUP), 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP | POLLRDHUP));
}

// What httplib reads is the current request only: its head, then its body by the framing
// the head gave; past that it reads the end of the stream.
ssize_t Connection::read(char* ptr, size_t size) {
    if (message_done()) return 0;
    if (!buffered() && !fill()) return deadline_hit_ ? -1 : 0;
    const char* p = in_.data() + off_;
    size_t n = std::min(size, in_.size() - off_);
    if (head_left_ > 0) {
        n = std::min(n, head_left_);
        head_left_ -= n;
    } else if (framing_ == BodyFraming::LENGTH) {
        n = static_cast<size_t>(std::min<uint64_t>(n, body_left_));
        body_left_ -= n;
    } else {
        n = chunks_.feed(p, n);
    }
    std::memcpy(ptr, p, n);
    off_ += n;
    return static_cast<ssize_t>(n);
}

ssize_t Connection::write(const char* ptr, size_t size) {
    const auto until = Clock::now() + ms(server_.limits().idle_timeout_s);
    for (;;) {
        const ssize_t n = ::send(sock_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        const int wait = ms_until(until, 100);
        if (wait == 0 || server_.stopping()) return -1;
        pollfd p{sock_, POLLOUT, 0};
        ::poll(&p, 1, wait);
    }
}

void Connection::get_remote_ip_and_port(std::string& ip, int& port) const { address_of(sock_, true, ip, port); }
void Connection::get_local_ip_and_port(std::string& ip, int& port) const { address_of(sock_, false, ip, port); }

ConnectionServer::ConnectionServer(ConnectionLimits limits) : limits_(std::move(limits)) {
    const size_t threads = static_cast<size_t>(std::max(1, limits_.max_connections)) + 16;  // + refusers
    new_task_queue = [threads] { return new ElasticPool(threads); };
}

void ConnectionServer::after_bind() {
    // httplib listens with a backlog of 5: a burst of connections overflows it, and the
    // kernel drops their handshakes, which clients retry after 1 s, 3 s ... Listening
    // again on the bound socket only changes the backlog.
    if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, SOMAXCONN);
}

bool ConnectionServer::process_and_close_socket(socket_t sock) {
    if (open_.fetch_add(1) >= limits_.max_connections) {
        --open_;
        ++refused_;
        const std::string& body = limits_.busy_body;
        send_now(sock, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body);
        lingering_close(sock, std::chrono::milliseconds(200));
        return false;
    }
    Connection c(sock, *this);
    t_current = &c;
    serve(c);
    t_current = nullptr;
    if (c.closing()) {
        lingering_close(sock, std::chrono::seconds(2));
    } else {
        ::shutdown(sock, SHUT_RDWR);
        ::close(sock);
    }
    --open_;
    return true;
}

void ConnectionServer::refuse(Connection& c, const RequestHead& head) {
    const bool json = static_cast<bool>(refusal_body_);
    const std::string body = json ? refusal_body_(head.status, head.message, head.code) : head.message + "\n";
    const std::string out = "HTTP/1.1 " + std::to_string(head.status) + " " + status_reason(head.status) +
                            "\r\nContent-Type: " + (json ? "application/json" : "text/plain") +
                            "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    for (size_t off = 0; off < out.size();) {
        const ssize_t n = c.write(out.data() + off, out.size() - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
    }
    c.close_after_response();
}

void ConnectionServer::serve(Connection& c) {
    const auto accepted = Clock::now();
    const auto request_time = ms(limits_.request_timeout_s);
    size_t left = keep_alive_max_count_;
    for (bool first = true; !stopping() && left > 0; first = false, --left) {
        // A new connection has request_timeout_s for its first request; a kept-alive one
        // waits idle_timeout_s for the next request's first byte, then has request_timeout_s.
        Clock::time_point deadline = accepted + request_time;
        if (!c.buffered() && !c.wait_readable(first ? deadline : Clock::now() + ms(limits_.idle_timeout_s))) return;
        if (!first) deadline = Clock::now() + request_time;
        c.begin_request(deadline);
        RequestHead head;
        const Connection::Head h = c.read_head(limits_.head, head);
        if (h == Connection::Head::GONE) return;
        if (h == Connection::Head::REFUSED) return refuse(c, head);
        bool closed = false;
        const bool ok = process_request(c, left == 1 || stopping(), closed, nullptr);
        const bool keep = ok && !closed && !c.closing() && left > 1 && !stopping();
        // A body the handler left unread is dropped here, never read as a request; when it
        // cannot be, or the connection ends anyway with bytes unread, it closes lingering.
        if (!c.message_done() && !(keep && c.finish_body(limits_.max_body))) c.close_after_response();
        if (!keep || c.closing()) return;
    }
}

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
