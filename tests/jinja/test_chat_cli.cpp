// glia chat, driven through a pipe: the plain-completion fallback of a model without a
// template, and a two-turn greedy conversation with a template (a copy of stories260K
// with tokenizer.chat_template added), checked against fresh `glia run`s of the
// rendered prompts, so the KV cache kept across turns must give the same text.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "temp_path.h"
#include "test_util.h"

namespace {

using glia::test::glia_binary;
using glia::test::run_command;
using glia::test::shared_path;

std::string q(const std::string& s) { return "'" + s + "'"; }

void write_file(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

// `glia run` greedy continuation of `prompt` (the generated text only).
std::string run_greedy(const std::string& model, const std::string& prompt, int n) {
    const std::string pf = glia::test::temp_path("chat_prompt.txt");
    write_file(pf, prompt);
    std::string out;
    const std::string cmd = q(glia_binary()) + " run " + q(model) + " -f " + q(pf) + " -n " + std::to_string(n) +
                            " --temp 0 2>/dev/null";
    EXPECT_EQ(run_command(cmd, &out), 0) << cmd;
    EXPECT_EQ(out.compare(0, prompt.size(), prompt), 0) << out;
    EXPECT_FALSE(out.empty());
    if (out.size() < prompt.size() + 1) return "";
    return out.substr(prompt.size(), out.size() - prompt.size() - 1);  // run adds one '\n'
}

TEST(CliChat, NoTemplateFallsBackToPlainCompletion) {
    const std::string model = shared_path("models/stories260K.gguf");
    const std::string in = glia::test::temp_path("chat_in1.txt");
    write_file(in, "Once upon a time\n");
    std::string out, err_out;
    const std::string base = q(glia_binary()) + " chat " + q(model) + " --temp 0 -n 12 < " + q(in);
    ASSERT_EQ(run_command(base + " 2>/dev/null", &out), 0) << base;
    ASSERT_EQ(run_command(base + " 2>&1 >/dev/null", &err_out), 0);
    EXPECT_NE(err_out.find("no chat template"), std::string::npos) << err_out;
    EXPECT_NE(err_out.find("plain completion"), std::string::npos) << err_out;
    EXPECT_EQ(out, run_greedy(model, "Once upon a time", 12) + "\n");
}

TEST(CliChat, TwoTurnsWithTemplateKeepTheCache) {
    const std::string src = shared_path("models/stories260K.gguf");
    const std::string model = glia::test::temp_path("stories_chat.gguf");
    const std::string tmpl =
        "{% for m in messages %}{% if m.role == 'user' %}user: {% else %}assistant:{% endif %}{{ m.content }}\n"
        "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";
    {
        auto f = glia::gguf::File::open(src);
        glia::gguf::Writer w(f->alignment());
        w.copy_kvs(*f);
        w.set_str("tokenizer.chat_template", tmpl);
        for (const auto& t : f->tensors())
            w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.nbytes);
        w.write(model);
    }
    const int n = 10;
    const std::string in = glia::test::temp_path("chat_in2.txt");
    write_file(in, "Tell me a story\\\nabout a cat\n\nWhat happened next?\n");
    std::string out, err;
    const std::string cmd = q(glia_binary()) + " chat " + q(model) + " --temp 0 -v -n " + std::to_string(n) + " < " + q(in);
    ASSERT_EQ(run_command(cmd + " 2>/dev/null", &out), 0) << cmd;
    ASSERT_EQ(run_command(cmd + " 2>&1 >/dev/null", &err), 0);
    EXPECT_EQ(err.find("no chat template"), std::string::npos) << err;

    // The same conversation rendered with `glia template` and generated from scratch.
    auto render = [&](const nlohmann::json& messages) {
        nlohmann::json c = {{"messages", messages}, {"add_generation_prompt", true}};
        const std::string cf = glia::test::temp_path("chat_case.json");
        write_file(cf, c.dump());
        std::string p;
        EXPECT_EQ(run_command(q(glia_binary()) + " template " + q(model) + " --case " + q(cf), &p), 0);
        return p;
    };
    nlohmann::json msgs = nlohmann::json::array();
    msgs.push_back({{"role", "user"}, {"content", "Tell me a story\nabout a cat"}});
    const std::string prompt1 = render(msgs);
    EXPECT_EQ(prompt1, "user: Tell me a story\nabout a cat\nassistant:");
    const std::string reply1 = run_greedy(model, prompt1, n);
    msgs.push_back({{"role", "assistant"}, {"content", reply1}});
    msgs.push_back({{"role", "user"}, {"content", "What happened next?"}});
    const std::string reply2 = run_greedy(model, render(msgs), n);
    EXPECT_EQ(out, reply1 + "\n" + reply2 + "\n") << err;
    // The second turn fed only the new part (the first reply retokenizes the same here).
    EXPECT_NE(err.find("[kv: reusing"), std::string::npos) << err;
    std::remove(model.c_str());
}

TEST(CliChat, HelpDocumentsMultilineInput) {
    std::string out;
    ASSERT_EQ(run_command(q(glia_binary()) + " chat --help", &out), 0);
    EXPECT_NE(out.find("'\\'"), std::string::npos) << out;
    EXPECT_NE(out.find("/reset"), std::string::npos) << out;
    EXPECT_NE(out.find("Ctrl-D"), std::string::npos) << out;
}

}  // namespace
