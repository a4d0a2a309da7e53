// Helpers for tests of files and commands: a scratch directory and running the glia binary.
#pragma once
#include <filesystem>
#include <string>
#include <unistd.h>

#include "test_util.h"

namespace glia::test {

// A fresh directory under the system temp dir, removed at the end of the test.
class ScratchDir {
public:
    explicit ScratchDir(const std::string& tag) {
        path_ = std::filesystem::temp_directory_path() / ("glia-test-" + tag + "-" + std::to_string(::getpid()));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~ScratchDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

// Runs `glia ARGS 2>&1`, returns the exit code and the output.
inline int run_glia(const std::string& args, std::string* out) {
    return run_command(glia_binary() + " " + args + " 2>&1", out);
}

}  // namespace glia::test
