// The npm test clients (the dependencies of tests/server/package.json: the openai and ollama
// packages ...): package.json and the client scripts (*.mjs) are copied into
// <build>/server_node and the packages installed there with npm when one is missing. The
// install holds a lock, so that the tests that use them may run at the same time.
#pragma once
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "server_fixture.h"
#include "test_util.h"

namespace glia::test::server {

inline std::string shell_quote(const std::string& s) { return "'" + s + "'"; }

struct NodeClients {
    std::string dir;     // the folder with node_modules; "" when not available
    std::string why;     // when not available: why
    bool failed = false; // ... an install that failed (a test failure; else skip: no node or npm)
};

inline NodeClients node_clients() {
    namespace fs = std::filesystem;
    NodeClients n;
    std::string out;
    if (run_command("node --version 2>&1", &out) != 0) {
        n.why = "node is not installed: " + out;
        return n;
    }
    if (run_command("npm --version 2>&1", &out) != 0) {
        n.why = "npm is not installed: " + out;
        return n;
    }
    const fs::path src = fs::path(GLIA_TESTS_DIR) / "server";
    const fs::path dir = fs::path(glia_binary()).parent_path() / "server_node";
    fs::create_directories(dir);
    for (const auto& e : fs::directory_iterator(src))
        if (e.path().filename() == "package.json" || e.path().extension() == ".mjs")
            fs::copy_file(e.path(), dir / e.path().filename(), fs::copy_options::overwrite_existing);
    std::string test = "true";  // every dependency is installed
    const auto pkg = nlohmann::json::parse(read_text((src / "package.json").string()), nullptr, false);
    if (pkg.is_object() && pkg.contains("dependencies") && pkg["dependencies"].is_object())
        for (const auto& [name, version] : pkg["dependencies"].items())
            test += " && [ -f " + shell_quote("node_modules/" + name + "/package.json") + " ]";
    const std::string cmd = "cd " + shell_quote(dir.string()) + " && flock .npm-install.lock sh -c " +
                            shell_quote("(" + test + ") || npm install --no-audit --no-fund --loglevel=error") + " 2>&1";
    if (run_command(cmd, &out) != 0) {
        n.failed = true;
        n.why = "installing the npm test clients failed (needs the npm registry):\n" + cmd + "\n" + out;
        return n;
    }
    n.dir = dir.string();
    return n;
}

// Runs SCRIPT from the clients' folder against a server on `model` (4096 cells, 4 slots, API
// key test-key) as `node SCRIPT URL MODEL_ID test-key`; the script prints "ALL OK" when every
// check passed.
inline void run_node_client(const std::string& script, const std::string& model, const std::string& model_id) {
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

}  // namespace glia::test::server
#endif  // GLIA_HAVE_SERVER
