// glia dump: per-node value summaries of one forward pass over a prompt (the same as
// GLIA_DEBUG_LAYERS=1), optionally compared with a reference dump node by node.
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "command.h"
#include "common.h"
#include "core/json.h"
#include "debug/layer_compare.h"
#include "lora_options.h"
#include "model/model.h"
#include "runtime/session.h"
#include "tokenizer/vocab.h"

namespace glia::cli {
namespace {

int cmd_dump(const std::vector<std::string>& argv) {
    Args a("dump", "MODEL (-p PROMPT | -f FILE) [-o OUT.txt] [--compare REF.txt] [--json]");
    add_runtime_options(a);
    a.opt("-p,--prompt", "TEXT", "prompt text", "Once upon a time")
        .opt("-f,--file", "FILE", "read the prompt from a file")
        .opt("-o,--output", "FILE", "write the dump here (default: stdout, or nowhere with --compare)")
        .opt("--compare", "FILE", "a reference dump (e.g. ../shared/golden/<model>/layers-once.txt): print the node sums side by side and the first node that diverges")
        .flag("--json", "print the comparison as JSON");
    add_lora_options(a);
    if (!a.parse(argv)) return 0;
    const std::string prompt = a.has("-f") ? read_file(a.str("-f")) : a.str("-p");
    auto model = load_model(model_path(a));
    const auto tokens = model->vocab().tokenize(prompt, true, true);
    SessionOptions so;
    so.n_threads = static_cast<int>(a.integer("-t"));
    so.n_ctx = static_cast<int>(tokens.size());
    so.cpu_ops = cpu_ops_option(a);
    const LoraAdapters loras = load_lora_options(a, *model);
    so.lora = loras.list();
    Session s(*model, so);

    const bool compare = a.has("--compare");
    FILE* out = nullptr;
    std::string tmp_path;
    if (compare) {
        if (a.has("-o")) {
            tmp_path = a.str("-o");
            out = std::fopen(tmp_path.c_str(), "w+");
        } else {
            char name[] = "/tmp/glia-dump-XXXXXX";
            const int fd = mkstemp(name);
            if (fd < 0) fail("cannot create a temporary file for the dump");
            tmp_path = name;
            out = fdopen(fd, "w+");
        }
    } else if (a.has("-o")) {
        out = std::fopen(a.str("-o").c_str(), "w");
    } else {
        out = stdout;
    }
    if (!out) fail("cannot write the dump file");
    s.runner().set_debug(out);
    s.decode(tokens, false);  // like the reference: the last block keeps only the last token
    if (!compare) {
        if (out != stdout) std::fclose(out);
        return 0;
    }
    std::fclose(out);
    const NodeSums ours = parse_node_sums(read_file(tmp_path), "glia_debug:");
    const NodeSums ref = parse_node_sums(read_file(a.str("--compare")), "common_debug_cb_eval:");
    if (!a.has("-o")) std::remove(tmp_path.c_str());
    const auto diffs = compare_node_sums(ours, ref);
    const NodeDiff* first = nullptr;
    for (const auto& d : diffs)
        if (d.diverges && !first) first = &d;
    if (a.has("--json")) {
        json::Writer w;
        w.begin_object().key("nodes").begin_array();
        for (const auto& d : diffs)
            w.begin_object().key("name").value(d.name).key("ours").value(d.ours).key("reference").value(d.ref)
                .key("diverges").value(d.diverges).end_object();
        w.end_array().key("first_divergence");
        if (first) w.value(first->name); else w.null();
        w.end_object();
        std::printf("%s\n", w.str().c_str());
    } else {
        std::printf("%-24s %16s %16s %s\n", "node", "glia sum", "reference sum", "");
        for (const auto& d : diffs)
            std::printf("%-24s %16.6f %16.6f %s\n", d.name.c_str(), d.ours, d.ref, d.diverges ? "<-- differs" : "");
        std::printf("\n%zu nodes compared; %s\n", diffs.size(),
                    first ? ("first divergence: " + first->name).c_str() : "no divergence");
    }
    return first ? 3 : 0;
}

const Command reg{"dump", "per-node value summaries of a forward pass; compare with a reference dump", cmd_dump};

}  // namespace
}  // namespace glia::cli
