// Speculative decoding in the server (issue 31): with --spec-ngram or a draft model
// (--model-draft) every greedy answer is the one the same server gives without it, alone
// or among concurrent requests, and /metrics counts the drafted and accepted tokens.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <future>

#include "cli_util.h"
#include "other_vocab.h"
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

// The plain server's greedy answers to kPrompts (computed once).
const std::vector<std::string>& plain_answers() {
    static const std::vector<std::string> plain = [] {
        std::vector<std::string> out;
        ServerProcess srv(stories(), {"--parallel", "4"});
        EXPECT_TRUE(srv.ok()) << srv.log();
        for (const char* p : kPrompts) out.push_back(complete(srv, p));
        EXPECT_EQ(metric(srv, "glia_speculative_drafted_tokens_total"), 0);
        return out;
    }();
    return plain;
}

// kPrompts alone, then all at once, on a speculating server: every answer is the plain
// server's, and (drafts depend on each sequence's own text only) the concurrent round
// counts exactly what the solo round did.
void check_unchanged_and_counted(const ServerProcess& srv) {
    const std::vector<std::string>& plain = plain_answers();
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
    EXPECT_EQ(metric(srv, "glia_draft_kv_cache_blocks_used"), 0);
}

TEST(ServerSpeculative, GreedyAnswersAreUnchangedAndCounted) {
    ServerProcess srv(stories(), {"--parallel", "4", "--spec-ngram", "--draft-max", "8"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    auto res = srv.client().Get("/props");
    ASSERT_TRUE(res);
    const json props = json::parse(res->body);
    EXPECT_EQ(props["speculative"], "prompt lookup");
    EXPECT_TRUE(props["draft_model"].is_null());
    check_unchanged_and_counted(srv);
}

// The same with stories260K's Q4_0 file drafting for it.
std::string draft_file() { return glia::test::shared_path("models/stories260K-q4_0.gguf"); }

TEST(ServerSpeculative, DraftModelGreedyAnswersAreUnchangedAndCounted) {
    ServerProcess srv(stories(), {"--parallel", "4", "--model-draft", draft_file(), "--draft-max", "8"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    auto res = srv.client().Get("/props");
    ASSERT_TRUE(res);
    const json props = json::parse(res->body);
    EXPECT_EQ(props["speculative"], "draft model");
    EXPECT_EQ(props["draft_model"], draft_file());
    EXPECT_EQ(props["draft_max"], 8);
    check_unchanged_and_counted(srv);
}

// Sampled requests with a fixed seed: valid answers, and the same answer alone as among
// the others (the draft's and the target's rows have the same bits, the generator is the
// request's own).
TEST(ServerSpeculative, DraftModelSampledRequestsWithASeed) {
    ServerProcess srv(stories(), {"--parallel", "4", "--model-draft", draft_file(), "--draft-max", "6"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    auto ask = [&srv](size_t i) {
        HttpResult r = post(srv, "/v1/completions",
                            json{{"prompt", kPrompts[i]}, {"temperature", 0.9}, {"seed", 1000 + i}, {"max_tokens", 48}});
        EXPECT_EQ(r.status, 200) << r.body;
        if (r.status != 200) return std::string();
        const json& ch = r.j["choices"][0];
        EXPECT_TRUE(ch["finish_reason"] == "length" || ch["finish_reason"] == "stop") << r.body;
        const int n = r.j["usage"]["completion_tokens"].get<int>();
        EXPECT_GE(n, 1) << r.body;
        EXPECT_LE(n, 48) << r.body;
        return ch["text"].get<std::string>();
    };
    std::vector<std::string> alone;
    for (size_t i = 0; i < std::size(kPrompts); ++i) {
        alone.push_back(ask(i));
        EXPECT_FALSE(alone.back().empty()) << kPrompts[i];
    }
    std::vector<std::future<std::string>> fs;
    for (size_t i = 0; i < std::size(kPrompts); ++i) fs.push_back(std::async(std::launch::async, [&ask, i] { return ask(i); }));
    for (size_t i = 0; i < fs.size(); ++i) EXPECT_EQ(fs[i].get(), alone[i]) << kPrompts[i];
    EXPECT_GT(metric(srv, "glia_speculative_drafted_tokens_total"), 0);
    EXPECT_EQ(metric(srv, "glia_draft_kv_cache_blocks_used"), 0);
}

// A draft whose vocabulary is not the target's is refused at start, naming the first
// token that differs.
// (Every tiny model of the shared data has stories260K's vocabulary: the draft here is
// the Q4_0 file with token 300's text changed.)
TEST(ServerSpeculative, DraftModelWithAnotherVocabularyIsRefusedAtStart) {
    const glia::test::ScratchDir scratch("other-vocab");
    const std::string other = glia::test::with_token_renamed(draft_file(), scratch.file(""), 300, "<renamed>");
    ServerProcess srv(stories(), {"--model-draft", other});
    EXPECT_FALSE(srv.ok());
    const std::string log = srv.log();
    EXPECT_NE(log.find("glia serve: error: the draft model " + other +
                       " does not share the target's vocabulary: token 300 is '<renamed>' in the draft"),
              std::string::npos)
        << log;
    // A draft with recurrent state (tiny-lfm2 has stories260K's vocabulary) is refused too.
    ServerProcess lfm2(stories(), {"--model-draft", glia::test::shared_path("models/tiny-lfm2-q8_0.gguf")});
    EXPECT_FALSE(lfm2.ok());
    EXPECT_NE(lfm2.log().find("recurrent layers"), std::string::npos) << lfm2.log();
}

}  // namespace
#endif
