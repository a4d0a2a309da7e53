#include "backend/cpu/threadpool.h"

#include <algorithm>
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
// Waiting: spin first (the gap between two ops of a decode step is a few microseconds),
// then sleep. The spin budget adapts per waiter: it doubles when spinning paid off and
// halves when the wait ended in a sleep anyway, so a thread on a busy machine (where the
// thread it waits for is descheduled) stops burning the core other work needs, while an
// idle machine gets spin-only hand-offs. PAUSE costs ~27 ns on the EPYC VMs we run on
// (~27 us at most). A spin of 1 << 13 (~0.2 ms) was measured faster on decode (bench/LOG.md,
// 2026-12-03) but starved other threads of a loaded 2-core machine (a test's event
// consumer fell 8 events behind the engine): longer spins need a yield first.
constexpr int kSpinMin = 1 << 4, kSpinMax = 1 << 10;

struct Spinner {
    int& budget;
    int spins = 0;
    // One step of the wait; false when it is time to sleep.
    bool step() {
        if (++spins >= budget) return false;
        GLIA_CPU_RELAX();
        return true;
    }
    void done(bool slept) { budget = slept ? std::max(kSpinMin, budget / 2) : std::min(kSpinMax, budget * 2); }
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
    int budget = kSpinMax;
    for (;;) {
        uint32_t g;
        Spinner spin{budget};
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
    Spinner spin{caller_spin_};
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
