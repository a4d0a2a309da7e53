// The backend interface: one backend per device for the whole process. A backend knows
// ops, never architectures. The dispatcher (src/dispatch/) decides which backend runs
// each node, inserts copies between devices and cuts the node list into segments; a
// backend compiles each of its segments once per step shape and runs it every step.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace glia {

// Per-node timing hook (GLIA_PROFILE): a segment that runs node by node reports each.
struct NodeTimer {
    virtual ~NodeTimer() = default;
    virtual void record(const Node& n, double seconds) = 0;
};

// A run of consecutive nodes compiled by one backend. The CPU runs them in order, fusing
// inside the segment; a GPU backend may capture them as one graph. A segment reads and
// writes the memory its nodes' tensors point to when it was compiled (the dispatcher
// recompiles when that changes).
class Segment {
public:
    virtual ~Segment() = default;
    virtual void run(NodeTimer* timer) = 0;
};

enum class MemoryKind : uint8_t { ACTIVATIONS, STATE, WEIGHTS, STAGING };
const char* memory_kind_name(MemoryKind k);

class Backend {
public:
    virtual ~Backend() = default;
    virtual const char* name() const = 0;   // "cpu", "cuda:0", ...
    virtual Device device() const = 0;

    // True when this backend can run the node with these operand types and shapes.
    virtual bool supports(const Node& node) const = 0;

    // Device memory (64-byte aligned at least; not zero-filled). `purpose` names it in
    // errors and allocation traces.
    virtual void* alloc(size_t bytes, MemoryKind kind, const std::string& purpose) = 0;
    virtual void free(void* p) = 0;
    // Zeroes `bytes` at `p` (device memory of this backend).
    virtual void zero(void* p, size_t bytes) = 0;

    // Load time: makes weight `w` (host memory, the mapped file) usable by this backend's
    // kernels. What it makes (a device copy, a repacked layout) stays private to the
    // backend; `w` itself is not changed. Counted: release_weight undoes one prepare.
    virtual void prepare_weight(const Tensor& w) = 0;
    virtual void release_weight(const Tensor& w) = 0;

    // Copies src's bytes into dst (same shape and type; either may be a view). One side
    // is this backend's memory, the other host memory. May be asynchronous: the data is
    // there after synchronize() or for later work of this backend.
    virtual void copy(const Tensor& src, Tensor& dst) = 0;

    // Whether nodes a and b (b right after a in the run order, both here) would run as one
    // launch if their memory allowed it (neither writing where the other reads). The memory
    // plan then keeps what a reads and writes alive until b is done, so that it does.
    virtual bool launches_with_next(const Node& a, const Node& b) const {
        (void)a;
        (void)b;
        return false;
    }

    // Compiles nodes (all supported by this backend, their tensors' memory assigned).
    virtual std::unique_ptr<Segment> compile(const std::vector<const Node*>& nodes) = 0;

    // Waits until all work issued to this backend is done.
    virtual void synchronize() {}

    // Load is over (weights prepared, state allocated): the backend may finish its uploads,
    // drop buffers it needed only for them, and report (GLIA_TRACE_ALLOC=1: a summary).
    virtual void load_done() {}
};

// Host memory views of device tensors are not assumed: debug dumps and results read a
// device tensor through Backend::copy into host memory.

}  // namespace glia
