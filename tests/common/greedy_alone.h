// The greedy continuation of a prompt computed alone, from nothing, on the CPU: what a
// batched or cached run must reproduce token for token. Stops at end-of-generation.
#pragma once
#include <cstdint>
#include <vector>

#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/vocab.h"

namespace glia::test {

inline std::vector<int32_t> greedy_alone(const Model& m, const std::vector<int32_t>& prompt, int n) {
    SessionOptions so;
    so.n_ctx = static_cast<int>(prompt.size()) + n + 1;
    so.n_threads = 2;
    Session s(m, so);
    std::vector<int32_t> out;
    std::vector<float> l = s.decode(prompt, false);
    for (int i = 0; i < n; ++i) {
        const int32_t t = argmax(l.data(), s.n_vocab());
        if (m.vocab().is_eog(t)) break;
        out.push_back(t);
        if (i + 1 < n) l = s.decode({t}, false);
    }
    return out;
}

}  // namespace glia::test
