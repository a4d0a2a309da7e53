// A fixed pool of worker threads for data-parallel loops. The calling thread takes
// part as worker 0; parallel_for returns when every worker has finished its share.
//
// Dispatch is a generation counter, not a mutex: workers spin briefly on it (an op in a
// decode step follows the previous one within microseconds), then yield the core for up to
// ~0.2 ms (fast hand-offs on an idle machine; other threads run first on a loaded one),
// then sleep on it (std::atomic wait, a futex on Linux); the budget adapts to how often
// waiting without sleeping pays off. The caller only issues a wake-up system call when some
// worker is actually asleep. Completion is a countdown the caller waits on the same way.
// Jobs are passed as non-owning references: no allocation per call.
//
// parallel_for does not wait for every worker: its range is cut into a few chunks per worker
// that the caller and the workers claim from one counter, and it returns when every chunk is
// done. A worker the system has taken off its core (a loaded machine) thus costs its chunk's
// time, not a scheduler time slice: the others take its chunks. run() still needs every
// worker (its jobs are split by worker index).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace glia::cpu {

// A non-owning reference to a callable (valid for the duration of the call it is passed to).
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
public:
    template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
    FunctionRef(F&& f)  // NOLINT(google-explicit-constructor)
        : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
          call_([](void* o, A... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<A>(a)...); }) {}
    R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

private:
    void* obj_;
    R (*call_)(void*, A...);
};

class ThreadPool {
public:
    // n_threads <= 0: hardware concurrency. Throws glia::Error when the system refuses to
    // start that many threads.
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }
    // fn(ith, nth): every worker runs fn once with its index. Not reentrant: fn must not
    // call run/parallel_for on the same pool.
    void run(FunctionRef<void(int ith, int nth)> fn);
    // Splits [0, n) into contiguous chunks (a few per worker; their bounds depend on n and the
    // pool's size only) and calls fn(begin, end) once per chunk, on whichever thread claims it.
    void parallel_for(int64_t n, FunctionRef<void(int64_t begin, int64_t end)> fn);

private:
    void worker(int ith);
    void stop_workers();
    void run_chunks(uint32_t gen);
    void wait_caller(std::atomic<int>& counter, int until);
    int n_threads_;
    std::vector<std::thread> threads_;
    // The generation's low bit says which job it is: 0 run(), 1 parallel_for().
    const FunctionRef<void(int, int)>* job_ = nullptr;
    const FunctionRef<void(int64_t, int64_t)>* range_fn_ = nullptr;
    int64_t range_n_ = 0;
    // parallel_for's chunks: generation (32 bits) | chunks (16) | next chunk to claim (16).
    alignas(64) std::atomic<uint64_t> claim_{0};
    alignas(64) std::atomic<int> chunks_done_{0};
    alignas(64) std::atomic<uint32_t> generation_{0};
    alignas(64) std::atomic<int> pending_{0};
    alignas(64) std::atomic<int> sleepers_{0};
    std::atomic<bool> caller_sleeping_{false};
    std::atomic<bool> stop_{false};
    int caller_wait_ns_ = 200'000;  // adaptive spin-and-yield budget of the calling thread
};

}  // namespace glia::cpu
