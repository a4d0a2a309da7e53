// glia plan: where each layer, weight and state of a model would go, and whether it fits,
// before anything is loaded. Plans a GGUF file from its header, or a synth shape from the
// tensor list the synthesized file would have (nothing is written).
//
// Exit codes: 0 a plan was made; 1 bad input (file, option); 3 the request has no legal
// plan (the reason and the remedy on stderr; with --json also as JSON on stdout).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "backend/cpu/simd/matmul.h"
#include "command.h"
#include "common.h"
#include "core/error.h"
#include "core/json.h"
#include "gguf/gguf.h"
#include "model/profile.h"
#include "placement/estimates.h"
#include "placement/placement.h"
#include "placement/report.h"
#include "placement/tensor_parallel.h"
#include "quant/mix.h"
#include "synth/synth.h"

namespace glia::cli {
namespace {

constexpr int kExitRefused = 3;

int int_option(const Args& a, const char* name, long long lo, long long hi) {
    const long long v = a.integer(name);
    if (v < lo || v > hi) fail(name, " ", v, " is out of range (", lo, "..", hi, ")");
    return static_cast<int>(v);
}

// The model: a file, or the header of a synth shape.
std::unique_ptr<gguf::File> open_model(const Args& a) {
    const std::string path = model_path(a);
    if (!a.has("--shape")) {
        if (path.empty()) fail("no model given (usage: glia plan MODEL [options], or --shape NAME; see --help)");
        return gguf::File::open(path);
    }
    if (!path.empty()) fail("give a model file or --shape, not both");
    const synth::Shape* s = synth::find_shape(a.str("--shape"));
    if (!s) {
        std::string names;
        for (const auto& x : synth::shapes()) names += (names.empty() ? "" : ", ") + x.name;
        fail("unknown shape '", a.str("--shape"), "' (one of: ", names, ")");
    }
    synth::Options o;
    o.shape = *s;
    if (!quant::file_type_from_name(a.str("--type"), o.ftype))
        fail("unknown --type '", a.str("--type"), "'; choose one of: ", quant::file_type_names());
    if (a.has("--vocab-from")) o.vocab_path = a.str("--vocab-from");
    return synth::model_header(o);
}

void print_text(const gguf::File& f, const ModelProfile& p, const ModelBytes& mb, const Placement& pl) {
    std::printf("model:       %s (%s, %d layers, %s of weights)\n", f.path().c_str(), p.arch.c_str(), p.n_layer,
                format_bytes(mb.total_weights()).c_str());
    std::printf("context:     %d tokens", pl.n_ctx);
    if (pl.ctx_shrunk()) std::printf(" (shrunk from %d)", pl.n_ctx_asked);
    std::printf(", %d sequence%s, batch %d\n", pl.n_seq, pl.n_seq == 1 ? "" : "s", pl.n_batch);
    std::printf("KV cache:    keys %s, values %s\n", cache_type_name(pl.cache.k), cache_type_name(pl.cache.v));
    std::printf("layers:      %s\n", describe_layers(pl).c_str());
    std::printf("embeddings:  %s\n", pl.devices[pl.embeddings].name.c_str());
    std::printf("output:      %s%s\n", pl.devices[pl.output].name.c_str(),
                pl.output_copies_embeddings ? " (tied LM head: a copy of token_embd.weight)" : "");
    if (mb.has_experts())
        std::printf("experts:     %s\n", pl.experts_on_host ? "in host memory (--cpu-moe)" : "with their layers");
    std::printf("\n%-10s %12s %12s %12s %12s %12s %12s %12s\n", "device", "memory", "weights", "repacked", "KV", "state",
                "scratch", "total");
    for (size_t d = 0; d < pl.devices.size(); ++d) {
        const DeviceUsage& u = pl.usage[d];
        const std::string mem = pl.devices[d].memory_bytes ? format_bytes(pl.devices[d].memory_bytes) : "host";
        std::printf("%-10s %12s %12s %12s %12s %12s %12s %12s\n", pl.devices[d].name.c_str(), mem.c_str(),
                    format_bytes(u.weights).c_str(), format_bytes(u.repacked).c_str(), format_bytes(u.kv).c_str(),
                    format_bytes(u.state).c_str(), format_bytes(u.scratch).c_str(), format_bytes(u.total()).c_str());
    }
    if (pl.usage[0].repacked)
        std::printf("\nrepacked:    copies of the CPU's product weights its kernels make on first use (GEMM "
                    "panels, the decode layout);\n             a decode layout takes its weight's place (the file's "
                    "pages are handed back once it is built, unless other ops read them)\n");
    std::printf("\ndecision:    fit, %d of %d layers on the GPU\n", pl.n_gpu_layers(), p.n_layer);
    for (const std::string& n : pl.notes) std::printf("note:        %s\n", n.c_str());
}

void print_tp(const gguf::File& f, const ModelProfile& p, const ModelBytes& mb, const TpPlan& tp) {
    std::printf("model:       %s (%s, %d layers, %s of weights)\n", f.path().c_str(), p.arch.c_str(), p.n_layer,
                format_bytes(mb.total_weights()).c_str());
    std::printf("context:     %d tokens\n", tp.n_ctx);
    std::printf("split:       tensor parallel, %d ranks: %s\n", tp.world, describe_split(p, tp.ranks[0]).c_str());
    std::printf("             attn_output and ffn_down split along K, then an all-reduce per block output; "
                "embeddings and norms replicated\n");
    std::printf("\n%-12s %12s %12s %12s %12s %12s %12s %12s\n", "rank", "memory", "weights", "repacked", "KV", "state",
                "scratch", "total");
    for (int r = 0; r < tp.world; ++r) {
        const DeviceUsage& u = tp.usage[size_t(r)];
        const DeviceSpec& d = tp.devices[size_t(r)];
        const std::string mem = d.memory_bytes ? format_bytes(d.memory_bytes) : "host";
        std::printf("%-12s %12s %12s %12s %12s %12s %12s %12s\n", d.name.c_str(), mem.c_str(),
                    format_bytes(u.weights).c_str(), format_bytes(u.repacked).c_str(), format_bytes(u.kv).c_str(),
                    format_bytes(u.state).c_str(), format_bytes(u.scratch).c_str(), format_bytes(u.total()).c_str());
    }
    if (tp.devices[0].kind != Device::CPU)
        std::printf("\nnote:        GPU ranks need the NCCL path, which has not been run yet: the runtime refuses "
                    "-tp with GPUs in this version\n");
}

std::string tp_json(const ModelProfile& p, const TpPlan& tp) {
    json::Writer w;
    w.begin_object().key("world").value(tp.world).key("n_ctx").value(tp.n_ctx)
        .key("split").value(describe_split(p, tp.ranks[0]))
        .key("lm_head_split").value(tp.ranks[0].tp.lm_head_split);
    w.key("ranks").begin_array();
    for (int r = 0; r < tp.world; ++r) {
        const ModelProfile& rp = tp.ranks[size_t(r)];
        const DeviceUsage& u = tp.usage[size_t(r)];
        w.begin_object().key("rank").value(r).key("device").value(tp.devices[size_t(r)].name)
            .key("memory_bytes").value(uint64_t(tp.devices[size_t(r)].memory_bytes))
            .key("n_head").value(rp.n_head).key("n_head_kv").value(rp.n_head_kv_max())
            .key("n_ff").value(rp.n_ff.empty() ? 0 : rp.n_ff[0]).key("n_ff_expert").value(rp.n_ff_expert)
            .key("vocab_rows").value(rp.n_vocab_local())
            .key("weights").value(uint64_t(u.weights)).key("repacked").value(uint64_t(u.repacked))
            .key("kv").value(uint64_t(u.kv))
            .key("state").value(uint64_t(u.state)).key("scratch").value(uint64_t(u.scratch))
            .key("total").value(uint64_t(u.total())).end_object();
    }
    w.end_array().end_object();
    return w.str();
}

std::string model_json(const gguf::File& f, const ModelProfile& p, const ModelBytes& mb) {
    json::Writer w;
    w.begin_object()
        .key("path").value(json::sanitize_utf8(f.path()))
        .key("arch").value(json::sanitize_utf8(p.arch))
        .key("n_layer").value(p.n_layer)
        .key("weights_bytes").value(mb.total_weights())
        .key("has_experts").value(mb.has_experts())
        .key("tied_output").value(mb.tied_output)
        .key("uniform_offload_required").value(p.uniform_offload_required)
        .key("n_ctx_train").value(p.n_ctx_train)
        .end_object();
    return w.str();
}

int cmd_plan(const std::vector<std::string>& argv) {
    Args a("plan", "MODEL [-ngl N] [--cpu-moe] [--gpu-mem 24G[,24G]] [-c N] [--min-ctx N] [--parallel N] [--json]\n"
                   "       glia plan MODEL -tp N [--gpu-mem 80G,80G] [-c N] [--json]\n"
                   "       glia plan --shape NAME [--type TYPE] [options]\n\n"
                   "Where each layer, weight and state would go, bytes per device, and whether it fits.\n"
                   "Several GPUs: --gpu-mem with one size per GPU splits the layers across them (in proportion\n"
                   "to their memory); -tp N splits every layer's heads and FFN across N ranks instead.\n"
                   "Exit codes: 0 planned, 1 bad input, 3 no legal plan (reason and remedy on stderr).");
    a.opt("-m,--model", "FILE", "the GGUF file (or give it as the first argument)")
        .opt("-ngl,--gpu-layers", "N", "layers on the GPU(s), the last N (leave out: as many as fit)")
        .flag("--cpu-moe", "keep MoE expert tensors in host memory")
        .opt("--gpu-mem", "LIST", "memory per GPU the plan may use, e.g. 24G or 24G,24G (none: CPU only)")
        .opt("-c,--ctx-size", "N", "context size in tokens (0 = the model's)", "0")
        .opt("--min-ctx", "N", "the fit may shrink the context down to N tokens (0 = never shrink)", "0")
        .opt("-np,--parallel", "N", "sequences served at once (recurrent state slots)", "1")
        .opt("-b,--batch-size", "N", "tokens per step, for the scratch estimate", "512")
        .opt("-tp,--tensor-parallel", "N", "plan N tensor-parallel ranks: each rank's share of the heads and FFN "
                                           "and its bytes (one GPU per rank with --gpu-mem, else CPU ranks)", "1")
        .opt("--shape", "NAME", "plan a synth shape instead of a file (see 'glia synth --list-shapes')")
        .opt("--type", "TYPE", "with --shape: tensor type or mix: " + quant::file_type_names(), "F16")
        .opt("--vocab-from", "FILE", "with --shape: take the vocabulary size from this GGUF")
        .flag("--json", "print one JSON object");
    add_cache_type_options(a);
    if (!a.parse(argv)) return 0;
    if (a.positional().size() > 1) fail("more than one model given: ", a.positional()[1]);
    if (!a.has("--shape") && (a.has("--type") || a.has("--vocab-from")))
        fail("--type and --vocab-from go with --shape");

    PlanRequest req;
    if (a.has("-ngl")) req.n_gpu_layers = int_option(a, "-ngl", 0, 1 << 20);
    req.cpu_moe = a.has("--cpu-moe");
    if (a.has("--gpu-mem")) req.gpu_mem = parse_memory_list(a.str("--gpu-mem"));
    req.n_ctx = int_option(a, "-c", 0, 1 << 24);
    req.min_ctx = int_option(a, "--min-ctx", 0, 1 << 24);
    req.n_seq = int_option(a, "--parallel", 1, 1 << 16);
    req.n_batch = int_option(a, "-b", 1, 1 << 20);
    req.cache = cache_types_option(a);
    req.host_copies = cpu::weight_copy_bytes;
    const bool json = a.has("--json");

    const std::unique_ptr<gguf::File> f = open_model(a);
    const ModelProfile p = derive_profile(*f);
    const ModelBytes mb = measure_model(p, *f, req.cache, req.host_copies);
    // A refused plan: the reason on stderr (and as JSON with --json), exit 3.
    auto refused = [&](const PlanError& e) {
        if (json) {
            json::Writer w;
            w.begin_object().key("model").raw(model_json(*f, p, mb)).key("decision").value("refused")
                .key("reason").value(e.what()).end_object();
            std::printf("%s\n", w.str().c_str());
        }
        std::fprintf(stderr, "glia plan: refused: %s\n", e.what());
        return kExitRefused;
    };
    const int tp_world = int_option(a, "-tp", 1, 256);
    if (tp_world > 1) {
        if (a.has("-ngl") || a.has("--cpu-moe")) fail("-tp plans ranks that each hold a share of every layer: "
                                                       "-ngl and --cpu-moe do not apply");
        TpPlan tp;
        try {
            tp = plan_tensor_parallel(p, *f, tp_world, req);
        } catch (const PlanError& e) {
            return refused(e);
        }
        if (json) {
            json::Writer w;
            w.begin_object().key("model").raw(model_json(*f, p, mb)).key("decision").value("fit")
                .key("tensor_parallel").raw(tp_json(p, tp)).end_object();
            std::printf("%s\n", w.str().c_str());
        } else {
            print_tp(*f, p, mb, tp);
        }
        return 0;
    }
    Placement pl;
    try {
        pl = plan_placement(p, *f, req);
    } catch (const PlanError& e) {
        return refused(e);
    }
    if (json) {
        json::Writer w;
        w.begin_object().key("model").raw(model_json(*f, p, mb)).key("decision").value("fit")
            .key("placement").raw(placement_json(pl)).end_object();
        std::printf("%s\n", w.str().c_str());
    } else {
        print_text(*f, p, mb, pl);
    }
    return 0;
}

const Command reg{"plan", "show where a model's layers and weights go, and whether it fits", cmd_plan};

}  // namespace
}  // namespace glia::cli
