#include "quant/convert.h"

#include <cstring>
#include <vector>

#include "core/error.h"
#include "quant/quant.h"
#include "core/parallel.h"
#include "core/progress.h"

namespace glia::quant {
namespace {
constexpr int64_t kMinRowsPerThread = 4;
}

void convert_rows(DType src_type, const void* src, DType dst_type, void* dst, int64_t ne0, int64_t n_rows,
                  int n_threads, Progress* progress) {
    const size_t in_row = row_bytes(src_type, ne0), out_row = row_bytes(dst_type, ne0);
    if (src_type == dst_type) {
        std::memcpy(dst, src, in_row * size_t(n_rows));
        if (progress) progress->add(uint64_t(n_rows * ne0));
        return;
    }
    const TypeTraits& from = traits(src_type);
    const TypeTraits& to = traits(dst_type);
    if (!from.dequantize_row) fail("cannot read tensors of type ", dtype_name(src_type));
    if (!to.quantize_row) fail("cannot write tensors of type ", dtype_name(dst_type));
    parallel_for(n_rows, n_threads, kMinRowsPerThread, [&](int64_t r0, int64_t r1) {
        std::vector<float> f(static_cast<size_t>(ne0));
        for (int64_t r = r0; r < r1; ++r) {
            const auto* in = static_cast<const uint8_t*>(src) + size_t(r) * in_row;
            auto* out = static_cast<uint8_t*>(dst) + size_t(r) * out_row;
            if (src_type == DType::F32) {
                to.quantize_row(reinterpret_cast<const float*>(in), out, ne0);
            } else {
                from.dequantize_row(in, f.data(), ne0);
                to.quantize_row(f.data(), out, ne0);
            }
            if (progress && ((r - r0) & 15) == 15) progress->add(uint64_t(16 * ne0));
        }
        if (progress) progress->add(uint64_t(((r1 - r0) & 15) * ne0));
    });
}

void quantize_rows(const float* src, DType dst_type, void* dst, int64_t ne0, int64_t n_rows, int n_threads,
                   Progress* progress) {
    convert_rows(DType::F32, src, dst_type, dst, ne0, n_rows, n_threads, progress);
}

}  // namespace glia::quant
