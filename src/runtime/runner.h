// The Runner: one model running on its placement. It owns the placement's use of the
// process's backends (weights prepared on their devices), the sequence store (the host
// page table shared by all layers; each layer's K/V pages and recurrent state as tensors
// on the layer's device) and the dispatcher, and keeps one compiled graph per step shape
// so that a decode step rebuilds nothing. The single-sequence Session and the serving
// Engine both drive one.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "dispatch/dispatcher.h"
#include "model/lora.h"
#include "model/model.h"
#include "placement/placement.h"
#include "runtime/pages.h"

namespace glia {

class RankThreads;
class ThreadGroup;

inline constexpr int kKvBlockSize = 16;  // cells per KV page, for every runtime user

struct RunnerOptions {
    int n_ctx = 0;            // KV cells of all slots together (0: the model's training context, at least 512)
    int n_slots = 1;          // sequences held at once
    int block_size = kKvBlockSize;  // cells per KV page
    int n_threads = 0;        // CPU threads (0: every core)
    Placement placement;      // empty devices: everything on the CPU
    // Backends for placement.devices[1..] (devices[0] is the CPU). Owned by the caller
    // and living longer than the Runner (the process's backends, or a test's).
    std::vector<Backend*> devices;
    std::vector<Op> cpu_ops;  // forced to the CPU (in addition to $GLIA_CPU_OPS)
    bool verbose = false;     // describe each new plan (glia run -v)
    size_t max_plans = 64;    // compiled step shapes kept (least recently used dropped)
    // Tensor parallelism (model/shard.h): the model split by heads into `tp` ranks that
    // run at once on threads of this process, each on its own CPU backend with
    // n_threads / tp threads, summing their parts through a ThreadGroup. CPU placements
    // only: GPU ranks need the NCCL communicator on each GPU's stream (not run yet).
    int tp = 1;
    // One rank of a group whose other ranks run elsewhere (other processes): the model
    // given is this rank's shard (Model::shard) and `comm` its communicator.
    Communicator* comm = nullptr;
    // Set by a tensor-parallel Runner for its other ranks: the page table they share and
    // each rank's own CPU backend.
    PageTable* shared_pages = nullptr;
    Backend* cpu = nullptr;
    // LoRA adapters of this model (model/lora.h; owned by the caller, living longer than
    // the Runner). Every step's graph adds each of them, scaled per token (StepInputs).
    std::vector<const LoraAdapter*> lora;
};

// One step: tokens of one or more sequences (slots), in order within each sequence.
struct StepInputs {
    const int32_t* tokens = nullptr;
    const int32_t* pos = nullptr;    // position of each token in its sequence
    const int32_t* seq = nullptr;    // slot of each token (nullptr: slot 0)
    int n_tokens = 0;
    const int32_t* out_ids = nullptr;  // token indices whose logits are wanted
    int n_out = 0;                     // 0 with out_ids null: the last token only, or all (all_logits)
    bool all_logits = false;
    // The final hidden states (after the output norm, before the LM head: n_embd floats
    // per output row) instead of logits; for embeddings.
    bool hidden = false;
    // LoRA: each token's scale of each adapter, [n_tokens][n_adapters] (nullptr: every
    // token uses the adapters' own scales). A request's tokens carry its own scales, so
    // its rows do not depend on what else is in the step.
    const float* lora_scales = nullptr;
    // Testing: experts per layer, [n_used][n_tokens] ids (nullptr for layers without MoE).
    std::vector<const int32_t*> forced_experts;

    // A step of tokens (their positions and slots alike long) of which the rows out_ids
    // are wanted; the vectors outlive the step.
    static StepInputs of(const std::vector<int32_t>& tokens, const std::vector<int32_t>& pos,
                         const std::vector<int32_t>& seq, const std::vector<int32_t>& out_ids) {
        StepInputs in;
        in.tokens = tokens.data();
        in.pos = pos.data();
        in.seq = seq.data();
        in.n_tokens = static_cast<int>(tokens.size());
        in.out_ids = out_ids.data();
        in.n_out = static_cast<int>(out_ids.size());
        return in;
    }
};

class Runner {
public:
    Runner(const Model& model, RunnerOptions opt);
    ~Runner();
    Runner(const Runner&) = delete;
    Runner& operator=(const Runner&) = delete;

    const Model& model() const { return model_; }
    PageTable& pages() { return *pt_; }
    const PageTable& pages() const { return *pt_; }
    int n_ctx() const { return pt_->n_cells(); }
    int n_slots() const { return pt_->n_slots(); }
    // Tensor-parallel ranks run by this Runner (1: none).
    int tp() const { return 1 + static_cast<int>(peers_.size()); }
    // Frees a slot's pages and zeroes its recurrent state (a new sequence starts there).
    void reset_slot(int slot);

    // A slot's recurrent state (every layer's per-slot state rows, in layer order) as host
    // bytes, so the prefix cache can checkpoint it at page boundaries and restore it into
    // another slot. 0 bytes for models without recurrent layers.
    size_t slot_state_bytes() const;
    void save_slot_state(int slot, std::vector<uint8_t>& out);
    void load_slot_state(int slot, const std::vector<uint8_t>& in);

    // Checks the inputs (token ids, slots, positions inside the slot's reserved pages,
    // forced expert ids), runs one forward pass and returns the logits, n_vocab floats per
    // output row, in host memory valid until the next forward().
    const float* forward(const StepInputs& in);
    // The same pass, returning each output row's argmax (the first of equal largest logits,
    // as greedy sampling picks) computed where the logits are: only the ids come back.
    const int32_t* forward_ids(const StepInputs& in);
    int n_outputs() const { return last_n_out_; }
    int n_embd() const;  // floats per row of a `hidden` step

    Dispatcher& dispatcher() { return *dispatcher_; }
    const Placement& placement() const { return opt_.placement; }
    // The device index (into the placement) of a layer's state; -1: the layer has none.
    int state_device(int il) const { return state_dev_[il]; }
    size_t state_bytes() const;  // every rank's
    // Debug dumps of every node to `out` (before the first forward).
    void set_debug(FILE* out) { dispatcher_->set_debug(out); }

private:
    struct StepGraph;
    // tokens, outputs, all_logits, forced, hidden, ids
    using ShapeKey = std::tuple<int, int, bool, bool, bool, bool>;
    StepGraph& graph_for(const StepInputs& in, int n_out, bool ids);
    void build(StepGraph& sg, int n_tokens, int n_out, bool all_logits, bool forced, bool hidden, bool ids);
    void add_lora(StepGraph& sg, int n_tokens, int n_out_rows);
    void fill_lora(StepGraph& sg, const StepInputs& in, int n_out);
    void prepare_lora();
    const Tensor& run(const StepInputs& in, bool ids);
    void validate(const StepInputs& in) const;
    const Tensor& run_step(const StepInputs& in, bool ids);  // one rank's forward, inputs checked
    void start_ranks();
    void place_state();
    int tensor_device(const Tensor& t, const Node& n) const;

    const Model& model_;
    RunnerOptions opt_;
    // Tensor parallelism: the model this rank's graphs are built from (model_ itself, or
    // rank 0's shard), the other ranks' shards, CPU backends and Runners.
    const Model* exec_ = nullptr;
    std::vector<std::unique_ptr<Model>> shards_;               // [r]: rank r's (tp > 1)
    std::vector<std::unique_ptr<Backend>> rank_cpus_;          // [r]: rank r's CPU backend
    std::unique_ptr<ThreadGroup> group_;
    Communicator* comm_ = nullptr;
    std::vector<Backend*> backends_;  // [0] CPU, then opt_.devices
    std::unique_ptr<PageTable> pages_;
    PageTable* pt_ = nullptr;         // pages_, or the group's shared table
    std::deque<Tensor> state_tensors_;
    std::vector<LayerState> state_;
    std::vector<int> state_dev_;
    std::vector<std::pair<int, void*>> state_mem_;  // (device, memory) to free
    size_t state_bytes_ = 0;
    std::map<const Tensor*, int> weight_dev_;
    std::vector<std::pair<int, const Tensor*>> prepared_;  // (device, weight) to release
    const Tensor* output_weight_ = nullptr;  // the LM head's matrix (the embeddings when tied)
    std::unique_ptr<Dispatcher> dispatcher_;
    std::map<ShapeKey, std::unique_ptr<StepGraph>> plans_;
    uint64_t use_clock_ = 0;
    int last_n_out_ = 0;
    std::vector<std::unique_ptr<Runner>> peers_;  // ranks 1.. (tp > 1)
    std::unique_ptr<RankThreads> rank_threads_;
};

}  // namespace glia
