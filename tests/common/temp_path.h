// Scratch file paths private to the test process.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace glia::test {

// A path in a directory of this process's own (the gtest temp dir + "glia-test-<pid>"),
// created on first use and removed with everything in it when the process exits. ctest runs
// every test case as its own process, several at once, and other checkouts' test runs share
// the temp dir: with a fixed name one test can read a file another has just written
// (CliChat once ran `glia run` on the plain-completion test's prompt, under load).
inline std::string temp_path(const std::string& name) {
    struct Dir {
        std::filesystem::path path;
        Dir() : path(std::filesystem::path(::testing::TempDir()) / ("glia-test-" + std::to_string(::getpid()))) {
            std::filesystem::create_directories(path);
        }
        ~Dir() {
            std::error_code ec;
            std::filesystem::remove_all(path, ec);
        }
    };
    static const Dir dir;
    return (dir.path / name).string();
}

}  // namespace glia::test
