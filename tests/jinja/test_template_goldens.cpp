// Every (template, case) golden in shared/templates/golden rendered in-process through
// tok::render_chat, compared byte for byte (or the raise where the reference raised),
// plus a sample through the `glia template` binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "jinja/jinja.h"
#include "cli_util.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"

namespace {

namespace fs = std::filesystem;
using glia::jinja::Value;

struct Golden {
    std::string tmpl;     // template name (no .jinja)
    std::string case_id;  // e.g. c_multi_turn
    std::string path;
};

// Readable parameter in gtest output.
void PrintTo(const Golden& g, std::ostream* os) { *os << g.tmpl << "/" << g.case_id; }

std::string templates_dir() { return glia::test::shared_dir() + "/templates"; }

std::vector<Golden> list_goldens() {
    std::vector<Golden> out;
    const fs::path root = fs::path(templates_dir()) / "golden";
    std::error_code ec;
    if (!fs::is_directory(root, ec)) return out;
    for (const auto& d : fs::directory_iterator(root, ec)) {
        if (!d.is_directory()) continue;
        for (const auto& f : fs::directory_iterator(d.path(), ec))
            if (f.path().extension() == ".json")
                out.push_back({d.path().filename().string(), f.path().stem().string(), f.path().string()});
    }
    std::sort(out.begin(), out.end(), [](const Golden& a, const Golden& b) { return a.path < b.path; });
    return out;
}

std::string test_name(const Golden& g) {
    std::string s = g.tmpl + "__" + g.case_id;
    for (char& c : s)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return s;
}

// The conversation the reference renderer was given: messages, and tools only where
// the case has them.
Value conversation(const Value& g) {
    Value conv = Value::object();
    conv.mutable_object().set("messages", *g.object_data().find("messages"));
    if (const Value* t = g.object_data().find("tools")) conv.mutable_object().set("tools", *t);
    return conv;
}

class TemplateGolden : public ::testing::TestWithParam<Golden> {};

TEST_P(TemplateGolden, RendersLikeReference) {
    const Golden& gc = GetParam();
    const Value g = Value::parse_json(glia::test::read_text(gc.path));
    const std::string src = glia::test::read_text(templates_dir() + "/" + gc.tmpl + ".jinja");
    const auto& o = g.object_data();
    glia::jinja::RenderOptions opt;
    opt.now = glia::jinja::reference_time();
    const Value* expected = o.find("expected");
    try {
        const std::string out = glia::tok::render_chat(src, conversation(g), o.find("bos_token")->as_string(),
                                                       o.find("eos_token")->as_string(),
                                                       o.find("add_generation_prompt")->truthy(), opt);
        ASSERT_NE(expected, nullptr) << "expected an error: " << o.find("expected_error")->as_string()
                                     << "\nbut rendered:\n" << out;
        EXPECT_EQ(out, expected->as_string());
    } catch (const glia::jinja::Error& e) {
        ASSERT_EQ(expected, nullptr) << "unexpected error: " << e.what();
        if (o.find("error_kind")->as_string() == "raise_exception") {
            EXPECT_EQ(e.kind(), glia::jinja::ErrorKind::Raised) << e.what();
            EXPECT_EQ(e.message(), o.find("expected_error")->as_string());
        }
    }
}

INSTANTIATE_TEST_SUITE_P(All, TemplateGolden, ::testing::ValuesIn(list_goldens()),
                         [](const ::testing::TestParamInfo<Golden>& i) { return test_name(i.param); });

TEST(TemplateGoldens, AllPresent) {
    // 58 templates x 9 cases; a missing shared folder must not pass silently.
    EXPECT_EQ(list_goldens().size(), 522u) << "golden folder: " << templates_dir() << "/golden";
}

// ---- through the binary ----

std::string q(const std::string& s) { return "'" + s + "'"; }

// Writes the golden's case part (what `glia template --case` reads) to a temp file.
std::string write_case(const glia::test::ScratchDir& dir, const Golden& gc) {
    const std::string path = dir.file(test_name(gc) + ".json");
    std::ofstream f(path, std::ios::binary);
    f << glia::test::read_text(gc.path);  // the golden itself is a valid case object
    return path;
}

TEST(CliTemplate, SampleOfGoldensThroughBinary) {
    const std::vector<Golden> all = list_goldens();
    ASSERT_FALSE(all.empty());
    const glia::test::ScratchDir scratch("template-cases");
    int checked = 0;
    for (size_t i = 0; i < all.size(); i += 7) {
        const Golden& gc = all[i];
        const Value g = Value::parse_json(glia::test::read_text(gc.path));
        const std::string cmd = q(glia::test::glia_binary()) + " template " + q(templates_dir() + "/" + gc.tmpl + ".jinja") +
                                " --case " + q(write_case(scratch, gc)) + " 2>/dev/null";
        std::string out;
        const int rc = glia::test::run_command(cmd, &out);
        if (const Value* e = g.object_data().find("expected")) {
            EXPECT_EQ(rc, 0) << cmd;
            EXPECT_EQ(out, e->as_string()) << cmd;
        } else {
            EXPECT_NE(rc, 0) << cmd;
            EXPECT_TRUE(out.empty()) << cmd;
        }
        ++checked;
    }
    EXPECT_GT(checked, 50);
}

TEST(CliTemplate, RaisedMessageOnStderr) {
    const std::string g = templates_dir() + "/golden/google-gemma-2-2b-it/b_system_user.json";
    const std::string cmd = q(glia::test::glia_binary()) + " template " + q(templates_dir() + "/google-gemma-2-2b-it.jinja") +
                            " --case " + q(g) + " 2>&1";
    std::string out;
    EXPECT_NE(glia::test::run_command(cmd, &out), 0);
    EXPECT_NE(out.find("System role not supported"), std::string::npos) << out;
}

}  // namespace
