// LoRA adapters in GGUF, as the reference implementation writes them: general.type
// "adapter", general.architecture the base model's, adapter.type "lora",
// adapter.lora.alpha (F32; absent or 0: no alpha / rank factor), and for every adapted
// weight W [in, out] a pair of tensors named after it:
//   "<W>.lora_a" [in, r]   and   "<W>.lora_b" [r, out]       (ne order, r the rank)
// An adapter at scale s changes the product by W x -> W x + s * (alpha / r) * B (A x).
//
// The addition is built into the graph (Graph::set_low_rank) from ops every backend has
// (two small products, a per-row scale, an add), with each row's scale an input of the
// step: rows that do not use an adapter get scale 0 and keep their exact W x, so
// requests with different adapters share one batch (runtime/runner.h).
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace glia::gguf { class File; }

namespace glia {

class Model;

// One adapted weight.
struct LoraPair {
    const Tensor* base = nullptr;  // the model's weight W [in, out]
    Tensor* a = nullptr;           // [in, r]
    Tensor* b = nullptr;           // [r, out]
    float factor = 1.0f;           // alpha / r (1 when alpha is 0)
};

class LoraAdapter {
public:
    // Reads and checks `path` against `model`: the file is a LoRA adapter of the model's
    // architecture, every tensor is half of a lora_a / lora_b pair, each pair's weight
    // exists in the model, is a matrix glia multiplies by, and the shapes agree. Throws
    // glia::Error naming the file, the tensor and what was wrong.
    static std::unique_ptr<LoraAdapter> load(const std::string& path, const Model& model, float scale = 1.0f);
    ~LoraAdapter();

    const std::string& path() const { return path_; }
    float alpha() const { return alpha_; }
    // The scale used when a step gives none (glia run's --lora FILE:SCALE, the server's
    // global scale).
    float scale = 1.0f;
    const std::vector<LoraPair>& pairs() const { return pairs_; }
    // Tensors of the file left unused (the reference ignores "*_norm.weight" tensors of
    // an adapter too): names, for a warning.
    const std::vector<std::string>& ignored() const { return ignored_; }

private:
    LoraAdapter() = default;
    std::string path_;
    float alpha_ = 0.0f;
    std::shared_ptr<gguf::File> file_;
    std::deque<Tensor> tensors_;
    std::vector<LoraPair> pairs_;
    std::vector<std::string> ignored_;
};

// "FILE" or "FILE:SCALE" (the scale a finite number; a path's own colons are kept when
// what follows the last one is not a number). Error naming `what` (the flag) otherwise.
struct LoraSpec {
    std::string path;
    float scale = 1.0f;
};
LoraSpec parse_lora_spec(const std::string& s, const std::string& what);

}  // namespace glia
