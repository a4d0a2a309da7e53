// Random LoRA adapters of a model's real shapes (`glia synth-lora`), for tests and
// benchmarks: for each chosen weight W [in, out] of the model, A [in, r] and B [r, out]
// drawn so that the added matrix (alpha / r) B A has an RMS of about `strength` times W's
// (W read as F32 for that). Written in the reference's adapter format (model/lora.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace glia {
class Model;
}

namespace glia::synth {

struct LoraOptions {
    int rank = 8;
    float alpha = 16.0f;
    // Which weights: names containing any of these (e.g. "attn_q", "ffn_down"); empty:
    // every 2-D weight of the blocks and the LM head ("output.weight").
    std::vector<std::string> targets;
    float strength = 0.2f;
    DType type = DType::F32;  // F32 or F16
    uint64_t seed = 42;
    std::string arch;         // general.architecture written ("" : the model's; tests write others)
};

// Writes the adapter to `path`; returns the number of adapted weights. Errors name what
// was wrong (no weight matched, a bad rank or type).
int write_random_lora(const Model& model, const std::string& path, const LoraOptions& opt);

}  // namespace glia::synth
