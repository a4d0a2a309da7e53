#include "backend/registry.h"

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

}  // namespace glia
