// The LoRA options shared by run, chat, dump, eval, perplexity, bench and serve:
// --lora FILE[:SCALE] and --lora-scaled FILE SCALE or FILE:SCALE (each repeatable, or a
// comma-separated list of the one-word forms, as the reference's), and
// --lora-init-without-apply (every adapter loaded at scale 0).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "model/lora.h"

namespace glia::cli {

void add_lora_options(Args& a);
// The adapters the options name, loaded and checked against `model` in command-line order,
// --lora and --lora-scaled mixed (adapter ids in the server). A note for each adapter goes to stderr.
struct LoraAdapters {
    std::vector<std::unique_ptr<LoraAdapter>> owned;
    std::vector<const LoraAdapter*> list() const;
};
LoraAdapters load_lora_options(const Args& a, const Model& model);

}  // namespace glia::cli
