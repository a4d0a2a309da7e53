// The dispatcher: runs a graph on several backends. For each node it picks a backend
// (forced-to-CPU list; a stateful op where its state lives; an op with a weight where the
// weight lives; else where its first computed input was made; unsupported -> CPU),
// inserts one copy per tensor and device where an input lives elsewhere, cuts the node
// list into same-backend segments, plans each device's activations into that device's
// arena and compiles the segments. All of this happens once per graph (the runtime keeps
// one graph per step shape), so a decode step only fills inputs and runs segments.
#pragma once
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "graph/graph.h"

namespace glia {

struct DispatchOptions {
    // Ops always run on the CPU (GLIA_CPU_OPS / --cpu-ops); parse_cpu_ops reads the list.
    std::vector<Op> cpu_ops;
    bool verbose = false;  // describe each new plan on stderr (glia run -v)
    int default_device = 0;  // for nodes whose operands are all step inputs (the op harness: the device tested)
};

// "attention,rope" -> ops; throws glia::Error naming an unknown op and listing the names.
std::vector<Op> parse_cpu_ops(const std::string& list);
// $GLIA_CPU_OPS parsed (empty when unset).
std::vector<Op> cpu_ops_from_env();

// The device (index into the dispatcher's backends) holding a weight or state tensor as
// operand of a node; weights also always have their host copy (the mapped file).
using TensorDeviceFn = std::function<int(const Tensor& t, const Node& n)>;

// One graph, placed and compiled.
struct DispatchPlan {
    struct Exec {
        Node node;    // the graph's node with operands redirected to copies where needed
        int dev = 0;  // backend index
    };
    std::vector<Exec> exec;  // in run order, copies included
    struct Seg {
        int dev = 0;
        size_t first = 0, count = 0;  // exec range
        std::unique_ptr<Segment> compiled;
    };
    std::vector<Seg> segs;
    // Activation roots and their place: device, offset in that device's arena.
    struct Placed { Tensor* t; int dev; size_t offset; };
    std::vector<Placed> placed;
    std::vector<Tensor*> views;           // activation views, resolved from their roots
    std::vector<size_t> arena_need;       // bytes per device
    std::vector<uint64_t> arena_gen;      // arena generation the pointers were bound to
    Tensor* output = nullptr;             // host tensor holding the graph output after run()
    size_t n_copies = 0, copy_bytes = 0;  // per run
    std::vector<std::string> copy_lines;  // "tensor: cpu -> standin:0 (bytes)"
};

class Dispatcher {
public:
    // backends[0] must be the CPU backend.
    Dispatcher(std::vector<Backend*> backends, TensorDeviceFn tensor_device, DispatchOptions opt);
    ~Dispatcher();  // prints the per-op profile (GLIA_PROFILE=1) to stderr
    Dispatcher(const Dispatcher&) = delete;
    Dispatcher& operator=(const Dispatcher&) = delete;

    // Places and compiles g (which must outlive the plan: the plan's copies live in it).
    std::unique_ptr<DispatchPlan> compile(Graph& g);
    // Runs a plan; returns the host tensor with the graph output. `timer`, when given,
    // receives each node's time (as GLIA_PROFILE does).
    const Tensor& run(DispatchPlan& plan, NodeTimer* timer = nullptr);

    // Debug dumps of every node (GLIA_DEBUG_LAYERS=1 or set_debug): every node is then its
    // own segment and device outputs are read back through copies. Call before compile().
    void set_debug(FILE* out) { debug_ = out; }
    bool forced_cpu(Op op) const;
    const std::vector<Backend*>& backends() const { return backends_; }
    // Which ops ran where and every copy, for a plan (glia run -v).
    std::string describe(const DispatchPlan& plan) const;
    void print_profile(FILE* out) const;

private:
    int assign(const Node& n, const std::function<int(const Tensor*)>& location) const;
    void bind(DispatchPlan& plan);
    struct Arena { void* base = nullptr; size_t cap = 0; uint64_t gen = 0; };
    std::vector<Backend*> backends_;
    TensorDeviceFn tensor_device_;
    DispatchOptions opt_;
    std::vector<Arena> arenas_;
    FILE* debug_ = nullptr;
    bool profile_ = false;
    bool profile_weights_ = false;
    struct Stat { double seconds = 0; long calls = 0; };
    std::map<std::string, Stat> stats_;
    friend struct ProfileTimer;
};

}  // namespace glia
