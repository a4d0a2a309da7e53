// Random-weight models with a real model's shapes, for benchmarks (`glia synth`).
//
// Weights are N(0, 0.02) rounded to F16 (never exactly zero), norm weights 1.0, the MoE
// router F32; then every tensor is converted with the mix rules of the requested type
// (quant/mix.h), exactly as if the F16 file had been written and then quantized. Standard
// GGUF key and tensor names, so the reference engine loads the files too. Generation and
// quantization are streamed in row chunks (memory stays ~100 MB for any model size) and
// run on all threads; the result depends only on the seed, not on the thread count.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quant/mix.h"

namespace glia::synth {

struct Shape {
    std::string name;
    std::string arch;         // llama, qwen3, qwen3moe
    int n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0, head_dim = 0;
    double rope_base = 10000;
    bool qk_norm = false;     // per-head RMSNorm of Q and K (qwen3)
    int n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
    int n_ctx_train = 4096;
    float norm_eps = 1e-5f;
    std::string vocab_hint;   // the vocabulary file the shape is meant for
    int n_vocab = 0;          // the real model's vocabulary size (used without a vocabulary file)
};

// The named shapes (llama3-1b, llama3-8b, qwen3-0.6b, qwen3-8b, qwen3-30b-a3b, tiny).
const std::vector<Shape>& shapes();
// nullptr when unknown.
const Shape* find_shape(const std::string& name);

struct Options {
    Shape shape;
    quant::FileType ftype = quant::FileType::MOSTLY_F16;
    std::string vocab_path;   // tokenizer.* keys are copied from this GGUF
    uint64_t seed = 42;
    int n_threads = 0;
    bool progress = true;
};

struct Result {
    int n_tensors = 0;
    uint64_t n_params = 0;
    uint64_t file_bytes = 0;
    int n_vocab = 0;
    double seconds = 0;
};

// The file write_model would write, as a header without tensor data: its metadata and
// every tensor's name, final type and shape (so its byte count), for planning a shape
// without writing it. Without opt.vocab_path the tokenizer keys are left out and the
// shape's n_vocab gives the vocabulary size.
std::unique_ptr<gguf::File> model_header(const Options& opt);

// Throws glia::Error on bad shapes (e.g. heads not dividing) or I/O errors; no partial
// file is left behind.
Result write_model(const std::string& out_path, const Options& opt);

}  // namespace glia::synth
