// A one-line progress bar on stderr, shown only when stderr is a terminal (quiet in a
// pipe or a log file). GLIA_PROGRESS=1 forces it on, GLIA_PROGRESS=0 off.
// Thread-safe: add() may be called from worker threads; redraws are rate-limited.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace glia {

class Progress {
public:
    // total: units of work (bytes, rows ...); label: what is being done. want = false
    // keeps it quiet even on a terminal.
    Progress(std::string label, uint64_t total, bool want = true);
    ~Progress();  // finishes the line
    void add(uint64_t n);
    void set_status(const std::string& s);  // short text after the bar (e.g. a tensor name)
    void done();
    bool enabled() const { return enabled_; }
    static bool stderr_is_terminal();

private:
    void draw(bool force);
    std::string label_, status_;
    uint64_t total_;
    std::atomic<uint64_t> done_{0};
    bool enabled_;
    bool finished_ = false;
    std::mutex mu_;
    std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace glia
