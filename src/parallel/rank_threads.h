// Threads for the ranks of a tensor-parallel group in one process: rank 0 runs on the
// caller's thread, ranks 1..n-1 on threads that live as long as this object, so a step
// costs a wake-up, not a thread start.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace glia {

class RankThreads {
public:
    explicit RankThreads(int n_ranks);
    ~RankThreads();
    RankThreads(const RankThreads&) = delete;
    RankThreads& operator=(const RankThreads&) = delete;

    // Runs fn(r) for every rank at once and waits for all of them; then rethrows the
    // first rank's error, if any (fn should make the other ranks stop waiting for a failed
    // one, e.g. by aborting the group's communicator).
    void run(const std::function<void(int)>& fn);

private:
    void loop(int rank);
    std::mutex mu_;
    std::condition_variable start_cv_, done_cv_;
    const std::function<void(int)>* job_ = nullptr;
    uint64_t generation_ = 0;
    int pending_ = 0;
    bool stop_ = false;
    std::vector<std::exception_ptr> errors_;
    std::vector<std::thread> threads_;
};

}  // namespace glia
