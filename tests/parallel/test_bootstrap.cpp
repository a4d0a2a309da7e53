// The bootstrap of several processes (--rank/--world/--coordinator): rank 0 hands every
// rank the same blob over TCP on localhost; timeouts, a wrong world size, a rank claimed
// twice and a rank out of range are clear errors on the ranks involved.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "core/error.h"
#include "parallel/bootstrap.h"
#include "test_util.h"

namespace glia {
namespace {

int free_port() {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(s);
    return ntohs(a.sin_port);
}

BootstrapOptions opts(int rank, int world, int port, double timeout = 20) {
    BootstrapOptions o;
    o.rank = rank;
    o.world = world;
    o.coordinator = parse_coordinator("127.0.0.1:" + std::to_string(port));
    o.timeout_s = timeout;
    return o;
}

std::string blob() {
    std::string b(128, '\0');  // an NCCL id's size, zero bytes included
    for (size_t i = 0; i < b.size(); ++i) b[i] = char((i * 37) & 0xff);
    return b;
}

using test::error_of;

TEST(Bootstrap, EveryRankGetsRankZerosBlob) {
    const int port = free_port(), world = 4;
    std::vector<std::string> got(world);
    std::vector<std::thread> ranks;
    // The others start first: they keep trying until the coordinator listens.
    for (int r = 1; r < world; ++r) ranks.emplace_back([&, r] { got[r] = bootstrap_exchange(opts(r, world, port), ""); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    got[0] = bootstrap_exchange(opts(0, world, port), blob());
    for (auto& t : ranks) t.join();
    for (int r = 0; r < world; ++r) EXPECT_EQ(got[r], blob()) << "rank " << r;
}

TEST(Bootstrap, TwoProcesses) {
    const int port = free_port();
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // rank 1, a process of its own
        int rc = 3;
        try {
            rc = bootstrap_exchange(opts(1, 2, port), "") == blob() ? 0 : 2;
        } catch (...) {
            rc = 1;
        }
        _exit(rc);
    }
    const std::string mine = bootstrap_exchange(opts(0, 2, port), blob());
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_EQ(mine, blob());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "rank 1 did not receive the blob (1: error, 2: other bytes)";
}

TEST(Bootstrap, ARankWithoutCoordinatorTimesOut) {
    const int port = free_port();
    const auto t0 = std::chrono::steady_clock::now();
    const std::string e = error_of([&] { bootstrap_exchange(opts(1, 2, port, 0.5), ""); });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(e.find("could not reach the coordinator at 127.0.0.1:" + std::to_string(port)), std::string::npos) << e;
    EXPECT_NE(e.find("start rank 0"), std::string::npos) << e;
    EXPECT_LT(s, 5.0);
}

TEST(Bootstrap, TheCoordinatorTimesOutNamingTheMissingRanks) {
    const int port = free_port();
    std::string e1;
    std::thread r1([&] { e1 = error_of([&] { bootstrap_exchange(opts(1, 3, port, 10), ""); }); });
    const std::string e0 = error_of([&] { bootstrap_exchange(opts(0, 3, port, 1.0), blob()); });
    r1.join();
    EXPECT_NE(e0.find("timed out"), std::string::npos) << e0;
    EXPECT_NE(e0.find("waiting for rank(s) 2 of 3"), std::string::npos) << e0;
    EXPECT_NE(e1.find("waiting for rank(s) 2 of 3"), std::string::npos) << "rank 1 hears why: " << e1;
}

TEST(Bootstrap, AWrongWorldSizeIsRefusedOnBothSides) {
    const int port = free_port();
    std::string e1;
    std::thread r1([&] { e1 = error_of([&] { bootstrap_exchange(opts(1, 3, port), ""); }); });
    const std::string e0 = error_of([&] { bootstrap_exchange(opts(0, 2, port), blob()); });
    r1.join();
    for (const std::string& e : {e0, e1}) {
        EXPECT_NE(e.find("started with --world 3"), std::string::npos) << e;
        EXPECT_NE(e.find("has --world 2"), std::string::npos) << e;
    }
}

TEST(Bootstrap, ARankClaimedTwiceIsRefused) {
    const int port = free_port();
    std::string e1, e2;
    std::thread a([&] { e1 = error_of([&] { bootstrap_exchange(opts(1, 3, port), ""); }); });
    std::thread b([&] { e2 = error_of([&] { bootstrap_exchange(opts(1, 3, port), ""); }); });
    const std::string e0 = error_of([&] { bootstrap_exchange(opts(0, 3, port), blob()); });
    a.join();
    b.join();
    EXPECT_NE(e0.find("two processes claim rank 1"), std::string::npos) << e0;
    EXPECT_NE((e1 + e2).find("two processes claim rank 1"), std::string::npos) << e1 << " / " << e2;
}

TEST(Bootstrap, OptionsAreChecked) {
    EXPECT_NE(error_of([] { bootstrap_exchange(opts(2, 2, 1234), ""); }).find("--rank 2 is outside 0..1"),
              std::string::npos);
    EXPECT_EQ(bootstrap_exchange(opts(0, 1, 1234), "x"), "x");  // a group of one needs nobody
    EXPECT_EQ(parse_coordinator("[::1]:29500").host, "::1");
    EXPECT_EQ(parse_coordinator("node7:29500").port, 29500);
    EXPECT_NE(error_of([] { parse_coordinator("node7"); }).find("expected HOST:PORT"), std::string::npos);
    EXPECT_NE(error_of([] { parse_coordinator("node7:70000"); }).find("not 1..65535"), std::string::npos);
}

}  // namespace
}  // namespace glia
