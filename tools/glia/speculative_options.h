// The speculative decoding options shared by run and bench: --spec-ngram, --model-draft,
// --draft-max, --draft-min, --draft-p-min, --spec-ngram-min/-max.
#pragma once
#include <string>

#include "args.h"
#include "runtime/speculative.h"

namespace glia::cli {

void add_speculative_options(Args& a);
// The options as given, checked (the draft model itself is loaded by the caller).
SpecOptions speculative_options(const Args& a);
// " | speculative (prompt lookup): drafted D, accepted A (x %), T tokens a target step"
std::string speculative_summary(const Speculator& spec);

}  // namespace glia::cli
