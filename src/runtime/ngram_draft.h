// Prompt lookup: drafting by n-grams, with no draft model. The last n tokens of the text
// so far (prompt and generated) are looked up earlier in that same text; the tokens that
// followed their most recent earlier occurrence are the draft. The longest n that occurs
// wins (n from n_max down to n_min). It pays off wherever the answer repeats its context:
// code edits, summaries, retrieval answers.
//
// The text only grows between calls (the tokens a sequence has emitted); the n-grams are
// indexed as it grows, so a lookup costs O(n_max) hash probes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace glia {

class NgramDraft {
public:
    explicit NgramDraft(int n_min = 1, int n_max = 4);
    // Up to `max` tokens predicted to follow `text` (empty when no n-gram of its end
    // occurred before). `text` extends the text of the previous call (else call reset()).
    std::vector<int32_t> draft(const std::vector<int32_t>& text, int max);
    void reset();
    int n_min() const { return n_min_; }
    int n_max() const { return n_max_; }

private:
    void index(const std::vector<int32_t>& text);
    static uint64_t hash(const int32_t* t, int n);
    int n_min_, n_max_;
    size_t indexed_ = 0;  // n-grams ending before this position are indexed (each followed by a token)
    // Per n (index n - n_min): hash of an n-gram -> its latest start position.
    std::vector<std::unordered_map<uint64_t, int>> last_;
};

}  // namespace glia
