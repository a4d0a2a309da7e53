#include "core/progress.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace glia {

bool Progress::stderr_is_terminal() {
    if (const char* e = std::getenv("GLIA_PROGRESS"); e && *e) return std::strcmp(e, "0") != 0;
    return ::isatty(STDERR_FILENO) == 1;
}

Progress::Progress(std::string label, uint64_t total, bool want)
    : label_(std::move(label)), total_(total ? total : 1), enabled_(want && stderr_is_terminal()) {
    start_ = last_ = std::chrono::steady_clock::now();
    if (enabled_) draw(true);
}

Progress::~Progress() { done(); }

void Progress::add(uint64_t n) {
    done_.fetch_add(n, std::memory_order_relaxed);
    if (enabled_) draw(false);
}

void Progress::set_status(const std::string& s) {
    if (!enabled_) return;
    {
        std::lock_guard<std::mutex> lk(mu_);
        status_ = s;
    }
    draw(false);
}

void Progress::done() {
    if (!enabled_ || finished_) return;
    draw(true);
    std::lock_guard<std::mutex> lk(mu_);
    finished_ = true;
    std::fputc('\n', stderr);
    std::fflush(stderr);
}

void Progress::draw(bool force) {
    std::unique_lock<std::mutex> lk(mu_, std::try_to_lock);
    if (!lk.owns_lock() || finished_) return;  // another thread is drawing
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const uint64_t d = std::min(done_.load(std::memory_order_relaxed), total_);
    const double frac = double(d) / double(total_);
    constexpr int kWidth = 30;
    const int fill = static_cast<int>(frac * kWidth);
    char bar[kWidth + 1];
    for (int i = 0; i < kWidth; ++i) bar[i] = i < fill ? '#' : '-';
    bar[kWidth] = 0;
    const double secs = std::chrono::duration<double>(now - start_).count();
    char eta[32] = "";
    if (frac > 0.01 && frac < 1) std::snprintf(eta, sizeof eta, " eta %.0fs", secs * (1 - frac) / frac);
    std::string status = status_;
    if (status.size() > 40) status = "..." + status.substr(status.size() - 37);
    std::fprintf(stderr, "\r\033[K%s [%s] %5.1f%% %.0fs%s %s", label_.c_str(), bar, frac * 100, secs, eta,
                 status.c_str());
    std::fflush(stderr);
}

}  // namespace glia
