// Protocol tests against a real client: the official `openai` npm package drives the
// Responses API of `glia serve` (tests/server/responses_client.mjs on stories260K with a
// Qwen 2.5 chat template, whose tool calls the server parses; responses_reasoning.mjs on
// stories260K with a Qwen 3.5 template, which opens a thought in its generation prompt), and
// so does the AI SDK's OpenAI provider (ai_sdk_client.mjs: `ai` and `@ai-sdk/openai`).
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include "node_clients.h"
#include "server_fixture.h"

namespace {

using namespace glia::test::server;

TEST(ServerResponsesClient, NodeOpenAIPackage) {
    const std::string tmpl = glia::test::read_text(glia::test::shared_path("templates/Qwen-Qwen2.5-7B-Instruct.jinja"));
    run_node_client("responses_client.mjs", stories_with_chat_template("qwen", tmpl), "glia_server_stories_qwen");
}

// The AI SDK's OpenAI provider (Responses API): text, stream, a two-step tool run, an object.
TEST(ServerResponsesClient, NodeAiSdk) {
    const std::string tmpl = glia::test::read_text(glia::test::shared_path("templates/Qwen-Qwen2.5-7B-Instruct.jinja"));
    run_node_client("ai_sdk_client.mjs", stories_with_chat_template("qwen", tmpl), "glia_server_stories_qwen");
}

TEST(ServerResponsesClient, NodeOpenAIPackageReasoning) {
    const std::string tmpl = glia::test::read_text(glia::test::shared_path("templates/Qwen3.5-4B.jinja"));
    run_node_client("responses_reasoning.mjs", stories_with_chat_template("qwen35", tmpl), "glia_server_stories_qwen35");
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
