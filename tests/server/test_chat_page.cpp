// The chat page (GET /): served from the binary with its security headers, and driven in
// a real browser: Debian's chromium, headless, through playwright-core from npm
// (tests/server/chat_page/, installed with `npm ci` into <build>/server_chat_page on first
// use). The browser test sends a message and waits for the streamed reply, checks the
// Markdown rendering of a stored conversation (code block, escaping) and its time on long
// inputs, presses Stop during a long generation and checks that the server cancelled it,
// checks the speed shown and split UTF-8 characters on replies the test streams itself,
// the template's source (model file, --template FILE), and the page on a phone-sized
// screen, and writes screenshots to <build>/server_chat_page/chat-page*.png.
//
// Without chromium (or node/npm) the browser test fails, naming what to install
// (scripts/setup.sh installs both); GLIA_SKIP_BROWSER_TESTS=1 skips it instead, for a
// development machine without a browser. $GLIA_CHROMIUM names another browser binary.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "server_fixture.h"

namespace {

using namespace glia::test::server;
namespace fs = std::filesystem;

std::string q(const std::string& s) { return "'" + s + "'"; }

// A chat template file for `glia serve --template FILE`.
std::string template_file() {
    const std::string path = ::testing::TempDir() + "/glia_chat_page_template.jinja";
    std::ofstream(path) << "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
                           "{% if add_generation_prompt %}<assistant>{% endif %}";
    return path;
}

TEST(ServerChatPage, ServedFromTheBinaryWithAPolicy) {
    ServerProcess srv(stories(), {"-c", "256", "--parallel", "1", "--api-key", "k"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    auto c = srv.client();
    auto page = c.Get("/");  // no key needed: the page holds no secret
    ASSERT_TRUE(page);
    EXPECT_EQ(page->status, 200);
    EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
    const std::string csp = page->get_header_value("Content-Security-Policy");
    for (const char* d : {"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"})
        EXPECT_NE(csp.find(d), std::string::npos) << d << " in " << csp;
    EXPECT_EQ(page->get_header_value("X-Content-Type-Options"), "nosniff");
    EXPECT_NE(page->body.find("<script src=\"/web/chat.js\""), std::string::npos);
    EXPECT_EQ(page->body.find("<script>"), std::string::npos) << "no inline script (the policy would refuse it)";
    EXPECT_EQ(page->body.find("http://"), std::string::npos) << "nothing from elsewhere";
    EXPECT_EQ(page->body.find("https://"), std::string::npos) << "nothing from elsewhere";
    for (const auto& [path, type] : std::vector<std::pair<std::string, std::string>>{
             {"/web/chat.js", "text/javascript; charset=utf-8"},
             {"/web/markdown.js", "text/javascript; charset=utf-8"},
             {"/web/chat.css", "text/css; charset=utf-8"}}) {
        auto r = c.Get(path.c_str());
        ASSERT_TRUE(r) << path;
        EXPECT_EQ(r->status, 200) << path;
        EXPECT_EQ(r->get_header_value("Content-Type"), type) << path;
        EXPECT_GT(r->body.size(), 1000u) << path;
        EXPECT_FALSE(r->get_header_value("Content-Security-Policy").empty()) << path;
    }
    auto missing = c.Get("/web/nothing.js");
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404);
    auto dot = c.Get("/web/chatxjs");  // the route's '.' is literal
    ASSERT_TRUE(dot);
    EXPECT_EQ(dot->status, 404);
    auto api = c.Get("/v1/models");  // the API still needs the key
    ASSERT_TRUE(api);
    EXPECT_EQ(api->status, 401);
}

// /props says where the chat template came from (the page shows it): the model file's own,
// a --template file (named), or none.
TEST(ServerChatPage, PropsNameTheTemplateSource) {
    const std::string file = template_file();
    struct Case {
        std::string model;
        std::vector<std::string> args;
        std::string source, path;
    };
    for (const Case& t : {Case{stories_with_template(), {}, "model", ""},
                          Case{stories(), {"--template", file}, "file", file},
                          Case{stories_with_template(), {"--template", file}, "file", file},
                          Case{stories_with_template(), {"--no-template"}, "none", ""},
                          Case{stories(), {}, "none", ""}}) {
        std::vector<std::string> args = {"-c", "256", "--parallel", "1"};
        args.insert(args.end(), t.args.begin(), t.args.end());
        ServerProcess srv(t.model, args);
        ASSERT_TRUE(srv.ok()) << srv.log();
        auto r = srv.client().Get("/props");
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 200) << r->body;
        const json j = json::parse(r->body);
        SCOPED_TRACE(t.model + (t.args.empty() ? "" : " " + t.args[0]));
        EXPECT_EQ(j.value("chat_template_source", "(missing)"), t.source) << r->body;
        EXPECT_EQ(j.value("chat_template_file", "(missing)"), t.path) << r->body;
        if (t.source == "file") {
            EXPECT_EQ(j["chat_template"], glia::test::read_text(file));
        }
        EXPECT_EQ(j["chat_template"].get<std::string>().empty(), t.source == "none");
    }
}

TEST(ServerChatPage, InHeadlessChromium) {
    const auto t0 = std::chrono::steady_clock::now();
    const char* skip = std::getenv("GLIA_SKIP_BROWSER_TESTS");
    const bool may_skip = skip && *skip && std::string(skip) != "0";
    std::string out;
    std::string chromium = std::getenv("GLIA_CHROMIUM") ? std::getenv("GLIA_CHROMIUM") : "";
    if (chromium.empty() && glia::test::run_command("command -v chromium 2>/dev/null", &out) == 0) {
        chromium = out.substr(0, out.find('\n'));
    }
    std::string missing;
    if (chromium.empty()) missing += " chromium";
    else if (!fs::exists(chromium)) missing += " chromium (" + chromium + " does not exist)";
    if (glia::test::run_command("node --version 2>&1", &out) != 0) missing += " node";
    if (glia::test::run_command("npm --version 2>&1", &out) != 0) missing += " npm";
    if (!missing.empty()) {
        if (may_skip) GTEST_SKIP() << "not installed:" << missing << " (GLIA_SKIP_BROWSER_TESTS is set)";
        FAIL() << "the chat page's browser test needs" << missing
               << ": install the Debian packages 'chromium' and 'nodejs' (scripts/setup.sh does), or set "
                  "GLIA_SKIP_BROWSER_TESTS=1 to skip this test on a machine without a browser";
    }

    // playwright-core, pinned by the committed package-lock.json, installed once per build
    // folder (again when the lock changes).
    const fs::path src = fs::path(GLIA_TESTS_DIR) / "server" / "chat_page";
    const fs::path dir = fs::path(glia::test::glia_binary()).parent_path() / "server_chat_page";
    fs::create_directories(dir);
    const bool lock_same = fs::exists(dir / "package-lock.json") &&
                           glia::test::read_text((dir / "package-lock.json").string()) ==
                               glia::test::read_text((src / "package-lock.json").string());
    for (const char* f : {"package.json", "package-lock.json", "chat_page.mjs", "page_checks.mjs"})
        fs::copy_file(src / f, dir / f, fs::copy_options::overwrite_existing);
    if (!lock_same || !fs::exists(dir / "node_modules" / "playwright-core" / "package.json")) {
        const std::string cmd = "cd " + q(dir.string()) + " && npm ci --no-audit --no-fund --loglevel=error 2>&1";
        ASSERT_EQ(glia::test::run_command(cmd, &out), 0) << "installing playwright-core failed (needs the npm registry):\n"
                                                        << cmd << "\n" << out;
    }

    // A long generation for Stop: stories260K decodes thousands of tokens a second, so the
    // request asks for many (ignore_eos) and the context holds them.
    const int max_tokens = 6000;  // plus the longest prompt, within -c
    ServerProcess srv(stories_with_template(),
                      {"-c", "8192", "--parallel", "2", "--api-key", "chat-page-key", "--max-tokens-limit", std::to_string(max_tokens)});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const std::string shot = (dir / "chat-page.png").string();
    fs::remove(shot);
    // A second server, with --template FILE: the page names the file as the template's source.
    const std::string tmpl = template_file();
    ServerProcess srv_tmpl(stories(), {"-c", "256", "--parallel", "1", "--template", tmpl});
    ASSERT_TRUE(srv_tmpl.ok()) << srv_tmpl.log();
    const std::string cmd = "cd " + q(dir.string()) + " && GLIA_CHROMIUM=" + q(chromium) + " node chat_page.mjs " +
                            q(srv.url()) + " chat-page-key " + q(shot) + " glia_server_stories_chat " +
                            std::to_string(max_tokens) + " " + q(srv_tmpl.url()) + " " + q(tmpl) + " 2>&1";
    const int rc = glia::test::run_command(cmd, &out);
    EXPECT_EQ(rc, 0) << cmd << "\n" << out << "\nserver log:\n" << srv.log() << "\n--template server log:\n" << srv_tmpl.log();
    EXPECT_NE(out.find("ALL OK"), std::string::npos) << out;
    EXPECT_TRUE(fs::exists(shot) && fs::file_size(shot) > 10000) << "no screenshot at " << shot;
    std::printf("%s\nscreenshot: %s\nbrowser test: %.1f s\n", out.c_str(), shot.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
