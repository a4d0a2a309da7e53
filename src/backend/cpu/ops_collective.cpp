// Collectives of tensor parallelism on the CPU: the node's communicator moves the data
// (ranks as threads share memory; the NCCL communicator stages host buffers through its
// GPU). The ranks reach these nodes in the same order, since they run the same graph.
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "parallel/communicator.h"

namespace glia::cpu {

void op_all_reduce(const Node& n) {
    const Tensor& x = *n.src[0];
    Tensor& out = *n.out;
    if (out.data != x.data) std::memcpy(out.data, x.data, x.nbytes());
    n.p<CollectiveParams>().comm->all_reduce_sum(out.ptr<float>(), static_cast<size_t>(out.n_elements()));
}

void op_all_gather(const Node& n) {
    const Tensor& x = *n.src[0];
    Tensor& out = *n.out;
    Communicator& c = *n.p<CollectiveParams>().comm;
    const size_t rows = static_cast<size_t>(x.ne[0]), cols = static_cast<size_t>(x.ne[1]);
    const size_t per_rank = rows * cols;
    if (cols == 1) {  // one column: the ranks' parts are already in place, stacked
        c.all_gather(x.ptr<float>(), out.ptr<float>(), per_rank);
        return;
    }
    std::vector<float> all(per_rank * static_cast<size_t>(c.world()));
    c.all_gather(x.ptr<float>(), all.data(), per_rank);
    float* o = out.ptr<float>();
    const size_t out_rows = rows * static_cast<size_t>(c.world());
    for (int r = 0; r < c.world(); ++r)
        for (size_t t = 0; t < cols; ++t)
            std::memcpy(o + t * out_rows + size_t(r) * rows, all.data() + size_t(r) * per_rank + t * rows,
                        rows * sizeof(float));
}

}  // namespace glia::cpu
