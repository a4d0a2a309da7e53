// A loaded model: the mapped file, its derived profile, its weights bound by the
// family's graph builder, and its vocabulary.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "model/profile.h"
#include "model/weights.h"

namespace glia::gguf { class File; }
namespace glia::tok { class Vocab; }

namespace glia {

class Communicator;

// A layer's state: K/V pages of an attention layer, the carried inputs of a recurrent one.
// Tensors allocated by the backend of the device the layer runs on (runtime/runner.h).
struct LayerState {
    Tensor* k = nullptr;     // F16 [n_kv_head * head_dim_k, n_cells]
    Tensor* v = nullptr;     // F16 [n_kv_head * head_dim_v, n_cells]
    // Recurrent state, F32 [ModelProfile::recurrent_state_floats, n_slots]: conv taps and
    // state matrices of each sequence (the family's graph takes views of its parts).
    Tensor* conv = nullptr;
};

// A step's inputs: host I32 tensors filled by the runtime (checked there: token ids,
// positions, slots and cells are valid when the graph runs) and the layers' state.
struct ForwardInputs {
    Tensor* tokens = nullptr;  // [n_tokens]
    Tensor* pos = nullptr;     // [n_tokens]
    Tensor* seq = nullptr;     // [n_tokens] sequence slot
    Tensor* cells = nullptr;   // [n_tokens] KV cell each token's K/V goes to
    Tensor* pages = nullptr;   // [max_pages, n_slots] page table
    Tensor* out_ids = nullptr; // token indices whose logits are wanted (nullptr: see all_logits)
    bool all_logits = false;   // without out_ids: logits for every token, else only the last
    int block_size = 16;       // cells per page
    const std::vector<LayerState>* state = nullptr;  // per layer
    // Tensor parallelism: this rank's communicator (required when the profile's tp.world
    // is above 1: the blocks sum their partial outputs through it).
    Communicator* comm = nullptr;
    // Testing: per layer, I32 [n_used, n_tokens] experts to use instead of the router's
    // choice (empty, or nullptr entries: the router decides).
    std::vector<Tensor*> forced_experts;
};

// One family's forward pass. Implementations live in src/model/<family>.cpp.
class Architecture {
public:
    virtual ~Architecture() = default;
    // Appends the forward pass to g; returns the logits [n_vocab, n_out].
    virtual Tensor* forward(Graph& g, const ForwardInputs& in) const = 0;
};

using ArchFactory = std::unique_ptr<Architecture> (*)(WeightSet& w, const ModelProfile& p);
// tensor_parallel: the family's graph is built from the shared blocks (blocks.h), which
// split by heads and sum the ranks' parts; other families are refused -tp above 1.
struct ArchEntry { const char* name; ArchFactory make; bool tensor_parallel = false; };
// The supported architectures (general.architecture values).
const std::vector<ArchEntry>& architectures();
std::string supported_architectures();  // "llama, ..." for messages

class Model {
public:
    // Maps the file, derives the profile, binds weights and loads the vocabulary.
    // Throws glia::Error (unsupported architecture, missing tensors ...).
    static std::unique_ptr<Model> load(const std::string& path);
    ~Model();

    // Rank `rank` of `world` of this model for tensor parallelism (model/shard.h): the
    // same file and vocabulary, the rank's profile, views of its share of the weights.
    // Throws Error naming the family or the tensor that cannot be split, and the remedy.
    std::unique_ptr<Model> shard(int rank, int world) const;

    const gguf::File& file() const { return *file_; }
    const ModelProfile& profile() const { return profile_; }
    const tok::Vocab& vocab() const { return *vocab_; }
    Tensor* forward(Graph& g, const ForwardInputs& in) const { return arch_->forward(g, in); }
    size_t weight_bytes() const { return weights_->total_bytes(); }
    const WeightSet& weights() const { return *weights_; }

private:
    Model() = default;
    std::shared_ptr<gguf::File> file_;
    ModelProfile profile_;
    std::unique_ptr<WeightSet> weights_;
    std::unique_ptr<Architecture> arch_;
    std::shared_ptr<tok::Vocab> vocab_;
};

}  // namespace glia
