// libFuzzer target for the Jinja parser and renderer, through tok::render_chat (what the
// server and `glia chat` call).
//
// An input is either
//   TEMPLATE [\0 CONVERSATION]   a fuzzed template, rendered with the conversation (JSON:
//                                a messages array or an object with "messages", "tools" ...;
//                                a fixed two-message conversation when absent or invalid), or
//   \x01 K CONVERSATION          a fuzzed conversation rendered with the K-th template of
//                                $GLIA_SHARED/templates (the real chat templates).
// Every render must end, with text or a jinja::Error, within its bounds (steps, output, and
// the size of every value: RenderOptions, error.h); any other exception, a crash, a hang
// or an allocation past libFuzzer's limits is a finding.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "jinja/jinja.h"
#include "tokenizer/chat_template.h"

using namespace glia;

namespace {

std::vector<std::string>* g_templates;

jinja::Value default_conversation() {
    return jinja::Value::parse_json(
        R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello <s> there"}]})");
}

void render(const std::string& tmpl, const std::string& conv_json) {
    jinja::Value conv;
    bool have = false;
    if (!conv_json.empty()) {
        try {
            conv = jinja::Value::parse_json(conv_json);
            have = true;
        } catch (const glia::Error&) {
        }
    }
    if (!have) conv = default_conversation();
    jinja::RenderOptions opt;
    opt.now = jinja::reference_time();
    opt.max_steps = 200000;     // enough for every real template on a long conversation
    opt.max_output = 1 << 20;
    for (bool gen : {true, false}) {
        try {
            (void)tok::render_chat(tmpl, conv, "<s>", "</s>", gen, opt);
        } catch (const glia::Error&) {  // jinja::Error is one
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    g_templates = new std::vector<std::string>();
    const char* shared = std::getenv("GLIA_SHARED");
    const std::string dir = std::string(shared ? shared : "../shared") + "/templates";
    std::vector<std::string> names;
    if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d)) {
            const std::string n = e->d_name;
            if (n.size() > 6 && n.compare(n.size() - 6, 6, ".jinja") == 0) names.push_back(n);
        }
        closedir(d);
    }
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
        std::ifstream f(dir + "/" + n, std::ios::binary);
        std::stringstream ss;
        ss << f.rdbuf();
        g_templates->push_back(ss.str());
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string in(reinterpret_cast<const char*>(data), size);
    if (size >= 2 && data[0] == 1 && !g_templates->empty()) {
        render((*g_templates)[data[1] % g_templates->size()], in.substr(2));
        return 0;
    }
    const size_t nul = in.find('\0');
    if (nul == std::string::npos) render(in, "");
    else render(in.substr(0, nul), in.substr(nul + 1));
    return 0;
}
