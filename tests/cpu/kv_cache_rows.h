// Cache rows for the CPU attention tests: n rows of `width` values in a cell type, encoded
// as the cache store does (quantize_act_row), handed out in shuffled order as a paged cache
// does; or given values in order.
#pragma once
#include <algorithm>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "quant/quant.h"

namespace glia::test {

struct Cache {
    std::vector<uint8_t> data;
    std::vector<const uint8_t*> rows;
    Cache(std::mt19937& rng, DType t, int n, int width, float sd) : rows(n) {
        const size_t rb = row_bytes(t, width);
        data.resize(rb * n);
        std::normal_distribution<float> g(0.f, sd);
        std::vector<float> x(width);
        for (int c = 0; c < n; ++c) {
            for (auto& v : x) v = g(rng);
            quant::quantize_act_row(t, x.data(), data.data() + rb * c, width);
        }
        std::vector<int> perm(n);
        for (int i = 0; i < n; ++i) perm[i] = i;
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int c = 0; c < n; ++c) rows[c] = data.data() + rb * perm[c];
    }
    // Rows of these values (n rows of `width`), in order.
    Cache(DType t, const std::vector<float>& x, int width) {
        const size_t rb = row_bytes(t, width), n = x.size() / width;
        data.resize(rb * n);
        for (size_t r = 0; r < n; ++r) {
            quant::quantize_act_row(t, x.data() + r * width, data.data() + rb * r, width);
            rows.push_back(data.data() + rb * r);
        }
    }
};

}  // namespace glia::test
