// The engine speculation tests' shared pieces: sixteen prompts (several repeat themselves,
// so prompt lookup has something to draft) and a collector of one request's tokens.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/engine.h"

namespace glia::test {

inline const char* kPrompts[] = {
    "Once upon a time",       "Lily and Tom went to the park. Lily and Tom", "The little dog ran. The little dog",
    "One day, a girl named Sue", "The sun was hot",                          "Tim had a big red ball. Tim had a big",
    "Mom said",               "In the forest there was a tree",              "The cat sat",
    "Ben liked to run",       "A bird flew. A bird flew. A bird",            "The boat was small",
    "She found a shell",      "They ate cake and cake and",                  "The moon was up",
    "He saw a frog",
};

struct Collector {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int32_t> tokens;
    bool done = false;
    FinishReason finish = FinishReason::NONE;
    TokenCallback callback() {
        return [this](const TokenEvent& ev) {
            std::lock_guard<std::mutex> lk(mu);
            if (ev.token >= 0) tokens.push_back(ev.token);
            if (ev.done) {
                done = true;
                finish = ev.finish;
                cv.notify_all();
            }
            return true;
        };
    }
    void wait() {
        std::unique_lock<std::mutex> lk(mu);
        ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(300), [&] { return done; })) << "request never finished";
    }
};

}  // namespace glia::test
