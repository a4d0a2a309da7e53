// Protocol test against a real client: the official `openai` npm package, driven by
// Node.js (tests/server/openai_client.mjs), talks to `glia serve` with an API key. The
// package is installed with npm into <build>/server_node on first use (node_clients.h).
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <filesystem>

#include "node_clients.h"
#include "server_fixture.h"

namespace {

using namespace glia::test::server;
namespace fs = std::filesystem;

std::string q(const std::string& s) { return "'" + s + "'"; }

TEST(ServerOpenAIClient, NodeOpenAIPackage) {
    std::string out;
    const NodeClients node = node_clients();  // node_clients.h: installs the npm packages once
    if (node.dir.empty()) {
        if (node.failed) FAIL() << node.why;
        GTEST_SKIP() << node.why;
    }
    const fs::path dir = node.dir;
    ServerProcess srv(stories_with_template(), {"-c", "1024", "--parallel", "4", "--api-key", "test-key"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const std::string cmd = "cd " + q(dir.string()) + " && node openai_client.mjs " + q(srv.url() + "/v1") +
                            " glia_server_stories_chat test-key 2>&1";
    const int rc = glia::test::run_command(cmd, &out);
    EXPECT_EQ(rc, 0) << cmd << "\n" << out << "\nserver log:\n" << srv.log();
    EXPECT_NE(out.find("ALL OK"), std::string::npos) << out;

    // Tools and structured output, on a model with a Qwen 2.5 (Hermes-style) template.
    ServerProcess tools(stories_with_chat_template("qwen", glia::test::read_text(glia::test::shared_path("templates/Qwen-Qwen2.5-7B-Instruct.jinja"))),
                        {"-c", "8192", "--parallel", "8", "--api-key", "test-key"});
    ASSERT_TRUE(tools.ok()) << tools.log();
    const std::string cmd2 = "cd " + q(dir.string()) + " && node openai_tools.mjs " + q(tools.url() + "/v1") +
                             " glia_server_stories_qwen test-key 2>&1";
    EXPECT_EQ(glia::test::run_command(cmd2, &out), 0) << cmd2 << "\n" << out << "\nserver log:\n" << tools.log();
    EXPECT_NE(out.find("ALL OK"), std::string::npos) << out;
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
