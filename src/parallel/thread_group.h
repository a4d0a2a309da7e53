// Ranks as threads of one process sharing memory: the communicator of `-tp N` on the
// CPU and of the tests. One ThreadGroup per group; each rank's thread uses the
// Communicator of its rank (comm(r)).
//
// A collective is three steps: every rank publishes its buffer and waits for the others;
// each rank then computes its share of the result (a contiguous range of elements,
// summed over the ranks in rank order) into the group's buffer, waits; and copies the
// whole result into its own buffer. The group's buffer is reused by the next collective
// only after every rank has arrived there, so after every rank finished copying.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace glia {

class ThreadGroup {
public:
    explicit ThreadGroup(int world);
    ~ThreadGroup();
    ThreadGroup(const ThreadGroup&) = delete;
    ThreadGroup& operator=(const ThreadGroup&) = delete;

    int world() const { return world_; }
    Communicator& comm(int rank);
    // See Communicator::abort.
    void abort(const std::string& why);

private:
    class RankComm;
    friend class RankComm;
    // Waits until every rank arrived; the last one to arrive runs `last` first (under the
    // lock). Throws when the group was aborted.
    void barrier(const std::function<void()>& last = nullptr);
    void collective(int rank, const float* in, float* out, size_t n, bool gather);

    const int world_;
    std::vector<std::unique_ptr<RankComm>> comms_;
    std::mutex mu_;
    std::condition_variable cv_;
    int arrived_ = 0;
    uint64_t generation_ = 0;
    bool aborted_ = false;
    std::string abort_why_;
    std::vector<const float*> in_;   // published per rank
    std::vector<size_t> n_;          // element counts per rank (must agree)
    std::vector<float> result_;      // the collective's result, shared
};

}  // namespace glia
