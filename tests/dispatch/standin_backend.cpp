#include "standin_backend.h"

#include <cstring>
#include <deque>

#include "core/error.h"

namespace glia::test {

StandinBackend::StandinBackend(std::set<Op> ops) : ops_(std::move(ops)), cpu_(2) {}

StandinBackend::~StandinBackend() = default;

bool StandinBackend::supports(const Node& n) const {
    if (n.op == Op::COPY) return true;
    if (!ops_.empty() && !ops_.count(n.op)) return false;
    if (filter_ && !filter_(n)) return false;
    return cpu_.supports(n);
}

void* StandinBackend::alloc(size_t bytes, MemoryKind, const std::string&) {
    std::unique_ptr<uint8_t[]> buf(new uint8_t[bytes + 64]);
    auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.get()) + 63) & ~uintptr_t(63));
    std::memset(p, 0xFF, bytes);  // NaN in every float format
    std::lock_guard<std::mutex> lk(mu_);
    size_[p] = bytes;
    mem_[p] = std::move(buf);
    return p;
}

void StandinBackend::free(void* p) {
    std::lock_guard<std::mutex> lk(mu_);
    size_.erase(static_cast<uint8_t*>(p));
    mem_.erase(static_cast<uint8_t*>(p));
}

void StandinBackend::zero(void* p, size_t bytes) {
    if (!owns(p, bytes)) fail("standin: zero() outside its memory");
    std::memset(p, 0, bytes);
}

bool StandinBackend::owns(const void* p, size_t bytes) const {
    std::lock_guard<std::mutex> lk(mu_);
    const auto* q = static_cast<const uint8_t*>(p);
    auto it = size_.upper_bound(q);
    if (it == size_.begin()) return false;
    --it;
    return q >= it->first && q + bytes <= it->first + it->second;
}

size_t StandinBackend::bytes_allocated() const {
    std::lock_guard<std::mutex> lk(mu_);
    size_t n = 0;
    for (const auto& [p, s] : size_) n += s;
    return n;
}

void StandinBackend::prepare_weight(const Tensor& w) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (auto it = weights_.find(w.data); it != weights_.end()) {
            ++it->second.refs;
            return;
        }
    }
    void* mem = alloc(w.nbytes(), MemoryKind::WEIGHTS, w.name);
    std::memcpy(mem, w.data, w.nbytes());
    Tensor c = w;
    c.data = mem;
    cpu_.prepare_weight(c);  // its kernels may derive data (packed panels) from the copy
    std::lock_guard<std::mutex> lk(mu_);
    weights_[w.data] = {mem, 1};
}

void StandinBackend::release_weight(const Tensor& w) {
    void* mem = nullptr;
    {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = weights_.find(w.data);
        if (it == weights_.end()) fail("standin: release of weight '", w.name, "' never prepared");
        if (--it->second.refs > 0) return;
        mem = it->second.mem;
        weights_.erase(it);
    }
    Tensor c = w;
    c.data = mem;
    cpu_.release_weight(c);  // drop packed panels of the copy before its memory goes
    free(mem);
}

const void* StandinBackend::weight_copy(const Tensor& w) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = weights_.find(w.data);
    return it == weights_.end() ? nullptr : it->second.mem;
}

void StandinBackend::copy(const Tensor& src, Tensor& dst) {
    const bool in = owns(dst.data, dst.nbytes()), out = owns(src.data, src.nbytes());
    if (!in && !out) fail("standin: copy of '", src.name, "' touches none of its memory");
    cpu::copy_strided(src, dst);
    in ? ++copies_in : ++copies_out;
}

// Runs the CPU kernels on private memory: weights redirected to their copies, every other
// operand and the output checked to be in the stand-in's memory.
class StandinSegment : public Segment {
public:
    StandinSegment(StandinBackend& b, const std::vector<const Node*>& nodes) : b_(b) {
        for (const Node* n : nodes) {
            Node m = *n;
            for (int i = 0; i < kMaxOperands; ++i) {
                const Tensor* s = n->src[i];
                if (!s || s->root()->role != TensorRole::WEIGHT) continue;
                const void* copy = b.weight_copy(*s->root());
                if (!copy) fail("standin: weight '", s->name, "' of ", op_name(n->op), " was not prepared here");
                Tensor w = *s;
                w.data = static_cast<uint8_t*>(const_cast<void*>(copy)) + s->root_offset();
                weights_.push_back(w);
                m.src[i] = &weights_.back();
            }
            nodes_.push_back(m);
            orig_.push_back(n);
        }
    }
    void run(NodeTimer* timer) override {
        for (size_t i = 0; i < nodes_.size(); ++i) {
            const Node& n = nodes_[i];
            if (n.op == Op::COPY) {
                b_.copy(*n.src[0], *n.out);
                continue;
            }
            for (int k = 0; k < kMaxOperands; ++k) {
                const Tensor* s = n.src[k];
                if (s && !b_.owns(s->data, s->nbytes()))
                    fail("standin: operand ", k, " ('", s->name, "') of ", op_name(n.op), " '", n.out->name,
                         "' is not in the stand-in's memory");
            }
            if (!b_.owns(n.out->data, n.out->nbytes()))
                fail("standin: the output of ", op_name(n.op), " '", n.out->name, "' is not in its memory");
            b_.cpu_.run(n);
            ++b_.ran[n.op];
            if (timer) timer->record(*orig_[i], 0.0);
        }
    }

private:
    StandinBackend& b_;
    std::deque<Tensor> weights_;
    std::vector<Node> nodes_;
    std::vector<const Node*> orig_;
};

std::unique_ptr<Segment> StandinBackend::compile(const std::vector<const Node*>& nodes) {
    if (observer_) observer_(nodes);
    return std::make_unique<StandinSegment>(*this, nodes);
}

}  // namespace glia::test
