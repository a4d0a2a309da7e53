// glia quantize: F32/F16/BF16 model -> a named type or mix (Q4_K_M, Q8_0 ...), with the
// reference quantizer's per-tensor rules, so that the files match what it writes.
#include <cinttypes>
#include <cstdio>
#include <map>

#include "args.h"
#include "command.h"
#include "core/error.h"
#include "core/json.h"
#include "quant/mix.h"
#include "quant/quantize_file.h"

namespace glia::cli {
namespace {

std::string mib(uint64_t n) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f MiB", double(n) / (1024.0 * 1024.0));
    return b;
}

int cmd_quantize(const std::vector<std::string>& argv) {
    Args a("quantize", "IN.gguf OUT.gguf TYPE [options]\n\nTYPE: " + quant::file_type_names());
    a.opt("-t,--threads", "N", "threads (0 = all cores)", "0")
        .flag("--pure", "use TYPE for every quantizable tensor (no per-tensor mix rules; row-length fallbacks still apply)")
        .flag("--allow-requantize", "accept input tensors that are already quantized (quality suffers)")
        .flag("--dry-run", "print the per-tensor plan, write nothing")
        .flag("-v,--verbose", "print every tensor")
        .flag("--json", "print the result as JSON");
    if (!a.parse(argv)) return 0;
    const auto& pos = a.positional();
    const bool dry = a.has("--dry-run");
    if (pos.size() != (dry ? 2u : 3u) && pos.size() != 3u)
        fail("usage: glia quantize IN.gguf OUT.gguf TYPE (see 'glia quantize --help')");
    const std::string in = pos[0];
    const std::string out = pos.size() == 3 ? pos[1] : "";
    const std::string type_name = pos.back();
    quant::QuantizeOptions opt;
    if (!quant::file_type_from_name(type_name, opt.ftype))
        fail("unknown quantization type '", type_name, "'; choose one of: ", quant::file_type_names());
    opt.n_threads = static_cast<int>(a.integer("-t"));
    if (opt.n_threads < 0) fail("--threads must be >= 0");
    opt.pure = a.has("--pure");
    opt.allow_requantize = a.has("--allow-requantize");
    const bool json = a.has("--json");
    opt.progress = !json;

    const quant::QuantizeResult r = dry ? quant::plan_quantize(in, opt) : quant::quantize_file(in, out, opt);

    uint64_t in_b = 0, out_b = 0;
    std::map<std::string, int> counts;
    for (const auto& t : r.tensors) {
        in_b += t.in_bytes;
        out_b += t.out_bytes;
        counts[dtype_name(t.to)]++;
    }
    if (json) {
        json::Writer w;
        w.begin_object()
            .key("input").value(in)
            .key("output").value(out)
            .key("file_type").value(quant::file_type_name(static_cast<uint32_t>(opt.ftype)))
            .key("file_type_id").value(static_cast<int64_t>(opt.ftype))
            .key("tensor_bytes_in").value(in_b)
            .key("tensor_bytes_out").value(out_b)
            .key("file_bytes_out").value(r.out_file_bytes)
            .key("n_fallback").value(static_cast<int64_t>(r.n_fallback))
            .key("seconds").value(r.seconds, 6)
            .key("tensors").begin_array();
        for (const auto& t : r.tensors) {
            w.begin_object().key("name").value(t.name).key("shape").array(t.ne)
                .key("from").value(dtype_name(t.from)).key("to").value(dtype_name(t.to))
                .key("bytes").value(t.out_bytes).end_object();
        }
        w.end_array().end_object();
        std::printf("%s\n", w.str().c_str());
        return 0;
    }
    if (a.has("-v") || dry) {
        for (const auto& t : r.tensors) {
            std::string shape;
            for (size_t d = 0; d < t.ne.size(); ++d) shape += cat(d ? ", " : "", t.ne[d]);
            std::printf("%-36s [%-18s] %6s -> %-6s %10s\n", t.name.c_str(), shape.c_str(), dtype_name(t.from),
                        dtype_name(t.to), mib(t.out_bytes).c_str());
        }
    }
    std::string mix;
    for (const auto& [k, n] : counts) mix += cat(mix.empty() ? "" : ", ", k, " x", n);
    std::printf("%s %s: %zu tensors (%s), %s -> %s (%.2f bits/weight)%s\n", dry ? "plan" : "quantized",
                quant::file_type_name(static_cast<uint32_t>(opt.ftype)).c_str(), r.tensors.size(), mix.c_str(),
                mib(in_b).c_str(), mib(out_b).c_str(), [&] {
                    uint64_t n = 0;
                    for (const auto& t : r.tensors) {
                        uint64_t e = 1;
                        for (int64_t d : t.ne) e *= uint64_t(d);
                        n += e;
                    }
                    return n ? 8.0 * double(out_b) / double(n) : 0.0;
                }(),
                r.n_fallback ? cat(", ", r.n_fallback, " tensors fell back to another type (row length)").c_str() : "");
    if (!dry) std::printf("wrote %s in %.2f s\n", out.c_str(), r.seconds);
    return 0;
}

const Command reg{"quantize", "convert an F32/F16/BF16 model to a quantized type or mix (Q4_K_M, Q8_0 ...)", cmd_quantize};

}  // namespace
}  // namespace glia::cli
