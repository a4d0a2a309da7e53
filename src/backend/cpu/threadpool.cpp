#include "backend/cpu/threadpool.h"

#include <algorithm>
#include <chrono>
#include <system_error>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GLIA_CPU_RELAX() _mm_pause()
#else
#define GLIA_CPU_RELAX() std::this_thread::yield()
#endif

namespace glia::cpu {
namespace {
// Waiting has three phases: spin, yield, sleep.
//  - Spin on PAUSE, at most 1,024 (~27 us on the EPYC VMs we run on): the gap between two
//    ops of a decode step is often a few microseconds.
//  - Then yield the core (sched_yield) until the wait budget is spent: on an idle machine the
//    yield returns at once, so the hand-off stays as fast as spinning (a ~0.2 ms spin made
//    decode 20-60 % faster than sleeping after 27 us, bench/LOG.md 2026-12-03); on a loaded
//    one any other runnable thread gets the core first, so waiting does not starve it (that
//    0.2 ms of PAUSE starved a test's event consumer on a loaded 2-core machine). A yield
//    that did give the core away ends the wait: see Waiter::step.
//  - Then sleep on the futex (std::atomic wait).
// The budget adapts per waiter: it doubles when the wait ended before the sleep and halves
// when it ended in a sleep anyway, between ~0.4 us and 0.2 ms, so long gaps (a server idle
// between requests) cost little.
constexpr int kSpinPauses = 1 << 10;
constexpr int kPauseNs = 27;
constexpr int kBudgetMinNs = 16 * kPauseNs, kBudgetMaxNs = 200'000;
constexpr int kYieldLostNs = 20'000;  // a yield that returns later than this ran another thread
using Clock = std::chrono::steady_clock;
// parallel_for's chunks per worker: enough that the others absorb a descheduled worker's
// share in small pieces, few enough that a chunk's fixed cost stays negligible.
constexpr int kChunksPerThread = 4;

struct Waiter {
    int& budget_ns;
    int spins = 0;
    bool yielding = false;
    Clock::time_point yield_until{};
    // One step of the wait; false when it is time to sleep.
    bool step() {
        if (!yielding) {
            if (spins < kSpinPauses && spins * kPauseNs < budget_ns) {
                ++spins;
                GLIA_CPU_RELAX();
                return true;
            }
            const int left = budget_ns - spins * kPauseNs;
            if (left <= 0) return false;
            yielding = true;
            yield_until = Clock::now() + std::chrono::nanoseconds(left);
        }
        const Clock::time_point t0 = Clock::now();
        if (t0 >= yield_until) return false;
        std::this_thread::yield();
        // A yield that took long gave the core to another thread: the machine is busy, and a
        // thread that keeps yielding runs only when the scheduler comes back to it (a time
        // slice later), while one woken from a sleep is run at once. Sleep.
        return Clock::now() - t0 < std::chrono::nanoseconds(kYieldLostNs);
    }
    void done(bool slept) {
        budget_ns = slept ? std::max(kBudgetMinNs, budget_ns / 2) : std::min(kBudgetMaxNs, budget_ns * 2);
    }
};
}  // namespace

ThreadPool::ThreadPool(int n) {
    if (n <= 0) n = std::max(1u, std::thread::hardware_concurrency());
    n_threads_ = n;
    threads_.reserve(static_cast<size_t>(n - 1));
    for (int i = 1; i < n; ++i) {
        try {
            threads_.emplace_back([this, i] { worker(i); });
        } catch (const std::system_error& e) {
            // The system refused a thread (its limits, or memory for the stacks): stop the
            // ones already started and say so, instead of terminating.
            const size_t started = threads_.size() + 1;
            stop_workers();
            fail("cannot start ", n, " CPU threads (the system refused thread ", started + 1, ": ", e.what(),
                 "); use fewer with -t/--threads");
        }
    }
}

void ThreadPool::stop_workers() {
    stop_.store(true, std::memory_order_seq_cst);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    generation_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::worker(int ith) {
    uint32_t seen = 0;
    int budget = kBudgetMaxNs;
    for (;;) {
        uint32_t g;
        Waiter spin{budget};
        bool slept = false;
        while ((g = generation_.load(std::memory_order_acquire)) == seen) {
            if (spin.step()) continue;
            // Announce the sleep, then re-check: the caller bumps the generation before
            // it reads sleepers_, so one of the two sees the other (all seq_cst).
            sleepers_.fetch_add(1, std::memory_order_seq_cst);
            if (generation_.load(std::memory_order_seq_cst) == seen) generation_.wait(seen, std::memory_order_seq_cst);
            sleepers_.fetch_sub(1, std::memory_order_seq_cst);
            slept = true;
        }
        spin.done(slept);
        seen = g;
        if (stop_.load(std::memory_order_acquire)) return;
        if (g & 1) {
            run_chunks(g);  // parallel_for: nobody waits for this worker
            continue;
        }
        (*job_)(ith, n_threads_);
        if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
            caller_sleeping_.load(std::memory_order_seq_cst))
            pending_.notify_one();
    }
}

// The caller waits (spin, yield, sleep) until counter reaches `until`; whoever moves it there
// wakes the caller when caller_sleeping_ is set.
void ThreadPool::wait_caller(std::atomic<int>& counter, int until) {
    Waiter spin{caller_wait_ns_};
    bool slept = false;
    for (int p; (p = counter.load(std::memory_order_acquire)) != until;) {
        if (spin.step()) continue;
        caller_sleeping_.store(true, std::memory_order_seq_cst);
        if ((p = counter.load(std::memory_order_seq_cst)) != until) counter.wait(p, std::memory_order_seq_cst);
        caller_sleeping_.store(false, std::memory_order_relaxed);
        slept = true;
    }
    spin.done(slept);
}

void ThreadPool::run(FunctionRef<void(int, int)> fn) {
    if (n_threads_ == 1) { fn(0, 1); return; }
    job_ = &fn;
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.store((generation_.load(std::memory_order_relaxed) & ~1u) + 2, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
    fn(0, n_threads_);
    wait_caller(pending_, 0);
    job_ = nullptr;
}

// Claims and runs chunks of generation gen until none is left. A claim succeeds only while
// gen's job is running (its chunk is not done, so the caller has not returned): range_fn_
// and range_n_ are gen's, published before claim_ (release) and read after the claim (acquire).
void ThreadPool::run_chunks(uint32_t gen) {
    uint64_t w = claim_.load(std::memory_order_acquire);
    for (;;) {
        if (uint32_t(w >> 32) != gen) return;
        const int chunks = int((w >> 16) & 0xffff), i = int(w & 0xffff);
        if (i >= chunks) return;
        if (!claim_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
        const int64_t n = range_n_;
        (*range_fn_)(n * i / chunks, n * (i + 1) / chunks);
        if (chunks_done_.fetch_add(1, std::memory_order_seq_cst) + 1 == chunks &&
            caller_sleeping_.load(std::memory_order_seq_cst))
            chunks_done_.notify_one();
        w = claim_.load(std::memory_order_acquire);
    }
}

void ThreadPool::parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t)> fn) {
    if (n <= 0) return;
    const int nth = static_cast<int>(std::min<int64_t>(n_threads_, n));
    if (nth == 1) { fn(0, n); return; }
    const int chunks = static_cast<int>(std::min<int64_t>({n, int64_t(nth) * kChunksPerThread, 0xffff}));
    range_fn_ = &fn;
    range_n_ = n;
    chunks_done_.store(0, std::memory_order_relaxed);
    const uint32_t g = (generation_.load(std::memory_order_relaxed) & ~1u) + 3;
    claim_.store(uint64_t(g) << 32 | uint64_t(chunks) << 16, std::memory_order_release);
    generation_.store(g, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
    run_chunks(g);
    wait_caller(chunks_done_, chunks);
    range_fn_ = nullptr;
}

}  // namespace glia::cpu
