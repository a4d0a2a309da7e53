// glia bench: prompt-processing (pp) and generation (tg) throughput, like the reference's
// bench tool. pp<P>: one forward pass over P random tokens (only the last logits);
// tg<N>: N single-token decodes starting from an empty context. Each test runs once as a
// warm-up, then -r times; the table shows the median and the sample standard deviation of
// the per-repetition tokens/second. Tokens are random ids, so no tokenizer is involved.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <thread>

#include "args.h"
#include "command.h"
#include "common.h"
#include "core/error.h"
#include "core/json.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/mix.h"
#include "runtime/session.h"

namespace glia::cli {
namespace {

std::vector<int> int_list(const Args& a, const std::string& opt, int min_value) {
    std::vector<int> v;
    std::stringstream ss(a.str(opt));
    std::string item;
    while (std::getline(ss, item, ',')) {
        char* end = nullptr;
        const long x = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end || x < min_value || x > (1 << 24))
            fail("option ", opt, " expects a comma-separated list of integers >= ", min_value, ", got '", a.str(opt), "'");
        v.push_back(static_cast<int>(x));
    }
    return v;
}

struct Stats { double avg = 0, sd = 0, median = 0; };

Stats stats(std::vector<double> x) {
    Stats s;
    if (x.empty()) return s;
    for (double v : x) s.avg += v;
    s.avg /= double(x.size());
    if (x.size() > 1) {
        double q = 0;
        for (double v : x) q += (v - s.avg) * (v - s.avg);
        s.sd = std::sqrt(q / double(x.size() - 1));
    }
    std::sort(x.begin(), x.end());
    const size_t n = x.size();
    s.median = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
    return s;
}

struct Result {
    std::string test;
    int n_prompt = 0, n_gen = 0, n_threads = 0;
    std::vector<double> ts;  // tokens/second per repetition
    std::vector<double> ns;  // nanoseconds per repetition
};

std::string human_size(uint64_t b) {
    char buf[32];
    if (b >= (uint64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(1ull << 30));
    else std::snprintf(buf, sizeof buf, "%.2f MiB", double(b) / double(1ull << 20));
    return buf;
}

std::string human_params(uint64_t n) {
    char buf[32];
    if (n >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.2f B", double(n) / 1e9);
    else if (n >= 1000000ull) std::snprintf(buf, sizeof buf, "%.2f M", double(n) / 1e6);
    else std::snprintf(buf, sizeof buf, "%.2f K", double(n) / 1e3);
    return buf;
}

int cmd_bench(const std::vector<std::string>& argv) {
    Args a("bench", "MODEL [options]");
    a.opt("-m,--model", "FILE", "model file (or give it as the first argument)")
        .opt("-p,--n-prompt", "N[,N...]", "prompt-processing tests: tokens per forward pass (0 = none)", "512")
        .opt("-n,--n-gen", "N[,N...]", "generation tests: tokens decoded one at a time (0 = none)", "128")
        .opt("-r,--repetitions", "N", "timed repetitions per test (after one warm-up)", "3")
        .opt("-t,--threads", "N[,N...]", "CPU threads (0 = all cores)", "0")
        .opt("-b,--batch-size", "N", "tokens per forward pass for pp tests (the prompt is split above it)", "2048")
        .opt("--seed", "S", "seed of the random token ids", "1234")
        .flag("--no-warmup", "skip the warm-up run")
        .flag("--json", "print a JSON list of results instead of the table");
    if (!a.parse(argv)) return 0;
    const std::string path = model_path(a);
    const std::vector<int> pps = int_list(a, "-p", 0), tgs = int_list(a, "-n", 0), threads = int_list(a, "-t", 0);
    const long long reps = a.integer("-r");
    if (reps < 1 || reps > 1000) fail("--repetitions must be between 1 and 1000");
    const long long n_batch = a.integer("-b");
    if (n_batch < 1) fail("--batch-size must be >= 1");
    const bool json = a.has("--json"), warmup = !a.has("--no-warmup");

    auto model = load_model(path);
    const ModelProfile& prof = model->profile();
    const int n_vocab = prof.n_vocab;
    uint64_t n_params = 0;
    for (const auto& t : model->file().tensors()) n_params += uint64_t(t.n_elements());
    const uint64_t model_bytes = model->weight_bytes();
    const gguf::File& f = model->file();
    const std::string ftype = f.has("general.file_type")
                                  ? quant::file_type_description(f.get<uint32_t>("general.file_type"))
                                  : std::string("unknown type");
    const std::string model_type = prof.arch + " " + human_params(n_params) + " " + ftype;

    std::mt19937 rng(static_cast<uint32_t>(a.integer("--seed")));
    std::uniform_int_distribution<int> tok(0, n_vocab - 1);
    auto random_tokens = [&](int n) {
        std::vector<int32_t> v(static_cast<size_t>(n));
        for (auto& x : v) x = tok(rng);
        return v;
    };
    using clock = std::chrono::steady_clock;

    std::vector<Result> results;
    for (int nt : threads) {
        struct Test { int p, n; };
        std::vector<Test> tests;
        for (int p : pps) if (p > 0) tests.push_back({p, 0});
        for (int n : tgs) if (n > 0) tests.push_back({0, n});
        for (const Test& t : tests) {
            SessionOptions so;
            so.n_ctx = std::max(t.p + t.n, 16);
            so.n_threads = nt;
            so.n_batch = static_cast<int>(std::min<long long>(n_batch, std::max(t.p, 1)));
            Session s(*model, so);
            Result r;
            r.n_prompt = t.p;
            r.n_gen = t.n;
            r.n_threads = nt > 0 ? nt : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
            r.test = t.p ? cat("pp", t.p) : cat("tg", t.n);
            auto run_once = [&](bool timed) {
                s.reset();
                if (t.p) {
                    const auto toks = random_tokens(t.p);
                    const auto t0 = clock::now();
                    s.decode(toks, false);
                    const double ns = std::chrono::duration<double, std::nano>(clock::now() - t0).count();
                    if (timed) { r.ns.push_back(ns); r.ts.push_back(1e9 * t.p / ns); }
                } else {
                    const int n = timed ? t.n : 1;  // the reference warms generation up with one token
                    const auto toks = random_tokens(n);
                    const auto t0 = clock::now();
                    for (int i = 0; i < n; ++i) s.decode({toks[size_t(i)]}, false);
                    const double ns = std::chrono::duration<double, std::nano>(clock::now() - t0).count();
                    if (timed) { r.ns.push_back(ns); r.ts.push_back(1e9 * n / ns); }
                }
            };
            if (warmup) run_once(false);
            for (long long i = 0; i < reps; ++i) run_once(true);
            if (!json) {
                const Stats st = stats(r.ts);
                if (results.empty()) {
                    std::printf("| %-28s | %10s | %10s | %-7s | %7s | %12s | %20s |\n", "model", "size", "params", "backend",
                                "threads", "test", "t/s (median ± sd)");
                    std::printf("| %s | %s: | %s: | %s | %s: | %s: | %s: |\n", std::string(28, '-').c_str(),
                                std::string(9, '-').c_str(), std::string(9, '-').c_str(), std::string(7, '-').c_str(),
                                std::string(6, '-').c_str(), std::string(11, '-').c_str(), std::string(19, '-').c_str());
                }
                char ts[64];
                std::snprintf(ts, sizeof ts, "%.2f ± %.2f", st.median, st.sd);
                std::printf("| %-28s | %10s | %10s | %-7s | %7d | %12s | %20s |\n", model_type.c_str(),
                            human_size(model_bytes).c_str(), human_params(n_params).c_str(), "CPU", r.n_threads,
                            r.test.c_str(), ts);
                std::fflush(stdout);
            }
            results.push_back(std::move(r));
        }
    }
    if (json) {
        json::Writer w;
        w.begin_array();
        for (const Result& r : results) {
            const Stats st = stats(r.ts), sn = stats(r.ns);
            w.begin_object()
                .key("model_filename").value(path)
                .key("model_type").value(model_type)
                .key("model_bytes").value(model_bytes)
                .key("model_size").value(model_bytes)
                .key("model_n_params").value(n_params)
                .key("backend").value("CPU")
                .key("n_threads").value(static_cast<int64_t>(r.n_threads))
                .key("n_batch").value(static_cast<int64_t>(n_batch))
                .key("n_prompt").value(static_cast<int64_t>(r.n_prompt))
                .key("n_gen").value(static_cast<int64_t>(r.n_gen))
                .key("test").value(r.test)
                .key("repetitions").value(static_cast<int64_t>(r.ts.size()))
                .key("avg_ns").value(sn.avg, 9)
                .key("stddev_ns").value(sn.sd, 9)
                .key("avg_ts").value(st.avg, 9)
                .key("stddev_ts").value(st.sd, 9)
                .key("median_ts").value(st.median, 9)
                .key("samples_ts").begin_array();
            for (double x : r.ts) w.value(x, 9);
            w.end_array().end_object();
        }
        w.end_array();
        std::printf("%s\n", w.str().c_str());
    }
    return 0;
}

const Command reg{"bench", "measure prompt-processing and generation throughput (pp512 / tg128)", cmd_bench};

}  // namespace
}  // namespace glia::cli
