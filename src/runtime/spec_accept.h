// The acceptance rule of speculative sampling: a drafted token x, drawn from the draft's
// distribution q, is kept with probability min(1, p(x) / q(x)) where p is the target's;
// otherwise a token is drawn from the residual max(0, p - q), normalized. The token that
// comes out is then distributed exactly as p, whatever q was. A deterministic draft
// (prompt lookup) is the case q = 1 at x: keep x with probability p(x), else draw from p
// without x. With a greedy target p is 1 at its pick, so the rule keeps x exactly when the
// target would pick it.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace glia {

// A sparse distribution over token ids (probabilities sum to 1).
struct TokenDist {
    std::vector<int32_t> ids;
    std::vector<double> p;
    double prob(int32_t id) const;
    void one_hot(int32_t id) { ids.assign(1, id); p.assign(1, 1.0); }
};

struct SpecVerdict {
    bool accepted = false;
    int32_t token = -1;  // the drafted token when accepted, else the residual's draw
};

// Decides one drafted token against the target's distribution `p` (`q`: the draft's).
SpecVerdict spec_accept(const TokenDist& p, const TokenDist& q, int32_t drafted, std::mt19937_64& rng);

}  // namespace glia
