// glia: run, inspect and serve GGUF language models.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "command.h"
#include "core/error.h"

namespace glia::cli {

static std::vector<const Command*>& registry() {
    static std::vector<const Command*> r;
    return r;
}

Command::Command(const char* n, const char* s, CommandFn f) : name(n), summary(s), fn(f) {
    registry().push_back(this);
}

const std::vector<const Command*>& commands() { return registry(); }

}  // namespace glia::cli

static void usage(FILE* out) {
    std::fprintf(out,
                 "glia - run GGUF language models on CPU and GPU\n\n"
                 "usage: glia <command> [options]\n\ncommands:\n");
    for (const auto* c : glia::cli::commands()) std::fprintf(out, "  %-12s %s\n", c->name, c->summary);
    std::fprintf(out, "\n'glia <command> --help' explains a command's options.\n");
}

int main(int argc, char** argv) {
    if (argc < 2) { usage(stderr); return 2; }
    std::string name = argv[1];
    if (name == "-h" || name == "--help" || name == "help") { usage(stdout); return 0; }
    std::vector<std::string> args(argv + 2, argv + argc);
    for (const auto* c : glia::cli::commands()) {
        if (name == c->name) {
            try {
                return c->fn(args);
            } catch (const glia::Error& e) {
                std::fprintf(stderr, "glia %s: error: %s\n", c->name, e.what());
                return 1;
            } catch (const std::exception& e) {
                std::fprintf(stderr, "glia %s: internal error: %s\n", c->name, e.what());
                return 1;
            }
        }
    }
    std::fprintf(stderr, "glia: unknown command '%s'\n", name.c_str());
    usage(stderr);
    return 2;
}
