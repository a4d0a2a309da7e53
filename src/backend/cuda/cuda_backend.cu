// The CUDA backend: device memory from cudaMalloc (traced with GLIA_TRACE_ALLOC=1),
// one compute stream, weights uploaded once per process at load (prepare_weight; 2-D
// Q4_K/Q6_K/Q8_0 weights are repacked for the matmul, packed.cuh), and segments that
// launch one kernel per node on the stream; runs of kernels between copies are captured
// as a CUDA graph on their second run and replayed after (GLIA_CUDA_GRAPHS=0: never).
// supports() names exactly the ops and types with a kernel here; the dispatcher runs the
// rest on the CPU.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include "backend/alloc_summary.h"
#include "backend/cuda/staging.h"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>

#include "common.cuh"
#include "kv_rows.cuh"
#include "packed.cuh"
#include "launch.cuh"
#include "strided.cuh"

namespace glia::cuda {

bool pdl_enabled() {
    static const bool on = [] {
        const char* e = std::getenv("GLIA_CUDA_PDL");
        return !(e && *e == '0');
    }();
    return on;
}

int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

DeviceInfo device_info(int ordinal) {
    DeviceInfo d;
    cudaDeviceProp p{};
    GLIA_CUDA_CHECK(cudaGetDeviceProperties(&p, ordinal), "reading the properties of cuda:" + std::to_string(ordinal));
    d.name = p.name;
    d.sm_count = p.multiProcessorCount;
    d.major = p.major;
    d.minor = p.minor;
    GLIA_CUDA_CHECK(cudaSetDevice(ordinal), "selecting cuda:" + std::to_string(ordinal));
    GLIA_CUDA_CHECK(cudaMemGetInfo(&d.free_bytes, &d.total_bytes), "reading the memory of cuda:" + std::to_string(ordinal));
    return d;
}

namespace {

bool is(const Tensor* t, DType d) { return t && t->type == d; }
bool contiguous_is(const Tensor* t, DType d) { return is(t, d) && t->is_contiguous(); }
// A weight of a type the kernels dequantize, rows a whole number of 32-value chunks.
bool weight_ok(const Tensor* w) { return w && experts_type_supported(w->type) && w->ne[0] % 32 == 0; }
// The expert FFN products (k_gemv.cu): x [E, T], stacked gate/up [E, F, n], down [F, E, n],
// each of its own type, ids and routing weights [n_used, T].
bool experts_ok(const Node& n) {
    const auto& s = n.src;
    const Tensor* g = s[MoeExpertsArg::GATE];
    const Tensor* d = s[MoeExpertsArg::DOWN];
    return contiguous_is(s[MoeExpertsArg::X], DType::F32) && weight_ok(g) && weight_ok(s[MoeExpertsArg::UP]) &&
           weight_ok(d) && experts_shape_supported(g->ne[0], g->ne[1]) && experts_shape_supported(d->ne[0], d->ne[1]) &&
           contiguous_is(s[MoeExpertsArg::IDS], DType::I32) && contiguous_is(s[MoeExpertsArg::WEIGHTS], DType::F32);
}

bool is_weight(const Tensor* t) { return t && t->root()->role == TensorRole::WEIGHT; }
// A weight operand this backend keeps packed (prepare_weight packs every packable root).
bool packed_weight(const Tensor* t) { return is_weight(t) && packable(*t); }
// A view into a packed weight: no kernel reads those (the CPU does).
bool view_of_packed(const Tensor* t) { return is_weight(t) && t->view_src && packable(*t->root()); }

class CudaBackend;

enum Pair : uint8_t { NONE = 0, ADD_NORM, ROPE_PAIR, MOE_ROUTE, NORM_PAIR };

// Which paired launch covers node a and the node after it, b (NONE: they launch apart);
// placed = false: which would, memory allowing (launches_with_next).
Pair pair_of(const Node& a, const Node& b, bool placed = true) {
    static const bool on = [] {
        const char* e = std::getenv("GLIA_CUDA_PAIRS");  // 0: every node its own launch (bisecting)
        return !(e && *e == '0');
    }();
    if (!on) return NONE;
    if (add_rms_norm_fusable(a, b)) return ADD_NORM;
    if (rope_pair_fusable(a, b, placed)) return ROPE_PAIR;
    if (moe_route_fusable(a, b, placed)) return MOE_ROUTE;
    if (norm_pair_fusable(a, b, placed)) return NORM_PAIR;
    return NONE;
}

class CudaSegment : public Segment {
public:
    CudaSegment(CudaBackend& b, const std::vector<const Node*>& nodes);
    ~CudaSegment() override;
    void run(NodeTimer* timer) override;

private:
    void launch_range(size_t first, size_t count);
    CudaBackend& b_;
    std::vector<Node> nodes_;
    std::vector<const Node*> orig_;
    std::vector<uint8_t> packed_;  // per node: operand 0 is a packed weight
    std::vector<uint8_t> fused_;   // per node: how many nodes launch together from here (0: inside a group)
    // per node: its launch also covers the next one (Pair: ADD + RMS_NORM, ROPE q + ROPE k)
    std::vector<uint8_t> pair_;
    // per node starting a packed product group: the prologue (prologue.h) of the node before
    // it (ADD_NORM: the two before it), which then launch with the products
    std::vector<uint8_t> pro_;
    std::deque<Tensor> weights_;   // weight operands pointing at their device copies
    // Runs of kernels between copies; each is captured as a graph on its second run.
    struct Run {
        size_t first = 0, count = 0;
        bool copy = false;
        int runs = 0;
        cudaGraphExec_t exec = nullptr;
        uint64_t scratch_gen = 0;
    };
    std::vector<Run> runs_;
};

class CudaBackend : public Backend {
public:
    explicit CudaBackend(int ordinal) : ordinal_(ordinal) {
        name_ = "cuda:" + std::to_string(ordinal);
        if (device_count() <= ordinal) fail("no CUDA device ", ordinal, " (", device_count(), " found)");
        GLIA_CUDA_CHECK(cudaSetDevice(ordinal), "selecting " + name_);
        GLIA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "creating a stream on " + name_);
        const char* e = std::getenv("GLIA_TRACE_ALLOC");
        trace_ = e && *e && *e != '0';
        const char* g = std::getenv("GLIA_CUDA_GRAPHS");
        graphs_ = !(g && *g == '0');
        const char* f = std::getenv("GLIA_FUSE_MATMUL");
        fuse_ = !(f && *f == '0');
        staging_ = std::make_unique<Staging>([this](long long bytes, const std::string& purpose) {
            if (!trace_) return;
            pinned_ += bytes;
            std::fprintf(stderr, "glia alloc: %s %-11s %10lld B  %s  (pinned host total %lld MiB)\n", name_.c_str(),
                         bytes > 0 ? "STAGING" : "STAGING-", bytes > 0 ? bytes : -bytes, purpose.c_str(),
                         pinned_ >> 20);
        });
    }
    ~CudaBackend() override {
        cudaStreamSynchronize(stream_);
        staging_.reset();
        for (auto& [p, info] : mem_) cudaFree(p);
        cudaStreamDestroy(stream_);
    }
    const char* name() const override { return name_.c_str(); }
    Device device() const override { return Device::CUDA; }
    cudaStream_t stream() const { return stream_; }

    bool supports(const Node& n) const override { return supports_node(n); }
    bool launches_with_next(const Node& a, const Node& b) const override { return fuse_ && pairs_with_next(a, b); }
    // Types, shapes and strides only (no device state): node_supported() answers it without a GPU.
    static bool supports_node(const Node& n) {
        const auto& s = n.src;
        const bool experts = n.op == Op::MOE_EXPERTS || n.op == Op::MOE_EXPERTS_GLU;
        for (int i = 0; i < kMaxOperands; ++i) {
            if (view_of_packed(s[i])) return false;
            if (experts && (i == MoeExpertsArg::GATE || i == MoeExpertsArg::UP || i == MoeExpertsArg::DOWN)) continue;
            if (packed_weight(s[i]) && !(i == 0 && (n.op == Op::MATMUL || n.op == Op::GET_ROWS))) return false;
        }
        // Expert stacks, some packed: k_mmvq.cu (none: k_gemv.cu).
        if (experts && (packed_weight(s[MoeExpertsArg::GATE]) || packed_weight(s[MoeExpertsArg::UP]) ||
                        packed_weight(s[MoeExpertsArg::DOWN])))
            return moe_packed_ok(n) && (n.op == Op::MOE_EXPERTS || n.p<GluParams>().kind == GluKind::SWIGLU ||
                                        n.p<GluParams>().kind == GluKind::SITU);
        switch (n.op) {
            case Op::GET_ROWS:
                return s[0] && rows_type_supported(s[0]->type) && s[0]->ne[0] % 32 == 0 && is(s[1], DType::I32);
            case Op::RMS_NORM: return is(s[0], DType::F32) && (!s[1] || is(s[1], DType::F32)) && s[0]->ne[3] == 1;
            case Op::ADD: case Op::MUL: case Op::SWIGLU: case Op::GEGLU:
                return is(s[0], DType::F32) && is(s[1], DType::F32) && s[0]->ne[3] == 1 && s[1]->ne[3] == 1;
            case Op::SCALE: case Op::SOFTCAP: return is(s[0], DType::F32) && s[0]->ne[3] == 1;
            case Op::ARGMAX: return is(s[0], DType::F32) && s[0]->ne[2] == 1 && s[0]->ne[3] == 1;
            case Op::ROPE: return is(s[0], DType::F32) && is(s[1], DType::I32);
            case Op::MATMUL:
                if (packed_weight(s[0])) return is(s[1], DType::F32);
                if (s[0] && s[0]->ne[0] % 32 != 0)  // float rows of odd length: k_gemv.cu
                    return matmul_any_k_supported(*s[0]) && is(s[1], DType::F32);
                return s[0] && matmul_type_supported(s[0]->type) && s[0]->ne[0] % 32 == 0 && is(s[1], DType::F32) &&
                       s[0]->ne[2] == 1;
            case Op::ATTENTION: {
                const Tensor* q = s[AttnArg::Q];
                const Tensor* v = s[AttnArg::V];
                const Tensor* kc = s[AttnArg::K_CACHE];
                const Tensor* vc = s[AttnArg::V_CACHE];
                // Caches of F16, BF16, Q8_0 or Q4_0 (kv_rows.cuh), rows of whole blocks.
                return is(q, DType::F32) && is(s[AttnArg::K], DType::F32) && is(v, DType::F32) && kc && vc &&
                       kv_cache_supported(kc->type, kc->ne[0]) && kv_cache_supported(vc->type, vc->ne[0]) &&
                       q->ne[0] % 8 == 0 && q->ne[0] <= 512 && v->ne[0] % 8 == 0 && v->ne[0] <= 512 &&
                       q->ne[1] % s[AttnArg::K]->ne[1] == 0 && q->ne[1] / s[AttnArg::K]->ne[1] <= 16 &&
                       attention_kv_smem_bytes(kc->type, vc->type, q->ne[1] / s[AttnArg::K]->ne[1], q->ne[0],
                                               v->ne[0]) <= attention_max_smem();
            }
            // (a routing block's probabilities fit the default 48 KiB of shared memory)
            case Op::MOE_TOPK: return is(s[0], DType::F32) && s[0]->is_contiguous() && s[0]->ne[0] <= 3072;
            case Op::MOE_WEIGHTS:
                return is(s[0], DType::F32) && s[0]->is_contiguous() && s[0]->ne[0] <= 3072 && is(s[1], DType::I32);
            case Op::MOE_EXPERTS: return experts_ok(n);
            case Op::SHORTCONV: return is(s[0], DType::F32) && is(s[1], DType::F32) && is(s[2], DType::F32);
            case Op::COPY: return true;
            // The newer families' ops: F32 operands as strided views (rows of contiguous values), as on the CPU.
            case Op::ROPE_FREQS:
                return f32_rows(s[0]) && s[0]->ne[3] == 1 && is(s[1], DType::I32) && contiguous_is(s[2], DType::F32);
            case Op::UNARY: return f32_rows(s[0]) && n.out->is_contiguous();
            case Op::MUL_BCAST: case Op::CONCAT: return f32_rows(s[0]) && f32_rows(s[1]);
            case Op::SITU: return f32_rows(s[0]) && f32_rows(s[1]);
            case Op::DELTA_NET:
                for (int i = DeltaNetArg::Q; i <= DeltaNetArg::BETA; ++i)
                    if (!f32_rows(s[i])) return false;
                return f32_rows(s[DeltaNetArg::STATE]) && contiguous_is(s[DeltaNetArg::SEQ], DType::I32) &&
                       delta_net_shape_supported(n);
            case Op::RES_MIX:
                return f32_rows(s[ResMixArg::STACK]) && f32_rows(s[ResMixArg::CUR]) &&
                       contiguous_is(s[ResMixArg::W], DType::F32) && res_mix_shape_supported(n);
            case Op::MATMUL_HEADS:
                return weight_ok(s[0]) && experts_shape_supported(s[0]->ne[0], s[0]->ne[1]) && f32_rows(s[1]);
            case Op::MOE_GATHER_WEIGHTS: return f32_rows(s[0]) && is(s[1], DType::I32) && s[1]->nb[0] == 4;
            case Op::MOE_EXPERTS_GLU: {
                const GluKind k = n.p<GluParams>().kind;
                return (k == GluKind::SWIGLU || k == GluKind::SITU) && experts_ok(n);
            }
            default: return false;
        }
    }

    void* alloc(size_t bytes, MemoryKind kind, const std::string& purpose) override {
        void* p = nullptr;
        GLIA_CUDA_CHECK(cudaSetDevice(ordinal_), "selecting " + name_);
        const cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 256));
        if (err != cudaSuccess) {
            size_t free_b = 0, total = 0;
            cudaGetLastError();
            cudaMemGetInfo(&free_b, &total);
            fail("out of memory on ", name_, ": ", purpose, " (", memory_kind_name(kind), ") needs ", bytes >> 20,
                 " MiB, ", free_b >> 20, " MiB free of ", total >> 20, " MiB (glia plan shows what fits; fewer -ngl "
                 "layers or a smaller -c)");
        }
        std::lock_guard<std::mutex> lk(mu_);
        mem_[p] = {bytes, kind, purpose};
        used_ += bytes;
        if (trace_)
            std::fprintf(stderr, "glia alloc: %s %-11s %10zu B  %s  (total %zu MiB)\n", name_.c_str(),
                         memory_kind_name(kind), bytes, purpose.c_str(), used_ >> 20);
        return p;
    }
    void free(void* p) override {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = mem_.find(p);
        if (it == mem_.end()) return;
        used_ -= it->second.bytes;
        mem_.erase(it);
        cudaFree(p);
    }
    void zero(void* p, size_t bytes) override {
        GLIA_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_), "zeroing state on " + name_);
    }

    void prepare_weight(const Tensor& w) override {
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (auto it = weights_.find(w.data); it != weights_.end()) {
                ++it->second.refs;
                return;
            }
        }
        void* d = nullptr;
        if (packable(w)) {
            // Upload the GGUF rows, repack them on the device, drop the upload.
            const PackedShape ps = packed_shape(w);
            void* raw = alloc(w.nbytes(), MemoryKind::STAGING, w.name + " (upload for packing)");
            staging_->upload(raw, w.data, w.nbytes(), stream_, w.name + "' to '" + name_);
            d = alloc(ps.main_bytes() + ps.side_bytes(w.type), MemoryKind::WEIGHTS, w.name + " (packed)");
            launch_pack(w.type, static_cast<const uint8_t*>(raw), w.nb[1], ps, d, stream_);
            GLIA_CUDA_CHECK(cudaGetLastError(), "packing '" + w.name + "' on " + name_);
            GLIA_CUDA_CHECK(cudaStreamSynchronize(stream_), "packing '" + w.name + "' on " + name_);
            free(raw);
        } else {
            d = alloc(w.nbytes(), MemoryKind::WEIGHTS, w.name);
            staging_->upload(d, w.data, w.nbytes(), stream_, w.name + "' to '" + name_);
        }
        std::lock_guard<std::mutex> lk(mu_);
        weights_[w.data] = {d, 1};
    }
    void release_weight(const Tensor& w) override {
        void* d = nullptr;
        {
            std::lock_guard<std::mutex> lk(mu_);
            auto it = weights_.find(w.data);
            if (it == weights_.end() || --it->second.refs > 0) return;
            d = it->second.mem;
            weights_.erase(it);
        }
        cudaStreamSynchronize(stream_);
        free(d);
    }
    void* weight_copy(const Tensor& w) const {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = weights_.find(w.data);
        return it == weights_.end() ? nullptr : it->second.mem;
    }

    bool owns(const void* p) const {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = mem_.upper_bound(const_cast<void*>(p));
        if (it == mem_.begin()) return false;
        --it;
        return static_cast<const char*>(p) < static_cast<const char*>(it->first) + it->second.bytes;
    }

    void copy(const Tensor& src, Tensor& dst) override {
        if (!owns(dst.data) && !owns(src.data)) fail(name_, ": copy of '", src.name, "' touches none of its memory");
        const cudaMemcpyKind kind = cudaMemcpyDefault;  // direction from the pointers (unified addressing)
        if (src.is_contiguous() && dst.is_contiguous()) {
            GLIA_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, src.nbytes(), kind, stream_),
                            "copying '" + src.name + "' on " + name_);
            return;
        }
        const size_t row = src.row_size();
        for (int64_t i2 = 0; i2 < src.ne[2]; ++i2)
            GLIA_CUDA_CHECK(cudaMemcpy2DAsync(dst.row(0, i2), dst.nb[1], src.row(0, i2), src.nb[1], row,
                                              size_t(src.ne[1]), kind, stream_),
                            "copying rows of '" + src.name + "' on " + name_);
    }

    std::unique_ptr<Segment> compile(const std::vector<const Node*>& nodes) override {
        return std::make_unique<CudaSegment>(*this, nodes);
    }
    void synchronize() override {
        GLIA_CUDA_CHECK(cudaStreamSynchronize(stream_), "waiting for " + name_);
    }
    void load_done() override {
        staging_->release();
        synchronize();
        if (!trace_) return;
        std::vector<AllocRecord> live;
        {
            std::lock_guard<std::mutex> lk(mu_);
            for (const auto& [p, m] : mem_) live.push_back({m.bytes, m.kind, m.purpose});
        }
        size_t free_b = 0, total = 0;
        if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) cudaGetLastError(), total = 0;
        std::fputs(alloc_summary(name_, live, free_b, total).c_str(), stderr);
    }

    // `packed`: operand 0 is a packed weight (packed.cuh).
    void launch(const Node& n, bool packed = false) {
        switch (n.op) {
            case Op::GET_ROWS:
                if (packed) launch_get_rows_packed(n, stream_);
                else launch_get_rows(n, stream_);
                break;
            case Op::RMS_NORM: launch_rms_norm(n, stream_); break;
            case Op::ADD: case Op::MUL: case Op::SCALE: case Op::SOFTCAP: case Op::SWIGLU: case Op::GEGLU:
                launch_binary(n, stream_);
                break;
            case Op::ROPE: case Op::ROPE_FREQS: launch_rope(n, stream_); break;
            case Op::ARGMAX: launch_argmax(n, stream_); break;
            case Op::MATMUL:
                if (packed) {
                    const Node* one = &n;
                    launch_matmul_packed(&one, 1, stream_, scratch(matmul_packed_scratch_bytes(&one, 1)));
                } else if (n.src[MatmulArg::W]->ne[0] % 32 != 0) {
                    launch_matmul_any_k(n, stream_, act_scratch(n));
                } else {
                    launch_matmul(n, stream_, act_scratch(n));
                }
                break;
            case Op::ATTENTION:
                launch_attention(n, stream_, scratch(attention_scratch_bytes(n)),
                                 fuse_ ? counters(attention_counters(n)) : nullptr);
                break;
            case Op::MOE_TOPK: case Op::MOE_WEIGHTS: launch_moe_route(n, stream_); break;
            case Op::MOE_EXPERTS: case Op::MOE_EXPERTS_GLU:
                if (packed_weight(n.src[MoeExpertsArg::GATE]) || packed_weight(n.src[MoeExpertsArg::UP]) ||
                    packed_weight(n.src[MoeExpertsArg::DOWN]))
                    launch_moe_experts_packed(n, stream_, scratch(moe_packed_scratch_bytes(n)));
                else
                    launch_moe_experts(n, stream_, scratch(moe_scratch_bytes(n)));
                break;
            case Op::SHORTCONV: launch_shortconv(n, stream_); break;
            case Op::MUL_BCAST: case Op::CONCAT: case Op::SITU: case Op::RES_MIX: launch_mix(n, stream_); break;
            case Op::UNARY: launch_unary(n, stream_); break;
            case Op::DELTA_NET: launch_delta_net(n, stream_); break;
            case Op::MATMUL_HEADS: launch_matmul_heads(n, stream_, act_scratch(n)); break;
            case Op::MOE_GATHER_WEIGHTS: launch_moe_gather_weights(n, stream_); break;
            case Op::COPY: copy(*n.src[0], *n.out); break;
            default: fail(name_, ": no kernel for ", op_name(n.op));
        }
        const cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess)
            fail("CUDA error in ", op_name(n.op), " '", n.out->name, "'", n.layer >= 0 ? " (layer " : "",
                 n.layer >= 0 ? std::to_string(n.layer) + ")" : std::string(), " on ", name_, ": ",
                 cudaGetErrorString(err));
    }

    // Two nodes in one launch: a residual ADD and the RMS_NORM of its result, the ROPE of q
    // and of k, the norms of q and of k, a MoE selection and its weights.
    void launch_pair(Pair kind, const Node& a, const Node& b) {
        const char* what = "ADD+RMS_NORM";
        switch (kind) {
            case ADD_NORM: launch_add_rms_norm(a, b, stream_); break;
            case ROPE_PAIR: what = "ROPE x2"; launch_rope_pair(a, &b, stream_); break;
            case MOE_ROUTE: what = "MOE_TOPK+MOE_WEIGHTS"; launch_moe_route_pair(a, b, stream_); break;
            case NORM_PAIR: what = "RMS_NORM x2"; launch_norm_pair(a, b, stream_); break;
            default: fail(name_, ": no paired launch ", int(kind));
        }
        const cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess)
            fail("CUDA error in ", what, " '", b.out->name, "'",
                 b.layer >= 0 ? " (layer " + std::to_string(b.layer) + ")" : std::string(), " on ", name_, ": ",
                 cudaGetErrorString(err));
    }

    // Products of one input in one launch: packed weights (matmul_packed_fusable pairs) or
    // F16/BF16 on tensor cores (mma16_fusable).
    void launch_matmul_group(const Node* const* nodes, int count, bool packed, const ActPrologue* pro = nullptr) {
        if (packed) launch_matmul_packed(nodes, count, stream_, scratch(matmul_packed_scratch_bytes(nodes, count)), pro);
        else launch_matmul_mma16(nodes, count, stream_, act_scratch(*nodes[0]));
        const cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess)
            fail("CUDA error in MATMUL x", count, " '", nodes[0]->out->name, "'",
                 nodes[0]->layer >= 0 ? " (layer " + std::to_string(nodes[0]->layer) + ")" : std::string(), " on ",
                 name_, ": ", cudaGetErrorString(err));
    }

    // Scratch for a product's rounded activations (act_rounding): x's values, contiguous.
    float* act_scratch(const Node& n) {
        const Tensor& x = *n.src[MatmulArg::X];
        return act_rounding(n.src[MatmulArg::W]->type) ? scratch(size_t(x.n_elements()) * sizeof(float)) : nullptr;
    }

    // Per-op scratch on the device, grown as needed (kept between steps).
    float* scratch(size_t bytes) {
        if (bytes > scratch_bytes_) {
            if (scratch_) {
                cudaStreamSynchronize(stream_);
                free(scratch_);
            }
            scratch_ = alloc(bytes, MemoryKind::ACTIVATIONS, "op scratch");
            scratch_bytes_ = bytes;
            ++scratch_gen_;
        }
        return static_cast<float*>(scratch_);
    }
    // Zeroed ints that kernels leave zero (attention's split counters), grown as needed.
    int* counters(size_t n) {
        if (n > counters_n_) {
            if (counters_) {
                cudaStreamSynchronize(stream_);
                free(counters_);
            }
            counters_ = alloc(n * sizeof(int), MemoryKind::ACTIVATIONS, "split counters");
            GLIA_CUDA_CHECK(cudaMemsetAsync(counters_, 0, n * sizeof(int), stream_), "zeroing counters on " + name_);
            counters_n_ = n;
            ++scratch_gen_;
        }
        return static_cast<int*>(counters_);
    }
    bool fuse() const { return fuse_; }
    // Changes whenever the scratch moves (captured graphs hold its address).
    uint64_t scratch_gen() const { return scratch_gen_; }
    bool graphs() const { return graphs_; }

private:
    void* scratch_ = nullptr;
    size_t scratch_bytes_ = 0;
    uint64_t scratch_gen_ = 0;
    void* counters_ = nullptr;
    size_t counters_n_ = 0;
    bool graphs_ = true;
    bool fuse_ = true;  // GLIA_FUSE_MATMUL=0: no fused launches (bisecting)
    int ordinal_;
    std::string name_;
    cudaStream_t stream_ = nullptr;
    bool trace_ = false;
    struct Mem { size_t bytes; MemoryKind kind; std::string purpose; };
    std::unique_ptr<Staging> staging_;
    long long pinned_ = 0;
    mutable std::mutex mu_;
    std::map<void*, Mem> mem_;
    size_t used_ = 0;
    struct Copy { void* mem; int refs; };
    std::map<const void*, Copy> weights_;
};

CudaSegment::CudaSegment(CudaBackend& b, const std::vector<const Node*>& nodes) : b_(b) {
    for (const Node* n : nodes) {
        Node m = *n;
        for (int i = 0; i < kMaxOperands; ++i) {
            const Tensor* s = n->src[i];
            if (!s || s->root()->role != TensorRole::WEIGHT) continue;
            void* d = b.weight_copy(*s->root());
            if (!d) fail(b.name(), ": weight '", s->name, "' of ", op_name(n->op), " was not uploaded");
            Tensor w = *s;
            w.data = static_cast<char*>(d) + s->root_offset();
            weights_.push_back(w);
            m.src[i] = &weights_.back();
        }
        nodes_.push_back(m);
        orig_.push_back(n);
        packed_.push_back(packed_weight(n->src[0]) ? 1 : 0);
    }
    // Consecutive packed (or F16/BF16 tensor-core) products of one input (q/k/v, gate/up)
    // launch together.
    const bool fuse = b.fuse();
    fused_.assign(nodes_.size(), 1);
    pair_.assign(nodes_.size(), 0);
    for (size_t i = 0; i < nodes_.size();) {
        size_t j = i + 1;
        if (fuse && nodes_[i].op == Op::MATMUL && packed_[i])
            while (j < nodes_.size() && int(j - i) < matmul_packed_max_group() && nodes_[j].op == Op::MATMUL &&
                   packed_[j] && matmul_packed_fusable(nodes_[i], nodes_[j]))
                ++j;
        else if (fuse && nodes_[i].op == Op::MATMUL && mma16_usable(nodes_[i]))
            while (j < nodes_.size() && int(j - i) < mma16_max_group() && nodes_[j].op == Op::MATMUL && !packed_[j] &&
                   mma16_fusable(nodes_[i], nodes_[j]))
                ++j;
        if (fuse && j == i + 1 && j < nodes_.size()) {  // launched with the next node
            pair_[i] = pair_of(nodes_[i], nodes_[j]);
            if (pair_[i] != NONE) ++j;
        }
        fused_[i] = uint8_t(j - i);
        for (size_t k = i + 1; k < j; ++k) fused_[k] = 0;
        i = j;
    }
    // One-token product groups take the SWIGLU, RMS_NORM or ADD + RMS_NORM before them as
    // their prologue.
    pro_.assign(nodes_.size(), PRO_NONE);
    for (size_t g = 1; fuse && g < nodes_.size(); ++g) {
        if (fused_[g] == 0 || nodes_[g].op != Op::MATMUL || !packed_[g] || pair_[g]) continue;
        const Node* prods[8];
        int64_t blocks = 0;  // each block makes the whole row: not for grids of too many (prologue_max_blocks)
        for (int k = 0; k < fused_[g]; ++k) {
            prods[k] = &nodes_[g + size_t(k)];
            blocks += (prods[k]->src[MatmulArg::W]->ne[1] + 31) / 32;
        }
        if (blocks > prologue_max_blocks()) continue;
        if (g >= 2 && pair_[g - 2] == ADD_NORM) {
            const Node* pre[2] = {&nodes_[g - 2], &nodes_[g - 1]};
            if (prologues_enabled(PRO_ADD_NORM) && prologue_fusable(pre, 2, prods, fused_[g], true) == PRO_ADD_NORM) {
                pro_[g] = PRO_ADD_NORM;
                fused_[g - 2] = 0, pair_[g - 2] = NONE;
            }
            continue;
        }
        if (fused_[g - 1] != 1 || pair_[g - 1]) continue;
        const Node* pre[1] = {&nodes_[g - 1]};
        const ProKind k = prologue_fusable(pre, 1, prods, fused_[g], true);
        if (k != PRO_NONE && prologues_enabled(k)) pro_[g] = k, fused_[g - 1] = 0;
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
        const bool copy = nodes_[i].op == Op::COPY;
        if (runs_.empty() || runs_.back().copy || copy) runs_.push_back(Run{i, 0, copy});
        ++runs_.back().count;
    }
}

CudaSegment::~CudaSegment() {
    for (Run& r : runs_)
        if (r.exec) cudaGraphExecDestroy(r.exec);
}

void CudaSegment::launch_range(size_t first, size_t count) {
    for (size_t i = first; i < first + count; ++i) {
        if (fused_[i] == 0) continue;
        if (pair_[i]) {
            b_.launch_pair(Pair(pair_[i]), nodes_[i], nodes_[i + 1]);
        } else if (fused_[i] > 1 || pro_[i]) {
            const Node* group[8];
            for (int k = 0; k < fused_[i]; ++k) group[k] = &nodes_[i + size_t(k)];
            if (pro_[i]) {
                const ProKind kind = ProKind(pro_[i]);
                const size_t first = i - (kind == PRO_ADD_NORM ? 2 : 1);
                const Node* pre[2] = {&nodes_[first], &nodes_[first + 1]};
                const ActPrologue pro = prologue_of(kind, pre);
                b_.launch_matmul_group(group, fused_[i], true, &pro);
            } else {
                b_.launch_matmul_group(group, fused_[i], packed_[i] != 0);
            }
        } else {
            b_.launch(nodes_[i], packed_[i] != 0);
        }
    }
}

void CudaSegment::run(NodeTimer* timer) {
    if (!timer) {
        const cudaStream_t st = b_.stream();
        for (Run& r : runs_) {
            if (r.copy || !b_.graphs() || r.count < 2) {
                launch_range(r.first, r.count);
                continue;
            }
            if (r.exec && r.scratch_gen == b_.scratch_gen()) {
                GLIA_CUDA_CHECK(cudaGraphLaunch(r.exec, st), std::string("replaying a step on ") + b_.name());
                continue;
            }
            if (r.runs++ == 0) {  // the first run sizes the scratch; capture on the next
                launch_range(r.first, r.count);
                continue;
            }
            GLIA_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal),
                            std::string("capturing a step on ") + b_.name());
            cudaGraph_t g = nullptr;
            try {
                launch_range(r.first, r.count);
            } catch (...) {
                cudaStreamEndCapture(st, &g);
                if (g) cudaGraphDestroy(g);
                throw;
            }
            GLIA_CUDA_CHECK(cudaStreamEndCapture(st, &g), std::string("capturing a step on ") + b_.name());
            if (r.exec) cudaGraphExecDestroy(r.exec);
            r.exec = nullptr;
            const cudaError_t err = cudaGraphInstantiate(&r.exec, g, 0);
            cudaGraphDestroy(g);
            GLIA_CUDA_CHECK(err, std::string("instantiating a step graph on ") + b_.name());
            r.scratch_gen = b_.scratch_gen();
            GLIA_CUDA_CHECK(cudaGraphLaunch(r.exec, st), std::string("replaying a step on ") + b_.name());
        }
        return;
    }
    // Timed: an event pair per node (GLIA_PROFILE, the op harness).
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (size_t i = 0; i < nodes_.size(); ++i) {
        cudaEventRecord(e0, b_.stream());
        b_.launch(nodes_[i], packed_[i] != 0);
        cudaEventRecord(e1, b_.stream());
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        timer->record(*orig_[i], ms * 1e-3);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}

}  // namespace

std::unique_ptr<Backend> create_backend(int ordinal) { return std::make_unique<CudaBackend>(ordinal); }

bool node_supported(const Node& n) { return CudaBackend::supports_node(n); }

bool launched_together(const Node& a, const Node& b) { return pair_of(a, b) != NONE; }

bool pairs_with_next(const Node& a, const Node& b) {
    if (pair_of(a, b, false) != NONE) return true;
    // A prologue and its products (prologue.h), and the products of one packed group: what
    // each reads and writes lives until the launch's last node.
    if (b.op != Op::MATMUL || !packed_weight(b.src[MatmulArg::W])) return false;
    if (a.op == Op::MATMUL && packed_weight(a.src[MatmulArg::W])) return matmul_packed_fusable(a, b);
    const Node* pre[1] = {&a};
    const Node* prods[1] = {&b};
    return prologue_fusable(pre, 1, prods, 1, false) != PRO_NONE;
}

bool prologue_launches_with(const Node* const* pre, int npre, const Node* const* products, int count) {
    return prologue_fusable(pre, npre, products, count, true) != PRO_NONE;
}

bool products_grouped(const Node& a, const Node& b) { return mma16_max_group() > 1 && mma16_fusable(a, b); }

}  // namespace glia::cuda
