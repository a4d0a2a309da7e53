// Helpers shared by the glia subcommands.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include <string_view>

#include "args.h"
#include "graph/graph.h"
#include "placement/placement.h"
#include "runtime/sampler.h"

namespace glia { class Model; class Backend; }

namespace glia::cli {

// Loads a model; errors say what was wrong and what to do. Warns (stderr) about NaN or
// infinite weights (sampled) and special-token ids outside the vocabulary.
std::unique_ptr<Model> load_model(const std::string& path);
// The model path: first positional or -m.
std::string model_path(const Args& a);
// Reads a whole file byte for byte (error naming the file; a directory is an error).
std::string read_file(const std::string& path);
// Writes to stdout and flushes; a failure (a full disk, a closed pipe) is an error, so
// that generation stops instead of going on unseen.
void write_out(std::string_view text);
// Declares and reads the sampling options (--temp, --top-k ...).
void add_sampling_options(Args& a);
SamplerParams sampling_params(const Args& a);
// Declares -t/--threads, -c/--ctx-size and --cpu-ops.
void add_runtime_options(Args& a);
// Declares -ngl/--gpu-layers, --cpu-moe, the several-device options (-tp N, --devices LIST,
// -sm layer|tensor, --rank/--world/--coordinator) and the KV cache types.
void add_device_options(Args& a);
// Declares --cache-type-k / --cache-type-v (add_device_options declares them too).
void add_cache_type_options(Args& a);
// Their values (error naming the flag for an unknown type).
CacheTypes cache_types_option(const Args& a);
// -ngl as given, else all layers when $GLIA_DEVICE is cuda, else 0.
long long gpu_layers_option(const Args& a);
// The placement those options ask for (the cache types included), planned against the free memory of the CUDA
// devices present (refusals name the remedy; the planner's notes go to stderr), and the
// backends of its devices beyond the CPU. Everything on the CPU when -ngl is 0.
struct DeviceChoice {
    Placement placement;            // empty devices: all on the CPU
    std::vector<Backend*> devices;  // for placement.devices[1..]
    int tp = 1;                     // tensor-parallel ranks (threads on the CPU)
};
DeviceChoice device_choice(const Args& a, const Model& m, int n_ctx, int n_seq = 1);
// The same, written into a SessionOptions or EngineOptions (placement, devices).
template <class Options>
void use_devices(const Args& a, const Model& m, int n_ctx, int n_seq, Options& o) {
    DeviceChoice dc = device_choice(a, m, n_ctx, n_seq);
    o.placement = std::move(dc.placement);
    o.devices = std::move(dc.devices);
    o.tp = dc.tp;
}
// The --cpu-ops list (error naming an unknown op).
std::vector<Op> cpu_ops_option(const Args& a);
// -t and -c, range-checked: threads 0..kMaxThreads, context lo..kMaxContext (0 = the model's).
constexpr long long kMaxThreads = 1024;
constexpr long long kMaxContext = 1 << 24;
int threads_option(const Args& a);
int context_option(const Args& a, int lo = 0);

}  // namespace glia::cli
