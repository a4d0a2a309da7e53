// Row-wise tensor type conversion (any supported type -> any supported type) through f32,
// multi-threaded over rows, with the reference quantizers (quant::quantize_row).
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace glia { class Progress; }

namespace glia::quant {

// Converts n_rows rows of ne0 elements. dst must hold row_bytes(dst_type, ne0) * n_rows.
// Equal types are copied. progress (optional) advances by the elements done.
void convert_rows(DType src_type, const void* src, DType dst_type, void* dst, int64_t ne0, int64_t n_rows,
                  int n_threads, Progress* progress = nullptr);

// Same from f32 rows.
void quantize_rows(const float* src, DType dst_type, void* dst, int64_t ne0, int64_t n_rows, int n_threads,
                   Progress* progress = nullptr);

}  // namespace glia::quant
