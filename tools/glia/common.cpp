#include "common.h"

#include "dispatch/dispatcher.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "model/model.h"

namespace glia::cli {

std::unique_ptr<Model> load_model(const std::string& path) {
    if (path.empty()) fail("no model given (pass a .gguf file as the first argument or with -m)");
    if (!std::filesystem::exists(path)) fail("model file '", path, "' does not exist");
    return Model::load(path);
}

std::string model_path(const Args& a) {
    if (a.has("-m")) return a.str("-m");
    return a.positional().empty() ? "" : a.positional()[0];
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) fail("cannot read '", path, "'");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void add_sampling_options(Args& a) {
    a.opt("--temp", "T", "sampling temperature; 0 = greedy", "0.8")
        .opt("--top-k", "K", "keep the K most likely tokens (0 = off)", "40")
        .opt("--top-p", "P", "keep the smallest set with probability mass P (1 = off)", "0.95")
        .opt("--min-p", "P", "drop tokens below P times the best probability (0 = off)", "0.05")
        .opt("--repeat-penalty", "F", "penalise recently seen tokens (1 = off)", "1.0")
        .opt("--repeat-last-n", "N", "window for the penalties (-1 = whole history)", "64")
        .opt("--presence-penalty", "F", "subtract F from seen tokens' logits", "0")
        .opt("--frequency-penalty", "F", "subtract F times the count of seen tokens", "0")
        .opt("--seed", "S", "random seed (-1 = random)", "-1");
}

SamplerParams sampling_params(const Args& a) {
    SamplerParams p;
    p.temperature = static_cast<float>(a.number("--temp"));
    p.top_k = static_cast<int>(a.integer("--top-k"));
    p.top_p = static_cast<float>(a.number("--top-p"));
    p.min_p = static_cast<float>(a.number("--min-p"));
    p.repeat_penalty = static_cast<float>(a.number("--repeat-penalty"));
    p.repeat_last_n = static_cast<int>(a.integer("--repeat-last-n"));
    p.presence_penalty = static_cast<float>(a.number("--presence-penalty"));
    p.frequency_penalty = static_cast<float>(a.number("--frequency-penalty"));
    const long long seed = a.integer("--seed");
    p.seed = seed < 0 ? 0xFFFFFFFFFFFFFFFFull : static_cast<uint64_t>(seed);
    if (p.top_p <= 0.0f || p.top_p > 1.0f) fail("--top-p must be in (0, 1], got ", p.top_p);
    return p;
}

void add_runtime_options(Args& a) {
    a.opt("-m,--model", "FILE", "model file (or give it as the first argument)")
        .opt("-t,--threads", "N", "CPU threads (0 = all cores)", "0")
        .opt("-c,--ctx-size", "N", "context size in tokens (0 = the model's)", "0")
        .opt("--cpu-ops", "LIST", "ops to run on the CPU whatever the placement, e.g. attention,rope "
                                  "(also $GLIA_CPU_OPS; names as in GLIA_PROFILE, lower case)");
}

std::vector<Op> cpu_ops_option(const Args& a) {
    return a.has("--cpu-ops") ? parse_cpu_ops(a.str("--cpu-ops")) : std::vector<Op>{};
}

}  // namespace glia::cli
