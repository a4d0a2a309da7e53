// The CPU backend: reference kernels for every op, multi-threaded over rows.
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/simd/matmul.h"
#include "backend/cpu/threadpool.h"

namespace glia::cpu {

class CpuBackend : public Backend {
public:
    // The packed-weight cache (on unless $GLIA_PACK_CACHE=0) keeps GEMM panels of every
    // weight that takes the packed path; see PackCache.
    explicit CpuBackend(int n_threads);
    const char* name() const override { return "cpu"; }
    bool supports(const Node& node) const override;
    void run(const Node& node) override;
    // Fuses consecutive decode-sized matrix products of one input (GLIA_FUSE_MATMUL=0: off).
    size_t run_from(const std::vector<Node>& nodes, size_t i) override;
    ThreadPool& pool() { return pool_; }
    size_t packed_bytes() const { return pack_cache_ ? pack_cache_->bytes() : 0; }

private:
    ThreadPool pool_;
    std::vector<uint8_t> scratch_;  // quantized activations for MATMUL
    std::unique_ptr<PackCache> pack_cache_;
    bool fuse_matmul_ = true;
};

// Runs fn(row_begin, row_end) over `rows` rows of `row_elems` values each: split across
// the pool when there is enough work to pay for waking it, on the caller otherwise.
template <class F>
void for_rows(ThreadPool& pool, int64_t rows, int64_t row_elems, F&& fn) {
    constexpr int64_t kMinParallelElems = 16384;
    if (rows < 2 || rows * row_elems < kMinParallelElems) fn(int64_t(0), rows);
    else pool.parallel_for(rows, fn);
}

// Op kernels (one file each); `pool` parallelises over rows.
void op_get_rows(const Node& n, ThreadPool& pool);
void op_rms_norm(const Node& n, ThreadPool& pool);
void op_binary(const Node& n, ThreadPool& pool);  // ADD, MUL, SCALE
void op_matmul(const Node& n, ThreadPool& pool, std::vector<uint8_t>& scratch, PackCache* cache);
// Several matrix products of one input on the row path (decode: q/k/v, gate/up): the input
// is quantized once and all weights' row tiles go to the pool in one dispatch.
bool matmul_group_fusable(const Node& a, const Node& b);
void op_matmul_group(const Node* const* nodes, int n, ThreadPool& pool, std::vector<uint8_t>& scratch);
void op_rope(const Node& n, ThreadPool& pool);
void op_attention(const Node& n, ThreadPool& pool);
void op_glu(const Node& n, ThreadPool& pool);  // SWIGLU, GEGLU
void op_softcap(const Node& n, ThreadPool& pool);
void op_moe(const Node& n, ThreadPool& pool);
void op_shortconv(const Node& n);

}  // namespace glia::cpu
