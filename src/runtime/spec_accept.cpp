#include "runtime/spec_accept.h"

#include <algorithm>
#include <unordered_map>

namespace glia {

double TokenDist::prob(int32_t id) const {
    for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] == id) return p[i];
    return 0.0;
}

SpecVerdict spec_accept(const TokenDist& p, const TokenDist& q, int32_t drafted, std::mt19937_64& rng) {
    const double px = p.prob(drafted), qx = q.prob(drafted);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    // q(x) > 0 always holds for a token drawn from q; a draft that names a token its own
    // distribution excludes is treated as certain (q = 1 at x).
    const double keep = qx > 0 ? std::min(1.0, px / qx) : px;
    if (px > 0 && (keep >= 1.0 || u01(rng) < keep)) return {true, drafted};
    // Residual: max(0, p - q) over p's support (where p is 0 the residual is 0 too).
    std::unordered_map<int32_t, double> qmap;
    if (qx > 0)
        for (size_t i = 0; i < q.ids.size(); ++i) qmap[q.ids[i]] = q.p[i];
    else
        qmap[drafted] = 1.0;
    std::vector<double> r(p.ids.size());
    double sum = 0;
    for (size_t i = 0; i < p.ids.size(); ++i) {
        auto it = qmap.find(p.ids[i]);
        r[i] = std::max(0.0, p.p[i] - (it == qmap.end() ? 0.0 : it->second));
        sum += r[i];
    }
    if (!(sum > 0)) r = p.p;  // p == q: a rejection has probability 0; draw from p
    std::discrete_distribution<size_t> dist(r.begin(), r.end());
    return {false, p.ids[dist(rng)]};
}

}  // namespace glia
