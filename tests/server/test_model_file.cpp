// `glia serve` when its model file is truncated underneath (the process used to die of
// SIGBUS, exit 135): the request running then ends with an error, later ones get 503,
// /health says why, and the process lives on.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "server_fixture.h"

namespace {

using namespace glia::test::server;

TEST(ServerModelFile, TruncatedWhileServingIsAnErrorNotACrash) {
    const std::string copy = ::testing::TempDir() + "/glia_served_copy_" + std::to_string(getpid()) + ".gguf";
    std::filesystem::copy_file(stories(), copy, std::filesystem::copy_options::overwrite_existing);
    ServerProcess srv(copy, {"-c", "16384", "--parallel", "1", "--max-tokens-limit", "16000"});
    ASSERT_TRUE(srv.ok()) << srv.log();

    // A long stream; the file is cut to 1000 bytes once the first tokens arrived.
    json b = {{"prompt", "Once upon a time"}, {"max_tokens", 16000}, {"ignore_eos", true}, {"stream", true}};
    auto c = srv.client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = b.dump();
    req.set_header("Content-Type", "application/json");
    std::string got;
    bool cut = false;
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
        got.append(data, len);
        if (!cut && got.find("data: ") != std::string::npos) {
            cut = true;
            EXPECT_EQ(::truncate(copy.c_str(), 1000), 0);
        }
        return true;
    };
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    ASSERT_TRUE(c.send(req, res, err)) << httplib::to_string(err);
    ASSERT_TRUE(cut);
    const std::vector<std::string> events = sse_data(got);
    ASSERT_GE(events.size(), 2u) << got;
    EXPECT_EQ(events.back(), "[DONE]");
    const json last = json::parse(events[events.size() - 2], nullptr, false);
    EXPECT_EQ(last["error"]["code"], "model_file_changed") << got.substr(got.size() > 600 ? got.size() - 600 : 0);
    EXPECT_NE(last["error"]["message"].get<std::string>().find(copy), std::string::npos);

    // Still alive: /health says what is wrong, a new request is refused with 503.
    auto h = c.Get("/health");
    ASSERT_TRUE(h) << srv.log();
    EXPECT_EQ(h->status, 503);
    EXPECT_EQ(json::parse(h->body)["status"], "error");
    EXPECT_NE(json::parse(h->body)["error"].get<std::string>().find("truncated"), std::string::npos) << h->body;
    HttpResult again = post(srv, "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 2}});
    EXPECT_EQ(again.status, 503) << again.body;
    EXPECT_EQ(again.j["error"]["code"], "model_file_changed") << again.body;
    std::filesystem::remove(copy);
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
