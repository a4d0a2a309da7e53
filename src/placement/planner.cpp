// The placement planner: which device runs each layer and holds each weight and state.
//
// The split follows the reference engine's convention, which users know from -ngl: the
// last n layers go to the accelerators (the first layers stay on the CPU, next to the
// embeddings, which are a row lookup and never leave host memory), the output head goes
// to the accelerator only when every layer does, and several accelerators share the
// offloaded layers in proportion to their memory (contiguous ranges, in device order).
//
// Without -ngl the plan fits: as many layers as the memory takes, from the last layer
// down. A context that does not fit is shrunk, but only when the user set a floor
// (--min-ctx) and never below it, and the plan says so in its notes. A model whose
// profile says uniform_offload_required (layers with recurrent state) is never split by
// layers between the CPU and an accelerator; the request is refused before anything is
// loaded, naming the shapes that are legal.
#include <algorithm>

#include "gguf/gguf.h"
#include "model/profile.h"
#include "placement/estimates.h"
#include "placement/placement.h"
#include "placement/report.h"

namespace glia {
namespace {

constexpr int kDefaultCtx = 4096;  // a model that does not state its training context
constexpr int kCtxStep = 256;      // a shrunk context is a multiple of this (when above it)

struct Planner {
    const ModelProfile& p;
    const ModelBytes mb;
    const PlanRequest& req;
    std::vector<DeviceSpec> devices;
    int n_ctx_asked = 0;

    Planner(const ModelProfile& prof, const gguf::File& f, const PlanRequest& r, int n_ctx)
        : p(prof), mb(measure_model(prof, f, r.cache, r.host_copies)), req(r), n_ctx_asked(n_ctx) {
        devices.push_back(DeviceSpec{Device::CPU, 0, "cpu", 0});
        for (size_t i = 0; i < req.gpu_mem.size(); ++i)
            devices.push_back(DeviceSpec{req.gpu_kind, int(i), cat(req.gpu_kind_name, ":", i), req.gpu_mem[i]});
    }

    int n_layer() const { return p.n_layer; }
    bool has_gpu() const { return devices.size() > 1; }

    // Device per layer with the last ngl layers on the GPUs, split in proportion to their
    // memory.
    std::vector<int> split(int ngl) const {
        std::vector<int> layer(n_layer(), 0);
        if (ngl <= 0 || !has_gpu()) return layer;
        double total = 0;
        for (size_t g = 1; g < devices.size(); ++g) total += double(devices[g].memory_bytes);
        std::vector<int> bound;  // gpu-layer index at which device g+1 ends
        double cum = 0;
        for (size_t g = 1; g < devices.size(); ++g) {
            cum += double(devices[g].memory_bytes);
            bound.push_back(g + 1 == devices.size() ? ngl : int(double(ngl) * cum / total + 0.5));
        }
        const int start = n_layer() - ngl;
        for (int j = 0; j < ngl; ++j) {
            size_t g = 0;
            while (g + 1 < bound.size() && j >= bound[g]) ++g;
            layer[start + j] = int(g) + 1;
        }
        return layer;
    }

    Placement build(int ngl, int n_ctx, bool cpu_moe) const {
        Placement pl;
        pl.devices = devices;
        pl.layer = split(ngl);
        pl.n_ctx = n_ctx;
        pl.n_ctx_asked = n_ctx_asked;
        pl.n_seq = req.n_seq;
        pl.n_batch = req.n_batch;
        pl.cache = req.cache;
        pl.experts_on_host = cpu_moe && mb.has_experts();
        pl.embeddings = 0;
        const bool all_gpu = n_layer() > 0 && pl.n_gpu_layers() == n_layer();
        pl.output = all_gpu ? pl.layer.back() : 0;
        pl.output_copies_embeddings = mb.tied_output && pl.output != pl.embeddings;

        std::vector<DeviceUsage>& u = pl.usage;
        u.assign(devices.size(), DeviceUsage{});
        std::vector<bool> runs(devices.size(), false);
        u[pl.embeddings].weights += mb.embeddings;
        u[pl.output].weights += mb.output + (pl.output_copies_embeddings ? mb.embeddings : 0);
        if (pl.output == 0) u[0].repacked += mb.output_repacked + mb.embeddings_repacked;
        for (int il = 0; il < n_layer(); ++il) {
            const int d = pl.layer[il];
            runs[d] = true;
            u[d].weights += mb.layer_weights[il];
            if (d == 0) u[0].repacked += mb.layer_repacked[il];
            u[pl.experts_on_host ? 0 : d].weights += mb.layer_experts[il];
            if (pl.experts_on_host || d == 0) u[0].repacked += mb.layer_experts_repacked[il];
            u[d].kv += mb.kv_per_token[il] * uint64_t(n_ctx);
            u[d].state += mb.state_per_seq[il] * uint64_t(req.n_seq);
        }
        const uint64_t tokens = uint64_t(req.n_batch);
        for (size_t d = 0; d < devices.size(); ++d)
            if (runs[d]) u[d].scratch += mb.layer_act_per_token * tokens;
        if (pl.experts_on_host && !runs[0]) u[0].scratch += mb.expert_act_per_token * tokens;
        u[pl.embeddings].scratch += mb.embd_per_token * tokens;
        u[pl.output].scratch += mb.embd_per_token * tokens + mb.logits_per_row * uint64_t(req.n_seq);
        return pl;
    }

    // The first accelerator whose usage passes its memory (0: none).
    static int overflow(const Placement& pl) {
        for (size_t d = 1; d < pl.devices.size(); ++d)
            if (pl.usage[d].total() > pl.devices[d].memory_bytes) return int(d);
        return 0;
    }
    bool fits(int ngl, int n_ctx, bool cpu_moe) const { return overflow(build(ngl, n_ctx, cpu_moe)) == 0; }

    // The largest context in [lo, hi] that fits (0: none); rounded down to a multiple of
    // kCtxStep when that stays within the range.
    int largest_ctx(int ngl, bool cpu_moe, int lo, int hi) const {
        if (lo > hi || !fits(ngl, lo, cpu_moe)) return 0;
        const int floor = lo;
        while (lo < hi) {
            const int mid = lo + (hi - lo + 1) / 2;
            if (fits(ngl, mid, cpu_moe)) lo = mid;
            else hi = mid - 1;
        }
        const int rounded = lo / kCtxStep * kCtxStep;
        return rounded >= floor && rounded > 0 ? rounded : lo;
    }

    std::string recurrent_layers() const {
        std::string s;
        int n = 0;
        for (int il = 0; il < n_layer(); ++il)
            if (p.layer_kind[il] == LayerKind::RECURRENT) {
                if (n < 8) s += cat(n ? ", " : "", il);
                ++n;
            }
        if (n > 8) s += cat(" ... (", n, " in all)");
        return n ? (n == 1 ? "recurrent layer " : "recurrent layers ") + s : "layers with recurrent state";
    }

    std::string legal_shapes() const {
        std::string s = cat("legal are all layers on the GPU (-ngl ", n_layer(), " or more");
        if (mb.has_experts()) s += "; experts may stay in host memory with --cpu-moe";
        return s + "), all on the CPU (-ngl 0), or serving the model across machines";
    }

    [[noreturn]] void refuse_split(int ngl) const {
        throw PlanError(cat("-ngl ", ngl, " would split the model's ", n_layer(), " layers between the CPU and a GPU, "
                            "but its profile requires uniform offload (the file declares ", recurrent_layers(),
                            "): ", legal_shapes()));
    }

    // "-ngl 32 needs 9.1 GiB on cuda:0 (weights 7.9, KV 1.0, scratch 0.2) but --gpu-mem
    // gives 8.0 GiB" (what: "-ngl 32 needs"): the first accelerator the plan overflows.
    std::string shortfall(const Placement& pl, const std::string& what) const {
        const int d = overflow(pl);
        return cat(what, " ", format_bytes(pl.usage[d].total()), " on ", devices[d].name, " ",
                   format_parts(pl.usage[d]), " but --gpu-mem gives ", format_bytes(devices[d].memory_bytes));
    }

    // What would make (ngl, n_ctx, cpu_moe) fit, each checked.
    std::string remedies(int ngl, int n_ctx, bool cpu_moe) const {
        std::vector<std::string> r;
        if (p.uniform_offload_required) {
            r.push_back("-ngl 0 (all on the CPU)");
        } else {
            int k = ngl - 1;
            while (k > 0 && !fits(k, n_ctx, cpu_moe)) --k;
            r.push_back(cat("-ngl ", std::max(k, 0)));
        }
        if (mb.has_experts() && !cpu_moe && fits(ngl, n_ctx, true)) r.push_back("--cpu-moe");
        if (const int c = largest_ctx(ngl, cpu_moe, 1, n_ctx - 1)) r.push_back(cat("-c ", c));
        if (p.uniform_offload_required) r.push_back("serving the model across machines");
        std::string s = "use ";
        for (size_t i = 0; i < r.size(); ++i) s += (i == 0 ? "" : i + 1 == r.size() ? ", or " : ", ") + r[i];
        return s;
    }

    // ngl layers on the accelerators at the asked context, or shrunk down to --min-ctx.
    // Returns false when neither fits.
    bool try_fit(int ngl, bool cpu_moe, Placement& out) const {
        out = build(ngl, n_ctx_asked, cpu_moe);
        if (overflow(out) == 0) return true;
        if (req.min_ctx <= 0 || req.min_ctx >= n_ctx_asked) return false;
        const int c = largest_ctx(ngl, cpu_moe, req.min_ctx, n_ctx_asked - 1);
        if (c == 0) return false;
        out = build(ngl, c, cpu_moe);
        out.notes.push_back(cat("context shrunk from ", n_ctx_asked, " to ", c, " tokens (floor --min-ctx ",
                                req.min_ctx, ") to fit ", ngl, " layers on the GPU"));
        return true;
    }

    Placement plan() const {
        const int asked = req.n_gpu_layers;
        const int ngl = asked < 0 ? -1 : std::min(asked, n_layer());
        if (p.uniform_offload_required && ngl > 0 && ngl < n_layer()) refuse_split(ngl);
        std::vector<std::string> notes;
        if (req.cpu_moe && !mb.has_experts()) notes.push_back("--cpu-moe: the model has no expert tensors");

        Placement pl;
        if (!has_gpu()) {
            pl = build(0, n_ctx_asked, req.cpu_moe);
            notes.insert(notes.begin(), ngl > 0 ? cat("-ngl ", asked, " ignored: no accelerator given (--gpu-mem); "
                                                      "everything on the CPU")
                                                : "no accelerator given (--gpu-mem): everything on the CPU");
        } else if (ngl >= 0) {
            if (!try_fit(ngl, req.cpu_moe, pl)) {
                const Placement want = build(ngl, n_ctx_asked, req.cpu_moe);
                throw PlanError(cat(shortfall(want, cat("-ngl ", asked, " needs")), ": ",
                                    remedies(ngl, n_ctx_asked, req.cpu_moe)));
            }
        } else if (p.uniform_offload_required) {
            // Only all or nothing is legal, and the fit does not choose "nothing" for the
            // user: running on the CPU is a decision worth making knowingly.
            if (!try_fit(n_layer(), req.cpu_moe, pl)) {
                const Placement want = build(n_layer(), n_ctx_asked, req.cpu_moe);
                throw PlanError(cat(shortfall(want, cat("all ", n_layer(), " layers need")),
                                    ", and the profile requires uniform offload (the file declares ",
                                    recurrent_layers(), "), so a split between the CPU and a GPU is no alternative: ",
                                    remedies(n_layer(), n_ctx_asked, req.cpu_moe)));
            }
        } else {
            int k = n_layer();
            while (k > 0 && !try_fit(k, req.cpu_moe, pl)) --k;
            if (k == 0) pl = build(0, n_ctx_asked, req.cpu_moe);
            if (k < n_layer()) {
                const Placement all = build(n_layer(), pl.n_ctx, req.cpu_moe);
                notes.push_back(cat("fit: ", k, " of ", n_layer(), " layers on the GPU; ",
                                    shortfall(all, cat("all ", n_layer(), " would need"))));
            }
        }
        pl.notes.insert(pl.notes.begin(), notes.begin(), notes.end());
        return pl;
    }
};

void check_request(const ModelProfile& p, const PlanRequest& r, int n_ctx) {
    if (p.n_layer <= 0) fail("the model has no layers to place");
    if (static_cast<int>(p.layer_kind.size()) != p.n_layer || static_cast<int>(p.n_head_kv.size()) != p.n_layer)
        fail("the profile's per-layer lists do not have ", p.n_layer, " entries");
    if (r.n_gpu_layers < -1) fail("-ngl ", r.n_gpu_layers, " is invalid (0 or more; leave it out to fit)");
    for (size_t i = 0; i < r.gpu_mem.size(); ++i)
        if (r.gpu_mem[i] == 0) fail("--gpu-mem: accelerator ", i, " has no memory");
    if (r.n_ctx < 0) fail("-c ", r.n_ctx, " is invalid (0: the model's context)");
    if (r.min_ctx < 0) fail("--min-ctx ", r.min_ctx, " is invalid");
    if (r.min_ctx > n_ctx) fail("--min-ctx ", r.min_ctx, " is above the context of ", n_ctx, " tokens");
    if (r.n_seq < 1) fail("--parallel ", r.n_seq, " is invalid (1 or more sequences)");
    if (r.n_batch < 1) fail("the batch size ", r.n_batch, " is invalid (1 or more tokens)");
}

}  // namespace

Placement plan_placement(const ModelProfile& p, const gguf::File& f, const PlanRequest& req) {
    const int n_ctx = req.n_ctx > 0 ? req.n_ctx : p.n_ctx_train > 0 ? p.n_ctx_train : kDefaultCtx;
    check_request(p, req, n_ctx);
    return Planner(p, f, req, n_ctx).plan();
}

}  // namespace glia
