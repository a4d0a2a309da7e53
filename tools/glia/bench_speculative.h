// glia bench --spec-ngram / --draft FILE: greedy generation from a real prompt with and
// without speculative decoding, timed, checked to give the same tokens.
#pragma once
#include <string>

#include "args.h"

namespace glia { class Model; }

namespace glia::cli {

// Declares --text and --text-file (the prompt of the speculative bench).
void add_bench_speculative_options(Args& a);
bool bench_speculative_wanted(const Args& a);
int bench_speculative(const Args& a, const Model& model, const std::string& model_desc);

}  // namespace glia::cli
