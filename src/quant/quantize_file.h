// Quantizes a GGUF model file into another with a named mix (the engine behind
// `glia quantize`): the same per-tensor types, tensor order and metadata as the
// reference quantizer writes without an importance matrix, streamed tensor by tensor.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "quant/mix.h"

namespace glia::quant {

struct QuantizeOptions {
    FileType ftype = FileType::Q8_0;
    int n_threads = 0;              // 0: all cores
    bool pure = false;              // base type everywhere (no mix rules)
    bool allow_requantize = false;  // accept already-quantized input tensors
    bool progress = true;           // progress bar (only shown on a terminal)
};

struct TensorPlan {
    std::string name;
    std::vector<int64_t> ne;
    DType from, to;
    uint64_t in_bytes, out_bytes;
};

struct QuantizeResult {
    std::vector<TensorPlan> tensors;  // in output order
    uint64_t in_file_bytes = 0, out_file_bytes = 0;
    int n_fallback = 0;
    double seconds = 0;
};

// Plans the per-tensor types without writing anything (also validates the input).
QuantizeResult plan_quantize(const std::string& in_path, const QuantizeOptions& opt);
// Writes out_path. Throws glia::Error naming the file and tensor on any problem; no
// partial output file is left behind.
QuantizeResult quantize_file(const std::string& in_path, const std::string& out_path, const QuantizeOptions& opt);

}  // namespace glia::quant
