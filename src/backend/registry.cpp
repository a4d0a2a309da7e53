#include "backend/registry.h"

#include "core/error.h"
#ifdef GLIA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace glia {

cpu::CpuBackend& cpu_backend(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    static std::mutex mu;
    // Never destroyed: worker threads outlive static destruction order at exit.
    static auto* backends = new std::map<int, std::unique_ptr<cpu::CpuBackend>>();
    std::lock_guard<std::mutex> lk(mu);
    auto& b = (*backends)[n_threads];
    if (!b) b = std::make_unique<cpu::CpuBackend>(n_threads);
    return *b;
}

Backend& cuda_backend(int ordinal) {
#ifdef GLIA_HAVE_CUDA
    static std::mutex mu;
    static auto* backends = new std::map<int, std::unique_ptr<Backend>>();
    std::lock_guard<std::mutex> lk(mu);
    auto& b = (*backends)[ordinal];
    if (!b) b = cuda::create_backend(ordinal);
    return *b;
#else
    (void)ordinal;
    fail("this glia was built without the CUDA backend (configure with nvcc present, GLIA_CUDA=ON)");
#endif
}

int cuda_device_count() {
#ifdef GLIA_HAVE_CUDA
    return cuda::device_count();
#else
    return 0;
#endif
}

size_t cuda_free_memory(int ordinal) {
#ifdef GLIA_HAVE_CUDA
    return cuda::device_info(ordinal).free_bytes;
#else
    (void)ordinal;
    return 0;
#endif
}

}  // namespace glia
