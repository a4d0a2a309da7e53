#include "backend/cpu/cpu_backend.h"

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace glia::cpu {

CpuBackend::CpuBackend(int n_threads) : pool_(n_threads) {
    const char* e = std::getenv("GLIA_PACK_CACHE");
    if (!(e && std::string(e) == "0")) pack_cache_ = std::make_unique<PackCache>();
    const char* f = std::getenv("GLIA_FUSE_MATMUL");
    fuse_matmul_ = !(f && std::string(f) == "0");
}

size_t CpuBackend::run_from(const std::vector<Node>& nodes, size_t i) {
    const Node& n = nodes[i];
    if (fuse_matmul_ && n.op == Op::MATMUL) {
        const Node* group[8] = {&n};
        int m = 1;
        while (m < 8 && i + m < nodes.size() && matmul_group_fusable(n, nodes[i + m])) {
            group[m] = &nodes[i + m];
            ++m;
        }
        if (m > 1) {
            op_matmul_group(group, m, pool_, scratch_);
            return static_cast<size_t>(m);
        }
    }
    run(n);
    return 1;
}

bool CpuBackend::supports(const Node& node) const { return node.op != Op::NONE && node.op != Op::COUNT; }

void CpuBackend::run(const Node& n) {
    switch (n.op) {
        case Op::GET_ROWS: op_get_rows(n, pool_); break;
        case Op::RMS_NORM: op_rms_norm(n, pool_); break;
        case Op::ADD: case Op::MUL: case Op::SCALE: op_binary(n, pool_); break;
        case Op::MATMUL: op_matmul(n, pool_, scratch_, pack_cache_.get()); break;
        case Op::ROPE: op_rope(n, pool_); break;
        case Op::ATTENTION: op_attention(n, pool_); break;
        case Op::SWIGLU: case Op::GEGLU: op_glu(n, pool_); break;
        case Op::SOFTCAP: op_softcap(n, pool_); break;
        case Op::MOE: op_moe(n, pool_); break;
        case Op::SHORTCONV: op_shortconv(n); break;
        default: fail("cpu backend: op ", op_name(n.op), " not implemented");
    }
}

}  // namespace glia::cpu
