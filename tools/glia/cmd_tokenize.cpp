// glia tokenize: show how a model's vocabulary splits a text into tokens.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "args.h"
#include "command.h"
#include "core/error.h"
#include "core/json.h"
#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

namespace {

std::string read_file_bytes(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) glia::fail("cannot read '", path, "': no such file");
    if (std::filesystem::is_directory(path, ec)) glia::fail("cannot read '", path, "': it is a directory");
    std::ifstream f(path, std::ios::binary);
    if (!f) glia::fail("cannot open '", path, "' for reading");
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) glia::fail("error while reading '", path, "'");
    return ss.str();
}

// A piece made readable on a terminal: control characters and bytes that are not part
// of valid UTF-8 are shown as escapes.
std::string printable(const std::string& s) {
    static const char hex[] = "0123456789abcdef";
    std::string out;
    if (glia::json::sanitize_utf8(s) != s) {
        // Invalid UTF-8 (e.g. a byte token): show every non-ASCII byte as \xNN.
        for (unsigned char c : s) {
            if (c >= 0x20 && c < 0x7F && c != '\\') out += static_cast<char>(c);
            else if (c == '\\') out += "\\\\";
            else out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
        }
        return out;
    }
    for (unsigned char c : s) {
        switch (c) {
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            case '\r': out += "\\r"; break;
            case '\\': out += "\\\\"; break;
            default:
                if (c < 0x20 || c == 0x7F) out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
                else out += static_cast<char>(c);
        }
    }
    return out;
}

int cmd_tokenize(const std::vector<std::string>& argv) {
    glia::cli::Args args("tokenize", "MODEL (TEXT | -f FILE) [options]");
    args.opt("-m,--model", "FILE", "GGUF model (or vocabulary-only GGUF); or the first positional argument")
        .opt("-p,--prompt", "TEXT", "text to tokenize; or the positional argument after MODEL")
        .opt("-f,--file", "FILE", "tokenize the contents of FILE (byte for byte)")
        .flag("--no-special", "add no BOS/EOS (default: as the vocabulary's add_bos/add_eos flags say)")
        .flag("--parse-special", "turn special-token text such as <s> into special tokens")
        .flag("--ids", "print only the token ids, on one line")
        .flag("--json", "print {\"ids\": [...], \"pieces\": [...]}");
    if (!args.parse(argv)) return 0;

    std::vector<std::string> pos = args.positional();
    std::string model;
    if (args.has("--model")) {
        model = args.str("--model");
    } else {
        if (pos.empty()) glia::fail("no model given (usage: glia tokenize ", "MODEL (TEXT | -f FILE))");
        model = pos.front();
        pos.erase(pos.begin());
    }
    const int n_sources = int(args.has("--prompt")) + int(args.has("--file")) + int(!pos.empty());
    if (n_sources == 0) glia::fail("no text given: pass TEXT, -p TEXT or -f FILE");
    if (n_sources > 1 || pos.size() > 1)
        glia::fail("give the text once: either TEXT, -p TEXT or -f FILE (quote a text that holds spaces)");
    std::string text;
    if (args.has("--file")) text = read_file_bytes(args.str("--file"));
    else if (args.has("--prompt")) text = args.str("--prompt");
    else text = pos.front();

    std::error_code ec;
    if (!std::filesystem::exists(model, ec)) glia::fail("model file '", model, "' not found");
    auto file = glia::gguf::File::open(model);
    auto vocab = glia::tok::Vocab::from_gguf(*file);

    const bool add_special = !args.has("--no-special");
    const std::vector<int32_t> ids = vocab->tokenize(text, add_special, args.has("--parse-special"));

    if (args.has("--json")) {
        glia::json::Writer w;
        w.begin_object().key("ids").begin_array();
        for (int32_t id : ids) w.value(id);
        w.end_array().key("pieces").begin_array();
        for (int32_t id : ids) w.value(vocab->token_to_piece(id, true));
        w.end_array().end_object();
        std::printf("%s\n", w.str().c_str());
    } else if (args.has("--ids")) {
        std::string line = "[";
        for (size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + std::to_string(ids[i]);
        std::printf("%s]\n", line.c_str());
    } else {
        for (int32_t id : ids) std::printf("%6d\t'%s'\n", id, printable(vocab->token_to_piece(id, true)).c_str());
    }
    return 0;
}

const glia::cli::Command reg{"tokenize", "show the token ids and pieces of a text", cmd_tokenize};

}  // namespace
