// The prefix cache seen through `glia serve`: concurrent multi-turn chats sharing a system
// prompt, with a cache small enough to force evictions, answer exactly what a server
// without the cache answers (greedy); usage reports cached tokens and /metrics the hit rate.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <future>

#include "server_fixture.h"

namespace {

using namespace glia::test::server;

const char* kSystem =
    "You are a storyteller. Every story has a girl named Lily, a dog named Max and a big red ball. "
    "Tell it in short sentences.";
const char* kUser[] = {"Tell me about the park.", "What did Max do?", "Then what happened?", "Where was the ball?",
                       "Tell me about the sun.", "Was Lily happy?"};

json turn(const json& messages, bool stream) {
    json b = {{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}};
    if (stream) {
        b["stream"] = true;
        b["stream_options"] = {{"include_usage", true}};
    }
    return b;
}

struct Chat {
    std::vector<std::string> replies;
    std::vector<int> cached;
};

// Conversation c: four turns; the user messages rotate so that conversations share the
// system prompt, some share their first turns, and all diverge later.
Chat converse(const ServerProcess& s, int c, bool streamed) {
    Chat out;
    json messages = json::array({{{"role", "system"}, {"content", kSystem}}});
    for (int t = 0; t < 4; ++t) {
        messages.push_back({{"role", "user"}, {"content", kUser[(c / 2 + t * (c % 3)) % 6]}});
        std::string text;
        int cached = -1;
        if (streamed) {
            StreamResult r = stream(s, "/v1/chat/completions", turn(messages, true));
            EXPECT_EQ(r.status, 200);
            text = r.text;
            if (!r.chunks.empty() && r.chunks.back().contains("usage"))
                cached = r.chunks.back()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
        } else {
            HttpResult r = post(s, "/v1/chat/completions", turn(messages, false));
            EXPECT_EQ(r.status, 200) << r.body;
            if (r.status != 200) return out;
            text = r.j["choices"][0]["message"]["content"];
            cached = r.j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
        }
        out.replies.push_back(text);
        out.cached.push_back(cached);
        messages.push_back({{"role", "assistant"}, {"content", text}});
    }
    return out;
}

TEST(ServerPrefixCache, ConcurrentChatsEqualAServerWithoutCache) {
    const std::string model = stories_with_template();
    const int n_chats = 8;
    std::vector<Chat> want;
    {
        ServerProcess cold(model, {"-c", "4096", "--parallel", "1", "--no-prefix-cache"});
        ASSERT_TRUE(cold.ok()) << cold.log();
        for (int c = 0; c < n_chats; ++c) want.push_back(converse(cold, c, false));
        EXPECT_EQ(metric(cold, "glia_prefix_cache_reused_tokens_total"), 0);
    }
    // 448 cells: a few conversations' pages at a time, so finished ones are evicted.
    ServerProcess srv(model, {"-c", "448", "--parallel", "4"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    std::vector<std::future<Chat>> fs;
    for (int c = 0; c < n_chats; ++c)
        fs.push_back(std::async(std::launch::async, [&srv, c] { return converse(srv, c, c % 2 == 1); }));
    int later_turns_cached = 0;
    for (int c = 0; c < n_chats; ++c) {
        Chat got = fs[c].get();
        EXPECT_EQ(got.replies, want[c].replies) << "conversation " << c;
        for (size_t t = 1; t < got.cached.size(); ++t) later_turns_cached += got.cached[t] > 0;
    }
    // Each later turn extends its own earlier turn: most must find it (unless evicted).
    EXPECT_GE(later_turns_cached, n_chats * 3 / 2);
    const double reused = metric(srv, "glia_prefix_cache_reused_tokens_total");
    const double total = metric(srv, "glia_prefix_cache_prompt_tokens_total");
    EXPECT_GT(reused, 0);
    EXPECT_NEAR(metric(srv, "glia_prefix_cache_hit_rate"), reused / total, 1e-6);
    EXPECT_GT(metric(srv, "glia_prefix_cache_evictions_total"), 0) << "the cache was meant to be too small";
    EXPECT_EQ(metric(srv, "glia_prefix_cache_requests_total"), n_chats * 4);
}

}  // namespace
#endif
