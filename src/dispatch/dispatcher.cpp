#include "dispatch/dispatcher.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "debug/dump.h"
#include "dispatch/memory_plan.h"

namespace glia {

std::vector<Op> parse_cpu_ops(const std::string& list) {
    std::vector<Op> ops;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) {
        item.erase(0, item.find_first_not_of(" \t"));
        item.erase(item.find_last_not_of(" \t") + 1);
        if (item.empty()) continue;
        for (char& c : item) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (item == "attn") item = "attention";
        Op op;
        if (!op_from_cli_name(item, op) || op == Op::COPY) {
            std::string names;
            for (size_t i = 1; i < static_cast<size_t>(Op::COPY); ++i)
                names += std::string(names.empty() ? "" : ", ") + op_cli_name(static_cast<Op>(i));
            fail("unknown op '", item, "' in the CPU op list (ops: ", names, ")");
        }
        ops.push_back(op);
    }
    return ops;
}

std::vector<Op> cpu_ops_from_env() {
    const char* e = std::getenv("GLIA_CPU_OPS");
    return e ? parse_cpu_ops(e) : std::vector<Op>{};
}

Dispatcher::Dispatcher(std::vector<Backend*> backends, TensorDeviceFn tensor_device, DispatchOptions opt)
    : backends_(std::move(backends)), tensor_device_(std::move(tensor_device)), opt_(std::move(opt)) {
    if (backends_.empty() || backends_[0]->device() != Device::CPU)
        fail("dispatcher: the first backend must be the CPU");
    arenas_.resize(backends_.size());
    if (const char* e = std::getenv("GLIA_DEBUG_LAYERS"); e && *e && *e != '0') debug_ = stderr;
    if (const char* e = std::getenv("GLIA_PROFILE"); e && *e && *e != '0') {
        profile_ = true;
        profile_weights_ = *e == '2';  // GLIA_PROFILE=2: an op's rows split by its weight's type and shape
    }
}

Dispatcher::~Dispatcher() {
    if (profile_ && !stats_.empty()) print_profile(stderr);
    for (size_t d = 0; d < arenas_.size(); ++d)
        if (arenas_[d].base) backends_[d]->free(arenas_[d].base);
}

bool Dispatcher::forced_cpu(Op op) const {
    return std::find(opt_.cpu_ops.begin(), opt_.cpu_ops.end(), op) != opt_.cpu_ops.end();
}

namespace {

bool is_weight(const Tensor* t) { return t->root()->role == TensorRole::WEIGHT; }
bool is_state(const Tensor* t) { return t->root()->role == TensorRole::STATE; }

}  // namespace

std::unique_ptr<DispatchPlan> Dispatcher::compile(Graph& g) {
    auto plan = std::make_unique<DispatchPlan>();
    std::unordered_map<const Tensor*, int> loc;  // activation / input root -> device holding it
    std::map<std::pair<const Tensor*, int>, Tensor*> copies;
    auto location = [&](const Tensor* root) {
        if (root->role == TensorRole::INPUT) return 0;
        auto it = loc.find(root);
        if (it == loc.end()) fail("dispatch: '", root->name, "' is read but no node computes it");
        return it->second;
    };
    // The copy of `root` on device d, made (once) right before the node now being placed.
    auto copy_of = [&](Tensor* root, int d) -> Tensor* {
        auto key = std::make_pair(static_cast<const Tensor*>(root), d);
        if (auto it = copies.find(key); it != copies.end()) return it->second;
        Tensor c = Tensor::make(root->type, root->ne[0], root->ne[1], root->ne[2], root->ne[3]);
        c.role = TensorRole::ACTIVATION;
        c.device = backends_[d]->device();
        c.name = root->name + "@" + backends_[d]->name();
        Tensor* ct = g.make_tensor(std::move(c));
        Node cn;
        cn.op = Op::COPY;
        cn.src[0] = root;
        cn.out = ct;
        const int from = location(root);
        const int runner = d != 0 ? d : from;
        plan->exec.push_back({cn, runner});
        loc[ct] = d;
        copies[key] = ct;
        ++plan->n_copies;
        plan->copy_bytes += root->nbytes();
        plan->copy_lines.push_back(root->name + ": " + backends_[from]->name() + " -> " + backends_[d]->name() + " (" +
                                   std::to_string(root->nbytes()) + " B)");
        return ct;
    };
    // The same view as `s` (same shape and strides) on the copy `c` of its root.
    auto view_on = [&](Tensor* s, Tensor* c) -> Tensor* {
        if (s->root() == s) return c;
        Tensor v = *s;
        v.view_src = c;
        v.view_offs = s->root_offset();
        v.device = c->device;
        v.data = nullptr;
        return g.make_tensor(std::move(v));
    };

    for (const Node& n : g.nodes()) {
        const int d = assign(n, location);
        DispatchPlan::Exec e{n, d};
        for (int i = 0; i < kMaxOperands; ++i) {
            Tensor* s = n.src[i];
            if (!s) continue;
            if (is_weight(s)) {
                if (d != 0 && tensor_device_(*s, n) != d)
                    fail("dispatch: ", op_name(n.op), " '", n.out->name, "' runs on ", backends_[d]->name(),
                         " but its weight '", s->name, "' is not there");
                continue;
            }
            if (is_state(s)) {
                const int sd = tensor_device_(*s, n);
                if (sd != d)
                    fail("dispatch: ", op_name(n.op), " '", n.out->name, "' runs on ", backends_[d]->name(),
                         " but its state '", s->name, "' lives on ", backends_[sd]->name());
                continue;
            }
            Tensor* root = const_cast<Tensor*>(s->root());
            if (location(root) != d) e.node.src[i] = view_on(s, copy_of(root, d));
        }
        loc[n.out] = d;
        n.out->device = backends_[d]->device();
        plan->exec.push_back(e);
    }
    // The output is read on the host.
    Tensor* out = g.output();
    if (!out) fail("dispatch: the graph has no output");
    Tensor* out_root = const_cast<Tensor*>(out->root());
    plan->output = location(out_root) == 0 ? out : view_on(out, copy_of(out_root, 0));

    // Memory: each device's activation roots in its arena, by lifetime over the run order.
    const int n_exec = static_cast<int>(plan->exec.size());
    std::unordered_map<const Tensor*, int> last;
    for (int j = 0; j < n_exec; ++j)
        for (const Tensor* s : plan->exec[j].node.src)
            if (s && s->root()->role == TensorRole::ACTIVATION) last[s->root()] = j;
    last[plan->output->root()] = n_exec;
    // Nodes a backend runs as one launch (each launching with the next): what any of them
    // reads and writes lives through the last, so that none writes where another reads.
    std::vector<const Tensor*> run;  // what the launch so far reads and writes
    for (int j = 0; j + 1 < n_exec; ++j) {
        const Node& a = plan->exec[j].node;
        const Node& b = plan->exec[j + 1].node;
        const auto la = loc.find(a.out), lb = loc.find(b.out);
        if (a.op == Op::COPY || b.op == Op::COPY || la == loc.end() || lb == loc.end() ||
            la->second != lb->second || !backends_[la->second]->launches_with_next(a, b)) {
            run.clear();
            continue;
        }
        for (const Tensor* s : a.src)
            if (s && s->root()->role == TensorRole::ACTIVATION) run.push_back(s->root());
        if (a.out->root()->role == TensorRole::ACTIVATION) run.push_back(a.out->root());
        for (const Tensor* t : run) {
            auto it = last.find(t);
            if (it == last.end()) last[t] = j + 1;
            else it->second = std::max(it->second, j + 1);
        }
    }
    plan->arena_need.assign(backends_.size(), 0);
    for (int d = 0; d < static_cast<int>(backends_.size()); ++d) {
        std::vector<Lifetime> lives;
        for (int j = 0; j < n_exec; ++j) {
            Tensor* o = plan->exec[j].node.out;
            if (loc.at(o) != d) continue;
            auto it = last.find(o);
            lives.push_back({o, (o->nbytes() + 63) & ~size_t(63), j, it == last.end() ? j : it->second});
        }
        std::vector<size_t> offsets;
        plan->arena_need[d] = plan_offsets(lives, offsets);
        for (size_t i = 0; i < lives.size(); ++i)
            plan->placed.push_back({const_cast<Tensor*>(lives[i].t), d, offsets[i]});
    }
    std::set<Tensor*> views;
    for (auto& e : plan->exec)
        for (Tensor* s : e.node.src)
            if (s && s->view_src && s->root()->role == TensorRole::ACTIVATION) views.insert(s);
    if (plan->output->view_src) views.insert(plan->output);
    plan->views.assign(views.begin(), views.end());
    // Views sorted so that a view's source view is resolved before it.
    std::sort(plan->views.begin(), plan->views.end(), [](const Tensor* a, const Tensor* b) {
        int da = 0, db = 0;
        for (const Tensor* t = a; t->view_src; t = t->view_src) ++da;
        for (const Tensor* t = b; t->view_src; t = t->view_src) ++db;
        return da < db;
    });

    // Segments: maximal runs of one backend (one node each when dumping).
    for (size_t j = 0; j < plan->exec.size(); ++j) {
        const int d = plan->exec[j].dev;
        if (!debug_ && !plan->segs.empty() && plan->segs.back().dev == d) {
            ++plan->segs.back().count;
        } else {
            DispatchPlan::Seg s;
            s.dev = d;
            s.first = j;
            s.count = 1;
            plan->segs.push_back(std::move(s));
        }
    }
    plan->arena_gen.assign(backends_.size(), ~uint64_t(0));
    bind(*plan);
    if (opt_.verbose) std::fprintf(stderr, "%s", describe(*plan).c_str());
    return plan;
}

int Dispatcher::assign(const Node& n, const std::function<int(const Tensor*)>& location) const {
    const int n_src = n.n_src();
    int d = -1;
    bool stateful = false;
    for (int i = 0; i < n_src && d < 0; ++i)
        if (n.writes_operand(i) && n.src[i]) {
            d = tensor_device_(*n.src[i], n);
            stateful = true;
        }
    if (forced_cpu(n.op)) {
        if (stateful && d != 0)
            fail("dispatch: ", op_name(n.op), " is forced to the CPU but the state of '", n.out->name, "' lives on ",
                 backends_[d]->name(), " (the runtime places state on the CPU for forced ops)");
        return 0;
    }
    for (int i = 0; i < n_src && d < 0; ++i)
        if (n.src[i] && is_weight(n.src[i])) d = tensor_device_(*n.src[i], n);
    // Else where the first computed input was made (inputs alone: the default, the CPU).
    for (int i = 0; i < n_src && d < 0; ++i)
        if (n.src[i] && n.src[i]->root()->role == TensorRole::ACTIVATION) d = location(n.src[i]->root());
    if (d < 0) d = opt_.default_device;
    if (d != 0 && !backends_[d]->supports(n)) {
        if (stateful)
            fail("dispatch: ", backends_[d]->name(), " holds the state of ", op_name(n.op), " '", n.out->name,
                 "' but cannot run it (the runtime places such state on the CPU)");
        d = 0;
    }
    return d;
}

void Dispatcher::bind(DispatchPlan& plan) {
    bool changed = false;
    for (size_t d = 0; d < backends_.size(); ++d) {
        Arena& a = arenas_[d];
        const size_t need = plan.arena_need[d];
        if (need > a.cap) {
            const size_t cap = std::max(need, a.cap + a.cap / 2);
            if (a.base) backends_[d]->free(a.base);
            a.base = nullptr;
            a.cap = 0;
            a.base = backends_[d]->alloc(cap, MemoryKind::ACTIVATIONS, "activation arena");
            a.cap = cap;
            ++a.gen;
        }
        if (plan.arena_gen[d] != a.gen) changed = true;
    }
    if (!changed) return;
    for (const auto& p : plan.placed) p.t->data = static_cast<uint8_t*>(arenas_[p.dev].base) + p.offset;
    for (Tensor* v : plan.views) v->data = static_cast<uint8_t*>(v->view_src->data) + v->view_offs;
    for (size_t d = 0; d < backends_.size(); ++d) plan.arena_gen[d] = arenas_[d].gen;
    for (auto& s : plan.segs) {
        std::vector<const Node*> nodes;
        for (size_t j = s.first; j < s.first + s.count; ++j) nodes.push_back(&plan.exec[j].node);
        s.compiled = backends_[s.dev]->compile(nodes);
    }
}

struct ProfileTimer : NodeTimer {
    Dispatcher& d;
    explicit ProfileTimer(Dispatcher& dd) : d(dd) {}
    void record(const Node& n, double seconds) override {
        std::string key = op_name(n.op);
        if (d.profile_weights_)
            for (int i = 0; i < n.n_src(); ++i)
                if (n.src[i] && is_weight(n.src[i])) {
                    const Tensor& w = *n.src[i];
                    key += " " + std::string(dtype_name(w.type)) + " " + std::to_string(w.ne[0]) + "x" +
                           std::to_string(w.ne[1]) + (w.ne[2] > 1 ? "x" + std::to_string(w.ne[2]) : "");
                    break;
                }
        auto& s = d.stats_[key];
        s.seconds += seconds;
        ++s.calls;
    }
};

const Tensor& Dispatcher::run(DispatchPlan& plan, NodeTimer* user_timer) {
    bind(plan);
    ProfileTimer timer(*this);
    NodeTimer* t = user_timer ? user_timer : (profile_ ? &timer : nullptr);
    std::vector<bool> pending(backends_.size(), false);
    auto sync_devices = [&] {
        for (size_t d = 1; d < backends_.size(); ++d)
            if (pending[d]) {
                backends_[d]->synchronize();
                pending[d] = false;
            }
    };
    for (auto& s : plan.segs) {
        if (s.dev == 0) sync_devices();
        s.compiled->run(t);
        if (s.dev != 0) pending[s.dev] = true;
        if (debug_) {
            const Node& n = plan.exec[s.first].node;
            if (n.op == Op::COPY) continue;
            if (s.dev == 0) {
                dump_tensor(debug_, n);
            } else {
                // Read the device output back into host memory for the dump.
                std::vector<uint8_t> host(n.out->nbytes() + 64);
                Tensor h = *n.out;
                h.view_src = nullptr;
                h.data = host.data();
                backends_[s.dev]->copy(*n.out, h);
                backends_[s.dev]->synchronize();
                Node hn = n;
                hn.out = &h;
                dump_tensor(debug_, hn);
            }
        }
    }
    sync_devices();
    return *plan.output;
}

std::string Dispatcher::describe(const DispatchPlan& plan) const {
    std::ostringstream os;
    std::vector<std::map<std::string, int>> per_dev(backends_.size());
    size_t n_nodes = 0;
    for (const auto& e : plan.exec) {
        if (e.node.op == Op::COPY) continue;
        ++n_nodes;
        ++per_dev[e.dev][op_name(e.node.op)];
    }
    os << "dispatch: " << n_nodes << " nodes, " << plan.n_copies << " copies (" << plan.copy_bytes
       << " B per step), " << plan.segs.size() << " segments\n";
    for (size_t d = 0; d < backends_.size(); ++d) {
        if (per_dev[d].empty()) continue;
        os << "  " << backends_[d]->name() << ":";
        for (const auto& [op, c] : per_dev[d]) os << " " << op << " x" << c;
        os << "\n";
    }
    for (const auto& l : plan.copy_lines) os << "  copy " << l << "\n";
    return os.str();
}

void Dispatcher::print_profile(FILE* out) const {
    double total = 0;
    for (const auto& [k, s] : stats_) total += s.seconds;
    const int w = profile_weights_ ? 36 : 12;
    std::fprintf(out, "%-*s %8s %10s %6s\n", w, "op", "calls", "ms", "%");
    for (const auto& [k, s] : stats_)
        std::fprintf(out, "%-*s %8ld %10.2f %6.1f\n", w, k.c_str(), s.calls, s.seconds * 1e3,
                     total > 0 ? 100 * s.seconds / total : 0.0);
}

}  // namespace glia
