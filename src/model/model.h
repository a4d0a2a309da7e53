// A loaded model: the mapped file, its derived profile, its weights bound by the
// family's graph builder, and its vocabulary.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "model/profile.h"
#include "model/weights.h"

namespace glia::gguf { class File; }
namespace glia::tok { class Vocab; }

namespace glia {

struct ForwardInputs {
    Tensor* tokens = nullptr;  // I32 [n_tokens]
    Tensor* pos = nullptr;     // I32 [n_tokens]
    Tensor* seq = nullptr;     // I32 [n_tokens] sequence ids (nullptr: all sequence 0)
    Tensor* out_ids = nullptr; // I32 token indices whose logits are wanted (nullptr: see all_logits)
    KVCache* cache = nullptr;
    bool all_logits = false;   // without out_ids: logits for every token, else only the last
    RecurrentState* state = nullptr;  // recurrent layers' per-sequence state
    // Testing: experts to use in MoE block il ([n_tokens][n_used] ids), or nullptr.
    std::function<const int32_t*(int il)> forced_experts;
};

// One family's forward pass. Implementations live in src/model/<family>.cpp.
class Architecture {
public:
    virtual ~Architecture() = default;
    // Appends the forward pass to g; returns the logits [n_vocab, n_out].
    virtual Tensor* forward(Graph& g, const ForwardInputs& in) const = 0;
};

using ArchFactory = std::unique_ptr<Architecture> (*)(WeightSet& w, const ModelProfile& p);
struct ArchEntry { const char* name; ArchFactory make; };
// The supported architectures (general.architecture values).
const std::vector<ArchEntry>& architectures();
std::string supported_architectures();  // "llama, ..." for messages

class Model {
public:
    // Maps the file, derives the profile, binds weights and loads the vocabulary.
    // Throws glia::Error (unsupported architecture, missing tensors ...).
    static std::unique_ptr<Model> load(const std::string& path);
    ~Model();

    const gguf::File& file() const { return *file_; }
    const ModelProfile& profile() const { return profile_; }
    const tok::Vocab& vocab() const { return *vocab_; }
    Tensor* forward(Graph& g, const ForwardInputs& in) const { return arch_->forward(g, in); }
    size_t weight_bytes() const { return weights_->total_bytes(); }

private:
    Model() = default;
    std::unique_ptr<gguf::File> file_;
    ModelProfile profile_;
    std::unique_ptr<WeightSet> weights_;
    std::unique_ptr<Architecture> arch_;
    std::unique_ptr<tok::Vocab> vocab_;
};

}  // namespace glia
