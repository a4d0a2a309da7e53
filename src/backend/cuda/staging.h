// Weight upload through pinned host buffers: the mapped file is copied by the CPU into one
// of two pinned buffers while the copy engine moves the other to the device, so the upload
// runs at DMA speed instead of the driver's pageable path (which stages through its own
// small buffer and blocks). The buffers exist only while uploads happen: release() after
// load gives them back. Without pinned memory (cudaHostAlloc refused) it falls back to
// plain cudaMemcpyAsync.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

namespace glia::cuda {

class Staging {
public:
    // trace(bytes, purpose): called for each pinned allocation (bytes > 0) and release
    // (bytes < 0), so that GLIA_TRACE_ALLOC logs them.
    using Trace = std::function<void(long long bytes, const std::string& purpose)>;
    explicit Staging(Trace trace, size_t chunk_bytes = size_t(64) << 20);
    ~Staging();
    Staging(const Staging&) = delete;
    Staging& operator=(const Staging&) = delete;

    // Copies `bytes` from host memory `src` to device memory `dst` on stream `s`. Returns
    // once `src` has been read; the device copy is complete for later work on `s`.
    void upload(void* dst, const void* src, size_t bytes, cudaStream_t s, const std::string& what);
    // Waits for the pending copies and frees the pinned buffers.
    void release();

private:
    bool ensure();
    void release_locked();
    Trace trace_;
    size_t chunk_;
    struct Buf { void* p = nullptr; cudaEvent_t done = nullptr; };
    Buf buf_[2];
    int next_ = 0;
    bool failed_ = false;  // pinned memory refused: plain copies from now on
    std::mutex mu_;        // one upload at a time (the buffers alternate)
};

}  // namespace glia::cuda
