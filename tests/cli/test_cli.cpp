// The glia binary's command line, run as a child process: every numeric option of run,
// chat and serve is checked against its range (the message names the range); prompt
// sources that make no sense are errors; a failing standard output stops generation;
// Ctrl-C in `glia chat` ends the reply, not the chat; a model file truncated under
// `glia run` is an error, not SIGBUS; NaN weights and special ids outside the vocabulary
// are warned about at load.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "backend/registry.h"
#include "gguf/gguf.h"
#include "test_util.h"

namespace {

using glia::test::glia_binary;
using glia::test::run_command;
using glia::test::shared_path;
using Clock = std::chrono::steady_clock;

std::string stories() { return shared_path("models/stories260K.gguf"); }
std::string temp(const std::string& name) { return ::testing::TempDir() + "/glia_cli_" + std::to_string(getpid()) + "_" + name; }

// A child glia with a pipe to its stdin and from its stdout; stderr goes to a file.
class Child {
public:
    explicit Child(const std::vector<std::string>& args) : err_(temp("stderr" + std::to_string(counter_++))) {
        int in[2], out[2];
        if (pipe(in) != 0 || pipe(out) != 0) return;
        pid_ = fork();
        if (pid_ == 0) {
            dup2(in[0], 0);
            dup2(out[1], 1);
            const int e = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(e, 2);
            ::close(in[1]);
            ::close(out[0]);
            std::vector<std::string> argv = {glia_binary()};
            argv.insert(argv.end(), args.begin(), args.end());
            std::vector<char*> cargv;
            for (auto& s : argv) cargv.push_back(s.data());
            cargv.push_back(nullptr);
            execv(cargv[0], cargv.data());
            _exit(127);
        }
        ::close(in[0]);
        ::close(out[1]);
        in_ = in[1];
        out_ = out[0];
        fcntl(out_, F_SETFL, O_NONBLOCK);
    }
    ~Child() {
        if (in_ >= 0) ::close(in_);
        if (out_ >= 0) ::close(out_);
        if (pid_ > 0 && status_ < 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        std::error_code ec;
        std::filesystem::remove(err_, ec);
    }
    void write(const std::string& s) {
        if (::write(in_, s.data(), s.size()) < 0) ADD_FAILURE() << "cannot write to the child";
    }
    void close_stdin() {
        ::close(in_);
        in_ = -1;
    }
    // Reads stdout until it holds at least `n` bytes or `seconds` pass.
    const std::string& read_until(size_t n, double seconds) {
        const auto until = Clock::now() + std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
        while (out_text_.size() < n && Clock::now() < until) {
            char buf[4096];
            const ssize_t k = ::read(out_, buf, sizeof buf);
            if (k > 0) out_text_.append(buf, static_cast<size_t>(k));
            else std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return out_text_;
    }
    void signal(int sig) { kill(pid_, sig); }
    // The raw wait status once the child ended, or -1 after `seconds`.
    int wait(double seconds) {
        const auto until = Clock::now() + std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
        while (status_ < 0 && Clock::now() < until) {
            read_until(std::numeric_limits<size_t>::max(), 0.02);  // keep the pipe drained
            int st;
            if (waitpid(pid_, &st, WNOHANG) == pid_) status_ = st;
        }
        return status_;
    }
    std::string err() const { return glia::test::read_text(err_); }

private:
    static inline int counter_ = 0;
    std::string err_;
    pid_t pid_ = -1;
    int in_ = -1, out_ = -1;
    int status_ = -1;
    std::string out_text_;
};

// Runs `glia ARGS`, stderr and stdout together; returns the exit code.
int glia(const std::string& args, std::string* out) { return run_command(glia_binary() + " " + args + " 2>&1", out); }

// Item: values out of range were accepted silently (or aborted: -t 100000). Each is now
// an error naming the option and its range, before the model is loaded.
TEST(CliOptions, EveryNumberIsRangeChecked) {
    struct Case {
        const char* args;
        const char* option;
        const char* range;
    };
    const Case cases[] = {
        {"-t 100000", "-t", "between 0 and 1024"},
        {"-t -3", "-t", "between 0 and 1024"},
        {"-n -5", "-n", "between -1 and 2147483647"},
        {"-c -1", "-c", "between 0 and 16777216"},
        {"--temp nan", "--temp", "between 0 and 100"},
        {"--temp inf", "--temp", "between 0 and 100"},
        {"--temp -1", "--temp", "between 0 and 100"},
        {"--top-k -4", "--top-k", "between 0 and 2147483647"},
        {"--min-p 5", "--min-p", "between 0 and 1"},
        {"--repeat-penalty 0", "--repeat-penalty", "greater than 0 and at most 100"},
        {"--top-p 2", "--top-p", "greater than 0 and at most 1"},
        {"--seed -2", "--seed", "between -1 and"},
        {"--presence-penalty 3", "--presence-penalty", "between -2 and 2"},
        {"--repeat-last-n 99999999999999999999", "--repeat-last-n", "out of range"},
    };
    for (const Case& c : cases) {
        for (const char* cmd : {"run", "chat"}) {
            std::string out;
            const std::string prompt = std::string(cmd) == "run" ? " -p hi " : " ";
            EXPECT_EQ(glia(std::string(cmd) + " " + stories() + prompt + c.args + " </dev/null", &out), 1)
                << cmd << " " << c.args << ": " << out;
            EXPECT_NE(out.find(std::string("option ") + c.option + " "), std::string::npos) << cmd << " " << c.args << ": " << out;
            EXPECT_NE(out.find(c.range), std::string::npos) << cmd << " " << c.args << ": " << out;
            EXPECT_EQ(out.find("terminate"), std::string::npos) << out;
        }
    }
    // serve checks its own options the same way, before loading anything.
    std::string out;
    EXPECT_EQ(glia("serve " + stories() + " --port 0 -t 100000", &out), 1) << out;
    EXPECT_NE(out.find("between 0 and 1024"), std::string::npos) << out;
    EXPECT_EQ(glia("serve " + stories() + " --port 0 --read-timeout 0", &out), 1) << out;
    EXPECT_NE(out.find("option --read-timeout must be a number greater than 0"), std::string::npos) << out;
    // In-range values still work.
    EXPECT_EQ(glia("run " + stories() + " -p Once -n 3 --temp 0 --top-p 1 --min-p 0 -t 1", &out), 0) << out;
}

// Item: an in-range thread count the system cannot start (its limits, or memory for the
// stacks) aborted in the thread pool (std::system_error from std::thread). Now a clear
// error. The address space is capped so that 1024 stacks cannot be mapped.
TEST(CliOptions, ThreadsTheSystemRefusesAreAnError) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "sanitizers reserve more address space than the cap allows";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    GTEST_SKIP() << "sanitizers reserve more address space than the cap allows";
#endif
#endif
    for (const char* cmd : {"run", "bench"}) {
        std::string out;
        const std::string args = std::string(cmd) == "run" ? " -p Once -n 2 -t 1024" : " -p 8 -n 2 -r 1 -t 1024";
        const int rc = run_command("bash -c 'ulimit -v 2000000; exec " + glia_binary() + " " + cmd + " " + stories() + args +
                                       "' 2>&1",
                                   &out);
        EXPECT_EQ(rc, 1) << cmd << ": " << out;
        EXPECT_NE(out.find("cannot start 1024 CPU threads"), std::string::npos) << cmd << ": " << out;
        EXPECT_NE(out.find("use fewer with -t"), std::string::npos) << cmd << ": " << out;
        EXPECT_EQ(out.find("terminate"), std::string::npos) << out;
    }
}

TEST(CliOptions, PromptSources) {
    std::string out;
    EXPECT_EQ(glia("run " + stories() + " -f " + ::testing::TempDir(), &out), 1) << out;
    EXPECT_NE(out.find("is a directory"), std::string::npos) << out;
    const std::string file = temp("prompt.txt");
    glia::test::run_command("printf 'Once upon' > '" + file + "'", nullptr);
    EXPECT_EQ(glia("run " + stories() + " -f " + file + " -p other", &out), 1) << out;
    EXPECT_NE(out.find("not both"), std::string::npos) << out;
    EXPECT_EQ(glia("run " + stories() + " -f " + file + " -n 2 -t 1", &out), 0) << out;
    EXPECT_EQ(out.rfind("Once upon", 0), 0u) << out;
    std::filesystem::remove(file);
}

// GLIA_DEVICE picks the device of every layer where no -ngl is given: cpu runs as before,
// an unknown name is an error, and cuda without a usable GPU is an error, never a silent
// CPU run (the GPU test runs rely on it).
TEST(CliOptions, DeviceFromEnvironment) {
    std::string out;
    EXPECT_EQ(run_command("GLIA_DEVICE=cpu " + glia_binary() + " run " + stories() + " -p Once -n 2 -t 1 2>&1", &out),
              0)
        << out;
    EXPECT_EQ(run_command("GLIA_DEVICE=tpu " + glia_binary() + " run " + stories() + " -p Once -n 2 -t 1 2>&1", &out),
              1)
        << out;
    EXPECT_NE(out.find("GLIA_DEVICE='tpu': cpu or cuda"), std::string::npos) << out;
    if (glia::cuda_device_count() == 0) {  // glia's own test for "no GPU here"
        EXPECT_EQ(run_command("GLIA_DEVICE=cuda " + glia_binary() + " run " + stories() + " -p Once -n 2 -t 1 2>&1", &out),
                  1)
            << out;
        EXPECT_NE(out.find("no CUDA device is usable"), std::string::npos) << out;
    }
}

// bench-ops --ops --no-check times only: no error column, "unchecked" (and "checked": false in
// --json), so long attentions are not held up by the scalar reference.
TEST(CliBenchOps, NoCheckTimesOnly) {
    std::string out;
    ASSERT_EQ(run_command(glia_binary() + " bench-ops --ops attention --shape qwen3-0.6b --tokens 2 --past 16 "
                                          "--no-check -r 1 -t 1 2>&1",
                          &out),
              0)
        << out;
    EXPECT_NE(out.find("| ATTENTION hd128 16/8 past 16 T=2 | | | unchecked | "), std::string::npos) << out;
    EXPECT_EQ(out.find("| yes |"), std::string::npos) << out;
    ASSERT_EQ(run_command(glia_binary() + " bench-ops --ops attention --shape qwen3-0.6b --tokens 2 --past 16 "
                                          "--no-check -r 1 -t 1 --json 2>&1",
                          &out),
              0)
        << out;
    EXPECT_NE(out.find("\"checked\":false"), std::string::npos) << out;
    EXPECT_EQ(out.find("max_err"), std::string::npos) << out;
    ASSERT_EQ(run_command(glia_binary() + " bench-ops --ops attention --shape qwen3-0.6b --tokens 2 --past 16 "
                                          "-r 1 -t 1 2>&1",
                          &out),
              0)
        << out;
    EXPECT_NE(out.find("| ATTENTION hd128 16/8 past 16 T=2 | "), std::string::npos) << out;
    EXPECT_EQ(out.find("unchecked"), std::string::npos) << out;
}

// bench-ops --ops on the CPU at a family shape: the newer families' ops pass their checks.
TEST(CliBenchOps, FamilyShapeOnTheCpu) {
    std::string out;
    EXPECT_EQ(run_command(glia_binary() + " bench-ops --ops mul_bcast,concat,res_mix,situ,moe_gather_weights,unary "
                                          "--shape kimi-k3 --tokens 1,3 -r 1 -t 1 2>&1",
                          &out),
              0)
        << out;
    EXPECT_NE(out.find("| CONCAT dim 0 512 strided T=3 |"), std::string::npos) << out;
    EXPECT_EQ(out.find("| NO |"), std::string::npos) << out;
    EXPECT_EQ(run_command(glia_binary() + " bench-ops --ops add --shape nope 2>&1", &out), 1) << out;
    EXPECT_NE(out.find("unknown shape 'nope' (llama3-1b, qwen3-0.6b, llama3-8b, qwen35, kimi-k3, gemma4)"),
              std::string::npos)
        << out;
}

// Item: a write error on stdout was ignored and generation went on.
TEST(CliOutput, WriteErrorsStopGeneration) {
    std::string out;
    EXPECT_EQ(run_command(glia_binary() + " run " + stories() + " -p Once -n 50 -t 1 2>&1 >/dev/full", &out), 1) << out;
    EXPECT_NE(out.find("cannot write to standard output"), std::string::npos) << out;
    // A reader that goes away (SIGPIPE ignored, so the write fails with EPIPE).
    const std::string err = temp("epipe.txt");
    const auto t0 = Clock::now();
    run_command("sh -c \"trap '' PIPE; " + glia_binary() + " run " + stories() +
                    " -p Once -n 3000 -c 4096 --ignore-eos -t 1 2>'" + err + "'; echo rc=\\$? >>'" + err +
                    "'\" | head -c 4 >/dev/null",
                nullptr);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 20);
    const std::string e = glia::test::read_text(err);
    EXPECT_NE(e.find("cannot write to standard output: Broken pipe"), std::string::npos) << e;
    EXPECT_NE(e.find("rc=1"), std::string::npos) << e;
    std::filesystem::remove(err);
}

// Item: Ctrl-C in `glia chat` ended the session instead of the reply.
TEST(CliChat, CtrlCEndsTheReplyNotTheChat) {
    // Greedy plain completion of stories260K runs thousands of tokens without an end.
    Child chat({"chat", stories(), "--no-template", "--temp", "0", "-n", "3000", "-c", "4096", "-t", "1"});
    chat.write("Once upon a time\n");
    ASSERT_GE(chat.read_until(40, 20).size(), 40u) << chat.err();
    chat.signal(SIGINT);
    chat.write("/reset\n/exit\n");
    const int st = chat.wait(20);
    ASSERT_NE(st, -1) << "glia chat did not end: " << chat.err();
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << ": " << chat.err();
    EXPECT_NE(chat.err().find("reply interrupted"), std::string::npos) << chat.err();
    EXPECT_NE(chat.err().find("conversation reset"), std::string::npos) << chat.err();
}

// Item: SIGBUS (exit 135) when the model file is truncated under `glia run`.
TEST(CliModelFile, TruncatedUnderRunIsAnError) {
    const std::string copy = temp("copy.gguf");
    std::filesystem::copy_file(stories(), copy, std::filesystem::copy_options::overwrite_existing);
    Child run({"run", copy, "-p", "Once", "-n", "3000", "-c", "4096", "--ignore-eos", "-t", "1"});
    ASSERT_GE(run.read_until(20, 20).size(), 20u) << run.err();
    ASSERT_EQ(::truncate(copy.c_str(), 1000), 0);
    const int st = run.wait(20);
    ASSERT_NE(st, -1) << run.err();
    EXPECT_TRUE(WIFEXITED(st)) << "killed by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    EXPECT_EQ(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 1) << run.err();
    EXPECT_NE(run.err().find("truncated"), std::string::npos) << run.err();
    std::filesystem::remove(copy);
}

// Item: NaN weights and a bos_token_id outside the vocabulary loaded without a word.
TEST(CliModelFile, LoadWarnsAboutNaNWeightsAndSpecialIds) {
    std::string out;
    ASSERT_EQ(glia("run " + stories() + " -p Once -n 1 -t 1", &out), 0) << out;
    EXPECT_EQ(out.find("warning"), std::string::npos) << out;

    const std::string bad = temp("nan.gguf");
    {
        auto f = glia::gguf::File::open(stories());
        glia::gguf::Writer w(f->alignment());
        w.copy_kvs(*f);
        w.set_u32("tokenizer.ggml.bos_token_id", 99999);
        bool poisoned = false;
        for (const auto& t : f->tensors()) {
            std::vector<uint8_t> data(t.data, t.data + t.nbytes);
            if (!poisoned && t.type == glia::DType::F32 && t.n_dims == 2) {
                const float nan = std::numeric_limits<float>::quiet_NaN();
                for (size_t i = 0; i + 4 <= data.size(); i += 4) std::memcpy(&data[i], &nan, 4);
                poisoned = true;
            }
            w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), data.data(), data.size());
        }
        ASSERT_TRUE(poisoned);
        w.write(bad);
    }
    glia("run " + bad + " -p Once -n 1 -t 1", &out);
    EXPECT_NE(out.find("NaN or infinite weights in 1 tensor"), std::string::npos) << out;
    EXPECT_NE(out.find("tokenizer.ggml.bos_token_id is 99999 but the vocabulary has 512 tokens"), std::string::npos) << out;
    std::filesystem::remove(bad);
}

}  // namespace
