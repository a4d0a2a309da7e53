// Helpers shared by all test executables.
#pragma once
#include <string>
#include <vector>
#include <cstdint>

#include "core/error.h"

namespace glia::test {
// $GLIA_SHARED, else the configured default (../shared next to the checkout).
std::string shared_dir();
// Path under the shared dir; fails the current test with a clear message if missing.
std::string shared_path(const std::string& rel);
std::vector<uint8_t> read_bytes(const std::string& path);
std::string read_text(const std::string& path);
// Path of the built glia binary.
std::string glia_binary();
// Runs a shell command, returns exit code; captures stdout (and stderr if asked).
int run_command(const std::string& cmd, std::string* out);
// Runs f; the text of the glia::Error it throws ("" when none).
template <class F> std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}
}  // namespace glia::test
