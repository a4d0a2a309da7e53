// Runs a graph's nodes on the backends that support them (CPU for now), with optional
// per-node debug dumps (GLIA_DEBUG_LAYERS=1) and per-op timing (GLIA_PROFILE=1).
#pragma once
#include <cstdio>
#include <map>
#include <string>

#include "backend/backend.h"
#include "graph/graph.h"

namespace glia {

class Executor {
public:
    explicit Executor(Backend& cpu);
    ~Executor();  // prints the per-op profile (GLIA_PROFILE=1) to stderr
    // Places the graph's activations in this executor's arena, then runs every node.
    void run(Graph& g);
    // Where debug dumps go (stderr by default); enabled by GLIA_DEBUG_LAYERS or set_debug.
    void set_debug(FILE* out) { debug_ = out; }
    void print_profile(FILE* out) const;

private:
    Backend& cpu_;
    Arena arena_;
    FILE* debug_ = nullptr;
    bool profile_ = false;
    struct Stat { double seconds = 0; long calls = 0; };
    std::map<std::string, Stat> stats_;
};

// Writes a tensor summary comparable with the reference's eval-callback dumps:
// header line, first/last 3 values of each dimension, and the sum of all elements.
void dump_tensor(FILE* out, const Node& node);

}  // namespace glia
