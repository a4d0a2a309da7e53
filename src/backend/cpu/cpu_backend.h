// The CPU backend: reference kernels for every op, multi-threaded over rows. One for the
// process (see backend/registry.h); its memory is host memory, so it reads weights in
// place from the mapped file and inputs where the runtime wrote them.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/simd/matmul.h"
#include "backend/cpu/threadpool.h"
#include "core/huge_buffer.h"

namespace glia::cpu {

class CpuBackend : public Backend {
public:
    // The packed-weight cache (on unless $GLIA_PACK_CACHE=0) keeps GEMM panels of every
    // weight that takes the packed path; see PackCache. `decode_layout`: keep a DecodeCache
    // (tests compare the bits with and without one).
    explicit CpuBackend(int n_threads, bool decode_layout = decode_layout_enabled());
    const char* name() const override { return "cpu"; }
    Device device() const override { return Device::CPU; }
    bool supports(const Node& node) const override;
    void* alloc(size_t bytes, MemoryKind kind, const std::string& purpose) override;
    void free(void* p) override;
    void zero(void* p, size_t bytes) override;
    void prepare_weight(const Tensor& w) override;
    void release_weight(const Tensor& w) override;
    void copy(const Tensor& src, Tensor& dst) override;
    std::unique_ptr<Segment> compile(const std::vector<const Node*>& nodes) override;

    // Runs one node (tests, the op harness). Not for concurrent callers: a compiled
    // segment holds run_mutex() while it runs, so runners on several threads (a serving
    // engine and a session, say) take turns on the one pool and scratch buffer.
    void run(const Node& node);
    std::mutex& run_mutex() { return run_mu_; }
    // Runs nodes[i] and, where fusing pays (several decode-sized matrix products of one
    // input, GLIA_FUSE_MATMUL=0: off), some nodes right after it; returns how many ran.
    size_t run_from(const std::vector<const Node*>& nodes, size_t i);

    ThreadPool& pool() { return pool_; }
    int n_threads() const { return pool_.size(); }
    size_t packed_bytes() const { return pack_cache_ ? pack_cache_->bytes() : 0; }
    size_t decode_layout_bytes() const { return decode_cache_ ? decode_cache_->bytes() : 0; }

private:
    ThreadPool pool_;
    std::vector<uint8_t> scratch_;  // quantized activations for MATMUL
    std::unique_ptr<PackCache> pack_cache_;
    std::unique_ptr<DecodeCache> decode_cache_;  // see decode_layout_enabled
    bool fuse_matmul_ = true;
    std::mutex run_mu_;
    std::mutex mem_mu_;
    std::map<void*, HugeBuffer> mem_;
    std::map<const void*, int> prepared_;  // weight data -> prepare count
};

// Runs fn(row_begin, row_end) over `rows` rows of `row_elems` values each: split across
// the pool when there is enough work to pay for waking it, on the caller otherwise.
template <class F>
void for_rows(ThreadPool& pool, int64_t rows, int64_t row_elems, F&& fn) {
    constexpr int64_t kMinParallelElems = 16384;
    if (rows < 2 || rows * row_elems < kMinParallelElems) fn(int64_t(0), rows);
    else pool.parallel_for(rows, fn);
}

// Copies the elements of src into dst (same type and shape, any strides), host memory.
void copy_strided(const Tensor& src, Tensor& dst);

// Op kernels (one file each); `pool` parallelises over rows. Inputs are valid (checked
// where they are made: token ids, positions, slots, expert ids).
void op_get_rows(const Node& n, ThreadPool& pool);
void op_rms_norm(const Node& n, ThreadPool& pool);
void op_binary(const Node& n, ThreadPool& pool);  // ADD, MUL, SCALE
void op_matmul(const Node& n, ThreadPool& pool, std::vector<uint8_t>& scratch, PackCache* cache,
               DecodeCache* decode);
// Several matrix products of one input on the row path (decode: q/k/v, gate/up): the input
// is quantized once and all weights' row tiles go to the pool in one dispatch. `layout`:
// the weights' decode layouts are at hand (a DecodeCache).
bool matmul_group_fusable(const Node& a, const Node& b, bool layout);
void op_matmul_group(const Node* const* nodes, int n, ThreadPool& pool, std::vector<uint8_t>& scratch,
                     DecodeCache* decode);
void op_rope(const Node& n, ThreadPool& pool);
void op_attention(const Node& n, ThreadPool& pool);
void op_glu(const Node& n, ThreadPool& pool);  // SWIGLU, GEGLU
void op_softcap(const Node& n, ThreadPool& pool);
void op_argmax(const Node& n, ThreadPool& pool);
void op_moe_topk(const Node& n, ThreadPool& pool);
void op_moe_weights(const Node& n, ThreadPool& pool);
// `decode`: the experts' products read their stacks' decode layouts (expert_decode_layout).
void op_moe_experts(const Node& n, ThreadPool& pool, DecodeCache* decode);
void op_shortconv(const Node& n);
void op_rope_freqs(const Node& n, ThreadPool& pool);
void op_unary(const Node& n, ThreadPool& pool);
void op_delta_net(const Node& n, ThreadPool& pool);
void op_mul_bcast(const Node& n, ThreadPool& pool);
void op_concat(const Node& n, ThreadPool& pool);
void op_res_mix(const Node& n, ThreadPool& pool);
void op_situ(const Node& n, ThreadPool& pool);
void op_moe_experts_glu(const Node& n, ThreadPool& pool, DecodeCache* decode);
void op_moe_gather_weights(const Node& n, ThreadPool& pool);
void op_matmul_heads(const Node& n, ThreadPool& pool);
void op_all_reduce(const Node& n);  // ALL_REDUCE, ALL_GATHER: through the node's communicator
void op_all_gather(const Node& n);
// beta tanh(g / beta) sigmoid(g) * linear_beta tanh(u / linear_beta), as the reference rounds it.
float situ_value(float g, float u, float beta, float linear_beta);

}  // namespace glia::cpu
