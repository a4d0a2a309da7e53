// The CPU backend: reference kernels for every op, multi-threaded over rows.
#pragma once
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/threadpool.h"

namespace glia::cpu {

class CpuBackend : public Backend {
public:
    explicit CpuBackend(int n_threads);
    const char* name() const override { return "cpu"; }
    bool supports(const Node& node) const override;
    void run(const Node& node) override;
    ThreadPool& pool() { return pool_; }

private:
    ThreadPool pool_;
    std::vector<uint8_t> scratch_;  // quantized activations for MATMUL
};

// Op kernels (one file each); `pool` parallelises over rows.
void op_get_rows(const Node& n);
void op_rms_norm(const Node& n, ThreadPool& pool);
void op_binary(const Node& n);  // ADD, MUL, SCALE
void op_matmul(const Node& n, ThreadPool& pool, std::vector<uint8_t>& scratch);
void op_rope(const Node& n);
void op_attention(const Node& n, ThreadPool& pool);
void op_glu(const Node& n);      // SWIGLU, GEGLU
void op_softcap(const Node& n);
void op_moe(const Node& n, ThreadPool& pool);
void op_shortconv(const Node& n);

}  // namespace glia::cpu
