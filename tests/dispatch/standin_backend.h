// A second device for the tests: its own memory (separate allocations, poisoned with NaN
// bytes when made, so reading anything the dispatcher forgot to copy shows up), private
// copies of the weights it is given, and a configurable subset of ops. It computes with
// the CPU kernels on its own memory and refuses to run a node whose operands are not in
// that memory, so a missing copy is an error, not a silent host read.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <functional>
#include <set>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"

namespace glia::test {

class StandinBackend : public Backend {
public:
    // ops: the ops it supports (empty: every op the CPU supports).
    explicit StandinBackend(std::set<Op> ops = {});
    ~StandinBackend() override;
    const char* name() const override { return "standin:0"; }
    Device device() const override { return Device::STANDIN; }
    bool supports(const Node& n) const override;
    void* alloc(size_t bytes, MemoryKind kind, const std::string& purpose) override;
    void free(void* p) override;
    void zero(void* p, size_t bytes) override;
    void prepare_weight(const Tensor& w) override;
    void release_weight(const Tensor& w) override;
    void copy(const Tensor& src, Tensor& dst) override;
    std::unique_ptr<Segment> compile(const std::vector<const Node*>& nodes) override;

    void set_ops(std::set<Op> ops) { ops_ = std::move(ops); }
    // A further condition on the nodes it takes (e.g. another backend's supports()).
    void set_filter(std::function<bool(const Node&)> f) { filter_ = std::move(f); }
    // What launches_with_next() answers (default: false).
    void set_pairing(std::function<bool(const Node&, const Node&)> f) { pairing_ = std::move(f); }
    bool launches_with_next(const Node& a, const Node& b) const override { return pairing_ && pairing_(a, b); }
    // Sees each segment's nodes, in order, as compile() gets them.
    void set_observer(std::function<void(const std::vector<const Node*>&)> f) { observer_ = std::move(f); }
    // True when [p, p + bytes) lies in one of its allocations.
    bool owns(const void* p, size_t bytes) const;
    // The private copy of a weight (nullptr: not prepared here).
    const void* weight_copy(const Tensor& w) const;
    std::map<Op, long> ran;       // nodes run, per op
    long copies_in = 0, copies_out = 0;
    size_t bytes_allocated() const;
    size_t weights_held() const { return weights_.size(); }

private:
    friend class StandinSegment;
    std::set<Op> ops_;
    std::function<bool(const Node&)> filter_;
    std::function<void(const std::vector<const Node*>&)> observer_;
    std::function<bool(const Node&, const Node&)> pairing_;
    cpu::CpuBackend cpu_;
    mutable std::mutex mu_;
    std::map<const uint8_t*, std::unique_ptr<uint8_t[]>> mem_;  // aligned start -> owner
    std::map<const uint8_t*, size_t> size_;
    struct Copy { void* mem; int refs; };
    std::map<const void*, Copy> weights_;  // host weight data -> private copy
};

}  // namespace glia::test
