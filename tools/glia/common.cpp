#include "common.h"

#include "backend/cpu/simd/matmul.h"
#include "backend/registry.h"
#include "dispatch/dispatcher.h"
#include "gguf/gguf.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/dtype.h"
#include "core/error.h"
#include "core/f16.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "parallel/bootstrap.h"
#include "tokenizer/vocab.h"

namespace glia::cli {
namespace {

// Where a block of `type` keeps its scale(s) (fp16 unless noted), or none known: the
// bytes a NaN shows in once a quantized tensor is broken.
struct ScaleAt {
    int offset = -1, second = -1;  // -1: none
    bool f32 = false;
};
ScaleAt scales_of(DType t) {
    switch (t) {
        case DType::Q4_0: case DType::Q5_0: case DType::Q8_0: case DType::IQ4_NL: case DType::IQ4_XS:
        case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
            return {0, -1, false};
        case DType::Q4_1: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: return {0, 2, false};
        case DType::Q2_K: return {80, 82, false};
        case DType::Q3_K: return {108, -1, false};
        case DType::Q6_K: return {208, -1, false};
        case DType::Q8_K: return {0, -1, true};
        default: return {};
    }
}

bool finite_f16(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return (h & 0x7C00) != 0x7C00;  // exponent all ones: inf or NaN
}

// Whether a sample of the tensor's values holds NaN or infinity. It reads 32 places spread
// over the tensor, 8 blocks (or 16 values) at each: a few pages per tensor, whatever the
// file's size, and pages the first decode reads anyway. A tensor with a few bad values
// among millions can pass; a broken conversion (NaN throughout) does not.
bool sample_has_nonfinite(const gguf::TensorInfo& t) {
    const DTypeInfo& info = dtype_info(t.type);
    const ScaleAt sc = scales_of(t.type);
    const bool is_float = t.type == DType::F32 || t.type == DType::F16 || t.type == DType::BF16;
    if (!is_float && sc.offset < 0) return false;
    const uint64_t unit = info.type_size;  // one element (float types) or one block
    const uint64_t n = t.nbytes / unit;
    const uint64_t run = is_float ? 16 : 8;
    constexpr int kPlaces = 32;
    for (int k = 0; k < kPlaces && n > 0; ++k) {
        const uint64_t first = n <= run ? 0 : (n - run) * static_cast<uint64_t>(k) / (kPlaces - 1);
        for (uint64_t i = first; i < std::min(n, first + run); ++i) {
            const uint8_t* p = t.data + i * unit;
            if (t.type == DType::F32) {
                float f;
                std::memcpy(&f, p, 4);
                if (!std::isfinite(f)) return true;
            } else if (t.type == DType::F16) {
                if (!finite_f16(p)) return true;
            } else if (t.type == DType::BF16) {
                uint16_t h;
                std::memcpy(&h, p, 2);
                if (!std::isfinite(bf16_to_f32(h))) return true;
            } else if (sc.f32) {
                float f;
                std::memcpy(&f, p + sc.offset, 4);
                if (!std::isfinite(f)) return true;
            } else {
                if (!finite_f16(p + sc.offset)) return true;
                if (sc.second >= 0 && !finite_f16(p + sc.second)) return true;
            }
        }
        if (n <= run) break;
    }
    return false;
}

// Warnings about a model that loads but cannot work well: NaN or infinite weights (by
// sampling, see above) and special-token ids outside the vocabulary (which the vocabulary
// ignores, keeping its default).
void warn_about(const Model& model) {
    const gguf::File& f = model.file();
    std::vector<std::string> bad;
    for (const auto& t : f.tensors())
        if (sample_has_nonfinite(t)) bad.push_back(t.name);
    if (!bad.empty()) {
        std::string names;
        for (size_t i = 0; i < bad.size() && i < 3; ++i) names += (i ? ", '" : "'") + bad[i] + "'";
        if (bad.size() > 3) names += cat(" and ", bad.size() - 3, " more");
        std::fprintf(stderr, "glia: warning: %s: NaN or infinite weights in %zu tensor(s) (%s); the model's output "
                             "will be garbage\n", f.path().c_str(), bad.size(), names.c_str());
    }
    const int64_t n_tokens = model.vocab().n_tokens();
    for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                            "tokenizer.ggml.eom_token_id", "tokenizer.ggml.unknown_token_id",
                            "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id"}) {
        const gguf::Value* v = f.find(key);
        if (!v || !v->is_integer()) continue;
        const bool is_unsigned = v->type == gguf::ValueType::UINT8 || v->type == gguf::ValueType::UINT16 ||
                                 v->type == gguf::ValueType::UINT32 || v->type == gguf::ValueType::UINT64;
        // -1 and 0xFFFFFFFF are the usual ways of saying "none".
        if (is_unsigned ? (v->u < static_cast<uint64_t>(n_tokens) || v->u == 0xFFFFFFFFu || v->u == UINT64_MAX)
                        : ((v->i >= 0 && v->i < n_tokens) || v->i == -1))
            continue;
        std::fprintf(stderr, "glia: warning: %s: %s is %s but the vocabulary has %lld tokens (ids 0..%lld); the key is "
                             "ignored\n", f.path().c_str(), key, v->to_string().c_str(), static_cast<long long>(n_tokens),
                     static_cast<long long>(n_tokens - 1));
    }
}

}  // namespace

std::unique_ptr<Model> load_model(const std::string& path) {
    if (path.empty()) fail("no model given (pass a .gguf file as the first argument or with -m)");
    if (!std::filesystem::exists(path)) fail("model file '", path, "' does not exist");
    auto model = Model::load(path);
    warn_about(*model);
    return model;
}

std::string model_path(const Args& a) {
    if (a.has("-m")) return a.str("-m");
    return a.positional().empty() ? "" : a.positional()[0];
}

std::string read_file(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) fail("'", path, "' is a directory, not a file");
    std::ifstream f(path, std::ios::binary);
    if (!f) fail("cannot read '", path, "': ", std::strerror(errno));
    std::stringstream ss;
    ss << f.rdbuf();
    if (f.bad()) fail("cannot read '", path, "': ", std::strerror(errno));
    return ss.str();
}

void write_out(std::string_view text) {
    if ((!text.empty() && std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) || std::fflush(stdout) != 0)
        fail("cannot write to standard output: ", std::strerror(errno), "; stopping");
}

void add_sampling_options(Args& a) {
    a.opt("--temp", "T", "sampling temperature, 0..100; 0 = greedy", "0.8")
        .opt("--top-k", "K", "keep the K most likely tokens (0 = off)", "40")
        .opt("--top-p", "P", "keep the smallest set with probability mass P, in (0, 1] (1 = off)", "0.95")
        .opt("--min-p", "P", "drop tokens below P times the best probability, 0..1 (0 = off)", "0.05")
        .opt("--repeat-penalty", "F", "penalise recently seen tokens, in (0, 100] (1 = off)", "1.0")
        .opt("--repeat-last-n", "N", "window for the penalties (-1 = whole history)", "64")
        .opt("--presence-penalty", "F", "subtract F (-2..2) from seen tokens' logits", "0")
        .opt("--frequency-penalty", "F", "subtract F (-2..2) times the count of seen tokens", "0")
        .opt("--seed", "S", "random seed (-1 = random)", "-1");
}

SamplerParams sampling_params(const Args& a) {
    SamplerParams p;
    p.temperature = static_cast<float>(a.number("--temp", 0, 100));
    p.top_k = static_cast<int>(a.integer("--top-k", 0, INT32_MAX));
    p.top_p = static_cast<float>(a.number("--top-p", 0, 1, true));
    p.min_p = static_cast<float>(a.number("--min-p", 0, 1));
    p.repeat_penalty = static_cast<float>(a.number("--repeat-penalty", 0, 100, true));
    p.repeat_last_n = static_cast<int>(a.integer("--repeat-last-n", -1, INT32_MAX));
    p.presence_penalty = static_cast<float>(a.number("--presence-penalty", -2, 2));
    p.frequency_penalty = static_cast<float>(a.number("--frequency-penalty", -2, 2));
    const long long seed = a.integer("--seed", -1, LLONG_MAX);
    p.seed = seed < 0 ? 0xFFFFFFFFFFFFFFFFull : static_cast<uint64_t>(seed);
    return p;
}

void add_runtime_options(Args& a) {
    a.opt("-m,--model", "FILE", "model file (or give it as the first argument)")
        .opt("-t,--threads", "N", "CPU threads, 0..1024 (0 = all cores)", "0")
        .opt("-c,--ctx-size", "N", "context size in tokens (0 = the model's)", "0")
        .opt("--cpu-ops", "LIST", "ops to run on the CPU whatever the placement, e.g. attention,rope "
                                  "(also $GLIA_CPU_OPS; names as in GLIA_PROFILE, lower case)");
}

void add_device_options(Args& a) {
    a.opt("-ngl,--gpu-layers", "N", "layers on the GPU: 0 none, more than the model has: all (the CUDA backend; "
                                    "default 0, or all with GLIA_DEVICE=cuda)", "0")
        .flag("--cpu-moe", "with -ngl: keep the MoE expert tensors in host memory")
        .opt("-tp,--tensor-parallel", "N", "split the model by heads into N ranks that run at once and sum their "
                                           "parts (CPU ranks as threads, n_threads / N each; see 'glia plan -tp N')", "1")
        .opt("--devices", "LIST", "with -ngl: the GPUs to use, e.g. 0,1 (default: every GPU present)")
        .opt("-sm,--split-mode", "MODE", "with several --devices: layer (each GPU runs a range of layers) or tensor "
                                         "(heads split across the GPUs: needs NCCL, not available yet)", "layer")
        .opt("--rank", "R", "one process of a group of several (with --world, --coordinator): needs NCCL on GPUs, "
                            "not available yet")
        .opt("--world", "W", "processes in the group (with --rank)")
        .opt("--coordinator", "HOST:PORT", "where rank 0 listens and hands the other ranks the group's NCCL id");
    add_cache_type_options(a);
}

void add_cache_type_options(Args& a) {
    a.opt("-ctk,--cache-type-k", "TYPE", std::string("KV cache type of the keys: ") + cache_type_names() +
                                             " (q8_0: about half the bytes of f16)", "f16")
        .opt("-ctv,--cache-type-v", "TYPE", std::string("KV cache type of the values: ") + cache_type_names(), "f16");
}

CacheTypes cache_types_option(const Args& a) {
    CacheTypes c;
    c.k = cache_type_from_name(a.str("--cache-type-k"), "--cache-type-k");
    c.v = cache_type_from_name(a.str("--cache-type-v"), "--cache-type-v");
    return c;
}

#if GLIA_HAVE_CUDA
constexpr bool kBuiltWithCuda = true;
#else
constexpr bool kBuiltWithCuda = false;
#endif

long long gpu_layers_option(const Args& a) {
    if (a.has("-ngl")) return a.integer("-ngl", 0, 1 << 20);
    // GLIA_DEVICE=cuda: every layer on the GPU unless -ngl says otherwise (how the ordinary
    // tests, the goldens included, run on the GPU machine).
    const char* e = std::getenv("GLIA_DEVICE");
    if (e && std::string(e).rfind("cuda", 0) == 0) {
        if (cuda_device_count() == 0)
            fail("GLIA_DEVICE=", e, " but no CUDA device is usable here (this build ",
                 kBuiltWithCuda ? "has the CUDA backend: no driver or no GPU" : "has no CUDA backend",
                 "); unset GLIA_DEVICE to run on the CPU");
        return 1 << 20;
    }
    if (e && *e && std::string(e) != "cpu") fail("GLIA_DEVICE='", e, "': cpu or cuda");
    return 0;
}

#if GLIA_HAVE_NCCL
constexpr bool kBuiltWithNccl = true;
#else
constexpr bool kBuiltWithNccl = false;
#endif

namespace {

// The GPUs --devices names (every one present without it).
std::vector<int> devices_option(const Args& a) {
    const int n = cuda_device_count();
    std::vector<int> out;
    if (!a.has("--devices")) {
        for (int i = 0; i < n; ++i) out.push_back(i);
        return out;
    }
    const std::string list = a.str("--devices");
    size_t pos = 0;
    while (pos <= list.size()) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        const std::string item = list.substr(pos, comma - pos);
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 0) fail("--devices '", list, "': '", item, "' is not a GPU number");
        if (v >= n)
            fail("--devices '", list, "': GPU ", v, " is not there (", n, " usable CUDA device", n == 1 ? "" : "s",
                 kBuiltWithCuda ? ")" : "; this build has no CUDA backend)");
        if (std::find(out.begin(), out.end(), int(v)) != out.end()) fail("--devices '", list, "' names GPU ", v, " twice");
        out.push_back(int(v));
        pos = comma + 1;
    }
    return out;
}

// --rank/--world/--coordinator: checked, then refused honestly (see the message).
void check_multiprocess(const Args& a) {
    const bool any = a.has("--rank") || a.has("--world") || a.has("--coordinator");
    if (!any) return;
    if (!(a.has("--rank") && a.has("--world") && a.has("--coordinator")))
        fail("--rank, --world and --coordinator go together (e.g. --rank 1 --world 2 --coordinator 10.0.0.1:29500)");
    const long long world = a.integer("--world", 1, 1024);
    a.integer("--rank", 0, world - 1);
    parse_coordinator(a.str("--coordinator"));
    fail("several processes (--rank/--world/--coordinator) run their ranks on GPUs through NCCL, which ",
         kBuiltWithNccl ? "this build compiles (and whose bootstrap is tested) but which has not been run on a "
                          "multi-GPU machine yet"
                        : "this build does not have (no nccl.h / libnccl next to the CUDA toolkit)",
         ": not available in this version. In one process, -tp N splits the model across CPU ranks");
}

}  // namespace

DeviceChoice device_choice(const Args& a, const Model& m, int n_ctx, int n_seq) {
    DeviceChoice c;
    check_multiprocess(a);
    c.tp = static_cast<int>(a.integer("-tp", 1, 256));
    const std::string sm = a.str("-sm");
    if (sm != "layer" && sm != "tensor") fail("-sm '", sm, "': layer or tensor");
    const long long ngl = gpu_layers_option(a);
    if (sm == "tensor")
        fail("-sm tensor (the heads split across GPUs) needs the NCCL all-reduce on each GPU's stream, which has not "
             "been run on a multi-GPU machine yet: not available in this version. Use -sm layer (each GPU runs a "
             "range of layers), or -tp N for CPU ranks");
    if (c.tp > 1 && ngl > 0)
        fail("-tp ", c.tp, " runs its ranks on the CPU in this version (GPU ranks need the NCCL path, not run yet); "
             "leave out -ngl", std::getenv("GLIA_DEVICE") ? " and GLIA_DEVICE" : "",
             ", or split the layers across GPUs with --devices 0,1 -sm layer");
    if (c.tp > 1) m.shard(0, c.tp);  // refuse an unsplittable model before anything is allocated
    if (a.has("--devices") && ngl == 0) fail("--devices goes with -ngl (layers on the GPUs)");
    const std::vector<int> gpus = ngl == 0 ? std::vector<int>{} : devices_option(a);
    c.placement.cache = cache_types_option(a);
    if (ngl == 0) return c;
    PlanRequest req;
    req.cache = c.placement.cache;
    req.host_copies = cpu::weight_copy_bytes;
    req.n_gpu_layers = static_cast<int>(ngl);
    req.cpu_moe = a.has("--cpu-moe");
    req.n_ctx = n_ctx;
    req.n_seq = n_seq;
    for (int g : gpus) req.gpu_mem.push_back(cuda_free_memory(g) / 100 * 95);
    c.placement = plan_placement(m.profile(), m.file(), req);
    // The planner numbers the GPUs it was given; name them as the machine does.
    for (size_t d = 1; d < c.placement.devices.size(); ++d) {
        c.placement.devices[d].ordinal = gpus[d - 1];
        c.placement.devices[d].name = cat("cuda:", gpus[d - 1]);
    }
    for (const std::string& note : c.placement.notes) std::fprintf(stderr, "glia: %s\n", note.c_str());
    for (size_t d = 1; d < c.placement.devices.size(); ++d)
        c.devices.push_back(&cuda_backend(c.placement.devices[d].ordinal));
    return c;
}

std::vector<Op> cpu_ops_option(const Args& a) {
    return a.has("--cpu-ops") ? parse_cpu_ops(a.str("--cpu-ops")) : std::vector<Op>{};
}

int threads_option(const Args& a) { return static_cast<int>(a.integer("-t", 0, kMaxThreads)); }
int context_option(const Args& a, int lo) { return static_cast<int>(a.integer("-c", lo, kMaxContext)); }

}  // namespace glia::cli
