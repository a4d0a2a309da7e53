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
        (*job_)(ith, n_threads_);
        if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
            caller_sleeping_.load(std::memory_order_seq_cst))
            pending_.notify_one();
    }
}

void ThreadPool::run(FunctionRef<void(int, int)> fn) {
    if (n_threads_ == 1) { fn(0, 1); return; }
    job_ = &fn;
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
    fn(0, n_threads_);
    Waiter spin{caller_wait_ns_};
    bool slept = false;
    for (int p; (p = pending_.load(std::memory_order_acquire)) != 0;) {
        if (spin.step()) continue;
        caller_sleeping_.store(true, std::memory_order_seq_cst);
        if ((p = pending_.load(std::memory_order_seq_cst)) != 0) pending_.wait(p, std::memory_order_seq_cst);
        caller_sleeping_.store(false, std::memory_order_relaxed);
        slept = true;
    }
    spin.done(slept);
    job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, FunctionRef<void(int64_t, int64_t)> fn) {
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
