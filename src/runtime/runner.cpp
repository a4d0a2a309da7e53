#include "runtime/runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "backend/registry.h"
#include "core/error.h"
#include "core/progress.h"
#include "parallel/rank_threads.h"
#include "parallel/thread_group.h"
#include "tokenizer/vocab.h"

namespace glia {

struct Runner::StepGraph {
    Graph g;
    ForwardInputs fin;
    std::vector<Tensor*> forced;  // per layer (nullptr: no MoE there)
    // LoRA: per adapter, the scale of each token and of each output row, and the map the
    // graph's products read (Graph::set_low_rank).
    std::vector<Tensor*> lora_tok, lora_out;
    LowRankMap low_rank;
    std::unique_ptr<DispatchPlan> plan;
    uint64_t last_use = 0;
};

Runner::Runner(const Model& model, RunnerOptions opt) : model_(model), opt_(std::move(opt)) {
    exec_ = &model_;
    comm_ = opt_.comm;
    if (opt_.tp < 1) fail("tensor parallelism: -tp must be at least 1, not ", opt_.tp);
    if (opt_.tp > 1) {
        // Ranks as threads: each rank's shard (views of the one mapped file) and CPU backend.
        if (!opt_.devices.empty() || opt_.placement.n_gpu_layers() > 0)
            fail("tensor parallelism (-tp ", opt_.tp, ") runs its ranks on the CPU in this version; GPU ranks need the "
                 "NCCL all-reduce on each GPU's stream, which has not been run yet. Use -tp without -ngl, or split the "
                 "layers across GPUs (-sm layer)");
        if (opt_.comm) fail("a Runner is either a whole tensor-parallel group (tp > 1) or one rank of one (comm)");
        const int total = opt_.n_threads > 0 ? opt_.n_threads
                                             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        for (int r = 0; r < opt_.tp; ++r) {
            shards_.push_back(model_.shard(r, opt_.tp));
            rank_cpus_.push_back(std::make_unique<cpu::CpuBackend>(std::max(1, total / opt_.tp)));
        }
        group_ = std::make_unique<ThreadGroup>(opt_.tp);
        exec_ = shards_[0].get();
        comm_ = &group_->comm(0);
        opt_.cpu = rank_cpus_[0].get();
    }
    const ModelProfile& p = exec_->profile();
    if (p.tp.world > 1 && (!comm_ || comm_->world() != p.tp.world || comm_->rank() != p.tp.rank))
        fail("the model is rank ", p.tp.rank, " of a tensor-parallel group of ", p.tp.world,
             comm_ ? cat(" but its communicator is rank ", comm_->rank(), " of ", comm_->world())
                   : std::string(" but no communicator was given"));
    if (opt_.placement.devices.empty()) {
        const CacheTypes cache = opt_.placement.cache;
        opt_.placement = Placement::all_cpu(p.n_layer);
        opt_.placement.cache = cache;
    }
    Placement& pl = opt_.placement;
    if (static_cast<int>(pl.layer.size()) != p.n_layer)
        fail("placement has ", pl.layer.size(), " layers, the model ", p.n_layer);
    check_cache_types(p, pl.cache);
    backends_.push_back(opt_.cpu ? opt_.cpu : &cpu_backend(opt_.n_threads));
    for (Backend* b : opt_.devices) backends_.push_back(b);
    if (pl.devices.size() != backends_.size())
        fail("placement names ", pl.devices.size(), " devices but ", backends_.size(), " backends are available",
             pl.devices.size() > backends_.size() ? " (this build has no backend for the accelerator)" : "");
    const int n_ctx = opt_.n_ctx > 0 ? opt_.n_ctx : (p.n_ctx_train > 0 ? p.n_ctx_train : 4096);
    if (opt_.n_slots <= 0) fail("the number of sequences must be at least 1");
    if (opt_.shared_pages) {
        pt_ = opt_.shared_pages;
    } else {
        pages_ = std::make_unique<PageTable>(n_ctx, opt_.block_size, opt_.n_slots);
        pt_ = pages_.get();
    }
    pl.n_ctx = pt_->n_cells();
    pl.n_seq = pt_->n_slots();

    // Weights: the CPU reads every one in place (and is the fallback for any op); devices
    // prepare those the placement gives them.
    const WeightSet& ws = exec_->weights();
    uint64_t upload_bytes = 0;  // what the devices copy (a progress bar on a terminal)
    for (const Tensor& w : ws.all())
        if (pl.device_of_tensor(w.name) != 0) upload_bytes += w.nbytes();
    std::string device_names;
    for (size_t d = 1; d < backends_.size(); ++d)
        device_names += std::string(d > 1 ? ", " : "") + backends_[d]->name();
    Progress upload("weights to " + device_names, upload_bytes, upload_bytes > 0);
    for (const Tensor& w : ws.all()) {
        const int d = pl.device_of_tensor(w.name);
        weight_dev_[&w] = d;
        backends_[0]->prepare_weight(w);
        prepared_.emplace_back(0, &w);
        if (d != 0) {
            backends_[d]->prepare_weight(w);
            prepared_.emplace_back(d, &w);
            upload.add(w.nbytes());
        }
    }
    for (const Tensor& w : ws.all())
        if (w.name == "output.weight") output_weight_ = &w;
    if (!output_weight_)
        for (const Tensor& w : ws.all())
            if (w.name == "token_embd.weight") output_weight_ = &w;
    if (output_weight_ && pl.output != 0 && weight_dev_.at(output_weight_) != pl.output) {
        // Tied embeddings: the head's matrix is also needed where the head runs.
        backends_[pl.output]->prepare_weight(*output_weight_);
        prepared_.emplace_back(pl.output, output_weight_);
    }
    upload.done();
    prepare_lora();

    std::vector<Op> forced = cpu_ops_from_env();
    forced.insert(forced.end(), opt_.cpu_ops.begin(), opt_.cpu_ops.end());
    opt_.cpu_ops = forced;
    DispatchOptions dopt;
    dopt.cpu_ops = forced;
    dopt.verbose = opt_.verbose;
    dispatcher_ = std::make_unique<Dispatcher>(
        backends_, [this](const Tensor& t, const Node& n) { return tensor_device(t, n); }, dopt);
    place_state();
    for (size_t d = 1; d < backends_.size(); ++d) backends_[d]->load_done();
    if (opt_.tp > 1) start_ranks();
}

// Ranks 1.. of a tensor-parallel group: Runners of their shards that share this one's
// page table (one scheduler for the group) and run on their own CPU backends.
void Runner::start_ranks() {
    for (int r = 1; r < opt_.tp; ++r) {
        RunnerOptions ro;
        ro.n_ctx = opt_.n_ctx;
        ro.n_slots = opt_.n_slots;
        ro.block_size = opt_.block_size;
        ro.n_threads = opt_.n_threads;
        ro.cpu_ops = opt_.cpu_ops;
        ro.max_plans = opt_.max_plans;
        ro.comm = &group_->comm(r);
        ro.shared_pages = pt_;
        ro.placement.cache = opt_.placement.cache;
        ro.cpu = rank_cpus_[r].get();
        peers_.push_back(std::make_unique<Runner>(*shards_[r], std::move(ro)));
    }
    rank_threads_ = std::make_unique<RankThreads>(opt_.tp);
}

size_t Runner::state_bytes() const {
    size_t n = state_bytes_;
    for (const auto& r : peers_) n += r->state_bytes();
    return n;
}

Runner::~Runner() {
    plans_.clear();
    dispatcher_.reset();
    for (auto& [d, w] : prepared_) backends_[d]->release_weight(*w);
    for (auto& [d, mem] : state_mem_) backends_[d]->free(mem);
}

int Runner::tensor_device(const Tensor& t, const Node& n) const {
    const Tensor* r = t.root();
    if (r->role == TensorRole::WEIGHT) {
        if (r == output_weight_ && n.op == Op::MATMUL) return opt_.placement.output;
        auto it = weight_dev_.find(r);
        return it == weight_dev_.end() ? 0 : it->second;
    }
    if (r->role == TensorRole::STATE)
        for (size_t il = 0; il < state_.size(); ++il)
            if (r == state_[il].k || r == state_[il].v || r == state_[il].conv) return state_dev_[il];
    return 0;
}

// Each layer's state lives on the device that runs the layer, unless that device cannot
// run the layer's stateful op (or the op is forced to the CPU): then on the CPU, and the
// op runs there. Decided once, from a one-token graph, before any memory is allocated.
void Runner::place_state() {
    const ModelProfile& p = exec_->profile();
    const int n_cells = pt_->n_cells(), n_slots = pt_->n_slots();
    state_.assign(p.n_layer, {});
    state_dev_.assign(p.n_layer, -1);
    auto state_tensor = [&](DType type, int64_t ne0, int64_t ne1, const std::string& name) {
        Tensor t = Tensor::make(type, ne0, ne1);
        t.role = TensorRole::STATE;
        t.name = name;
        state_tensors_.push_back(std::move(t));
        return &state_tensors_.back();
    };
    for (int il = 0; il < p.n_layer; ++il) {
        const std::string blk = "blk." + std::to_string(il);
        if (p.layer_kind[il] == LayerKind::RECURRENT) {
            // Conv taps and state matrices of a sequence, one row per slot.
            if (p.recurrent_state_floats > 0)
                state_[il].conv = state_tensor(DType::F32, p.recurrent_state_floats, n_slots, blk + ".recurrent_state");
        } else if (p.n_head_kv[il] > 0) {
            const int64_t hk = p.head_dim_k_of(il), hv = p.head_dim_v_of(il);
            const CacheTypes& ct = opt_.placement.cache;
            state_[il].k = state_tensor(ct.k, int64_t(p.n_head_kv[il]) * hk, n_cells, blk + ".k_pages");
            // Latent attention caches one vector a token: V is a view of the K pages.
            if (p.mla_kv_lora_rank == 0)
                state_[il].v = state_tensor(ct.v, int64_t(p.n_head_kv[il]) * hv, n_cells, blk + ".v_pages");
        }
    }
    // Probe: which device can run each layer's stateful op.
    StepGraph probe;
    {
        ForwardInputs& f = probe.fin;
        f.tokens = probe.g.new_input(DType::I32, 1, 1, 1, 1, "inp_tokens");
        f.pos = probe.g.new_input(DType::I32, 1, 1, 1, 1, "inp_pos");
        f.seq = probe.g.new_input(DType::I32, 1, 1, 1, 1, "inp_seq");
        f.cells = probe.g.new_input(DType::I32, 1, 1, 1, 1, "inp_cells");
        f.pages = &pt_->tensor();
        f.block_size = pt_->block_size();
        f.state = &state_;
        f.comm = comm_;
        exec_->forward(probe.g, f);
    }
    // A layer's state may be written by several ops (a recurrent block's convs and state
    // matrices): it stays on the layer's device only if that device runs all of them.
    for (const Node& n : probe.g.nodes()) {
        if (!n.writes || n.layer < 0) continue;
        int d = opt_.placement.layer[n.layer];
        if (d != 0 && (dispatcher_->forced_cpu(n.op) || !backends_[d]->supports(n))) {
            // A cache of other types than f16 that the layer's device cannot read is refused
            // (falling back, its cache would stay in host memory and q, k and v cross every
            // step, against the plan); f16 falls back as any op does.
            if (n.op == Op::ATTENTION && !opt_.placement.cache.is_default() && !dispatcher_->forced_cpu(n.op))
                fail(cache_types_device_refusal(opt_.placement.cache, n.layer, backends_[d]->name()));
            d = 0;
        }
        state_dev_[n.layer] = state_dev_[n.layer] == 0 ? 0 : d;
    }
    for (int il = 0; il < p.n_layer; ++il) {
        for (Tensor* t : {state_[il].k, state_[il].v, state_[il].conv}) {
            if (!t) continue;
            const int d = std::max(0, state_dev_[il]);
            state_dev_[il] = d;
            const size_t bytes = t->nbytes();
            void* mem = backends_[d]->alloc(bytes, MemoryKind::STATE, t->name);
            state_mem_.emplace_back(d, mem);
            t->data = mem;
            t->device = backends_[d]->device();
            state_bytes_ += bytes;
            // Recurrent state starts at zero; KV cells are written before they are read.
            if (t == state_[il].conv) backends_[d]->zero(mem, bytes);
        }
    }
}

void Runner::reset_slot(int slot) {
    if (pages_) pages_->release(slot);  // the ranks of a group share the first rank's table
    for (size_t il = 0; il < state_.size(); ++il)
        if (Tensor* c = state_[il].conv) backends_[state_dev_[il]]->zero(c->row(slot), c->nb[1]);
    for (auto& r : peers_) r->reset_slot(slot);
}

size_t Runner::slot_state_bytes() const {
    size_t n = 0;
    for (const LayerState& ls : state_)
        if (ls.conv) n += ls.conv->nb[1];
    return n;
}

// The rows are copied through the backend that holds them (host memory on the CPU).
void Runner::save_slot_state(int slot, std::vector<uint8_t>& out) {
    out.resize(slot_state_bytes());
    size_t off = 0;
    for (size_t il = 0; il < state_.size(); ++il) {
        const Tensor* c = state_[il].conv;
        if (!c) continue;
        Tensor src = Tensor::make(c->type, c->ne[0]);
        src.data = c->row(slot);
        src.device = c->device;
        Tensor dst = Tensor::make(c->type, c->ne[0]);
        dst.data = out.data() + off;
        backends_[state_dev_[il]]->copy(src, dst);
        backends_[state_dev_[il]]->synchronize();
        off += c->nb[1];
    }
}

void Runner::load_slot_state(int slot, const std::vector<uint8_t>& in) {
    if (in.size() != slot_state_bytes())
        fail("slot state of ", in.size(), " bytes, the model's is ", slot_state_bytes());
    size_t off = 0;
    for (size_t il = 0; il < state_.size(); ++il) {
        Tensor* c = state_[il].conv;
        if (!c) continue;
        Tensor src = Tensor::make(c->type, c->ne[0]);
        src.data = const_cast<uint8_t*>(in.data() + off);
        Tensor dst = Tensor::make(c->type, c->ne[0]);
        dst.data = c->row(slot);
        dst.device = c->device;
        backends_[state_dev_[il]]->copy(src, dst);
        backends_[state_dev_[il]]->synchronize();
        off += c->nb[1];
    }
}

void Runner::validate(const StepInputs& in) const {
    const ModelProfile& p = model_.profile();
    if (in.n_tokens <= 0) fail("a step needs at least one token");
    const int n_slots = pt_->n_slots();
    for (int t = 0; t < in.n_tokens; ++t) {
        const int32_t tok = in.tokens[t];
        if (tok < 0 || tok >= p.n_vocab) fail("token id ", tok, " is outside the vocabulary (", p.n_vocab, " tokens)");
        const int s = in.seq ? in.seq[t] : 0;
        if (s < 0 || s >= n_slots) fail("sequence slot ", s, " outside the ", n_slots, " slots");
        if (in.pos[t] < 0 || in.pos[t] >= pt_->capacity(s))
            fail("position ", in.pos[t], " of sequence ", s, " is outside its reserved ", pt_->capacity(s),
                 " cache cells");
    }
    for (int i = 0; in.out_ids && i < in.n_out; ++i)
        if (in.out_ids[i] < 0 || in.out_ids[i] >= in.n_tokens)
            fail("output row ", in.out_ids[i], " outside the step's ", in.n_tokens, " tokens");
    if (in.lora_scales && opt_.lora.empty()) fail("LoRA scales given, but no adapter is loaded");
    for (size_t i = 0; in.lora_scales && i < size_t(in.n_tokens) * opt_.lora.size(); ++i)
        if (!std::isfinite(in.lora_scales[i])) fail("LoRA scale ", in.lora_scales[i], " is not a finite number");
    if (!in.forced_experts.empty() && static_cast<int>(in.forced_experts.size()) != p.n_layer)
        fail("forced routing gives ", in.forced_experts.size(), " layers, the model has ", p.n_layer);
    for (size_t il = 0; il < in.forced_experts.size(); ++il) {
        const int32_t* f = in.forced_experts[il];
        if (!f && p.n_expert > 0 && static_cast<int>(il) >= p.n_layer_dense_lead)
            fail("forced routing gives no experts for layer ", il);
        if (!f) continue;
        for (int i = 0; i < p.n_expert_used * in.n_tokens; ++i)
            if (f[i] < 0 || f[i] >= p.n_expert) fail("forced expert id ", f[i], " outside the ", p.n_expert, " experts");
    }
}

int Runner::n_embd() const { return model_.profile().n_embd; }

void Runner::build(StepGraph& sg, int n_tokens, int n_out, bool all_logits, bool forced, bool hidden, bool ids) {
    const ModelProfile& p = exec_->profile();
    Graph& g = sg.g;
    ForwardInputs& f = sg.fin;
    f.tokens = g.new_input(DType::I32, n_tokens, 1, 1, 1, "inp_tokens");
    f.pos = g.new_input(DType::I32, n_tokens, 1, 1, 1, "inp_pos");
    f.seq = g.new_input(DType::I32, n_tokens, 1, 1, 1, "inp_seq");
    f.cells = g.new_input(DType::I32, n_tokens, 1, 1, 1, "inp_cells");
    f.pages = &pt_->tensor();
    if (n_out > 0) f.out_ids = g.new_input(DType::I32, n_out, 1, 1, 1, "out_ids");
    f.all_logits = all_logits;
    f.block_size = pt_->block_size();
    f.state = &state_;
    f.comm = comm_;
    sg.forced.assign(p.n_layer, nullptr);
    if (forced) {
        for (int il = 0; il < p.n_layer; ++il)
            if (p.n_expert > 0)
                sg.forced[il] = g.new_input(DType::I32, p.n_expert_used, n_tokens, 1, 1,
                                            "forced_experts-" + std::to_string(il));
        f.forced_experts = sg.forced;
    }
    if (!opt_.lora.empty()) add_lora(sg, n_tokens, n_out > 0 ? n_out : (all_logits ? n_tokens : 1));
    Tensor* out = exec_->forward(g, f);
    g.set_low_rank(nullptr);
    for (const LoraAdapter* ad : opt_.lora)
        for (const LoraPair& pr : ad->pairs()) {
            bool used = false;
            for (const Node& n : g.nodes()) used = used || (n.op == Op::MATMUL && n.src[MatmulArg::W] == pr.a);
            if (!used)
                fail(ad->path(), ": the ", model_.profile().arch, " graph does not multiply by '", pr.base->name,
                     "' as a plain matrix product, so its LoRA pair cannot be applied");
        }
    if (hidden) {
        // The LM head is the last matmul by the output matrix; its input is the final
        // hidden state (a softcap or other op after the head does not matter here).
        Tensor* h = nullptr;
        for (auto it = g.nodes().rbegin(); it != g.nodes().rend() && !h; ++it)
            if (it->op == Op::MATMUL && it->src[MatmulArg::W] && it->src[MatmulArg::W]->root() == output_weight_)
                h = it->src[MatmulArg::X];
        if (!h || h->ne[0] != model_.profile().n_embd || h->type != DType::F32) fail("this model's graph has no LM head to take hidden states before");
        out = h;
    } else if (ids) {
        out = g.argmax(out);
    }
    g.set_output(out);
    sg.plan = dispatcher_->compile(g);
}

Runner::StepGraph& Runner::graph_for(const StepInputs& in, int n_out, bool ids) {
    const bool forced = !in.forced_experts.empty();
    const ShapeKey key{in.n_tokens, in.out_ids ? n_out : 0, in.out_ids ? false : in.all_logits, forced, in.hidden, ids};
    auto it = plans_.find(key);
    if (it == plans_.end()) {
        if (plans_.size() >= opt_.max_plans) {
            auto lru = std::min_element(plans_.begin(), plans_.end(), [](const auto& a, const auto& b) {
                return a.second->last_use < b.second->last_use;
            });
            plans_.erase(lru);
        }
        auto sg = std::make_unique<StepGraph>();
        build(*sg, in.n_tokens, in.out_ids ? n_out : 0, in.out_ids ? false : in.all_logits, forced, in.hidden, ids);
        it = plans_.emplace(key, std::move(sg)).first;
    }
    it->second->last_use = ++use_clock_;
    return *it->second;
}

const float* Runner::forward(const StepInputs& in) { return run(in, false).ptr<float>(); }

const int32_t* Runner::forward_ids(const StepInputs& in) {
    if (in.hidden) fail("forward_ids: a hidden-state step has no logits to pick from");
    return run(in, true).ptr<int32_t>();
}

const Tensor& Runner::run(const StepInputs& in, bool ids) {
    validate(in);
    if (peers_.empty()) return run_step(in, ids);
    // Every rank runs the same step at once; a failing rank stops the others' collectives.
    const Tensor* out = nullptr;
    rank_threads_->run([&](int r) {
        try {
            if (r == 0) out = &run_step(in, ids);
            else peers_[size_t(r) - 1]->run_step(in, ids);
        } catch (const std::exception& e) {
            group_->abort(cat("rank ", r, " failed: ", e.what()));
            throw;
        }
    });
    return *out;
}

const Tensor& Runner::run_step(const StepInputs& in, bool ids) {
    const int T = in.n_tokens;
    const int n_out = in.out_ids ? in.n_out : (in.all_logits ? T : 1);
    StepGraph& sg = graph_for(in, n_out, ids);
    ForwardInputs& f = sg.fin;
    std::memcpy(f.tokens->data, in.tokens, sizeof(int32_t) * T);
    std::memcpy(f.pos->data, in.pos, sizeof(int32_t) * T);
    int32_t* seq = f.seq->ptr<int32_t>();
    int32_t* cells = f.cells->ptr<int32_t>();
    for (int t = 0; t < T; ++t) {
        seq[t] = in.seq ? in.seq[t] : 0;
        cells[t] = pt_->cell(seq[t], in.pos[t]);
    }
    if (in.out_ids) std::memcpy(f.out_ids->data, in.out_ids, sizeof(int32_t) * n_out);
    if (!opt_.lora.empty()) fill_lora(sg, in, n_out);
    const int n_used = model_.profile().n_expert_used;
    for (size_t il = 0; il < sg.forced.size() && il < in.forced_experts.size(); ++il)
        if (sg.forced[il] && in.forced_experts[il])
            std::memcpy(sg.forced[il]->data, in.forced_experts[il], sizeof(int32_t) * n_used * T);
    const Tensor& out = dispatcher_->run(*sg.plan);
    last_n_out_ = n_out;
    return out;
}

// LoRA pairs live where their weight does: prepared on the CPU (the fallback) and on the
// weight's device (the LM head's device for the output matrix).
void Runner::prepare_lora() {
    if (opt_.lora.empty()) return;
    if (opt_.tp > 1 || exec_->profile().tp.world > 1)
        fail("LoRA adapters with tensor parallelism (-tp) are not supported: the adapters are not split across ranks");
    for (const LoraAdapter* ad : opt_.lora)
        for (const LoraPair& pr : ad->pairs()) {
            auto it = weight_dev_.find(pr.base);
            if (it == weight_dev_.end())
                fail(ad->path(), ": '", pr.base->name, "' is not a weight of the model this runner runs");
            const int d = pr.base == output_weight_ ? opt_.placement.output : it->second;
            for (const Tensor* t : {pr.a, pr.b}) {
                weight_dev_[t] = d;
                backends_[0]->prepare_weight(*t);
                prepared_.emplace_back(0, t);
                if (d != 0) {
                    backends_[d]->prepare_weight(*t);
                    prepared_.emplace_back(d, t);
                }
            }
        }
}

void Runner::add_lora(StepGraph& sg, int n_tokens, int n_out_rows) {
    Graph& g = sg.g;
    for (size_t i = 0; i < opt_.lora.size(); ++i) {
        const std::string id = std::to_string(i);
        sg.lora_tok.push_back(g.new_input(DType::F32, 1, n_tokens, 1, 1, "lora_scale_tokens-" + id));
        sg.lora_out.push_back(g.new_input(DType::F32, 1, n_out_rows, 1, 1, "lora_scale_out-" + id));
        for (const LoraPair& pr : opt_.lora[i]->pairs())
            sg.low_rank[pr.base].push_back({pr.a, pr.b, pr.factor, sg.lora_tok.back(), sg.lora_out.back()});
    }
    g.set_low_rank(&sg.low_rank);
}

void Runner::fill_lora(StepGraph& sg, const StepInputs& in, int n_out) {
    const size_t n_ad = opt_.lora.size();
    const int T = in.n_tokens;
    auto scale = [&](int t, size_t i) { return in.lora_scales ? in.lora_scales[size_t(t) * n_ad + i] : opt_.lora[i]->scale; };
    for (size_t i = 0; i < n_ad; ++i) {
        float* tok = sg.lora_tok[i]->ptr<float>();
        for (int t = 0; t < T; ++t) tok[t] = scale(t, i);
        float* out = sg.lora_out[i]->ptr<float>();
        for (int j = 0; j < n_out; ++j) out[j] = scale(in.out_ids ? in.out_ids[j] : (in.all_logits ? j : T - 1), i);
    }
}

}  // namespace glia
