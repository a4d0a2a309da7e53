#include "speculative_options.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace glia::cli {

void add_speculative_options(Args& a) {
    a.flag("--spec-ngram", "speculative decoding by prompt lookup: draft the tokens that followed the text's last "
                           "n-gram where it occurred before (no draft model); greedy output is unchanged")
        .opt("--spec-ngram-min", "N", "prompt lookup: shortest n-gram looked up", "1")
        .opt("--spec-ngram-max", "N", "prompt lookup: longest n-gram looked up (tried first)", "4")
        .opt("-md,--draft,--model-draft", "FILE", "speculative decoding with this draft model (same vocabulary); greedy "
                                          "output is unchanged")
        .opt("--draft-max", "N", "speculative decoding: tokens drafted per step at most", "16")
        .opt("--draft-min", "N", "speculative decoding: a shorter draft is not verified", "0")
        .opt("--draft-p-min", "P", "greedy draft model: stop drafting at a token it gives less than P", "0.0");
}

SpecOptions speculative_options(const Args& a) {
    SpecOptions o;
    o.ngram = a.has("--spec-ngram");
    if (o.ngram && a.has("--model-draft")) fail("give --spec-ngram or --model-draft, not both");
    o.ngram_min = static_cast<int>(a.integer("--spec-ngram-min", 1, 64));
    o.ngram_max = static_cast<int>(a.integer("--spec-ngram-max", 1, 64));
    if (o.ngram_max < o.ngram_min)
        fail("--spec-ngram-max (", o.ngram_max, ") is below --spec-ngram-min (", o.ngram_min, ")");
    o.draft_max = static_cast<int>(a.integer("--draft-max", 1, 256));
    o.draft_min = static_cast<int>(a.integer("--draft-min", 0, o.draft_max));
    o.draft_p_min = static_cast<float>(a.number("--draft-p-min", 0.0, 1.0));
    return o;
}

std::string speculative_summary(const Speculator& spec) {
    const SpecStats& st = spec.stats();
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  " | speculative (%s): drafted %lld, accepted %lld (%.1f %%), %.2f tokens a target step, "
                  "drafting %.0f %% of the time",
                  spec.kind().c_str(), st.drafted, st.accepted, 100.0 * st.acceptance(), st.tokens_per_step(),
                  100.0 * st.draft_s / std::max(st.draft_s + st.verify_s, 1e-9));
    return buf;
}

}  // namespace glia::cli
