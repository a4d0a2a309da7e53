#include "backend/cpu/threadpool.h"

#include <algorithm>

namespace glia::cpu {

ThreadPool::ThreadPool(int n) {
    if (n <= 0) n = std::max(1u, std::thread::hardware_concurrency());
    n_threads_ = n;
    for (int i = 1; i < n; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_start_.notify_all();
    for (auto& t : threads_) t.join();
}

void ThreadPool::worker(int ith) {
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int, int)>* job;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_start_.wait(lk, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            job = job_;
        }
        (*job)(ith, n_threads_);
        {
            std::lock_guard<std::mutex> lk(mu_);
            if (--pending_ == 0) cv_done_.notify_one();
        }
    }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
    if (n_threads_ == 1) { fn(0, 1); return; }
    {
        std::lock_guard<std::mutex> lk(mu_);
        job_ = &fn;
        pending_ = n_threads_ - 1;
        ++generation_;
    }
    cv_start_.notify_all();
    fn(0, n_threads_);
    std::unique_lock<std::mutex> lk(mu_);
    cv_done_.wait(lk, [&] { return pending_ == 0; });
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    const int nth = static_cast<int>(std::min<int64_t>(n_threads_, n));
    if (nth == 1) { fn(0, n); return; }
    run([&](int ith, int) {
        if (ith >= nth) return;
        const int64_t per = (n + nth - 1) / nth;
        const int64_t b = ith * per, e = std::min(n, b + per);
        if (b < e) fn(b, e);
    });
}

}  // namespace glia::cpu
