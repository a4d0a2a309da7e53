// glia template: render a chat template for a conversation and print the text exactly.
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <iterator>

#include "args.h"
#include "command.h"
#include "common.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "jinja/jinja.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/vocab.h"

namespace glia::cli {
namespace {

// Parses "YYYY-MM-DD[THH:MM[:SS]]" (a space may replace the T).
std::tm parse_time(const std::string& s) {
    std::tm t{};
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
    const int n = std::sscanf(s.c_str(), "%d-%d-%d%*[T ]%d:%d:%d", &y, &mo, &d, &h, &mi, &se);
    if (n < 3 || mo < 1 || mo > 12 || d < 1 || d > 31)
        fail("bad time '", s, "': expected YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS, or 'local'");
    t.tm_year = y - 1900;
    t.tm_mon = mo - 1;
    t.tm_mday = d;
    t.tm_hour = h;
    t.tm_min = mi;
    t.tm_sec = se;
    t.tm_isdst = -1;
    std::tm norm = t;
    timegm(&norm);  // fills weekday and day of the year
    t.tm_wday = norm.tm_wday;
    t.tm_yday = norm.tm_yday;
    return t;
}

bool is_gguf(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) fail("cannot open '", path, "'");
    char magic[4] = {};
    const size_t n = std::fread(magic, 1, 4, f);
    std::fclose(f);
    return n == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

int cmd_template(const std::vector<std::string>& argv) {
    Args a("template", "FILE --case CASE.json [options]\n\n"
                       "Renders FILE's chat template (a .gguf's tokenizer.chat_template, or a .jinja file)\n"
                       "for the conversation in CASE.json and prints the text exactly, with no newline\n"
                       "added. CASE.json is an object: messages, and optionally tools, bos_token,\n"
                       "eos_token (default: the model's, or empty for a .jinja file),\n"
                       "add_generation_prompt (default false) and 'now' (the time strftime_now() sees);\n"
                       "other keys become template variables, except the golden files' own fields.\n"
                       "A template error exits with status 1 and the message on stderr");
    a.opt("--case", "FILE", "the conversation (JSON object); '-' reads standard input")
        .opt("--now", "TIME",
             "time for strftime_now(): YYYY-MM-DDTHH:MM:SS, or 'local' for the clock "
             "(default: the case's 'now', else the reference time 2026-01-15T12:00:00 of the goldens)");
    if (!a.parse(argv)) return 0;
    if (a.positional().size() != 1) fail("give exactly one template FILE (.gguf or .jinja); see 'glia template --help'");
    if (!a.has("--case")) fail("no conversation: give --case CASE.json (see 'glia template --help')");
    const std::string path = a.positional()[0];

    std::string source, bos, eos;
    if (is_gguf(path)) {
        auto f = gguf::File::open(path);
        source = tok::chat_template(*f);
        if (source.empty())
            fail("'", path, "' has no chat template (no tokenizer.chat_template key); pass a .jinja file instead");
        try {
            auto vocab = tok::Vocab::from_gguf(*f);
            if (vocab->bos() >= 0) bos = vocab->token_to_piece(vocab->bos(), true);
            if (vocab->eos() >= 0) eos = vocab->token_to_piece(vocab->eos(), true);
        } catch (const glia::Error&) {
            // No usable vocabulary: the case must give the tokens.
        }
    } else {
        source = read_file(path);
    }

    const std::string case_path = a.str("--case");
    std::string case_text;
    if (case_path == "-") case_text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    else case_text = read_file(case_path);
    jinja::Value c;
    try {
        c = jinja::Value::parse_json(case_text);
    } catch (const jinja::Error& e) {
        fail("'", case_path, "': ", e.message());
    }
    if (!c.is_object()) fail("'", case_path, "': expected a JSON object with 'messages'");
    const jinja::ObjectData& o = c.object_data();
    const jinja::Value* messages = o.find("messages");
    if (!messages || !messages->is_array()) fail("'", case_path, "': 'messages' must be a list of messages");

    jinja::Value conv = jinja::Value::object();
    static const char* const skip[] = {"bos_token", "eos_token", "add_generation_prompt", "now", "template", "case",
                                       "id", "description", "expected", "expected_error", "error_type", "error_kind"};
    for (const auto& [k, v] : o.items) {
        bool skipped = false;
        for (const char* s : skip) skipped |= k == s;
        if (!skipped) conv.mutable_object().set(k, v);
    }
    auto text_field = [&](const char* key, std::string& dst) {
        if (const jinja::Value* v = o.find(key)) {
            if (!v->is_string() && !v->is_none()) fail("'", case_path, "': '", key, "' must be a string");
            dst = v->is_string() ? v->as_string() : "";
        }
    };
    text_field("bos_token", bos);
    text_field("eos_token", eos);
    const jinja::Value* agp = o.find("add_generation_prompt");
    const bool add_generation_prompt = agp && agp->truthy();

    jinja::RenderOptions opt;
    std::string now = a.has("--now") ? a.str("--now") : "";
    if (now.empty())
        if (const jinja::Value* v = o.find("now"); v && v->is_string()) now = v->as_string();
    if (now.empty()) opt.now = jinja::reference_time();
    else if (now != "local") opt.now = parse_time(now);

    const std::string out = tok::render_chat(source, conv, bos, eos, add_generation_prompt, opt);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return 0;
}

const Command reg{"template", "render a chat template (.gguf or .jinja) for a conversation", cmd_template};

}  // namespace
}  // namespace glia::cli
