// The emulator's double-precision attention for one query row, shared by the tensor-core
// and the CUDA-core checks: q rounded to f16 (as every kernel rounds it), the cells lo..p
// seen through cell_of(j) (the page table), K and V values read by k_at(cell, i) and
// v_at(cell, i) as the cache holds them, scores scaled and soft-capped, softmax in double.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/f16.h"

template <class CellOf, class KAt, class VAt>
std::vector<double> reference_attention_row(const float* q, int hd, int hd_v, int lo, int p, double scale,
                                            float softcap, CellOf cell_of, KAt k_at, VAt v_at) {
    std::vector<double> w;
    double mx = -1e300;
    for (int j = lo; j <= p; ++j) {
        const int64_t cl = cell_of(j);
        double s = 0;
        for (int i = 0; i < hd; ++i) s += double(glia::f16_to_f32(glia::f32_to_f16(q[i]))) * double(k_at(cl, i));
        s *= scale;
        if (softcap > 0) s = softcap * std::tanh(s / softcap);
        w.push_back(s);
        mx = std::max(mx, s);
    }
    double sum = 0;
    for (double& x : w) sum += (x = std::exp(x - mx));
    std::vector<double> out(size_t(hd_v), 0.0);
    for (int i = 0; i < hd_v; ++i) {
        double o = 0;
        for (int j = lo; j <= p; ++j) o += w[size_t(j - lo)] * double(v_at(cell_of(j), i));
        out[size_t(i)] = o / sum;
    }
    return out;
}
