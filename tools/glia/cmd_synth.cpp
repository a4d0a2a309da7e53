// glia synth: a random-weight model with a real model's shapes, for benchmarks.
#include <cstdio>

#include "args.h"
#include "command.h"
#include "core/error.h"
#include "core/json.h"
#include "quant/mix.h"
#include "synth/synth.h"

namespace glia::cli {
namespace {

std::string shape_line(const synth::Shape& s) {
    std::string l = cat(s.name, ": ", s.arch, " embd ", s.n_embd, ", ", s.n_layer, " layers, ", s.n_head, "/",
                        s.n_head_kv, " heads, head dim ", s.head_dim);
    if (s.n_expert) l += cat(", ", s.n_expert, " experts (", s.n_expert_used, " used) of ffn ", s.n_ff_exp);
    else l += cat(", ffn ", s.n_ff);
    l += cat(", rope base ", s.rope_base, s.qk_norm ? ", QK-norm" : "", "; vocab ", s.vocab_hint);
    return l;
}

int cmd_synth(const std::vector<std::string>& argv) {
    Args a("synth", "OUT.gguf --shape NAME --vocab-from VOCAB.gguf [--type TYPE] [options]");
    a.opt("--shape", "NAME", "model shape (see --list-shapes)")
        .opt("--type", "TYPE", "tensor type or mix: " + quant::file_type_names(), "F16")
        .opt("--vocab-from", "FILE", "GGUF whose tokenizer.* keys are copied (sets the vocabulary size)")
        .opt("--seed", "S", "random seed", "42")
        .opt("-t,--threads", "N", "threads (0 = all cores)", "0")
        .opt("--arch", "NAME", "override: architecture (llama, qwen3, qwen3moe)")
        .opt("--embd", "N", "override: embedding length")
        .opt("--layers", "N", "override: block count")
        .opt("--heads", "N", "override: attention heads")
        .opt("--kv-heads", "N", "override: key/value heads")
        .opt("--ffn", "N", "override: feed-forward length")
        .opt("--head-dim", "N", "override: head dimension")
        .opt("--experts", "N", "override: expert count (qwen3moe)")
        .opt("--experts-used", "N", "override: experts used per token")
        .opt("--expert-ffn", "N", "override: expert feed-forward length")
        .opt("--ctx", "N", "override: training context length")
        .opt("--rope-base", "F", "override: RoPE frequency base")
        .flag("--list-shapes", "list the named shapes")
        .flag("--json", "print the result as JSON");
    if (!a.parse(argv)) return 0;
    if (a.has("--list-shapes")) {
        for (const auto& s : synth::shapes()) std::printf("%s\n", shape_line(s).c_str());
        return 0;
    }
    if (a.positional().size() != 1) fail("usage: glia synth OUT.gguf --shape NAME --vocab-from VOCAB.gguf (see --help)");
    if (!a.has("--shape")) fail("no --shape given; one of: llama3-1b, llama3-8b, qwen3-0.6b, qwen3-8b, qwen3-30b-a3b, tiny (see --list-shapes)");
    const synth::Shape* base = synth::find_shape(a.str("--shape"));
    if (!base) fail("unknown shape '", a.str("--shape"), "' (see 'glia synth --list-shapes')");
    synth::Options o;
    o.shape = *base;
    auto over = [&](const char* opt, int& field) {
        if (!a.has(opt)) return;
        const long long v = a.integer(opt);
        if (v < 0 || v > (1 << 24)) fail(opt, " ", v, " is out of range");
        field = static_cast<int>(v);
    };
    if (a.has("--arch")) o.shape.arch = a.str("--arch");
    over("--embd", o.shape.n_embd);
    over("--layers", o.shape.n_layer);
    over("--heads", o.shape.n_head);
    over("--kv-heads", o.shape.n_head_kv);
    over("--ffn", o.shape.n_ff);
    over("--head-dim", o.shape.head_dim);
    over("--experts", o.shape.n_expert);
    over("--experts-used", o.shape.n_expert_used);
    over("--expert-ffn", o.shape.n_ff_exp);
    over("--ctx", o.shape.n_ctx_train);
    if (a.has("--rope-base")) o.shape.rope_base = a.number("--rope-base");
    if (a.has("--arch")) o.shape.qk_norm = o.shape.arch != "llama";
    if (!quant::file_type_from_name(a.str("--type"), o.ftype))
        fail("unknown --type '", a.str("--type"), "'; choose one of: ", quant::file_type_names());
    if (!a.has("--vocab-from"))
        fail("no --vocab-from given; shape ", o.shape.name, " is meant for ../shared/", o.shape.vocab_hint);
    o.vocab_path = a.str("--vocab-from");
    const long long seed = a.integer("--seed");
    o.seed = static_cast<uint64_t>(seed);
    o.n_threads = static_cast<int>(a.integer("-t"));
    if (o.n_threads < 0) fail("--threads must be >= 0");
    const bool json = a.has("--json");
    o.progress = !json;

    const std::string out = a.positional()[0];
    const synth::Result r = synth::write_model(out, o);
    const std::string type = quant::file_type_name(static_cast<uint32_t>(o.ftype));
    if (json) {
        json::Writer w;
        w.begin_object()
            .key("output").value(out)
            .key("shape").value(o.shape.name)
            .key("arch").value(o.shape.arch)
            .key("file_type").value(type)
            .key("n_params").value(r.n_params)
            .key("n_vocab").value(static_cast<int64_t>(r.n_vocab))
            .key("n_tensors").value(static_cast<int64_t>(r.n_tensors))
            .key("file_bytes").value(r.file_bytes)
            .key("seconds").value(r.seconds, 6)
            .end_object();
        std::printf("%s\n", w.str().c_str());
    } else {
        std::printf("%s\nwrote %s: %s, %.3f B params, vocab %d, %d tensors, %.2f MiB, %.1f s\n",
                    shape_line(o.shape).c_str(), out.c_str(), type.c_str(), double(r.n_params) / 1e9, r.n_vocab,
                    r.n_tensors, double(r.file_bytes) / (1024.0 * 1024.0), r.seconds);
    }
    return 0;
}

const Command reg{"synth", "write a random-weight model with a real model's shapes (for benchmarks)", cmd_synth};

}  // namespace
}  // namespace glia::cli
