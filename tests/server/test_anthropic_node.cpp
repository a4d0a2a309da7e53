// Protocol tests against real clients: the official `@anthropic-ai/sdk` npm package
// (tests/server/anthropic_client.mjs) talks to `glia serve` through the Messages API
// (stories260K with a Qwen 2.5 chat template, whose tool calls the server parses), and
// reasoning_client.mjs drives reasoning output with the `openai` and Anthropic packages
// (stories260K with a Qwen 3.5 template, which opens a thought in its generation prompt).
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include "node_clients.h"
#include "server_fixture.h"

namespace {

using namespace glia::test::server;

// Runs `script` against a server on `model` (API key test-key); expects "ALL OK".
void run_client(const std::string& script, const std::string& model, const std::string& model_id) {
    const NodeClients node = node_clients();
    if (node.dir.empty()) {
        if (node.failed) FAIL() << node.why;
        GTEST_SKIP() << node.why;
    }
    ServerProcess srv(model, {"-c", "4096", "--parallel", "4", "--api-key", "test-key"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    std::string out;
    const std::string cmd = "cd " + shell_quote(node.dir) + " && node " + script + " " + shell_quote(srv.url()) + " " +
                            model_id + " test-key 2>&1";
    EXPECT_EQ(glia::test::run_command(cmd, &out), 0) << cmd << "\n" << out << "\nserver log:\n" << srv.log();
    EXPECT_NE(out.find("ALL OK"), std::string::npos) << out;
}

TEST(ServerAnthropicClient, NodeAnthropicPackage) {
    const std::string tmpl = glia::test::read_text(glia::test::shared_path("templates/Qwen-Qwen2.5-7B-Instruct.jinja"));
    run_client("anthropic_client.mjs", stories_with_chat_template("qwen", tmpl), "glia_server_stories_qwen");
}

TEST(ServerReasoningClient, NodeOpenAIAndAnthropicPackages) {
    const std::string tmpl = glia::test::read_text(glia::test::shared_path("templates/Qwen3.5-4B.jinja"));
    run_client("reasoning_client.mjs", stories_with_chat_template("qwen35", tmpl), "glia_server_stories_qwen35");
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
