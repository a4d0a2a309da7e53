// Protocol test against a real client: the official `openai` npm package, driven by
// Node.js (tests/server/openai_client.mjs), talks to `glia serve` with an API key. The
// package is installed with npm into <build>/server_node on first use.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <filesystem>

#include "server_fixture.h"

namespace {

using namespace glia::test::server;
namespace fs = std::filesystem;

std::string q(const std::string& s) { return "'" + s + "'"; }

TEST(ServerOpenAIClient, NodeOpenAIPackage) {
    std::string out;
    if (glia::test::run_command("node --version 2>&1", &out) != 0) GTEST_SKIP() << "node is not installed: " << out;
    if (glia::test::run_command("npm --version 2>&1", &out) != 0) GTEST_SKIP() << "npm is not installed: " << out;
    const fs::path src = fs::path(GLIA_TESTS_DIR) / "server";
    const fs::path dir = fs::path(glia::test::glia_binary()).parent_path() / "server_node";
    fs::create_directories(dir);
    fs::copy_file(src / "package.json", dir / "package.json", fs::copy_options::overwrite_existing);
    fs::copy_file(src / "openai_client.mjs", dir / "openai_client.mjs", fs::copy_options::overwrite_existing);
    fs::copy_file(src / "openai_tools.mjs", dir / "openai_tools.mjs", fs::copy_options::overwrite_existing);
    if (!fs::exists(dir / "node_modules" / "openai" / "package.json")) {
        const std::string cmd = "cd " + q(dir.string()) + " && npm install --no-audit --no-fund --loglevel=error 2>&1";
        ASSERT_EQ(glia::test::run_command(cmd, &out), 0) << "installing the openai npm package failed (needs the npm registry):\n"
                                                        << cmd << "\n" << out;
    }
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
