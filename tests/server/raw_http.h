// A raw TCP client for the server tests that need what an HTTP library will not send:
// half-open connections, header lines trickled one at a time, pipelined requests,
// chunked bodies of any size, lengths that lie. Loopback only.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace glia::test::server {

class RawConn {
public:
    using Clock = std::chrono::steady_clock;
    explicit RawConn(int port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            ::close(fd_);
            fd_ = -1;
        }
    }
    ~RawConn() {
        if (fd_ >= 0) ::close(fd_);
    }
    RawConn(const RawConn&) = delete;
    RawConn& operator=(const RawConn&) = delete;

    bool ok() const { return fd_ >= 0; }
    // Sends everything; false when the peer refused (closed, reset).
    bool send(const std::string& s) {
        size_t off = 0;
        while (off < s.size()) {
            const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
            if (n <= 0) return false;
            off += static_cast<size_t>(n);
        }
        return true;
    }
    // Reads what arrives until `seconds` pass or the peer closes (closed() then true).
    std::string read_for(double seconds) {
        std::string got;
        const auto until = Clock::now() + std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
        while (!closed_) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
            if (left <= 0) break;
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
            char buf[65536];
            const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) closed_ = true;
            else got.append(buf, static_cast<size_t>(n));
        }
        return got;
    }
    // Reads until `n` whole responses (by Content-Length) arrived, or `seconds` pass.
    std::string read_responses(int n, double seconds) {
        std::string got;
        const auto until = Clock::now() + std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
        while (count_responses(got) < n && !closed_ && Clock::now() < until) got += read_for(0.05);
        return got;
    }
    bool closed() const { return closed_; }

    // Complete responses in `s` (each with a Content-Length).
    static int count_responses(const std::string& s) {
        int n = 0;
        size_t pos = 0;
        for (;;) {
            const size_t head_end = s.find("\r\n\r\n", pos);
            if (head_end == std::string::npos) return n;
            const std::string head = s.substr(pos, head_end - pos);
            const size_t cl = head.find("Content-Length: ");
            const size_t len = cl == std::string::npos ? 0 : std::strtoul(head.c_str() + cl + 16, nullptr, 10);
            if (s.size() < head_end + 4 + len) return n;
            ++n;
            pos = head_end + 4 + len;
        }
    }
    // The status of the first response in `s` (0 when none).
    static int status_of(const std::string& s) {
        if (s.rfind("HTTP/1.1 ", 0) != 0 || s.size() < 12) return 0;
        return std::atoi(s.c_str() + 9);
    }

private:
    int fd_ = -1;
    bool closed_ = false;
};

}  // namespace glia::test::server
