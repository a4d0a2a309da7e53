// NOT RUN YET (see nccl_communicator.h): compiled, never executed on GPUs.
#include "parallel/nccl_communicator.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace glia {
namespace {

// libnccl is loaded when a communicator is made (it is ~200 MB: every glia binary and test
// would otherwise map it at start), from the loader's path ($LD_LIBRARY_PATH, or the
// toolkit's lib folder this build was configured with).
struct Nccl {
    decltype(&ncclGetUniqueId) get_unique_id = nullptr;
    decltype(&ncclCommInitRank) comm_init_rank = nullptr;
    decltype(&ncclAllGather) all_gather = nullptr;
    decltype(&ncclCommDestroy) comm_destroy = nullptr;
    decltype(&ncclCommAbort) comm_abort = nullptr;
    decltype(&ncclGetErrorString) error_string = nullptr;
};

const Nccl& nccl() {
    static const Nccl lib = [] {
        void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
#ifdef GLIA_NCCL_DIR
        if (!h) h = dlopen(GLIA_NCCL_DIR "/libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
#endif
        if (!h) fail("NCCL communicator: cannot load libnccl.so.2 (", dlerror(), "); add its folder to LD_LIBRARY_PATH");
        Nccl n;
        auto sym = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
            if (!fn) fail("NCCL communicator: libnccl.so.2 has no ", name);
        };
        sym(n.get_unique_id, "ncclGetUniqueId");
        sym(n.comm_init_rank, "ncclCommInitRank");
        sym(n.all_gather, "ncclAllGather");
        sym(n.comm_destroy, "ncclCommDestroy");
        sym(n.comm_abort, "ncclCommAbort");
        sym(n.error_string, "ncclGetErrorString");
        return n;
    }();
    return lib;
}

void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) fail("NCCL communicator: ", what, ": ", cudaGetErrorString(e));
}
void check_nccl(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) fail("NCCL communicator: ", what, ": ", nccl().error_string(r));
}

class NcclCommunicator : public Communicator {
public:
    NcclCommunicator(int rank, int world, const std::string& id, int device) : rank_(rank), world_(world), device_(device) {
        if (id.size() != sizeof(ncclUniqueId))
            fail("NCCL communicator: the unique id has ", id.size(), " bytes, NCCL's has ", sizeof(ncclUniqueId));
        ncclUniqueId uid;
        std::memcpy(&uid, id.data(), sizeof uid);
        check_cuda(cudaSetDevice(device_), "cudaSetDevice");
        check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
        check_nccl(nccl().comm_init_rank(&comm_, world_, uid, rank_), "ncclCommInitRank");
    }
    ~NcclCommunicator() override {
        if (comm_) nccl().comm_destroy(comm_);
        if (buf_) cudaFree(buf_);
        if (stream_) cudaStreamDestroy(stream_);
    }
    int rank() const override { return rank_; }
    int world() const override { return world_; }
    const char* kind() const override { return "nccl"; }

    void all_reduce_sum(float* buf, size_t n) override {
        gather_to_host(buf, n);
        // Rank order, on the host: the same bits on every rank and as ThreadGroup gives.
        for (size_t i = 0; i < n; ++i) {
            float s = host_[i];
            for (int r = 1; r < world_; ++r) s += host_[size_t(r) * n + i];
            buf[i] = s;
        }
    }
    void all_gather(const float* in, float* out, size_t n) override {
        gather_to_host(in, n);
        std::memcpy(out, host_.data(), host_.size() * sizeof(float));
    }
    void abort(const std::string&) override {
        if (comm_) nccl().comm_abort(comm_);
        comm_ = nullptr;
    }

private:
    // host_ = every rank's n values, in rank order.
    void gather_to_host(const float* in, size_t n) {
        if (!comm_) fail("NCCL communicator: the group was aborted");
        const size_t bytes = n * sizeof(float), total = bytes * size_t(world_ + 1);
        check_cuda(cudaSetDevice(device_), "cudaSetDevice");
        if (total > cap_) {
            if (buf_) check_cuda(cudaFree(buf_), "cudaFree");
            check_cuda(cudaMalloc(&buf_, total), "cudaMalloc");
            cap_ = total;
        }
        auto* send = static_cast<float*>(buf_);
        float* recv = send + n;
        check_cuda(cudaMemcpyAsync(send, in, bytes, cudaMemcpyHostToDevice, stream_), "copy to the GPU");
        check_nccl(nccl().all_gather(send, recv, n, ncclFloat32, comm_, stream_), "ncclAllGather");
        host_.resize(n * size_t(world_));
        check_cuda(cudaMemcpyAsync(host_.data(), recv, bytes * size_t(world_), cudaMemcpyDeviceToHost, stream_),
                   "copy to the host");
        check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    }

    const int rank_, world_, device_;
    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;
    void* buf_ = nullptr;
    size_t cap_ = 0;
    std::vector<float> host_;
};

}  // namespace

std::string nccl_unique_id() {
    ncclUniqueId id;
    check_nccl(nccl().get_unique_id(&id), "ncclGetUniqueId");
    return std::string(reinterpret_cast<const char*>(&id), sizeof id);
}

std::unique_ptr<Communicator> make_nccl_communicator(int rank, int world, const std::string& id, int device) {
    return std::make_unique<NcclCommunicator>(rank, world, id, device);
}

}  // namespace glia
