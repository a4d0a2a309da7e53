#include "lora_options.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/error.h"
#include "model/model.h"

namespace glia::cli {
namespace {

bool is_number(const std::string& s) {
    char* end = nullptr;
    std::strtod(s.c_str(), &end);
    return !s.empty() && end && *end == '\0';
}

// "--lora-scaled FILE SCALE" (the reference's form): the word after FILE is a number, and
// FILE carries no scale (nor a list) of its own.
bool scale_follows(const std::string& file, const std::string& next) {
    if (!is_number(next) || file.find(',') != std::string::npos) return false;
    const size_t colon = file.rfind(':');
    return colon == std::string::npos || !is_number(file.substr(colon + 1));
}

}  // namespace

void add_lora_options(Args& a) {
    a.opt("--lora", "FILE[:SCALE]", "apply a LoRA adapter (GGUF) at SCALE (default 1); repeat the option or give a "
                                    "comma-separated list for several")
        .opt("--lora-scaled", "FILE SCALE", "the same with the scale required, as the reference's option (FILE:SCALE "
                                            "works too)")
        .flag("--lora-init-without-apply", "load the adapters at scale 0 (the server's requests or "
                                           "POST /lora-adapters give them scales)")
        .two_words("--lora-scaled", ':', scale_follows);
}

std::vector<const LoraAdapter*> LoraAdapters::list() const {
    std::vector<const LoraAdapter*> out;
    for (const auto& ad : owned) out.push_back(ad.get());
    return out;
}

LoraAdapters load_lora_options(const Args& a, const Model& model) {
    std::vector<LoraSpec> specs;
    // In command-line order, --lora and --lora-scaled mixed: an adapter's id is its place.
    for (const auto& [flag, value] : a.all_of({"--lora", "--lora-scaled"})) {
        std::stringstream ss(value);
        std::string item;
        while (std::getline(ss, item, ',')) {
            LoraSpec spec = parse_lora_spec(item, flag.c_str());
            if (flag == "--lora-scaled" && spec.path == item)
                fail("--lora-scaled '", item, "': give FILE SCALE or FILE:SCALE (or use --lora FILE)");
            specs.push_back(spec);
        }
    }
    LoraAdapters out;
    for (const LoraSpec& spec : specs) {
        const float scale = a.has("--lora-init-without-apply") ? 0.0f : spec.scale;
        out.owned.push_back(LoraAdapter::load(spec.path, model, scale));
        const LoraAdapter& ad = *out.owned.back();
        std::fprintf(stderr, "glia: LoRA adapter %zu: %s (%zu weights, alpha %g) at scale %g\n", out.owned.size() - 1,
                     spec.path.c_str(), ad.pairs().size(), static_cast<double>(ad.alpha()),
                     static_cast<double>(ad.scale));
        if (!ad.ignored().empty())
            std::fprintf(stderr, "glia: warning: %s: %zu tensor(s) not applied (e.g. '%s'): glia applies the "
                                 "lora_a / lora_b pairs only\n", spec.path.c_str(), ad.ignored().size(),
                         ad.ignored().front().c_str());
    }
    return out;
}

}  // namespace glia::cli
