#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

namespace glia {

int32_t argmax(const float* v, int n) {
    // The best value kept in a register (re-reading v[best] each time ran at ~4 ns a value).
    int32_t best = 0;
    float bv = v[0];
    for (int i = 1; i < n; ++i)
        if (v[i] > bv) bv = v[i], best = i;
    return best;
}

Sampler::Sampler(const SamplerParams& p) : p_(p) {
    rng_.seed(p.seed == 0xFFFFFFFFFFFFFFFFull ? std::random_device{}() : p.seed);
}

bool Sampler::plain_greedy() const {
    const bool penalize = p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f;
    return p_.temperature <= 0.0f && !(penalize && p_.repeat_last_n != 0);
}

int32_t Sampler::sample(const float* logits, int n_vocab, const std::vector<int32_t>& history) {
    if (plain_greedy()) return argmax(logits, n_vocab);
    const long keep = candidates(logits, n_vocab, history);
    if (keep < 0) return greedy_;
    std::discrete_distribution<size_t> dist(pr_.begin(), pr_.begin() + keep);
    return ids_[dist(rng_)];
}

void Sampler::distribution(const float* logits, int n_vocab, const std::vector<int32_t>& history,
                           std::vector<int32_t>& ids, std::vector<double>& probs) {
    const long keep = plain_greedy() ? -1 : candidates(logits, n_vocab, history);
    if (keep < 0) {
        ids.assign(1, plain_greedy() ? argmax(logits, n_vocab) : greedy_);
        probs.assign(1, 1.0);
        return;
    }
    ids.assign(ids_.begin(), ids_.begin() + keep);
    probs.assign(pr_.begin(), pr_.begin() + keep);
    double sum = 0;
    for (double x : probs) sum += x;
    for (double& x : probs) x /= sum;
}

long Sampler::candidates(const float* logits, int n_vocab, const std::vector<int32_t>& history) {
    // Penalties over the recent window.
    const bool penalize = p_.repeat_penalty != 1.0f || p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f;
    std::vector<float>& l = l_;
    l.assign(logits, logits + n_vocab);
    if (penalize && p_.repeat_last_n != 0) {
        std::unordered_map<int32_t, int> count;
        const size_t n = p_.repeat_last_n < 0 ? history.size() : std::min<size_t>(history.size(), p_.repeat_last_n);
        for (size_t i = history.size() - n; i < history.size(); ++i) ++count[history[i]];
        for (const auto& [id, c] : count) {
            if (id < 0 || id >= n_vocab) continue;
            float& x = l[id];
            if (p_.repeat_penalty != 1.0f) x = x > 0 ? x / p_.repeat_penalty : x * p_.repeat_penalty;
            x -= float(c) * p_.frequency_penalty + (c > 0 ? p_.presence_penalty : 0.0f);
        }
    }
    if (p_.temperature <= 0.0f) {
        greedy_ = argmax(l.data(), n_vocab);
        return -1;
    }

    std::vector<int32_t>& ids = ids_;
    ids.resize(n_vocab);
    std::iota(ids.begin(), ids.end(), 0);
    // Top-k.
    size_t k = (p_.top_k > 0 && p_.top_k < n_vocab) ? size_t(p_.top_k) : size_t(n_vocab);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    ids.resize(k);
    // Softmax with temperature over the candidates.
    std::vector<double>& pr = pr_;
    pr.assign(k, 0.0);
    const double mx = l[ids[0]];
    double sum = 0;
    for (size_t i = 0; i < k; ++i) sum += pr[i] = std::exp((l[ids[i]] - mx) / p_.temperature);
    for (auto& x : pr) x /= sum;
    // Min-p: drop candidates below min_p * the best probability.
    size_t keep = k;
    if (p_.min_p > 0.0f)
        for (size_t i = 1; i < k; ++i)
            if (pr[i] < p_.min_p * pr[0]) { keep = i; break; }
    // Top-p: smallest prefix whose mass reaches top_p.
    if (p_.top_p < 1.0f) {
        double cum = 0;
        for (size_t i = 0; i < keep; ++i) {
            cum += pr[i];
            if (cum >= p_.top_p) { keep = i + 1; break; }
        }
    }
    return static_cast<long>(keep);
}

}  // namespace glia
