// Speculative decoding in the server (issue 31): with --spec-ngram every greedy answer is
// the one the same server gives without it, alone or among concurrent requests, and
// /metrics counts the drafted and accepted tokens.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <future>

#include "server_fixture.h"

namespace {

using namespace glia::test::server;

// Prompts that repeat themselves, so prompt lookup finds n-grams to draft from.
const char* kPrompts[] = {
    "Once upon a time, there was a little girl named Lily. She liked to play. Once upon a time, there was",
    "The dog ran to the park. The dog ran to the park. The dog ran to the",
    "Tom had a red ball. He liked the ball. Tom had a red ball. He",
    "Lily and Ben were friends. They played in the sun. Lily and Ben were",
};

std::string complete(const ServerProcess& srv, const char* prompt) {
    HttpResult r = post(srv, "/v1/completions", json{{"prompt", prompt}, {"temperature", 0}, {"max_tokens", 64}});
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.j["choices"][0]["text"].get<std::string>() : std::string();
}

TEST(ServerSpeculative, GreedyAnswersAreUnchangedAndCounted) {
    std::vector<std::string> plain;
    {
        ServerProcess srv(stories(), {"--parallel", "4"});
        ASSERT_TRUE(srv.ok()) << srv.log();
        for (const char* p : kPrompts) plain.push_back(complete(srv, p));
        EXPECT_EQ(metric(srv, "glia_speculative_drafted_tokens_total"), 0);
    }
    ServerProcess srv(stories(), {"--parallel", "4", "--spec-ngram", "--draft-max", "8"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    for (size_t i = 0; i < std::size(kPrompts); ++i) EXPECT_EQ(complete(srv, kPrompts[i]), plain[i]) << kPrompts[i];
    const double drafted_alone = metric(srv, "glia_speculative_drafted_tokens_total");
    const double accepted_alone = metric(srv, "glia_speculative_accepted_tokens_total");
    EXPECT_GT(drafted_alone, 0);
    EXPECT_GT(accepted_alone, 0);
    EXPECT_LE(accepted_alone, drafted_alone);
    // The same requests at once: the same answers, and (drafts depend on each sequence's
    // own text only) the same counts again.
    std::vector<std::future<std::string>> fs;
    for (const char* p : kPrompts) fs.push_back(std::async(std::launch::async, [&srv, p] { return complete(srv, p); }));
    for (size_t i = 0; i < fs.size(); ++i) EXPECT_EQ(fs[i].get(), plain[i]) << kPrompts[i];
    EXPECT_EQ(metric(srv, "glia_speculative_drafted_tokens_total"), 2 * drafted_alone);
    EXPECT_EQ(metric(srv, "glia_speculative_accepted_tokens_total"), 2 * accepted_alone);
    EXPECT_EQ(metric(srv, "glia_kv_cache_blocks_used"), 0);
}

}  // namespace
#endif
