#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

namespace glia::test {

std::string shared_dir() {
    if (const char* s = std::getenv("GLIA_SHARED"); s && *s) return s;
    return GLIA_SHARED_DEFAULT;
}

std::string shared_path(const std::string& rel) {
    std::string p = shared_dir() + "/" + rel;
    if (!std::filesystem::exists(p)) {
        ADD_FAILURE() << "test data missing: " << p
                      << " (set GLIA_SHARED to the shared test-data folder)";
    }
    return p;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string read_text(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

std::string glia_binary() {
    if (const char* e = std::getenv("GLIA_BINARY"); e && *e) return e;  // a copy elsewhere (the GPU machine)
    return GLIA_BINARY;
}

int run_command(const std::string& cmd, std::string* out) {
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return -1;
    char buf[4096];
    size_t n;
    std::string s;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) s.append(buf, n);
    int st = pclose(p);
    if (out) *out = s;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace glia::test
