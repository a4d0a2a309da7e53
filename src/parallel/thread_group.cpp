#include "parallel/thread_group.h"

#include <cstring>

#include "core/error.h"

namespace glia {

class ThreadGroup::RankComm : public Communicator {
public:
    RankComm(ThreadGroup& g, int rank) : g_(g), rank_(rank) {}
    int rank() const override { return rank_; }
    int world() const override { return g_.world_; }
    const char* kind() const override { return "threads"; }
    void all_reduce_sum(float* buf, size_t n) override { g_.collective(rank_, buf, buf, n, false); }
    void all_gather(const float* in, float* out, size_t n) override { g_.collective(rank_, in, out, n, true); }
    void abort(const std::string& why) override { g_.abort(why); }

private:
    ThreadGroup& g_;
    const int rank_;
};

ThreadGroup::ThreadGroup(int world) : world_(world) {
    if (world < 1) fail("a tensor-parallel group needs at least one rank (asked for ", world, ")");
    for (int r = 0; r < world; ++r) comms_.push_back(std::make_unique<RankComm>(*this, r));
    in_.assign(world, nullptr);
    n_.assign(world, 0);
}

ThreadGroup::~ThreadGroup() = default;

Communicator& ThreadGroup::comm(int rank) {
    if (rank < 0 || rank >= world_) fail("rank ", rank, " outside the group's ", world_, " ranks");
    return *comms_[rank];
}

void ThreadGroup::abort(const std::string& why) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!aborted_) {
        aborted_ = true;
        abort_why_ = why;
    }
    cv_.notify_all();
}

void ThreadGroup::barrier(const std::function<void()>& last) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!aborted_) {
        const uint64_t gen = generation_;
        if (++arrived_ == world_) {
            arrived_ = 0;
            if (last) last();
            ++generation_;
            cv_.notify_all();
        } else {
            cv_.wait(lk, [&] { return generation_ != gen || aborted_; });
        }
    }
    if (aborted_) fail("tensor-parallel group stopped: ", abort_why_);
}

void ThreadGroup::collective(int rank, const float* in, float* out, size_t n, bool gather) {
    if (world_ == 1) {
        if (gather && out != in) std::memcpy(out, in, n * sizeof(float));
        return;
    }
    in_[rank] = in;
    n_[rank] = n;
    barrier([&] {
        for (int r = 1; r < world_; ++r)
            if (n_[r] != n_[0]) {
                aborted_ = true;
                abort_why_ = cat("ranks disagree on a collective's size (rank 0: ", n_[0], " values, rank ", r, ": ",
                                 n_[r], "); the ranks must run the same graph");
                return;
            }
        if (!gather && result_.size() < n) result_.resize(n);
    });
    if (gather) {
        // Every rank reads every rank's input directly; the barrier keeps the inputs alive.
        for (int r = 0; r < world_; ++r)
            if (out + size_t(r) * n != in_[r]) std::memcpy(out + size_t(r) * n, in_[r], n * sizeof(float));
        barrier();
        return;
    }
    // This rank's share of the elements, summed in rank order.
    const size_t b = n * size_t(rank) / size_t(world_), e = n * size_t(rank + 1) / size_t(world_);
    float* res = result_.data();
    for (size_t i = b; i < e; ++i) res[i] = in_[0][i];
    for (int r = 1; r < world_; ++r) {
        const float* src = in_[r];
        for (size_t i = b; i < e; ++i) res[i] += src[i];
    }
    barrier();
    std::memcpy(out, res, n * sizeof(float));
}

}  // namespace glia
