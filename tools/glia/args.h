// A small option parser for glia subcommands: flags, valued options, positionals,
// generated --help text, and clear errors for unknown or malformed options.
#pragma once
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace glia::cli {

class Args {
public:
    Args(std::string command, std::string synopsis) : cmd_(std::move(command)), synopsis_(std::move(synopsis)) {}
    // Declare options before parse(). Names: "-p,--prompt". `value` names the argument
    // (empty for a flag).
    Args& opt(const std::string& names, const std::string& value, const std::string& help,
              const std::string& def = "");
    Args& flag(const std::string& names, const std::string& help) { return opt(names, "", help); }
    // The declared option `name` may also take its value as two words: "NAME A B" reads as
    // "NAME A<sep>B" when `joins(A, B)` (the reference's --lora-scaled FILE SCALE beside
    // --lora-scaled FILE:SCALE). A value given as NAME=A is one word.
    using Joins = std::function<bool(const std::string& first, const std::string& second)>;
    Args& two_words(const std::string& name, char sep, Joins joins);
    // Returns false when --help was given (help printed to stdout).
    bool parse(const std::vector<std::string>& argv);

    bool has(const std::string& name) const;                 // given on the command line
    std::string str(const std::string& name) const;          // value or default
    std::vector<std::string> all(const std::string& name) const;  // every value given, in order
    // Every value of any of these options, as (the name as declared in `names`, value), in
    // command-line order.
    std::vector<std::pair<std::string, std::string>> all_of(const std::vector<std::string>& names) const;
    long long integer(const std::string& name) const;
    double number(const std::string& name) const;
    // The value checked against a range (numbers must also be finite): an error names the
    // option, the range and what was given. `lo_open`: lo itself is not allowed.
    long long integer(const std::string& name, long long lo, long long hi) const;
    double number(const std::string& name, double lo, double hi, bool lo_open = false) const;
    const std::vector<std::string>& positional() const { return pos_; }
    std::string help() const;

private:
    struct Opt {
        std::vector<std::string> names;
        std::string value, help, def;
        char sep = 0;  // two_words
        Joins joins;
    };
    const Opt* find(const std::string& name) const;
    std::string cmd_, synopsis_;
    std::vector<Opt> opts_;
    std::map<std::string, std::string> given_;  // canonical (last) name -> value
    std::vector<std::pair<std::string, std::string>> given_all_;  // (canonical name, value), in order
    std::vector<std::string> pos_;
};

}  // namespace glia::cli
