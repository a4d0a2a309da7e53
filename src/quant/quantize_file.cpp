#include "quant/quantize_file.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "core/error.h"
#include "core/progress.h"
#include "gguf/gguf.h"
#include "gguf/stream_writer.h"
#include "quant/convert.h"
#include "quant/quant.h"

namespace glia::quant {
namespace {

bool is_float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Output rows per write: about 64 MiB of output (at least one row).
int64_t rows_per_chunk(DType t, int64_t ne0) {
    const size_t rb = row_bytes(t, ne0);
    return std::max<int64_t>(1, int64_t((size_t(64) << 20) / std::max<size_t>(rb, 1)));
}

QuantizeResult plan(const gguf::File& f, const QuantizeOptions& opt) {
    QuantizeResult r;
    r.in_file_bytes = f.file_size();
    const auto& ts = f.tensors();
    std::vector<std::string> names;
    for (const auto& t : ts) names.push_back(t.name);
    MixPlanner planner(opt.ftype, model_facts(f), opt.pure);
    for (size_t i : reference_order(names)) {
        const gguf::TensorInfo& t = ts[i];
        TensorPlan p;
        p.name = t.name;
        p.ne.assign(t.ne, t.ne + std::max<uint32_t>(t.n_dims, 1));
        p.from = t.type;
        p.to = planner.choose(t.name, t.type, static_cast<int>(t.n_dims), t.ne[0]);
        p.in_bytes = t.nbytes;
        p.out_bytes = row_bytes(p.to, t.ne[0]) * uint64_t(t.n_rows());
        if (p.to != p.from) {
            if (!is_float_type(p.from) && !opt.allow_requantize)
                fail(f.path(), ": tensor '", t.name, "' is already quantized (", dtype_name(p.from),
                     "); quantize from an F32, F16 or BF16 file, or pass --allow-requantize (quality suffers)");
            if (!supported(p.from))
                fail(f.path(), ": tensor '", t.name, "' has type ", dtype_name(p.from), ", which glia cannot read");
            traits(p.to);  // the target must be writable
        }
        r.tensors.push_back(std::move(p));
    }
    r.n_fallback = planner.n_fallback();
    return r;
}

}  // namespace

QuantizeResult plan_quantize(const std::string& in_path, const QuantizeOptions& opt) {
    auto f = gguf::File::open(in_path);
    return plan(*f, opt);
}

QuantizeResult quantize_file(const std::string& in_path, const std::string& out_path, const QuantizeOptions& opt) {
    const auto t0 = std::chrono::steady_clock::now();
    if (std::filesystem::exists(out_path) && std::filesystem::exists(in_path) &&
        std::filesystem::equivalent(in_path, out_path))
        fail("the output file '", out_path, "' is the input file; choose another name");
    auto f = gguf::File::open(in_path);
    QuantizeResult r = plan(*f, opt);

    gguf::StreamWriter w;
    // Every key of the input in its order, then the quantization version and file type
    // (moved to the end, as the reference writes them). Split-file keys are dropped.
    for (const auto& kv : f->kvs()) {
        if (kv.key == "split.no" || kv.key == "split.count" || kv.key == "split.tensors.count") continue;
        w.set(kv.key, kv.value);
    }
    w.set_u32("general.quantization_version", 2);
    w.set_u32("general.file_type", static_cast<uint32_t>(opt.ftype));
    for (const auto& p : r.tensors) w.add_tensor(p.name, p.to, p.ne);
    w.open(out_path);

    uint64_t total = 0;
    for (const auto& p : r.tensors) total += uint64_t(f->tensor(p.name).n_elements());
    Progress bar("quantize", total, opt.progress);
    Progress* pb = bar.enabled() ? &bar : nullptr;
    std::vector<uint8_t> buf;
    for (const auto& p : r.tensors) {
        const gguf::TensorInfo& t = f->tensor(p.name);
        if (pb) pb->set_status(p.name);
        if (p.from == p.to) {
            w.write(t.data, t.nbytes);
            if (pb) pb->add(uint64_t(t.n_elements()));
            continue;
        }
        const int64_t ne0 = t.ne[0], rows = t.n_rows();
        const int64_t chunk = rows_per_chunk(p.to, ne0);
        const size_t in_row = row_bytes(p.from, ne0), out_row = row_bytes(p.to, ne0);
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
            const int64_t n = std::min(chunk, rows - r0);
            buf.resize(out_row * size_t(n));
            convert_rows(p.from, t.data + size_t(r0) * in_row, p.to, buf.data(), ne0, n, opt.n_threads, pb);
            w.write(buf.data(), buf.size());
        }
    }
    w.finish();
    bar.done();
    r.out_file_bytes = std::filesystem::file_size(out_path);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

}  // namespace glia::quant
