// glia bench: prompt-processing (pp) and generation (tg) throughput, like the reference's
// bench tool. pp<P>: one forward pass over P random tokens (only the last logits);
// tg<N>: N single-token decodes starting from an empty context. -d D[,D...] runs each test
// after D random tokens are already in the cache (filled untimed before every repetition,
// in forward passes of -b tokens), named like the reference's "pp512 @ d4096". Each test runs once as a
// warm-up, then -r times; the table shows the median and the sample standard deviation of
// the per-repetition tokens/second. Tokens are random ids, so no tokenizer is involved.
//
// --parallel N[,N...] replaces the pp/tg tests with batched generation through the
// serving engine (continuous batching over the paged KV cache), like the reference's
// batched bench: N sequences, each a prompt of --pp random tokens followed by --tg greedy
// tokens (end-of-generation ignored), submitted together. The prompt phase runs from the
// submission until every sequence has its first generated token (prompt t/s = N*pp / t);
// the generation phase from then until every sequence has all --tg tokens, which takes
// tg-1 batched decode steps (generation t/s = N*(tg-1) / t).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

#include "args.h"
#include "backend/registry.h"
#include "command.h"
#include "bench_speculative.h"
#include "common.h"
#include "lora_options.h"
#include "core/error.h"
#include "core/json.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/mix.h"
#include "runtime/engine.h"
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
    int n_prompt = 0, n_gen = 0, n_depth = 0, n_threads = 0;
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

// What the table and the JSON records say about the model.
struct ModelInfo {
    std::string path, type;
    uint64_t bytes = 0, n_params = 0;
};

struct BatchedResult {
    int n_parallel = 0, n_prompt = 0, n_gen = 0, n_threads = 0, n_batch = 0;
    std::vector<double> pp_ts, tg_ts;  // tokens/second per repetition, all sequences together
    std::vector<double> pp_ns, tg_ns;  // phase durations per repetition
    int alone_same = -1;               // --check-alone: sequences equal to their solo run
};

// One batched run: submits n_parallel requests at once and records, from the token
// callbacks (each on its request's delivery thread, woken as soon as the engine queues
// the event: a clock reading and a short lock of their own), when the last sequence got
// its first token and when the last one finished.
struct BatchedRun {
    using clock = std::chrono::steady_clock;
    std::mutex mu;
    std::condition_variable cv;
    int n_first = 0, n_done = 0;
    clock::time_point first_end, done_end;
    std::string error;
    std::vector<std::vector<int32_t>> tokens;  // per request, when kept

    TokenCallback callback(size_t index) {
        return [this, index](const TokenEvent& ev) {
            const auto now = clock::now();
            std::lock_guard<std::mutex> lk(mu);
            if (ev.token >= 0 && index < tokens.size()) tokens[index].push_back(ev.token);
            if (ev.token >= 0 && ev.n_generated == 1) {
                ++n_first;
                if (now > first_end) first_end = now;
            }
            if (ev.done) {
                if (ev.finish != FinishReason::LENGTH && error.empty())
                    error = cat("a sequence ended with '", finish_reason_name(ev.finish), "' after ", ev.n_generated,
                                " tokens", ev.error.empty() ? "" : ": ", ev.error);
                ++n_done;
                if (now > done_end) done_end = now;
                cv.notify_all();
            }
            return true;
        };
    }
};

// Runs n_parallel sequences of n_prompt random tokens + n_gen generated tokens through
// `engine`; returns {prompt-phase ns, generation-phase ns}.
// `kept`, when given, receives each request's prompt and generated tokens.
struct KeptRun {
    std::vector<std::vector<int32_t>> prompts, tokens;
};
std::pair<double, double> run_batched(Engine& engine, int n_parallel, int n_gen,
                                      const std::function<std::vector<int32_t>()>& prompt, KeptRun* kept = nullptr) {
    BatchedRun run;
    if (kept) run.tokens.resize(size_t(n_parallel));
    std::vector<std::pair<GenerationRequest, TokenCallback>> reqs;
    for (int i = 0; i < n_parallel; ++i) {
        GenerationRequest r;
        r.prompt = prompt();
        r.max_tokens = n_gen;
        r.ignore_eos = true;
        r.sampling.temperature = 0;  // greedy
        if (kept) kept->prompts.push_back(r.prompt);
        reqs.emplace_back(std::move(r), run.callback(size_t(i)));
    }
    const auto t0 = BatchedRun::clock::now();
    engine.submit_batch(std::move(reqs));
    std::unique_lock<std::mutex> lk(run.mu);
    run.cv.wait(lk, [&] { return run.n_done == n_parallel; });
    if (!run.error.empty()) fail("batched run (", n_parallel, " sequences): ", run.error);
    if (run.n_first != n_parallel)
        fail("batched run: ", run.n_first, " of ", n_parallel, " sequences produced a first token");
    const double pp_ns = std::chrono::duration<double, std::nano>(run.first_end - t0).count();
    const double tg_ns = std::chrono::duration<double, std::nano>(run.done_end - run.first_end).count();
    if (kept) kept->tokens = std::move(run.tokens);
    return {pp_ns, tg_ns};
}

int bench_batched(const Args& a, const Model& model, const ModelInfo& info, const std::vector<int>& threads,
                  long long reps, long long n_batch, bool json, bool warmup,
                  const std::vector<const LoraAdapter*>& lora) {
    const std::vector<int> pars = int_list(a, "--parallel", 1);
    const long long pp = a.integer("--pp"), tg = a.integer("--tg");
    if (pp < 1 || pp > (1 << 20)) fail("--pp must be between 1 and ", 1 << 20, ", got ", pp);
    if (tg < 2 || tg > (1 << 20))
        fail("--tg must be between 2 and ", 1 << 20, ", got ", tg,
             " (the generation phase starts after each sequence's first token)");
    for (int n : pars)
        if (n > 4096) fail("option --parallel expects values between 1 and 4096, got ", n);
    const int n_vocab = model.profile().n_vocab;
    std::mt19937 rng(static_cast<uint32_t>(a.integer("--seed")));
    std::uniform_int_distribution<int> tok(0, n_vocab - 1);
    auto random_prompt = [&] {
        std::vector<int32_t> v(static_cast<size_t>(pp));
        for (auto& x : v) x = tok(rng);
        return v;
    };

    std::vector<BatchedResult> results;
    for (int nt : threads) {
        for (int np : pars) {
            EngineOptions eo;
            eo.n_parallel = np;
            eo.n_threads = nt;
            const long long per_seq = (pp + tg + eo.block_size - 1) / eo.block_size * eo.block_size;
            if (per_seq * np > (1ll << 30)) fail("--parallel ", np, " with --pp ", pp, " --tg ", tg, " is too large");
            eo.n_ctx = static_cast<int>(per_seq * np);
            eo.max_queue = std::max(eo.max_queue, np);
            // The prompt phase is one forward pass over all prompts when N*pp <= -b, else
            // each pass takes b/N tokens of every prompt.
            eo.prefill_chunk = static_cast<int>(std::clamp<long long>(n_batch / np, 1, pp));
            use_devices(a, model, eo.n_ctx, np, eo);
            eo.lora = lora;
            Engine engine(model, eo);
            BatchedResult r;
            r.n_parallel = np;
            r.n_prompt = static_cast<int>(pp);
            r.n_gen = static_cast<int>(tg);
            r.n_batch = static_cast<int>(std::min<long long>(n_batch, 1ll << 30));
            r.n_threads = nt > 0 ? nt : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
            // Warm-up: the whole prompt phase and all tg steps, as the single-sequence tests
            // do: the cache's pages are touched (first-touch zeroing) before the timed runs.
            if (warmup) run_batched(engine, np, static_cast<int>(tg), random_prompt);
            const bool check = a.has("--check-alone");
            KeptRun kept;
            for (long long i = 0; i < reps; ++i) {
                const auto [pp_ns, tg_ns] =
                    run_batched(engine, np, static_cast<int>(tg), random_prompt, check && i + 1 == reps ? &kept : nullptr);
                r.pp_ns.push_back(pp_ns);
                r.tg_ns.push_back(tg_ns);
                r.pp_ts.push_back(1e9 * double(np) * double(pp) / pp_ns);
                r.tg_ts.push_back(1e9 * double(np) * double(tg - 1) / tg_ns);
            }
            if (check) {
                // Each sequence of the last batched run again, alone on the same engine:
                // a batch must change no one's greedy tokens (DESIGN.md principle 6).
                int same = 0;
                for (size_t i = 0; i < kept.prompts.size(); ++i) {
                    KeptRun solo;
                    run_batched(engine, 1, static_cast<int>(tg), [&] { return kept.prompts[i]; }, &solo);
                    if (solo.tokens[0] == kept.tokens[i]) ++same;
                }
                r.alone_same = same;
                std::fprintf(stderr, "bench: --parallel %d: %d of %d sequences equal to the same prompt alone\n", np,
                             same, np);
            }
            if (!json) {
                const Stats sp = stats(r.pp_ts), sg = stats(r.tg_ts);
                if (results.empty()) {
                    std::printf("| %-28s | %7s | %8s | %6s | %6s | %20s | %20s |\n", "model", "threads", "parallel", "pp",
                                "tg", "prompt t/s", "generation t/s");
                    std::printf("| %s | %s: | %s: | %s: | %s: | %s: | %s: |\n", std::string(28, '-').c_str(),
                                std::string(6, '-').c_str(), std::string(7, '-').c_str(), std::string(5, '-').c_str(),
                                std::string(5, '-').c_str(), std::string(19, '-').c_str(),
                                std::string(19, '-').c_str());
                }
                char pts[64], gts[64];
                std::snprintf(pts, sizeof pts, "%.2f ± %.2f", sp.median, sp.sd);
                std::snprintf(gts, sizeof gts, "%.2f ± %.2f", sg.median, sg.sd);
                std::printf("| %-28s | %7d | %8d | %6d | %6d | %20s | %20s |\n", info.type.c_str(), r.n_threads,
                            r.n_parallel, r.n_prompt, r.n_gen, pts, gts);
                std::fflush(stdout);
            }
            results.push_back(std::move(r));
        }
    }
    if (json) {
        json::Writer w;
        w.begin_array();
        for (const BatchedResult& r : results) {
            const Stats sp = stats(r.pp_ts), sg = stats(r.tg_ts), spn = stats(r.pp_ns), sgn = stats(r.tg_ns);
            w.begin_object()
                .key("model_filename").value(info.path)
                .key("model_type").value(info.type)
                .key("model_bytes").value(info.bytes)
                .key("model_size").value(info.bytes)
                .key("model_n_params").value(info.n_params)
                .key("backend").value(gpu_layers_option(a) > 0 && cuda_device_count() > 0 ? "CUDA" : "CPU")
                .key("test").value("batched")
                .key("n_threads").value(static_cast<int64_t>(r.n_threads))
                .key("n_batch").value(static_cast<int64_t>(r.n_batch))
                .key("n_parallel").value(static_cast<int64_t>(r.n_parallel))
                .key("alone_same").value(static_cast<int64_t>(r.alone_same))
                .key("n_prompt").value(static_cast<int64_t>(r.n_prompt))
                .key("n_gen").value(static_cast<int64_t>(r.n_gen))
                .key("repetitions").value(static_cast<int64_t>(r.pp_ts.size()))
                .key("prompt_ts").value(sp.median, 9)
                .key("prompt_ts_median").value(sp.median, 9)
                .key("prompt_ts_avg").value(sp.avg, 9)
                .key("prompt_ts_stddev").value(sp.sd, 9)
                .key("gen_ts_median").value(sg.median, 9)
                .key("gen_ts_avg").value(sg.avg, 9)
                .key("gen_ts_stddev").value(sg.sd, 9)
                .key("prompt_avg_ns").value(spn.avg, 9)
                .key("gen_avg_ns").value(sgn.avg, 9)
                .key("samples_prompt_ts").begin_array();
            for (double x : r.pp_ts) w.value(x, 9);
            w.end_array().key("samples_gen_ts").begin_array();
            for (double x : r.tg_ts) w.value(x, 9);
            w.end_array().end_object();
        }
        w.end_array();
        std::printf("%s\n", w.str().c_str());
    }
    return 0;
}

int cmd_bench(const std::vector<std::string>& argv) {
    Args a("bench", "MODEL [options]");
    add_device_options(a);
    a.opt("-m,--model", "FILE", "model file (or give it as the first argument)")
        .opt("-p,--n-prompt", "N[,N...]", "prompt-processing tests: tokens per forward pass (0 = none)", "512")
        .opt("-n,--n-gen", "N[,N...]", "generation tests: tokens decoded one at a time (0 = none)", "128")
        .opt("-d,--n-depth", "N[,N...]",
             "tokens already in the cache when each pp/tg test starts (filled untimed before every repetition)", "0")
        .opt("-r,--repetitions", "N", "timed repetitions per test (after one warm-up)", "3")
        .opt("-t,--threads", "N[,N...]", "CPU threads (0 = all cores)", "0")
        .opt("-b,--batch-size", "N",
             "tokens per forward pass for pp tests (the prompt is split above it); with --parallel, prompt tokens "
             "per engine step (all prompts in one step when N*pp fits)",
             "2048")
        .opt("--parallel", "N[,N...]",
             "batched generation instead of pp/tg: N sequences through the serving engine (prompt t/s = N*pp / "
             "time to every first token; generation t/s = N*(tg-1) / time from then to the end)")
        .opt("--pp", "N", "with --parallel: random prompt tokens per sequence", "128")
        .opt("--tg", "N", "with --parallel: generated tokens per sequence, greedy, end-of-generation ignored (>= 2)",
             "128")
        .flag("--check-alone",
              "with --parallel: afterwards run each sequence of the last batched run alone on the same engine and "
              "count those whose greedy tokens are identical (a batch must change nothing)")
        .opt("--seed", "S", "seed of the random token ids", "1234")
        .flag("--no-warmup", "skip the warm-up run")
        .flag("--json", "print a JSON list of results instead of the table");
    add_bench_speculative_options(a);
    add_lora_options(a);
    if (!a.parse(argv)) return 0;
    const std::string path = model_path(a);
    const bool speculative = bench_speculative_wanted(a);
    const bool batched = a.has("--parallel");
    if (speculative) {
        // Checked by bench_speculative.
    } else if (batched) {
        if (a.has("-p")) fail("-p/--n-prompt does not apply with --parallel; use --pp");
        if (a.has("-n")) fail("-n/--n-gen does not apply with --parallel; use --tg");
        if (a.has("-d")) fail("-d/--n-depth does not apply with --parallel");
        // Check the list before loading the model.
        if (int_list(a, "--parallel", 1).empty())
            fail("option --parallel expects a comma-separated list of integers >= 1, got an empty list");
    } else {
        if (a.has("--pp")) fail("--pp needs --parallel (use -p for prompt-processing tests)");
        if (a.has("--tg")) fail("--tg needs --parallel (use -n for generation tests)");
        if (a.has("--check-alone")) fail("--check-alone needs --parallel (it compares batched sequences with each alone)");
    }
    const std::vector<int> pps = int_list(a, "-p", 0), tgs = int_list(a, "-n", 0), threads = int_list(a, "-t", 0);
    const std::vector<int> depths = batched ? std::vector<int>{0} : int_list(a, "-d", 0);
    for (int t : threads)
        if (t > kMaxThreads) fail("--threads must be between 0 and ", kMaxThreads, ", got ", t);
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
    if (speculative && (a.has("--lora") || a.has("--lora-scaled")))
        fail("--lora does not apply to the speculative benchmark (--spec-ngram / --draft)");
    if (speculative) return bench_speculative(a, *model, model_type);
    const LoraAdapters loras = load_lora_options(a, *model);
    if (batched)
        return bench_batched(a, *model, {path, model_type, model_bytes, n_params}, threads, reps, n_batch, json,
                             warmup, loras.list());

    std::mt19937 rng(static_cast<uint32_t>(a.integer("--seed")));
    std::uniform_int_distribution<int> tok(0, n_vocab - 1);
    auto random_tokens = [&](int n) {
        std::vector<int32_t> v(static_cast<size_t>(n));
        for (auto& x : v) x = tok(rng);
        return v;
    };
    using clock = std::chrono::steady_clock;

    const char* backend_name = gpu_layers_option(a) > 0 && cuda_device_count() > 0 ? "CUDA" : "CPU";
    std::vector<Result> results;
    for (int nt : threads) {
        struct Test { int p, n, d; };
        std::vector<Test> tests;
        for (int d : depths) {
            for (int p : pps) if (p > 0) tests.push_back({p, 0, d});
            for (int n : tgs) if (n > 0) tests.push_back({0, n, d});
        }
        for (const Test& t : tests) {
            SessionOptions so;
            so.n_ctx = std::max(t.d + t.p + t.n, 16);
            so.n_threads = nt;
            so.n_batch = static_cast<int>(std::min<long long>(n_batch, std::max(std::max(t.p, t.d), 1)));
            use_devices(a, *model, so.n_ctx, 1, so);
            so.lora = loras.list();
            Session s(*model, so);
            Result r;
            r.n_prompt = t.p;
            r.n_gen = t.n;
            r.n_depth = t.d;
            r.n_threads = nt > 0 ? nt : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
            r.test = t.p ? cat("pp", t.p) : cat("tg", t.n);
            if (t.d > 0) r.test += cat(" @ d", t.d);
            auto run_once = [&](bool timed) {
                s.reset();
                if (t.d > 0) s.decode(random_tokens(t.d), false);  // the cache's depth, untimed
                if (t.p) {
                    const auto toks = random_tokens(t.p);
                    const auto t0 = clock::now();
                    s.decode(toks, false);
                    const double ns = std::chrono::duration<double, std::nano>(clock::now() - t0).count();
                    if (timed) { r.ns.push_back(ns); r.ts.push_back(1e9 * t.p / ns); }
                } else {
                    // The warm-up generates all n tokens too: the cache's pages are touched before
                    // any timed run (the reference clears its whole cache when it makes it).
                    const int n = t.n;
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
                    std::printf("| %-28s | %10s | %10s | %-7s | %7s | %14s | %20s |\n", "model", "size", "params", "backend",
                                "threads", "test", "t/s (median ± sd)");
                    std::printf("| %s | %s: | %s: | %s | %s: | %s: | %s: |\n", std::string(28, '-').c_str(),
                                std::string(9, '-').c_str(), std::string(9, '-').c_str(), std::string(7, '-').c_str(),
                                std::string(6, '-').c_str(), std::string(13, '-').c_str(), std::string(19, '-').c_str());
                }
                char ts[64];
                std::snprintf(ts, sizeof ts, "%.2f ± %.2f", st.median, st.sd);
                std::printf("| %-28s | %10s | %10s | %-7s | %7d | %14s | %20s |\n", model_type.c_str(),
                            human_size(model_bytes).c_str(), human_params(n_params).c_str(), backend_name, r.n_threads,
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
                .key("backend").value(backend_name)
                .key("n_threads").value(static_cast<int64_t>(r.n_threads))
                .key("n_batch").value(static_cast<int64_t>(n_batch))
                .key("n_prompt").value(static_cast<int64_t>(r.n_prompt))
                .key("n_gen").value(static_cast<int64_t>(r.n_gen))
                .key("n_depth").value(static_cast<int64_t>(r.n_depth))
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

const Command reg{"bench", "measure prompt-processing and generation throughput (pp512 / tg128; --parallel: batched)",
                  cmd_bench};

}  // namespace
}  // namespace glia::cli
