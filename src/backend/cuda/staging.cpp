#include "backend/cuda/staging.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace glia::cuda {

Staging::Staging(Trace trace, size_t chunk_bytes) : trace_(std::move(trace)), chunk_(chunk_bytes) {}

Staging::~Staging() { release(); }

void Staging::release() {
    std::lock_guard<std::mutex> lk(mu_);
    release_locked();
}

bool Staging::ensure() {
    if (failed_) return false;
    if (buf_[0].p) return true;
    for (Buf& b : buf_) {
        if (cudaHostAlloc(&b.p, chunk_, cudaHostAllocDefault) != cudaSuccess ||
            cudaEventCreateWithFlags(&b.done, cudaEventDisableTiming) != cudaSuccess) {
            cudaGetLastError();
            if (b.p) cudaFreeHost(b.p);
            b.p = nullptr;
            release_locked();
            failed_ = true;
            return false;
        }
        if (trace_) trace_(static_cast<long long>(chunk_), "upload staging (pinned)");
    }
    return true;
}

void Staging::upload(void* dst, const void* src, size_t bytes, cudaStream_t s, const std::string& what) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!ensure()) {
        const cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s);
        if (err != cudaSuccess) fail("CUDA error uploading '", what, "': ", cudaGetErrorString(err));
        return;
    }
    for (size_t off = 0; off < bytes; off += chunk_) {
        const size_t n = std::min(chunk_, bytes - off);
        Buf& b = buf_[next_];
        next_ ^= 1;
        // The buffer's previous copy must have left it before the CPU refills it.
        cudaError_t err = cudaEventSynchronize(b.done);
        if (err == cudaSuccess) {
            std::memcpy(b.p, static_cast<const char*>(src) + off, n);
            err = cudaMemcpyAsync(static_cast<char*>(dst) + off, b.p, n, cudaMemcpyHostToDevice, s);
        }
        if (err == cudaSuccess) err = cudaEventRecord(b.done, s);
        if (err != cudaSuccess) fail("CUDA error uploading '", what, "': ", cudaGetErrorString(err));
    }
}

void Staging::release_locked() {
    for (Buf& b : buf_) {
        if (b.done) {
            cudaEventSynchronize(b.done);
            cudaEventDestroy(b.done);
            b.done = nullptr;
        }
        if (b.p) {
            cudaFreeHost(b.p);
            b.p = nullptr;
            if (trace_) trace_(-static_cast<long long>(chunk_), "upload staging (pinned)");
        }
    }
    next_ = 0;
}

}  // namespace glia::cuda
