// Helpers shared by the glia subcommands.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "graph/graph.h"
#include "runtime/sampler.h"

namespace glia { class Model; }

namespace glia::cli {

// Loads a model; errors say what was wrong and what to do.
std::unique_ptr<Model> load_model(const std::string& path);
// The model path: first positional or -m.
std::string model_path(const Args& a);
// Reads a whole file byte for byte (error naming the file).
std::string read_file(const std::string& path);
// Declares and reads the sampling options (--temp, --top-k ...).
void add_sampling_options(Args& a);
SamplerParams sampling_params(const Args& a);
// Declares -t/--threads, -c/--ctx-size and --cpu-ops.
void add_runtime_options(Args& a);
// The --cpu-ops list (error naming an unknown op).
std::vector<Op> cpu_ops_option(const Args& a);

}  // namespace glia::cli
