// Helpers for the placement tests: a model file with its profile, synth shapes as
// headers, and the shared model list.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/profile.h"
#include "placement/placement.h"
#include "synth/synth.h"
#include "test_util.h"

namespace glia::test {

constexpr size_t kGiB = size_t(1) << 30;
constexpr size_t kMiB = size_t(1) << 20;

struct Model {
    std::unique_ptr<gguf::File> f;
    ModelProfile p;
};

inline Model load_model_file(const std::string& path) {
    Model m;
    m.f = gguf::File::open(path);
    m.p = derive_profile(*m.f);
    return m;
}

inline Model shared_model(const std::string& name) { return load_model_file(shared_path("models/" + name)); }

// A synth shape's file as a header (no data), e.g. ("llama3-8b", Q4_K_M).
inline Model synth_model(const std::string& shape, quant::FileType ft) {
    const synth::Shape* s = synth::find_shape(shape);
    if (!s) throw Error("unknown synth shape " + shape);
    synth::Options o;
    o.shape = *s;
    o.ftype = ft;
    Model m;
    m.f = synth::model_header(o);
    m.p = derive_profile(*m.f);
    return m;
}

// Every GGUF in the shared models folder, sorted.
inline std::vector<std::string> shared_model_paths() {
    std::vector<std::string> out;
    const std::string dir = shared_path("models");
    if (!std::filesystem::is_directory(dir)) return out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".gguf") out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
}

inline PlanRequest gpu_request(std::vector<size_t> mem, int ngl = -1) {
    PlanRequest r;
    r.gpu_mem = std::move(mem);
    r.n_gpu_layers = ngl;
    return r;
}

inline uint64_t tensor_bytes(const gguf::File& f) {
    uint64_t n = 0;
    for (const auto& t : f.tensors()) n += t.nbytes;
    return n;
}

}  // namespace glia::test
