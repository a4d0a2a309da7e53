// glia synth-lora: a random LoRA adapter of a model's real shapes (tests, benchmarks).
#include <cstdio>
#include <sstream>

#include "args.h"
#include "command.h"
#include "common.h"
#include "core/error.h"
#include "model/model.h"
#include "synth/lora.h"

namespace glia::cli {
namespace {

int cmd_synth_lora(const std::vector<std::string>& argv) {
    Args a("synth-lora", "MODEL -o OUT.gguf [options]");
    a.opt("-m,--model", "FILE", "the base model (or give it as the first argument)")
        .opt("-o,--output", "FILE", "where to write the adapter")
        .opt("-r,--rank", "N", "rank of every pair", "8")
        .opt("--alpha", "A", "adapter.lora.alpha (0: no alpha / rank factor)", "16")
        .opt("--targets", "LIST", "weights to adapt: names containing any of these, comma-separated (e.g. "
                                  "attn_q,attn_v); default every block matrix and the LM head")
        .opt("--strength", "S", "RMS of the added matrix relative to the weight's, at scale 1", "0.2")
        .opt("--type", "TYPE", "f32 or f16", "f32")
        .opt("--seed", "S", "random seed", "42");
    if (!a.parse(argv)) return 0;
    if (!a.has("-o")) fail("no output file: give -o OUT.gguf");
    synth::LoraOptions o;
    o.rank = static_cast<int>(a.integer("-r", 1, 1 << 16));
    o.alpha = static_cast<float>(a.number("--alpha", -1e6, 1e6));
    o.strength = static_cast<float>(a.number("--strength", 0, 1e3));
    o.seed = static_cast<uint64_t>(a.integer("--seed", 0, INT64_MAX));
    const std::string type = a.str("--type");
    if (type == "f32" || type == "F32") o.type = DType::F32;
    else if (type == "f16" || type == "F16") o.type = DType::F16;
    else fail("--type '", type, "': f32 or f16");
    if (a.has("--targets")) {
        std::stringstream ss(a.str("--targets"));
        std::string item;
        while (std::getline(ss, item, ','))
            if (!item.empty()) o.targets.push_back(item);
    }
    auto model = load_model(model_path(a));
    const int n = synth::write_random_lora(*model, a.str("-o"), o);
    std::fprintf(stderr, "glia synth-lora: %s: %d weights adapted, rank %d, alpha %g\n", a.str("-o").c_str(), n, o.rank,
                 static_cast<double>(o.alpha));
    return 0;
}

const Command reg{"synth-lora", "write a random LoRA adapter of a model's shapes (tests, benchmarks)", cmd_synth_lora};

}  // namespace
}  // namespace glia::cli
