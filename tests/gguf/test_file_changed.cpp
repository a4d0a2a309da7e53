// A mapped GGUF file that changes underneath: truncation no longer kills the process
// with SIGBUS (the pages past the new end read as zeros, and File::changed() says so), a
// rewrite is noticed by its modification time, an untouched file reports nothing, and a
// SIGBUS that is not about a model file still ends the process as before.
#include <fcntl.h>
#include <sys/wait.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "gguf/gguf.h"
#include "test_util.h"

namespace {

using glia::gguf::File;

// A GGUF file with one 256 KiB tensor of ones (many pages), at a fresh path.
std::string write_model(const std::string& name) {
    const std::string path = ::testing::TempDir() + "/" + name + "_" + std::to_string(getpid()) + ".gguf";
    glia::gguf::Writer w;
    w.set_str("general.architecture", "test");
    std::vector<float> ones(65536, 1.0f);
    w.add_tensor("t", glia::DType::F32, {65536}, ones.data(), ones.size() * sizeof(float));
    w.write(path);
    return path;
}

float last_value(const File& f) {
    const auto& t = f.tensor("t");
    float v;
    std::memcpy(&v, t.data + t.nbytes - sizeof v, sizeof v);
    return v;
}

TEST(GgufFileChanged, UntouchedFileReportsNothing) {
    const std::string path = write_model("unchanged");
    auto f = File::open(path);
    EXPECT_EQ(last_value(*f), 1.0f);
    EXPECT_EQ(f->changed(), "");
    std::filesystem::remove(path);
}

TEST(GgufFileChanged, TruncationReadsAsZerosAndIsReported) {
    const std::string path = write_model("truncated");
    auto f = File::open(path);
    EXPECT_EQ(last_value(*f), 1.0f);
    ASSERT_EQ(::truncate(path.c_str(), 1000), 0);
    // Without the handler this read raises SIGBUS and the test binary dies.
    EXPECT_EQ(last_value(*f), 0.0f);
    const std::string why = f->changed();
    EXPECT_NE(why.find(path), std::string::npos) << why;
    EXPECT_NE(why.find("truncated"), std::string::npos) << why;
    // The file can still be closed, and another one opened and read.
    f.reset();
    const std::string other = write_model("after_truncation");
    auto g = File::open(other);
    EXPECT_EQ(last_value(*g), 1.0f);
    EXPECT_EQ(g->changed(), "");
    std::filesystem::remove(path);
    std::filesystem::remove(other);
}

TEST(GgufFileChanged, SizeChangeSeenBeforeAnyRead) {
    const std::string path = write_model("shrunk");
    auto f = File::open(path);
    ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
    const std::string why = f->changed();
    EXPECT_NE(why.find("4096 bytes"), std::string::npos) << why;
    std::filesystem::remove(path);
}

TEST(GgufFileChanged, RewriteInPlaceIsReported) {
    const std::string path = write_model("rewritten");
    auto f = File::open(path);
    // Same size, new contents and modification time (as `cp other.gguf served.gguf` of a
    // file of the same size would leave it).
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const char junk[16] = {};
    ASSERT_EQ(::pwrite(fd, junk, sizeof junk, static_cast<off_t>(f->file_size() - sizeof junk)), 16);
    const timespec times[2] = {{0, UTIME_NOW}, {1, 0}};  // mtime: 1970, surely not the old one
    ASSERT_EQ(::futimens(fd, times), 0);
    ::close(fd);
    const std::string why = f->changed();
    EXPECT_NE(why.find("modified"), std::string::npos) << why;
    std::filesystem::remove(path);
}

// The handler only handles the mappings of model files: another SIGBUS still kills.
TEST(GgufFileChangedDeathTest, OtherSigbusStillKills) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    // The files are made and unlinked (still mapped) by the child, which dies before any
    // cleanup after the statement could run; the threadsafe style re-runs the test there.
    EXPECT_EXIT(
        {
            const std::string model = write_model("installs_handler");
            const std::string other = ::testing::TempDir() + "/glia_plain_" + std::to_string(getpid()) + ".bin";
            auto f = File::open(model);  // the handler is installed
            std::filesystem::remove(model);
            std::ofstream(other, std::ios::binary) << std::string(65536, 'x');
            const int fd = ::open(other.c_str(), O_RDONLY);
            auto* p = static_cast<volatile const char*>(mmap(nullptr, 65536, PROT_READ, MAP_PRIVATE, fd, 0));
            if (::truncate(other.c_str(), 0) != 0) _exit(3);
            std::filesystem::remove(other);
            const char c = p[65535];  // not a model file: SIGBUS as without the handler
            _exit(c == 0 ? 4 : 5);
        },
        // Killed as without our handler: by SIGBUS, or, under AddressSanitizer (whose handler
        // is the previous one and aborts on the report), by SIGABRT. Exiting is the failure.
        [](int status) {
            return WIFSIGNALED(status) && (WTERMSIG(status) == SIGBUS || WTERMSIG(status) == SIGABRT);
        },
        "");
}

}  // namespace
