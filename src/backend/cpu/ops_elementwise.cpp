// Row-wise and element-wise ops: GET_ROWS, RMS_NORM, ADD/MUL/SCALE, SWIGLU.
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "quant/quant.h"

namespace glia::cpu {

void op_get_rows(const Node& n) {
    const Tensor& table = *n.src[0];
    const Tensor& ids = *n.src[1];
    Tensor& out = *n.out;
    const int32_t* id = ids.ptr<int32_t>();
    for (int64_t t = 0; t < ids.ne[0]; ++t) {
        if (id[t] < 0 || id[t] >= table.ne[1])
            fail("token id ", id[t], " out of range for '", table.name, "' with ", table.ne[1], " rows");
        quant::dequantize_row(table.type, table.row(id[t]), reinterpret_cast<float*>(out.row(t)), table.ne[0]);
    }
}

void op_rms_norm(const Node& n, ThreadPool& pool) {
    const Tensor& x = *n.src[0];
    const Tensor* w = n.src[1];
    Tensor& out = *n.out;
    const int64_t ne0 = x.ne[0];
    const float eps = n.f0;
    const int64_t rows = x.n_rows();
    pool.parallel_for(rows, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* xr = reinterpret_cast<const float*>(static_cast<const uint8_t*>(x.data) + r * x.nb[1]);
            float* yr = reinterpret_cast<float*>(static_cast<uint8_t*>(out.data) + r * out.nb[1]);
            double sum = 0.0;
            for (int64_t i = 0; i < ne0; ++i) sum += double(xr[i]) * double(xr[i]);
            const float mean = static_cast<float>(sum / double(ne0));
            const float scale = 1.0f / std::sqrt(mean + eps);
            if (w) {
                const float* wr = w->ptr<float>();
                for (int64_t i = 0; i < ne0; ++i) yr[i] = (xr[i] * scale) * wr[i];
            } else {
                for (int64_t i = 0; i < ne0; ++i) yr[i] = xr[i] * scale;
            }
        }
    });
}

void op_binary(const Node& n) {
    const Tensor& a = *n.src[0];
    Tensor& out = *n.out;
    const int64_t ne0 = a.ne[0], rows = a.n_rows();
    if (n.op == Op::SCALE) {
        for (int64_t r = 0; r < rows; ++r) {
            const float* ar = reinterpret_cast<const float*>(a.row(r));
            float* yr = reinterpret_cast<float*>(out.row(r));
            for (int64_t i = 0; i < ne0; ++i) yr[i] = ar[i] * n.f0;
        }
        return;
    }
    const Tensor& b = *n.src[1];
    const bool bcast = b.n_rows() == 1;
    for (int64_t r = 0; r < rows; ++r) {
        const float* ar = reinterpret_cast<const float*>(a.row(r));
        const float* br = reinterpret_cast<const float*>(b.row(bcast ? 0 : r));
        float* yr = reinterpret_cast<float*>(out.row(r));
        if (n.op == Op::ADD)
            for (int64_t i = 0; i < ne0; ++i) yr[i] = ar[i] + br[i];
        else
            for (int64_t i = 0; i < ne0; ++i) yr[i] = ar[i] * br[i];
    }
}

void op_swiglu(const Node& n) {
    const Tensor& g = *n.src[0];
    const Tensor& u = *n.src[1];
    const int64_t count = g.n_elements();
    const float* gp = g.ptr<float>();
    const float* up = u.ptr<float>();
    float* y = n.out->ptr<float>();
    for (int64_t i = 0; i < count; ++i) y[i] = gp[i] / (1.0f + std::exp(-gp[i])) * up[i];
}

}  // namespace glia::cpu
