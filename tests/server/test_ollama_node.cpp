// Protocol test against a real client: ollama's own npm package, driven by Node.js
// (tests/server/ollama_client.mjs), talks to `glia serve` (stories260K with a Qwen 2.5
// chat template) through ollama's API, with an API key.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include "node_clients.h"
#include "server_fixture.h"

namespace {

using namespace glia::test::server;

TEST(ServerOllamaClient, NodeOllamaPackage) {
    const NodeClients node = node_clients();
    if (node.dir.empty()) {
        if (node.failed) FAIL() << node.why;
        GTEST_SKIP() << node.why;
    }
    const std::string& dir = node.dir;
    const std::string tmpl = glia::test::read_text(glia::test::shared_path("templates/Qwen-Qwen2.5-7B-Instruct.jinja"));
    ServerProcess srv(stories_with_chat_template("qwen", tmpl), {"-c", "4096", "--parallel", "4", "--api-key", "test-key"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    std::string out;
    const std::string cmd = "cd " + shell_quote(dir) + " && node ollama_client.mjs " + shell_quote(srv.url()) +
                            " glia_server_stories_qwen test-key 2>&1";
    EXPECT_EQ(glia::test::run_command(cmd, &out), 0) << cmd << "\n" << out << "\nserver log:\n" << srv.log();
    EXPECT_NE(out.find("ALL OK"), std::string::npos) << out;
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
