// Token sampling: greedy, temperature, top-k, top-p, min-p, repetition / presence /
// frequency penalties, seeded RNG.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace glia {

struct SamplerParams {
    float temperature = 0.8f;    // <= 0: greedy (argmax, ties to the lowest id)
    int top_k = 40;              // <= 0: off
    float top_p = 0.95f;         // >= 1: off
    float min_p = 0.05f;         // <= 0: off
    float repeat_penalty = 1.0f; // 1: off
    int repeat_last_n = 64;      // window for the penalties
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    uint64_t seed = 0xFFFFFFFFFFFFFFFFull;  // this value: a random seed
};

class Sampler {
public:
    explicit Sampler(const SamplerParams& p);
    // Picks the next token from logits (n_vocab values) given the tokens so far.
    int32_t sample(const float* logits, int n_vocab, const std::vector<int32_t>& history);
    const SamplerParams& params() const { return p_; }
    // True when sample() is the plain argmax of the logits (no temperature, no penalties):
    // the pick can then be made where the logits are (Runner::forward_ids).
    bool plain_greedy() const;
    // The distribution sample() draws from, after penalties, temperature, top-k, min-p and
    // top-p: candidate ids with probabilities summing to 1 (greedy: the pick alone, at 1).
    // Speculative decoding compares the target's and the draft's (runtime/spec_accept.h).
    void distribution(const float* logits, int n_vocab, const std::vector<int32_t>& history,
                      std::vector<int32_t>& ids, std::vector<double>& probs);
    // The seeded generator sample() draws with (speculative acceptance draws from it too).
    std::mt19937_64& rng() { return rng_; }

private:
    // Fills ids_ and pr_ (normalized over the top k, before min-p and top-p cut them) and returns how many
    // candidates are kept; -1 with the pick in greedy_ when the temperature is 0.
    long candidates(const float* logits, int n_vocab, const std::vector<int32_t>& history);
    SamplerParams p_;
    int32_t greedy_ = 0;
    std::mt19937_64 rng_;
    // Working copies kept between calls (a vocabulary-sized allocation per token costs
    // fresh zeroed pages every step).
    std::vector<float> l_;
    std::vector<int32_t> ids_;
    std::vector<double> pr_;
};

// Index of the largest value; ties go to the lowest index.
int32_t argmax(const float* v, int n);

}  // namespace glia
