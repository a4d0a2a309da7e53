#include "placement/tensor_parallel.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/shard.h"
#include "model/weights.h"
#include "placement/estimates.h"
#include "placement/report.h"

namespace glia {

TpPlan plan_tensor_parallel(const ModelProfile& p, const gguf::File& f, int world, const PlanRequest& req) {
    if (world < 1) throw PlanError(cat("-tp ", world, " is invalid (1 or more ranks)"));
    if (!req.gpu_mem.empty() && static_cast<int>(req.gpu_mem.size()) < world)
        throw PlanError(cat("-tp ", world, " puts one rank on each GPU, but --gpu-mem lists ", req.gpu_mem.size(),
                            "; give one size per GPU, or leave --gpu-mem out for CPU ranks"));
    TpPlan tp;
    tp.world = world;
    tp.n_ctx = req.n_ctx > 0 ? req.n_ctx : p.n_ctx_train > 0 ? p.n_ctx_train : 4096;
    const WeightSet full(f);  // the tensor list; nothing is read
    for (int r = 0; r < world; ++r) {
        ModelProfile rp;
        std::unique_ptr<WeightSet> ws;
        try {
            if (const std::string m = tp_missing(p); world > 1 && !m.empty())
                fail("tensor parallelism: the ", p.arch, " model cannot be split across ranks yet: ", m,
                     "; run it with -tp 1");
            rp = shard_profile(p, r, world);
            ws = shard_weights(full, p, rp);  // the runtime's split, so its refusals too
        } catch (const PlanError&) {
            throw;
        } catch (const Error& e) {
            throw PlanError(e.what());
        }
        DeviceUsage u;
        for (const Tensor& t : ws->all()) {
            u.weights += t.row_size() * uint64_t(t.n_rows());
            // CPU ranks keep derived copies of their product weights (row lookups none).
            const bool lookup =
                t.name.find("token_embd") != std::string::npos && !(p.tied_output && t.name == "token_embd.weight");
            if (req.gpu_mem.empty() && req.host_copies && t.ne[1] > 1 && !lookup)
                u.repacked += req.host_copies(t.type, t.ne[0], t.ne[1], t.name.find("_exps") != std::string::npos) *
                              uint64_t(t.ne[2] * t.ne[3]);
        }
        const ModelBytes mb = measure_model(rp, f, req.cache);
        for (int il = 0; il < rp.n_layer; ++il) {
            u.kv += mb.kv_per_token[il] * uint64_t(tp.n_ctx);
            u.state += mb.state_per_seq[il] * uint64_t(req.n_seq);
        }
        const uint64_t tokens = uint64_t(req.n_batch);
        u.scratch = (mb.layer_act_per_token + 2 * mb.embd_per_token) * tokens + mb.logits_per_row * uint64_t(req.n_seq);
        DeviceSpec d;
        if (req.gpu_mem.empty()) {
            d = DeviceSpec{Device::CPU, r, cat("cpu rank ", r), 0};
        } else {
            d = DeviceSpec{req.gpu_kind, r, cat(req.gpu_kind_name, ":", r), req.gpu_mem[size_t(r)]};
            if (u.total() > d.memory_bytes)
                throw PlanError(cat("-tp ", world, ": rank ", r, " needs ", format_bytes(u.total()), " on ", d.name, " ",
                                    format_parts(u), " but --gpu-mem gives ", format_bytes(d.memory_bytes),
                                    "; use more ranks, a smaller context (-c), or split the layers (-sm layer)"));
        }
        tp.ranks.push_back(std::move(rp));
        tp.devices.push_back(std::move(d));
        tp.usage.push_back(u);
    }
    return tp;
}

std::string describe_split(const ModelProfile& full, const ModelProfile& rank) {
    const int kv_full = full.n_head_kv_max(), kv = rank.n_head_kv_max();
    std::string s = cat("heads ", full.n_head, " -> ", rank.n_head, " per rank, KV heads ", kv_full, " -> ", kv,
                        kv * rank.tp.world > kv_full ? " (repeated: fewer KV heads than ranks)" : "");
    if (!full.n_ff.empty()) s += cat(", FFN ", full.n_ff[0], " -> ", rank.n_ff[0]);
    if (full.n_ff_expert > 0) s += cat(", expert FFN ", full.n_ff_expert, " -> ", rank.n_ff_expert);
    s += rank.tp.lm_head_split ? cat(", LM head split (", rank.n_vocab_local(), " of ", full.n_vocab, " rows each)")
                               : std::string(", LM head replicated");
    return s;
}

}  // namespace glia
