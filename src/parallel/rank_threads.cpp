#include "parallel/rank_threads.h"

namespace glia {

RankThreads::RankThreads(int n_ranks) : errors_(static_cast<size_t>(n_ranks > 0 ? n_ranks : 1)) {
    for (int r = 1; r < n_ranks; ++r) threads_.emplace_back([this, r] { loop(r); });
}

RankThreads::~RankThreads() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    start_cv_.notify_all();
    for (auto& t : threads_) t.join();
}

void RankThreads::loop(int rank) {
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int)>* job;
        {
            std::unique_lock<std::mutex> lk(mu_);
            start_cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            job = job_;
        }
        std::exception_ptr err;
        try {
            (*job)(rank);
        } catch (...) {
            err = std::current_exception();
        }
        std::lock_guard<std::mutex> lk(mu_);
        errors_[rank] = err;
        if (--pending_ == 0) done_cv_.notify_all();
    }
}

void RankThreads::run(const std::function<void(int)>& fn) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        job_ = &fn;
        pending_ = static_cast<int>(threads_.size());
        for (auto& e : errors_) e = nullptr;
        ++generation_;
    }
    start_cv_.notify_all();
    try {
        fn(0);
    } catch (...) {
        errors_[0] = std::current_exception();
    }
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return pending_ == 0; });
    job_ = nullptr;
    for (auto& e : errors_)
        if (e) std::rethrow_exception(e);
}

}  // namespace glia
