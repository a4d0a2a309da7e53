#include "parallel/bootstrap.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "core/error.h"

namespace glia {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[4] = {'G', 'L', 'T', 'P'};
enum : uint32_t { HELLO = 1, BLOB = 2, ERROR = 3 };
constexpr uint32_t kMaxPayload = 1u << 20;

struct Fd {
    int fd = -1;
    explicit Fd(int f = -1) : fd(f) {}
    Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
    Fd& operator=(Fd&& o) noexcept {
        if (fd >= 0) ::close(fd);
        fd = o.fd;
        o.fd = -1;
        return *this;
    }
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

int ms_left(Clock::time_point deadline) {
    const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return d <= 0 ? 0 : static_cast<int>(std::min<long long>(d, 1 << 30));
}

// false on timeout; throws on a closed or broken connection.
bool read_all(int fd, void* p, size_t n, Clock::time_point deadline, const std::string& peer) {
    auto* b = static_cast<uint8_t*>(p);
    while (n > 0) {
        pollfd pf{fd, POLLIN, 0};
        const int r = ::poll(&pf, 1, ms_left(deadline));
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) return false;
        const ssize_t got = ::recv(fd, b, n, 0);
        if (got == 0) fail("the connection with ", peer, " closed during the tensor-parallel bootstrap");
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            fail("reading from ", peer, ": ", std::strerror(errno));
        }
        b += got;
        n -= size_t(got);
    }
    return true;
}

void write_all(int fd, const void* p, size_t n, const std::string& peer) {
    const auto* b = static_cast<const uint8_t*>(p);
    while (n > 0) {
        const ssize_t w = ::send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            fail("writing to ", peer, ": ", std::strerror(errno));
        }
        b += w;
        n -= size_t(w);
    }
}

void put_u32(std::string& s, uint32_t v) {
    for (int i = 0; i < 4; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }

void send_frame(int fd, uint32_t type, const std::string& payload, const std::string& peer) {
    std::string f(kMagic, 4);
    put_u32(f, type);
    put_u32(f, static_cast<uint32_t>(payload.size()));
    f += payload;
    write_all(fd, f.data(), f.size(), peer);
}

// false on timeout.
bool recv_frame(int fd, uint32_t& type, std::string& payload, Clock::time_point deadline, const std::string& peer) {
    uint8_t h[12];
    if (!read_all(fd, h, sizeof h, deadline, peer)) return false;
    if (std::memcmp(h, kMagic, 4) != 0)
        fail(peer, " does not speak glia's tensor-parallel bootstrap (is HOST:PORT another service?)");
    type = get_u32(h + 4);
    const uint32_t len = get_u32(h + 8);
    if (len > kMaxPayload) fail(peer, " sent a bootstrap frame of ", len, " bytes (at most ", kMaxPayload, ")");
    payload.assign(len, '\0');
    return len == 0 || read_all(fd, payload.data(), len, deadline, peer);
}

std::string where(const Coordinator& c) { return c.host + ":" + std::to_string(c.port); }

std::string coordinator_side(const BootstrapOptions& o, const std::string& blob) {
    const std::string addr = where(o.coordinator);
    Fd ls(::socket(AF_INET6, SOCK_STREAM, 0));
    bool v6 = ls.fd >= 0;
    if (v6) {
        int off = 0;  // accept IPv4 too
        ::setsockopt(ls.fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    } else {
        ls = Fd(::socket(AF_INET, SOCK_STREAM, 0));
    }
    if (ls.fd < 0) fail("tensor-parallel coordinator: cannot create a socket: ", std::strerror(errno));
    int one = 1;
    ::setsockopt(ls.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (v6) {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_addr = in6addr_any;
        a.sin6_port = htons(uint16_t(o.coordinator.port));
        rc = ::bind(ls.fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        a.sin_port = htons(uint16_t(o.coordinator.port));
        rc = ::bind(ls.fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    if (rc != 0 || ::listen(ls.fd, 64) != 0)
        fail("tensor-parallel coordinator (rank 0): cannot listen on port ", o.coordinator.port, ": ",
             std::strerror(errno), "; choose a free port in --coordinator ", addr);

    const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(o.timeout_s * 1000));
    std::vector<Fd> peer(size_t(o.world));
    int joined = 1;
    auto refuse_all = [&](const std::string& msg) {
        for (auto& p : peer)
            if (p.fd >= 0) {
                try {
                    send_frame(p.fd, ERROR, msg, "a rank");
                } catch (const Error&) {
                }
            }
        fail(msg);
    };
    while (joined < o.world) {
        pollfd pf{ls.fd, POLLIN, 0};
        const int r = ::poll(&pf, 1, ms_left(deadline));
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) {
            std::string missing;
            for (int k = 1; k < o.world; ++k)
                if (peer[k].fd < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
            refuse_all(cat("tensor-parallel bootstrap: rank 0 timed out after ", o.timeout_s, " s at ", addr,
                           " waiting for rank(s) ", missing, " of ", o.world,
                           "; start each with --rank R --world ", o.world, " --coordinator ", addr));
        }
        Fd c(::accept(ls.fd, nullptr, nullptr));
        if (c.fd < 0) continue;
        uint32_t type = 0;
        std::string hello;
        // A connection that says nothing must not hold up the others for long.
        const auto hello_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(10));
        try {
            if (!recv_frame(c.fd, type, hello, hello_deadline, "a connecting rank") || type != HELLO ||
                hello.size() != 8)
                continue;
        } catch (const Error&) {
            continue;  // not one of ours (a port scan, a health check): keep waiting
        }
        const int rank = int(get_u32(reinterpret_cast<const uint8_t*>(hello.data())));
        const int world = int(get_u32(reinterpret_cast<const uint8_t*>(hello.data()) + 4));
        std::string err;
        if (world != o.world)
            err = cat("rank ", rank, " was started with --world ", world, " but the coordinator (rank 0) at ", addr,
                      " has --world ", o.world, "; start every process with the same --world");
        else if (rank <= 0 || rank >= o.world)
            err = cat("a process connected as rank ", rank, " but the ranks besides the coordinator are 1..",
                      o.world - 1, " (rank 0 is the process listening at ", addr, ")");
        else if (peer[rank].fd >= 0)
            err = cat("two processes claim rank ", rank, " of ", o.world, " at ", addr, "; give each a distinct --rank");
        if (!err.empty()) {
            try {
                send_frame(c.fd, ERROR, err, "rank " + std::to_string(rank));
            } catch (const Error&) {
            }
            refuse_all("tensor-parallel bootstrap: " + err);
        }
        peer[rank] = std::move(c);
        ++joined;
    }
    for (int k = 1; k < o.world; ++k) send_frame(peer[k].fd, BLOB, blob, "rank " + std::to_string(k));
    return blob;
}

std::string rank_side(const BootstrapOptions& o) {
    const std::string addr = where(o.coordinator);
    const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(o.timeout_s * 1000));
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    std::string last_error = "no attempt";
    Fd s;
    while (s.fd < 0) {
        addrinfo* res = nullptr;
        const int g = ::getaddrinfo(o.coordinator.host.c_str(), std::to_string(o.coordinator.port).c_str(), &hints, &res);
        if (g != 0) {
            last_error = cat("cannot resolve '", o.coordinator.host, "': ", gai_strerror(g));
        } else {
            for (addrinfo* a = res; a && s.fd < 0; a = a->ai_next) {
                Fd c(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
                if (c.fd < 0) continue;
                if (::connect(c.fd, a->ai_addr, a->ai_addrlen) == 0) s = std::move(c);
                else last_error = std::strerror(errno);
            }
            ::freeaddrinfo(res);
        }
        if (s.fd >= 0) break;
        if (ms_left(deadline) == 0)
            fail("tensor-parallel bootstrap: rank ", o.rank, " could not reach the coordinator at ", addr, " within ",
                 o.timeout_s, " s (", last_error, "); start rank 0 with --rank 0 --world ", o.world, " --coordinator ",
                 addr, " and check the host and port");
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, ms_left(deadline))));
    }
    std::string hello;
    put_u32(hello, uint32_t(o.rank));
    put_u32(hello, uint32_t(o.world));
    send_frame(s.fd, HELLO, hello, "the coordinator at " + addr);
    uint32_t type = 0;
    std::string payload;
    if (!recv_frame(s.fd, type, payload, deadline, "the coordinator at " + addr))
        fail("tensor-parallel bootstrap: rank ", o.rank, " reached the coordinator at ", addr,
             " but got no answer within ", o.timeout_s, " s (are all ", o.world, " ranks started?)");
    if (type == ERROR) fail("tensor-parallel bootstrap: ", payload);
    if (type != BLOB) fail("tensor-parallel bootstrap: unexpected answer from the coordinator at ", addr);
    return payload;
}

}  // namespace

Coordinator parse_coordinator(const std::string& s) {
    const size_t colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
        fail("--coordinator '", s, "': expected HOST:PORT (e.g. 10.0.0.1:29500)");
    Coordinator c;
    c.host = s.substr(0, colon);
    if (c.host.size() >= 2 && c.host.front() == '[' && c.host.back() == ']') c.host = c.host.substr(1, c.host.size() - 2);
    const std::string port = s.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (*end != '\0' || p <= 0 || p > 65535) fail("--coordinator '", s, "': port '", port, "' is not 1..65535");
    c.port = int(p);
    return c;
}

std::string bootstrap_exchange(const BootstrapOptions& o, const std::string& blob) {
    if (o.world < 1) fail("--world must be at least 1, not ", o.world);
    if (o.rank < 0 || o.rank >= o.world) fail("--rank ", o.rank, " is outside 0..", o.world - 1, " (--world ", o.world, ")");
    if (!(o.timeout_s > 0)) fail("the bootstrap timeout must be positive");
    if (o.world == 1) return blob;
    return o.rank == 0 ? coordinator_side(o, blob) : rank_side(o);
}

}  // namespace glia
