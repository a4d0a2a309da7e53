#include "backend/cpu/cpu_backend.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"
#include "quant/quant.h"

namespace glia::cpu {

CpuBackend::CpuBackend(int n_threads, bool decode_layout) : pool_(n_threads) {
    if (pack_cache_enabled()) pack_cache_ = std::make_unique<PackCache>();
    const char* f = std::getenv("GLIA_FUSE_MATMUL");
    fuse_matmul_ = !(f && std::string(f) == "0");
    if (decode_layout) decode_cache_ = std::make_unique<DecodeCache>();
}

namespace {

bool is(const Tensor* t, DType d) { return t && t->type == d; }
bool has_dot(const Tensor* w) { return w && quant::supported(w->type) && quant::traits(w->type).vec_dot; }
// KV pages the attention kernels read (Graph::attention checks that the heads fit the blocks).
bool kv_page_type(const Tensor* t) {
    return t && (t->type == DType::F16 || t->type == DType::BF16 || t->type == DType::Q8_0 || t->type == DType::Q4_0);
}

}  // namespace

// What the kernels handle: activations in F32, ids and positions in I32, KV pages in F16,
// BF16, Q8_0 or Q4_0, weights of every type with a dequantizer (row lookups) or a dot product (products).
bool CpuBackend::supports(const Node& n) const {
    const auto& s = n.src;
    switch (n.op) {
        case Op::GET_ROWS:
            return s[0] && quant::supported(s[0]->type) && is(s[1], DType::I32);
        case Op::RMS_NORM: return is(s[0], DType::F32) && (!s[1] || is(s[1], DType::F32));
        case Op::ADD: case Op::MUL: return is(s[0], DType::F32) && is(s[1], DType::F32);
        case Op::SCALE: case Op::SOFTCAP: case Op::ARGMAX: return is(s[0], DType::F32);
        case Op::MATMUL: return has_dot(s[0]) && is(s[1], DType::F32);
        case Op::ROPE:
            return is(s[0], DType::F32) && is(s[1], DType::I32) &&
                   (n.p<RopeParams>().type == RopeType::NORMAL || n.p<RopeParams>().type == RopeType::NEOX);
        case Op::ATTENTION:
            return is(s[AttnArg::Q], DType::F32) && is(s[AttnArg::K], DType::F32) && is(s[AttnArg::V], DType::F32) &&
                   kv_page_type(s[AttnArg::K_CACHE]) && kv_page_type(s[AttnArg::V_CACHE]);
        case Op::SWIGLU: case Op::GEGLU: return is(s[0], DType::F32) && is(s[1], DType::F32);
        case Op::MOE_TOPK: return is(s[0], DType::F32);
        case Op::MOE_WEIGHTS: return is(s[0], DType::F32) && is(s[1], DType::I32);
        case Op::MOE_EXPERTS:
            return is(s[MoeExpertsArg::X], DType::F32) && has_dot(s[MoeExpertsArg::GATE]) &&
                   has_dot(s[MoeExpertsArg::UP]) && has_dot(s[MoeExpertsArg::DOWN]);
        case Op::SHORTCONV: return is(s[0], DType::F32) && is(s[1], DType::F32) && is(s[2], DType::F32);
        case Op::COPY: return s[0] && s[0]->type == n.out->type;
        case Op::ROPE_FREQS:
            return is(s[0], DType::F32) && is(s[1], DType::I32) && is(s[2], DType::F32) &&
                   (n.p<RopeParams>().type == RopeType::NORMAL || n.p<RopeParams>().type == RopeType::NEOX);
        case Op::UNARY: return is(s[0], DType::F32);
        case Op::DELTA_NET:
            for (int i = DeltaNetArg::Q; i <= DeltaNetArg::STATE; ++i)
                if (!is(s[i], DType::F32)) return false;
            return is(s[DeltaNetArg::SEQ], DType::I32);
        case Op::MUL_BCAST: case Op::CONCAT: return is(s[0], DType::F32) && is(s[1], DType::F32);
        case Op::MATMUL_HEADS: return has_dot(s[0]) && is(s[1], DType::F32);
        case Op::RES_MIX: return is(s[0], DType::F32) && is(s[1], DType::F32) && is(s[2], DType::F32);
        case Op::SITU: return is(s[0], DType::F32) && is(s[1], DType::F32);
        case Op::MOE_GATHER_WEIGHTS: return is(s[0], DType::F32) && is(s[1], DType::I32);
        case Op::MOE_EXPERTS_GLU:
            return n.p<GluParams>().kind != GluKind::GEGLU && is(s[MoeExpertsArg::X], DType::F32) &&
                   has_dot(s[MoeExpertsArg::GATE]) && has_dot(s[MoeExpertsArg::UP]) && has_dot(s[MoeExpertsArg::DOWN]);
        case Op::ALL_REDUCE: case Op::ALL_GATHER:
            return is(s[0], DType::F32) && s[0]->is_contiguous() && n.p<CollectiveParams>().comm;
        case Op::NONE: case Op::COUNT: break;
    }
    return false;
}

void* CpuBackend::alloc(size_t bytes, MemoryKind, const std::string&) {
    HugeBuffer b(std::max<size_t>(bytes, 64));
    void* p = b.data();
    std::lock_guard<std::mutex> lk(mem_mu_);
    mem_.emplace(p, std::move(b));
    return p;
}

void CpuBackend::free(void* p) {
    std::lock_guard<std::mutex> lk(mem_mu_);
    mem_.erase(p);
}

void CpuBackend::zero(void* p, size_t bytes) { std::memset(p, 0, bytes); }

// The CPU reads weights in place; what it derives from them (GEMM panels, packed on first
// use) is dropped when the last user of the weight releases it.
void CpuBackend::prepare_weight(const Tensor& w) {
    std::lock_guard<std::mutex> lk(mem_mu_);
    ++prepared_[w.data];
}

void CpuBackend::release_weight(const Tensor& w) {
    std::lock_guard<std::mutex> lk(mem_mu_);
    auto it = prepared_.find(w.data);
    if (it == prepared_.end() || --it->second > 0) return;
    prepared_.erase(it);
    if (pack_cache_) pack_cache_->forget(static_cast<const uint8_t*>(w.data), w.nbytes());
    if (decode_cache_) decode_cache_->forget(static_cast<const uint8_t*>(w.data), w.nbytes());
}

void copy_strided(const Tensor& src, Tensor& dst) {
    if (src.type != dst.type) fail("copy: '", src.name, "' is ", dtype_name(src.type), ", '", dst.name, "' ",
                                   dtype_name(dst.type));
    for (int d = 0; d < 4; ++d)
        if (src.ne[d] != dst.ne[d]) fail("copy: shapes ", src.shape_str(), " and ", dst.shape_str(), " differ");
    if (src.is_contiguous() && dst.is_contiguous()) {
        std::memcpy(dst.data, src.data, src.nbytes());
        return;
    }
    const size_t row = src.row_size();
    for (int64_t i3 = 0; i3 < src.ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < src.ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < src.ne[1]; ++i1) std::memcpy(dst.row(i1, i2, i3), src.row(i1, i2, i3), row);
}

void CpuBackend::copy(const Tensor& src, Tensor& dst) { copy_strided(src, dst); }

size_t CpuBackend::run_from(const std::vector<const Node*>& nodes, size_t i) {
    const Node& n = *nodes[i];
    if (fuse_matmul_ && n.op == Op::MATMUL) {
        const Node* group[8] = {&n};
        int m = 1;
        while (m < 8 && i + m < nodes.size() && matmul_group_fusable(n, *nodes[i + m], decode_cache_ != nullptr)) {
            group[m] = nodes[i + m];
            ++m;
        }
        if (m > 1) {
            op_matmul_group(group, m, pool_, scratch_, decode_cache_.get());
            return static_cast<size_t>(m);
        }
    }
    run(n);
    return 1;
}

void CpuBackend::run(const Node& n) {
    switch (n.op) {
        case Op::GET_ROWS: op_get_rows(n, pool_); break;
        case Op::RMS_NORM: op_rms_norm(n, pool_); break;
        case Op::ADD: case Op::MUL: case Op::SCALE: op_binary(n, pool_); break;
        case Op::MATMUL: op_matmul(n, pool_, scratch_, pack_cache_.get(), decode_cache_.get()); break;
        case Op::ROPE: op_rope(n, pool_); break;
        case Op::ATTENTION: op_attention(n, pool_); break;
        case Op::SWIGLU: case Op::GEGLU: op_glu(n, pool_); break;
        case Op::SOFTCAP: op_softcap(n, pool_); break;
        case Op::ARGMAX: op_argmax(n, pool_); break;
        case Op::MOE_TOPK: op_moe_topk(n, pool_); break;
        case Op::MOE_WEIGHTS: op_moe_weights(n, pool_); break;
        case Op::MOE_EXPERTS: op_moe_experts(n, pool_, decode_cache_.get()); break;
        case Op::SHORTCONV: op_shortconv(n); break;
        case Op::COPY: copy_strided(*n.src[0], *n.out); break;
        case Op::ROPE_FREQS: op_rope_freqs(n, pool_); break;
        case Op::UNARY: op_unary(n, pool_); break;
        case Op::DELTA_NET: op_delta_net(n, pool_); break;
        case Op::MUL_BCAST: op_mul_bcast(n, pool_); break;
        case Op::CONCAT: op_concat(n, pool_); break;
        case Op::MATMUL_HEADS: op_matmul_heads(n, pool_); break;
        case Op::RES_MIX: op_res_mix(n, pool_); break;
        case Op::SITU: op_situ(n, pool_); break;
        case Op::MOE_GATHER_WEIGHTS: op_moe_gather_weights(n, pool_); break;
        case Op::MOE_EXPERTS_GLU: op_moe_experts_glu(n, pool_, decode_cache_.get()); break;
        case Op::ALL_REDUCE: op_all_reduce(n); break;
        case Op::ALL_GATHER: op_all_gather(n); break;
        default: fail("cpu backend: op ", op_name(n.op), " not implemented");
    }
}

namespace {

// The CPU runs a segment's nodes in order; fusion happens inside it (run_from).
class CpuSegment : public Segment {
public:
    CpuSegment(CpuBackend& b, std::vector<const Node*> nodes) : b_(b), nodes_(std::move(nodes)) {}
    void run(NodeTimer* timer) override {
        std::lock_guard<std::mutex> lk(b_.run_mutex());
        for (size_t i = 0; i < nodes_.size();) {
            const auto t0 = timer ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
            const size_t ran = b_.run_from(nodes_, i);
            if (timer) {
                // A fused group's time is shared evenly by its nodes.
                const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                for (size_t j = i; j < i + ran; ++j) timer->record(*nodes_[j], sec / double(ran));
            }
            i += ran;
        }
    }

private:
    CpuBackend& b_;
    std::vector<const Node*> nodes_;
};

}  // namespace

std::unique_ptr<Segment> CpuBackend::compile(const std::vector<const Node*>& nodes) {
    for (const Node* n : nodes)
        if (!supports(*n)) fail("cpu backend: cannot run ", op_name(n->op), " '", n->out->name, "'");
    // Weights that ops other than the products read (a tied embedding's row lookups) keep
    // their pages when a product's decode layout is built from them (DecodeCache::get).
    if (decode_cache_)
        for (const Node* n : nodes) {
            if (n->op == Op::MATMUL || n->op == Op::MOE_EXPERTS || n->op == Op::MOE_EXPERTS_GLU) continue;
            for (int i = 0; i < n->n_src(); ++i) {
                const Tensor* r = n->src[i] ? n->src[i]->root() : nullptr;
                if (r && r->role == TensorRole::WEIGHT && r->data) decode_cache_->keep_pages(r->data, r->nbytes());
            }
        }
    return std::make_unique<CpuSegment>(*this, nodes);
}

}  // namespace glia::cpu

namespace glia {

const char* memory_kind_name(MemoryKind k) {
    switch (k) {
        case MemoryKind::ACTIVATIONS: return "activations";
        case MemoryKind::STATE: return "state";
        case MemoryKind::WEIGHTS: return "weights";
        case MemoryKind::STAGING: return "staging";
    }
    return "?";
}

}  // namespace glia
