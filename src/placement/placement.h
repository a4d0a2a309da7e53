// Placement: which device holds every weight, every layer's state and runs every layer.
// Made by the planner (planner.cpp) from the profile, the byte count of each tensor, the
// KV bytes per token, scratch estimates and each device's memory; consumed by the Runner
// (which backend allocates a layer's KV/recurrent state, where each weight is prepared)
// and by the dispatcher (a node with a weight runs where the weight lives).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "placement/cache_types.h"

namespace glia::gguf { class File; }

namespace glia {

struct ModelProfile;

// One device a plan may use. devices[0] of a plan is always the host CPU.
struct DeviceSpec {
    Device kind = Device::CPU;
    int ordinal = 0;             // index among devices of this kind
    std::string name;            // "cpu", "cuda:0", "standin:0" (tests)
    size_t memory_bytes = 0;     // memory the plan may use on it (0 on the CPU: unbounded)
};

// Bytes a plan puts on one device. `repacked`: copies of weights that the device's kernels
// derive and keep (on the CPU: the GEMM's packed panels and the decode layout).
struct DeviceUsage {
    size_t weights = 0, repacked = 0, kv = 0, state = 0, scratch = 0;
    size_t total() const { return weights + repacked + kv + state + scratch; }
};

// Bytes of host memory the CPU backend derives from one product matrix of `type` with K
// columns and N rows, `expert` for one expert of a stacked MoE tensor
// (cpu::weight_copy_bytes); the planner stays free of backends.
using HostCopyBytesFn = uint64_t (*)(DType type, int64_t K, int64_t N, bool expert);

struct Placement {
    std::vector<DeviceSpec> devices;  // [0] is the CPU
    std::vector<int> layer;           // device index (into devices) per layer
    int embeddings = 0;               // token embedding table
    int output = 0;                   // final norm and LM head
    bool experts_on_host = false;     // MoE expert tensors stay in host memory (--cpu-moe)
    int n_ctx = 0;                    // context the KV estimate was made for
    int n_seq = 1;                    // sequences (recurrent state slots)
    CacheTypes cache;                 // KV cell types (--cache-type-k/-v): the estimate's and the Runner's
    std::vector<DeviceUsage> usage;   // per device, parallel to devices
    // A tied LM head (no output.weight: it reads token_embd.weight) on another device than
    // the embeddings: devices[output] holds a copy of token_embd.weight (counted in usage).
    bool output_copies_embeddings = false;
    int n_ctx_asked = 0;              // the context asked for; n_ctx < n_ctx_asked: shrunk to fit
    int n_batch = 0;                  // tokens per step the scratch estimate was made for
    // What the planner decided on the user's behalf, one line each (context shrunk, layers
    // left on the CPU by the fit, -ngl ignored without an accelerator ...): never silent.
    std::vector<std::string> notes;

    // Everything on the CPU.
    static Placement all_cpu(int n_layer);
    // The device of a weight by its GGUF tensor name ("blk.3.attn_q.weight" -> layer[3];
    // "blk.N.ffn_*_exps.*" -> 0 when experts_on_host; "token_embd.weight" -> embeddings;
    // "output*" -> output).
    int device_of_tensor(const std::string& name) const;
    int n_gpu_layers() const;         // layers not on devices[0]
    bool ctx_shrunk() const { return n_ctx_asked > 0 && n_ctx < n_ctx_asked; }
};

// What a GGUF tensor is to the placement, by its name.
enum class SiteRole {
    EMBEDDINGS,  // token_embd.weight: a row lookup
    OUTPUT,      // final norm, LM head, and every other tensor outside the blocks
    LAYER,       // blk.N.*
    EXPERT,      // blk.N.ffn_{gate,up,down,gate_up}_exps.*: MoE expert tensors (--cpu-moe)
};
struct TensorSite {
    SiteRole role = SiteRole::OUTPUT;
    int layer = -1;  // LAYER, EXPERT: the block index
};
TensorSite tensor_site(const std::string& name);

// Parses a --gpu-mem list: sizes separated by commas, each a number with an optional
// binary unit (K, M, G, T, also written KiB, GB ...; none: bytes): "24G,24G", "1.5GiB".
// Throws Error naming the item that is wrong.
std::vector<size_t> parse_memory_list(const std::string& list);

// What the user asked for.
struct PlanRequest {
    int n_gpu_layers = -1;            // -1: fit as many as the memory allows
    bool cpu_moe = false;             // expert tensors in host memory
    std::vector<size_t> gpu_mem;      // memory per accelerator (bytes); empty: none
    std::string gpu_kind_name = "cuda";  // names devices "<kind>:<i>"
    Device gpu_kind = Device::CUDA;
    int n_ctx = 0;                    // 0: the model's training context
    int min_ctx = 0;                  // a fit may shrink the context down to this, never below (0: never shrink)
    int n_seq = 1;
    int n_batch = 512;                // tokens per step, for the scratch estimate
    CacheTypes cache;                 // KV cell types (refused when the model's heads do not fit them)
    HostCopyBytesFn host_copies = nullptr;  // counts the CPU's derived weight copies (nullptr: none)
};

// A placement that cannot work: what() says why and the remedy.
class PlanError : public Error {
public:
    using Error::Error;
};

// Plans (throws PlanError with the reason and the remedy when no legal plan exists,
// e.g. a partial -ngl on a model whose profile says uniform_offload_required).
Placement plan_placement(const ModelProfile& p, const gguf::File& f, const PlanRequest& req);

}  // namespace glia
