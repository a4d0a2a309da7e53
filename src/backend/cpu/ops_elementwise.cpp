// Row-wise and element-wise ops: GET_ROWS, RMS_NORM, ADD/MUL/SCALE, SWIGLU.
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/simd/vecmath.h"
#include "core/error.h"
#include "core/f16.h"
#include "quant/quant.h"

namespace glia::cpu {

void op_get_rows(const Node& n, ThreadPool& pool) {
    const Tensor& table = *n.src[0];
    const Tensor& ids = *n.src[1];
    Tensor& out = *n.out;
    const int32_t* id = ids.ptr<int32_t>();
    for_rows(pool, ids.ne[0], table.ne[0], [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            quant::dequantize_row(table.type, table.row(id[t]), reinterpret_cast<float*>(out.row(t)), table.ne[0]);
    });
}

void op_rms_norm(const Node& n, ThreadPool& pool) {
    const Tensor& x = *n.src[0];
    const Tensor* w = n.src[1];
    Tensor& out = *n.out;
    const int64_t ne0 = x.ne[0];
    const float eps = n.p<NormParams>().eps;
    const int64_t rows = x.n_rows();
    const simd::VecMath& vm = simd::vec_math();
    for_rows(pool, rows, ne0, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* xr = reinterpret_cast<const float*>(static_cast<const uint8_t*>(x.data) + r * x.nb[1]);
            float* yr = reinterpret_cast<float*>(static_cast<uint8_t*>(out.data) + r * out.nb[1]);
            const float mean = static_cast<float>(vm.sum_sq(xr, ne0) / double(ne0));
            const float scale = 1.0f / std::sqrt(mean + eps);
            vm.scale_mul(xr, scale, w ? w->ptr<float>() : nullptr, yr, ne0);
        }
    });
}

void op_binary(const Node& n, ThreadPool& pool) {
    const Tensor& a = *n.src[0];
    Tensor& out = *n.out;
    const int64_t ne0 = a.ne[0], rows = a.n_rows();
    if (n.op == Op::SCALE) {
        const float sc = n.p<ScaleParams>().s;
        for_rows(pool, rows, ne0, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
                const float* ar = reinterpret_cast<const float*>(a.row(r));
                float* yr = reinterpret_cast<float*>(out.row(r));
                for (int64_t i = 0; i < ne0; ++i) yr[i] = ar[i] * sc;
            }
        });
        return;
    }
    const Tensor& b = *n.src[1];
    const bool bcast = b.n_rows() == 1;
    for_rows(pool, rows, ne0, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* ar = reinterpret_cast<const float*>(a.row(r));
            const float* br = reinterpret_cast<const float*>(b.row(bcast ? 0 : r));
            float* yr = reinterpret_cast<float*>(out.row(r));
            if (n.op == Op::ADD)
                for (int64_t i = 0; i < ne0; ++i) yr[i] = ar[i] + br[i];
            else
                for (int64_t i = 0; i < ne0; ++i) yr[i] = ar[i] * br[i];
        }
    });
}

// GELU as the reference computes it: inputs rounded to f16 and looked up in a table of
// f16 results of the tanh approximation (exact passthrough beyond +-10).
static float gelu_tanh(float x) {
    constexpr float kA = 0.044715f, kSqrt2OverPi = 0.79788456080286535587989211986876f;
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kA * x * x)));
}

static const std::vector<uint16_t>& gelu_table() {
    static const std::vector<uint16_t> table = [] {
        std::vector<uint16_t> t(65536);
        for (uint32_t i = 0; i < 65536; ++i) t[i] = f32_to_f16(gelu_tanh(f16_to_f32(uint16_t(i))));
        return t;
    }();
    return table;
}

static inline float gelu_ref(float x, const uint16_t* table) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return f16_to_f32(table[f32_to_f16(x)]);
}

void op_glu(const Node& n, ThreadPool& pool) {
    const Tensor& g = *n.src[0];
    const Tensor& u = *n.src[1];
    Tensor& out = *n.out;
    const int64_t ne0 = g.ne[0];
    const uint16_t* table = n.op == Op::GEGLU ? gelu_table().data() : nullptr;
    const simd::VecMath& vm = simd::vec_math();
    for_rows(pool, g.ne[1], ne0, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* gp = reinterpret_cast<const float*>(g.row(r));
            const float* up = reinterpret_cast<const float*>(u.row(r));
            float* y = reinterpret_cast<float*>(out.row(r));
            if (table)
                for (int64_t i = 0; i < ne0; ++i) y[i] = gelu_ref(gp[i], table) * up[i];
            else
                vm.silu_mul(gp, up, y, ne0);
        }
    });
}

void op_softcap(const Node& n, ThreadPool& pool) {
    const Tensor& x = *n.src[0];
    const float cap = n.p<SoftcapParams>().cap, inv = 1.0f / cap;
    for_rows(pool, x.n_rows(), x.ne[0], [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* xr = reinterpret_cast<const float*>(x.row(r));
            float* y = reinterpret_cast<float*>(n.out->row(r));
            for (int64_t i = 0; i < x.ne[0]; ++i) y[i] = std::tanh(xr[i] * inv) * cap;
        }
    });
}

// The sampler's greedy pick (runtime/sampler.cpp argmax): the first of the largest values,
// NaN never greater.
void op_argmax(const Node& n, ThreadPool& pool) {
    const Tensor& x = *n.src[0];
    int32_t* out = n.out->ptr<int32_t>();
    for_rows(pool, x.n_rows(), x.ne[0], [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* v = reinterpret_cast<const float*>(x.row(r));
            int32_t best = 0;
            float bv = v[0];
            for (int64_t i = 1; i < x.ne[0]; ++i)
                if (v[i] > bv) bv = v[i], best = int32_t(i);
            out[r] = best;
        }
    });
}

void op_shortconv(const Node& n) {
    const Tensor& bx = *n.src[ShortconvArg::X];
    const Tensor& w = *n.src[ShortconvArg::KERNEL];
    Tensor& st = *n.src[ShortconvArg::STATE];
    const int32_t* seq = n.src[ShortconvArg::SEQ]->ptr<int32_t>();
    const int64_t C = bx.ne[0], T = bx.ne[1], L = w.ne[0];
    const float* wp = w.ptr<float>();
    // Tokens in batch order; each sequence's history is its state (column `slot` of the
    // state tensor), a sliding window of the last L-1 inputs (oldest first), shifted as
    // tokens arrive.
    std::vector<float> window(L * C);
    for (int64_t t = 0; t < T; ++t) {
        float* state = reinterpret_cast<float*>(st.row(seq[t]));
        const float* x = reinterpret_cast<const float*>(bx.row(t));
        std::copy(state, state + (L - 1) * C, window.begin());
        std::copy(x, x + C, window.begin() + (L - 1) * C);
        float* y = reinterpret_cast<float*>(n.out->row(t));
        for (int64_t c = 0; c < C; ++c) {
            float acc = 0.0f;
            for (int64_t k = 0; k < L; ++k) acc += window[k * C + c] * wp[c * L + k];
            y[c] = acc;
        }
        std::copy(window.begin() + C, window.end(), state);
    }
}

}  // namespace glia::cpu
