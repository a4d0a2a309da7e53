// A fixed pool of worker threads for data-parallel loops. The calling thread takes
// part as worker 0; parallel_for returns when every worker has finished its share.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace glia::cpu {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);  // n_threads <= 0: hardware concurrency
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }
    // fn(ith, nth): every worker runs fn once with its index.
    void run(const std::function<void(int ith, int nth)>& fn);
    // Splits [0, n) into contiguous ranges, one per worker: fn(begin, end).
    void parallel_for(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn);

private:
    void worker(int ith);
    int n_threads_;
    std::vector<std::thread> threads_;
    std::mutex mu_;
    std::condition_variable cv_start_, cv_done_;
    const std::function<void(int, int)>* job_ = nullptr;
    uint64_t generation_ = 0;
    int pending_ = 0;
    bool stop_ = false;
};

}  // namespace glia::cpu
