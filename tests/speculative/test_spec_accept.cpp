// The speculative acceptance rule leaves the output distribution unchanged: tokens drafted
// from q and kept or replaced by spec_accept come out distributed as the target's p.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/spec_accept.h"

using namespace glia;

namespace {

// Draws n outcomes (x ~ q, then the verdict) and returns the largest gap between an
// outcome's frequency and p, with the acceptance rate.
std::pair<double, double> worst_gap(const TokenDist& p, const TokenDist& q, int n_vocab, int n, bool one_hot_draft,
                                    int32_t fixed = -1) {
    std::mt19937_64 rng(1234);
    std::vector<int> count(static_cast<size_t>(n_vocab), 0);
    int kept = 0;
    std::discrete_distribution<size_t> draw(q.p.begin(), q.p.end());
    for (int i = 0; i < n; ++i) {
        const int32_t x = one_hot_draft ? fixed : q.ids[draw(rng)];
        TokenDist hot;
        hot.one_hot(x);
        const SpecVerdict v = spec_accept(p, one_hot_draft ? hot : q, x, rng);
        kept += v.accepted;
        if (v.accepted) {
            EXPECT_EQ(v.token, x);
        }
        ++count[static_cast<size_t>(v.token)];
    }
    double gap = 0;
    for (int id = 0; id < n_vocab; ++id) gap = std::max(gap, std::fabs(double(count[size_t(id)]) / n - p.prob(id)));
    return {gap, double(kept) / n};
}

TEST(SpecAccept, DraftModelRuleKeepsTheTargetDistribution) {
    // q puts mass where p has none (token 4) and too little where p has much (token 0).
    TokenDist p{{0, 1, 2, 3}, {0.5, 0.2, 0.2, 0.1}};
    TokenDist q{{3, 1, 4, 0}, {0.4, 0.3, 0.2, 0.1}};
    const int n = 200000;
    const auto [gap, rate] = worst_gap(p, q, 5, n, false);
    // Standard error of a frequency near 0.5 at n = 200000 is ~0.0011: 0.005 is > 4 sigma,
    // while drawing the replacement from p instead of the residual is off by ~0.09.
    EXPECT_LT(gap, 0.005);
    // The rate of keeping is sum(min(p, q)) = 0.1 + 0.2 + 0 + 0.1 = 0.4.
    EXPECT_NEAR(rate, 0.4, 0.005);
}

TEST(SpecAccept, DeterministicDraftIsKeptWithItsTargetProbability) {
    TokenDist p{{2, 0, 1}, {0.6, 0.3, 0.1}};
    for (int32_t x : {0, 1, 2, 3}) {
        const auto [gap, rate] = worst_gap(p, TokenDist{}, 4, 100000, true, x);
        EXPECT_LT(gap, 0.006) << "drafted " << x;
        EXPECT_NEAR(rate, p.prob(x), 0.006) << "drafted " << x;
    }
}

TEST(SpecAccept, GreedyTargetKeepsExactlyItsPick) {
    TokenDist p;
    p.one_hot(7);
    std::mt19937_64 rng(5);
    for (int32_t x : {7, 3}) {
        TokenDist q;
        q.one_hot(x);
        const SpecVerdict v = spec_accept(p, q, x, rng);
        EXPECT_EQ(v.accepted, x == 7);
        EXPECT_EQ(v.token, 7);
    }
}

}  // namespace
