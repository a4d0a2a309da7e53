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

TEST(ServerAnthropicClient, NodeAnthropicPackage) {
    const std::string tmpl = glia::test::read_text(glia::test::shared_path("templates/Qwen-Qwen2.5-7B-Instruct.jinja"));
    run_node_client("anthropic_client.mjs", stories_with_chat_template("qwen", tmpl), "glia_server_stories_qwen");
}

TEST(ServerReasoningClient, NodeOpenAIAndAnthropicPackages) {
    const std::string tmpl = glia::test::read_text(glia::test::shared_path("templates/Qwen3.5-4B.jinja"));
    run_node_client("reasoning_client.mjs", stories_with_chat_template("qwen35", tmpl), "glia_server_stories_qwen35");
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
