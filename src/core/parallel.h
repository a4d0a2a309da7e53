// Runs fn(begin, end) over [0, n) split into contiguous chunks on n_threads threads
// (the caller's thread takes part). The first exception thrown by a worker is rethrown.
//
// For the offline file pipeline (quantize, synth): threads are started per call, which
// costs microseconds against chunks of megabytes. The engine's loops use the persistent,
// spinning pool of the CPU backend instead (backend/cpu/threadpool.h), which is built for
// ops microseconds apart; the two overlap in purpose but not in cost model, so they stay
// separate until the pool can also carry exceptions and a minimum chunk size.
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace glia {

// 0 or negative: all hardware threads.
inline int resolve_threads(int n) {
    if (n > 0) return n;
    const unsigned h = std::thread::hardware_concurrency();
    return h ? static_cast<int>(h) : 1;
}

template <typename Fn>
void parallel_for(int64_t n, int n_threads, int64_t min_chunk, Fn&& fn) {
    if (n <= 0) return;
    n_threads = resolve_threads(n_threads);
    min_chunk = std::max<int64_t>(1, min_chunk);
    const int64_t max_threads = (n + min_chunk - 1) / min_chunk;
    const int nt = static_cast<int>(std::min<int64_t>(n_threads, max_threads));
    if (nt <= 1) {
        fn(int64_t(0), n);
        return;
    }
    std::exception_ptr err;
    std::mutex mu;
    auto run = [&](int t) {
        const int64_t b = n * t / nt, e = n * (t + 1) / nt;
        try {
            fn(b, e);
        } catch (...) {
            std::lock_guard<std::mutex> lk(mu);
            if (!err) err = std::current_exception();
        }
    };
    std::vector<std::thread> ts;
    for (int t = 1; t < nt; ++t) ts.emplace_back(run, t);
    run(0);
    for (auto& t : ts) t.join();
    if (err) std::rethrow_exception(err);
}

}  // namespace glia
