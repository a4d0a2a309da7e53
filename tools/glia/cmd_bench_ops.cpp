// glia bench-ops: times the CPU matrix multiplication (and its activation quantizer) per
// weight type at the matrix shapes of a model, against the scalar reference kernels.
// This is the per-op iteration log: every kernel change is measured here first.
//
// Decode (T = 1) is memory-bound, so it reports weight GB/s; the weights are replicated
// into enough copies (>= 256 MiB together) that every timed call reads them from DRAM,
// as a model's layers do. Prefill (T > 1) is compute-bound and reports GFLOP/s.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>

#include <sys/mman.h>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/simd/matmul.h"
#include "backend/cpu/simd/simd.h"
#include "backend/cpu/threadpool.h"
#include "command.h"
#include "common.h"
#include "core/json.h"
#include "quant/quant.h"
#include "backend/registry.h"
#include "debug/op_check.h"
#include "dispatch/dispatcher.h"

namespace glia::cli {
namespace {

struct Shape { int64_t K, N; };

struct NamedShape {
    const char* name;
    std::vector<Shape> mats;
};

// K x N of each distinct weight matrix (attention q/k/v/o, ffn, output head).
const NamedShape kShapes[] = {
    {"llama3-1b", {{2048, 2048}, {2048, 512}, {2048, 8192}, {8192, 2048}, {2048, 128256}}},
    {"qwen3-0.6b", {{1024, 2048}, {1024, 1024}, {2048, 1024}, {1024, 3072}, {3072, 1024}, {1024, 151936}}},
    {"llama3-8b", {{4096, 4096}, {4096, 1024}, {4096, 14336}, {14336, 4096}, {4096, 128256}}},
};

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

double wall_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the calling thread: with one thread, the time the kernel really ran,
// whatever else the (shared) machine was doing.
double thread_cpu_s() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

bool g_cpu_clock = false;
double now_s() { return g_cpu_clock ? thread_cpu_s() : wall_s(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Result {
    std::string type;
    int64_t K, N, T;
    double quant_s, matmul_s;
    double gbps, gflops;
    double err;  // max |fast - ref| / sum |w_i a_i|
    double read_gbps = 0;  // plain read of the same weight copies, same threads (T = 1)
    bool gemm;
};

// Times one (type, shape, T) case.
struct Options {
    int reps = 5;
    double min_s = 0.3;
    bool check = true;
    bool hot = false;   // one copy of the weights (cache-resident when small)
    bool best = false;  // report the fastest repetition instead of the median
    bool small_pages = false;  // weights on 4 KiB pages, like a model mmap'ed from the page cache
};

// The weight copies: anonymous memory, optionally kept off transparent huge pages.
struct WeightBuffer {
    uint8_t* p = nullptr;
    size_t n = 0;
    WeightBuffer(size_t bytes, bool small_pages) : n(bytes) {
        void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) fail("bench-ops: cannot allocate ", n, " bytes of weights");
        madvise(m, n, small_pages ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
        p = static_cast<uint8_t*>(m);
    }
    ~WeightBuffer() { munmap(p, n); }
    uint8_t* data() { return p; }
};

Result bench_case(DType t, Shape sh, int64_t T, cpu::simd::Isa isa, cpu::ThreadPool& pool, const Options& o,
                  std::mt19937& rng) {
    const int64_t K = sh.K, N = sh.N;
    const auto& kk = cpu::simd::kernels(t, isa);
    const auto& ref = cpu::simd::kernels(t, cpu::simd::Isa::Scalar);
    const size_t wrow = row_bytes(t, K), wbytes = wrow * size_t(N);

    // Weights: 64 distinct quantized random rows, tiled over N, in enough copies to
    // defeat the caches.
    constexpr int64_t kDistinct = 64;
    std::normal_distribution<float> g(0.f, 0.02f);
    std::vector<uint8_t> rows(wrow * kDistinct);
    {
        std::vector<float> f(K);
        for (int64_t r = 0; r < kDistinct; ++r) {
            for (auto& v : f) v = g(rng);
            quant::quantize_row(t, f.data(), rows.data() + r * wrow, K);
        }
    }
    const size_t copies =
        o.hot ? 1 : std::clamp<size_t>((size_t(256) << 20) / std::max<size_t>(wbytes, 1) + 1, 1, 64);
    WeightBuffer w(wbytes * copies, o.small_pages);
    for (size_t c = 0; c < copies; ++c)
        for (int64_t r = 0; r < N; ++r)
            std::memcpy(w.data() + c * wbytes + r * wrow, rows.data() + (r % kDistinct) * wrow, wrow);

    std::vector<float> x(size_t(K) * T);
    std::normal_distribution<float> gx(0.f, 1.f);
    for (auto& v : x) v = gx(rng);
    std::vector<float> y(size_t(N) * T);
    std::vector<uint8_t> scratch;

    // The decode layout (as the backend keeps it, $GLIA_CPU_GEMV_INTERLEAVE), built for
    // every copy before the timing.
    std::unique_ptr<cpu::DecodeCache> decode;
    if (cpu::decode_layout_enabled() && cpu::matmul_has_decode_layout(kk, K)) {
        decode = std::make_unique<cpu::DecodeCache>();
        for (size_t c = 0; c < copies; ++c) decode->get(kk, w.data() + c * wbytes, wrow, K, N, pool);
    }
    cpu::MatmulAct a = cpu::matmul_prepare(kk, x.data(), K * 4, K, T, scratch, pool);  // warm-up
    cpu::matmul_compute(kk, w.data(), wrow, K, N, a, T, y.data(), pool, nullptr, decode.get());
    std::vector<double> tq, tm;
    const double start = wall_s();
    for (int i = 0; i < o.reps || wall_s() - start < o.min_s; ++i) {
        const uint8_t* wc = w.data() + (size_t(i + 1) % copies) * wbytes;
        const double t0 = now_s();
        a = cpu::matmul_prepare(kk, x.data(), K * 4, K, T, scratch, pool);
        const double t1 = now_s();
        cpu::matmul_compute(kk, wc, wrow, K, N, a, T, y.data(), pool, nullptr, decode.get());
        const double t2 = now_s();
        tq.push_back(t1 - t0);
        tm.push_back(t2 - t1);
        if (i > 10000) break;
    }
    Result r;
    if (T == 1) {
        // The yardstick: a plain read of the same bytes, split the same way.
        std::vector<double> tr;
        std::atomic<uint64_t> sink{0};
        for (size_t i = 0; i < tm.size(); ++i) {
            const uint8_t* wc = w.data() + (size_t(i + 1) % copies) * wbytes;
            const double t0 = now_s();
            pool.parallel_for(N, [&](int64_t b, int64_t e) {
                sink.fetch_add(cpu::simd::read_memory(wc + b * wrow, size_t(e - b) * wrow));
            });
            tr.push_back(now_s() - t0);
        }
        const double rt = o.best ? *std::min_element(tr.begin(), tr.end()) : median(tr);
        r.read_gbps = double(wbytes) / rt * 1e-9;
    }
    r.type = dtype_name(t);
    r.K = K;
    r.N = N;
    r.T = T;
    r.quant_s = o.best ? *std::min_element(tq.begin(), tq.end()) : median(tq);
    r.matmul_s = o.best ? *std::min_element(tm.begin(), tm.end()) : median(tm);
    r.gbps = double(wbytes) / r.matmul_s * 1e-9;
    r.gflops = 2.0 * double(K) * double(N) * double(T) / r.matmul_s * 1e-9;
    r.gemm = cpu::matmul_uses_gemm(kk, K, T, cpu::decode_layout_enabled() && cpu::matmul_has_decode_layout(kk, K));
    r.err = 0;
    if (o.check) {
        // The scalar reference on a sample of rows and tokens (the last y is from copy
        // `reps % copies`, all copies are identical).
        std::vector<uint8_t> qa(ref.act_type == DType::F32 ? size_t(K) * 4 : row_bytes(ref.act_type, K));
        std::vector<float> wf(K), af(K);
        const int64_t tok_step = std::max<int64_t>(1, T / 7), row_step = std::max<int64_t>(1, N / 97);
        for (int64_t c = 0; c < T; c += tok_step) {
            if (ref.act_type == DType::F32) std::memcpy(qa.data(), x.data() + c * K, size_t(K) * 4);
            else ref.quantize_act(x.data() + c * K, qa.data(), K);
            quant::dequantize_row(ref.act_type, qa.data(), af.data(), K);
            for (int64_t rr = 0; rr < N; rr += row_step) {
                float s = 0;
                ref.vec_dot(K, &s, w.data() + rr * wrow, qa.data());
                quant::dequantize_row(t, w.data() + rr * wrow, wf.data(), K);
                double scale = 0;
                for (int64_t i = 0; i < K; ++i) scale += std::fabs(double(wf[i]) * af[i]);
                const double e = std::fabs(double(y[c * N + rr]) - s) / std::max(scale, 1e-30);
                r.err = std::max(r.err, e);
            }
        }
    }
    return r;
}

// --ops: every op of one decoder layer (or the listed ones) through the op harness on the
// chosen device: error against the scalar reference, median time, GB/s and GFLOP/s.
int run_op_checks(const Args& a, const std::vector<DType>& types, const std::vector<int64_t>& tokens) {
    const LayerShape* dims = find_layer_shape(a.str("--shape"));
    if (!dims) {
        std::string names;
        for (const LayerShape& d : layer_shapes()) names += std::string(names.empty() ? "" : ", ") + d.name;
        fail("bench-ops: unknown shape '", a.str("--shape"), "' (", names, ")");
    }
    std::vector<Op> only;
    if (a.str("--ops") != "all") only = parse_cpu_ops(a.str("--ops"));
    const std::string dev = a.str("--device");
    Backend& b = dev == "cpu" ? static_cast<Backend&>(cpu_backend(static_cast<int>(a.integer("-t", 0, kMaxThreads))))
                              : cuda_backend(dev == "cuda" ? 0 : std::atoi(dev.c_str() + 5));
    const int n_past = static_cast<int>(a.integer("--past"));
    const int reps = static_cast<int>(std::max(1LL, a.integer("-r")));
    const bool json = a.has("--json");
    const bool check = !a.has("--no-check");
    json::Writer w;
    w.begin_array();
    if (!json) {
        std::printf("bench-ops --ops: device %s, shape %s, %d cached positions, median of %d runs\n", b.name(),
                    dims->name, n_past, reps);
        std::printf("| op | max err | bound | ok | us | GB/s | GFLOP/s | alone |\n"
                    "| --- | ---: | ---: | --- | ---: | ---: | ---: | --- |\n");
    }
    int failed = 0;
    for (int64_t T : tokens)
        for (const OpSpec& s : layer_op_specs(*dims, types, T, n_past)) {
            if (!only.empty() && std::find(only.begin(), only.end(), s.op) == only.end()) continue;
            const OpCheck c = check_op(b, s, reps, 1, check);
            failed += c.supported && c.checked && !c.ok;
            const double gbps = c.seconds > 0 ? c.bytes / c.seconds * 1e-9 : 0;
            const double gflops = c.seconds > 0 ? c.flops / c.seconds * 1e-9 : 0;
            if (json) {
                w.begin_object().key("device").value(b.name()).key("op").value(c.label);
                w.key("supported").value(c.supported).key("checked").value(c.checked);
                if (c.checked) {
                    w.key("max_err").value(c.max_err, 4);
                    w.key("bound").value(c.tolerance, 4).key("ok").value(c.ok);
                }
                w.key("us").value(c.seconds * 1e6, 6).key("gbps").value(gbps, 6).key("gflops").value(gflops, 6);
                if (c.alone_checked) w.key("alone_checked").value(c.alone_checked).key("alone_equal").value(c.alone_equal);
                w.end_object();
            } else if (!c.supported) {
                std::printf("| %s | | | unsupported (runs on the CPU) | | | | |\n", c.label.c_str());
            } else if (!c.checked) {
                std::printf("| %s | | | unchecked | %.1f | %.1f | %.1f | |\n", c.label.c_str(), c.seconds * 1e6, gbps,
                            gflops);
                std::fflush(stdout);
            } else {
                char alone[32] = "";
                if (c.alone_checked) std::snprintf(alone, sizeof alone, "%d/%d equal", c.alone_equal, c.alone_checked);
                std::printf("| %s | %.2g | %.2g | %s | %.1f | %.1f | %.1f | %s |\n", c.label.c_str(), c.max_err,
                            c.tolerance, c.ok ? "yes" : "NO", c.seconds * 1e6, gbps, gflops, alone);
                std::fflush(stdout);
            }
        }
    w.end_array();
    if (json) std::printf("%s\n", w.str().c_str());
    else std::printf("max err: max |ours - reference| / max |reference| (ids: count of differences); GB/s: operand and "
                     "output bytes / time; GFLOP/s: arithmetic / time; alone: products and attention of T > 1 tokens, the first and "
                     "the last token run alone (attention: against the caches the batch left), bit-equal to the batch "
                     "(required for ok).\n");
    return failed ? 1 : 0;
}

int cmd_bench_ops(const std::vector<std::string>& argv) {
    Args a("bench-ops", "[options]");
    a.opt("--device", "NAME", "device to time: cpu, or cuda / cuda:N (with --ops)", "cpu")
        .opt("--types", "LIST", "weight types, comma-separated", "q4_k,q6_k,q8_0")
        .opt("--shape", "NAME", "named model shape: llama3-1b, qwen3-0.6b, llama3-8b (--ops also: qwen35, kimi-k3, "
                                "gemma4)", "llama3-1b")
        .opt("-k", "K", "one matrix instead of a named shape: input size K (with -n)")
        .opt("-n", "N", "one matrix: output rows N (with -k)")
        .opt("--tokens", "LIST", "token counts T, comma-separated", "1,512")
        .opt("-t,--threads", "N", "CPU threads (0 = all cores)", "0")
        .opt("-r,--reps", "N", "minimum timed repetitions (median reported)", "5")
        .opt("--min-time", "SECONDS", "minimum timed seconds per case", "0.3")
        .opt("--isa", "LEVEL", "kernel level: scalar, avx2, avx512 (default: best supported)")
        .flag("--no-check", "skip the comparison with the scalar reference")
        .flag("--hot", "time one copy of the weights (cache-resident when small) instead of DRAM-cold copies")
        .flag("--best", "report the fastest repetition instead of the median (noisy shared machines)")
        .flag("--small-pages", "weights on 4 KiB pages (as a model mmap'ed from the page cache), not huge pages")
        .flag("--cpu-clock", "time with the thread's CPU clock (needs -t 1): kernel A/B on a busy machine")
        .opt("--ops", "LIST", "check and time every op of a layer (all) or the listed ones through the op harness, "
                              "against the scalar reference")
        .opt("--past", "N", "--ops: positions already in the KV cache for attention", "512")
        .flag("--json", "print a JSON list instead of a table");
    if (!a.parse(argv)) return 0;
    const std::string device = a.str("--device");
    if (device != "cpu" && !(a.has("--ops") && (device == "cuda" || device.rfind("cuda:", 0) == 0)))
        fail("bench-ops: device '", device, "' is not available (cpu; cuda or cuda:N with --ops)");

    std::vector<DType> types;
    for (const std::string& s : split(a.str("--types"))) {
        DType t;
        if (!dtype_from_name(s, t) || !quant::supported(t) || !quant::traits(t).vec_dot)
            fail("bench-ops: unknown or unsupported weight type '", s, "' (try q4_k, q6_k, q8_0, f16)");
        types.push_back(t);
    }
    std::vector<int64_t> tokens;
    for (const std::string& s : split(a.str("--tokens"))) {
        const long long v = std::atoll(s.c_str());
        if (v <= 0) fail("bench-ops: bad token count '", s, "' in --tokens");
        tokens.push_back(v);
    }
    if (a.has("--ops")) return run_op_checks(a, types, tokens);
    std::vector<Shape> shapes;
    std::string shape_name;
    if (a.has("-k") || a.has("-n")) {
        if (!a.has("-k") || !a.has("-n")) fail("bench-ops: give both -k K and -n N");
        shapes.push_back({a.integer("-k"), a.integer("-n")});
        if (shapes[0].K <= 0 || shapes[0].N <= 0) fail("bench-ops: -k and -n must be positive");
        shape_name = "custom";
    } else {
        shape_name = a.str("--shape");
        for (const NamedShape& s : kShapes)
            if (shape_name == s.name) shapes = s.mats;
        if (shapes.empty()) fail("bench-ops: unknown shape '", shape_name, "' (llama3-1b, qwen3-0.6b, llama3-8b)");
    }
    cpu::simd::Isa isa = cpu::simd::best_isa();
    if (a.has("--isa")) {
        bool ok = false;
        for (int l = 0; l < cpu::simd::kIsaCount; ++l)
            if (a.str("--isa") == cpu::simd::isa_name(cpu::simd::Isa(l))) { isa = cpu::simd::Isa(l); ok = true; }
        if (!ok) fail("bench-ops: --isa must be scalar, avx2 or avx512");
        if (!cpu::simd::isa_supported(isa)) fail("bench-ops: this CPU cannot run --isa ", a.str("--isa"));
    }
    cpu::ThreadPool pool(static_cast<int>(a.integer("-t", 0, kMaxThreads)));
    g_cpu_clock = a.has("--cpu-clock");
    if (g_cpu_clock && pool.size() != 1) fail("bench-ops: --cpu-clock needs -t 1");
    const bool json = a.has("--json");
    Options opt;
    opt.reps = static_cast<int>(std::max(1LL, a.integer("-r")));
    opt.min_s = a.number("--min-time");
    opt.check = !a.has("--no-check");
    opt.hot = a.has("--hot");
    opt.best = a.has("--best");
    opt.small_pages = a.has("--small-pages");
    std::mt19937 rng(42);

    if (!json) {
        std::printf("bench-ops: device cpu, isa %s, %d threads, shape %s, %s weights, %s of >= %d reps, %s clock\n",
                    cpu::simd::isa_name(isa), pool.size(), shape_name.c_str(), opt.hot ? "hot" : "DRAM-cold",
                    opt.best ? "best" : "median", opt.reps, g_cpu_clock ? "thread CPU" : "wall");
        std::printf("| type | K | N | T | path | quant us | matmul us | GB/s | read GB/s | GFLOP/s | max err |\n");
        std::printf("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    }
    json::Writer w;
    w.begin_array();
    for (DType t : types) {
        for (int64_t T : tokens) {
            double sum_q = 0, sum_m = 0, sum_bytes = 0, sum_flop = 0, max_err = 0;
            for (Shape sh : shapes) {
                if (sh.K % quant::traits(t).block_size != 0) {
                    std::fprintf(stderr, "bench-ops: skipping %s at K=%lld (not a multiple of its block size)\n",
                                 dtype_name(t), static_cast<long long>(sh.K));
                    continue;
                }
                const Result r = bench_case(t, sh, T, isa, pool, opt, rng);
                sum_q += r.quant_s;
                sum_m += r.matmul_s;
                sum_bytes += double(row_bytes(t, sh.K)) * double(sh.N);
                sum_flop += 2.0 * double(sh.K) * double(sh.N) * double(T);
                max_err = std::max(max_err, r.err);
                if (json) {
                    w.begin_object();
                    w.key("device").value("cpu").key("isa").value(cpu::simd::isa_name(isa));
                    w.key("threads").value(pool.size()).key("type").value(r.type);
                    w.key("K").value(r.K).key("N").value(r.N).key("T").value(r.T);
                    w.key("path").value(r.gemm ? "gemm" : "rows");
                    w.key("quant_us").value(r.quant_s * 1e6, 6).key("matmul_us").value(r.matmul_s * 1e6, 6);
                    w.key("gbps").value(r.gbps, 6).key("gflops").value(r.gflops, 6);
                    w.key("max_err").value(r.err, 4);
                    if (r.T == 1) w.key("read_gbps").value(r.read_gbps, 6);
                    w.end_object();
                } else {
                    char rd[32] = "";
                    if (r.T == 1) std::snprintf(rd, sizeof rd, "%.1f", r.read_gbps);
                    std::printf("| %s | %lld | %lld | %lld | %s | %.1f | %.1f | %.1f | %s | %.1f | %.2g |\n",
                                r.type.c_str(), static_cast<long long>(r.K), static_cast<long long>(r.N),
                                static_cast<long long>(r.T), r.gemm ? "gemm" : "rows", r.quant_s * 1e6,
                                r.matmul_s * 1e6, r.gbps, rd, r.gflops, r.err);
                    std::fflush(stdout);
                }
            }
            if (!json && shapes.size() > 1)
                std::printf("| %s | all | | %lld | | %.1f | %.1f | %.1f | | %.1f | %.2g |\n", dtype_name(t),
                            static_cast<long long>(T), sum_q * 1e6, sum_m * 1e6, sum_bytes / sum_m * 1e-9,
                            sum_flop / sum_m * 1e-9, max_err);
        }
    }
    w.end_array();
    if (json) std::printf("%s\n", w.str().c_str());
    if (!json)
        std::printf("GB/s: weight bytes / matmul time (meaningful at T=1); read GB/s: a plain read of the same "
                    "bytes, same threads, same run (the ceiling); GFLOP/s: 2*K*N*T / matmul time; max err: "
                    "|fast - scalar reference| / sum |w*a| over sampled rows and tokens.\n");
    return 0;
}

const Command reg{"bench-ops", "time each op (matmul per weight type) at a model's shapes, with reference check",
                  cmd_bench_ops};

}  // namespace
}  // namespace glia::cli
