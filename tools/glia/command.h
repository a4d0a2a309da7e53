// Subcommand registry for the glia CLI. Each command lives in its own file and
// registers itself:  static const Command reg{"inspect", "summary", usage, cmd_inspect};
#pragma once
#include <string>
#include <vector>

namespace glia::cli {

using CommandFn = int (*)(const std::vector<std::string>& args);  // args exclude "glia <cmd>"

struct Command {
    Command(const char* name, const char* summary, CommandFn fn);
    const char* name;
    const char* summary;
    CommandFn fn;
};

const std::vector<const Command*>& commands();

}  // namespace glia::cli
