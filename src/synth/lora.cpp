#include "synth/lora.h"

#include <cmath>
#include <random>

#include "core/error.h"
#include "core/f16.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/quant.h"

namespace glia::synth {

namespace {

// The weights an adapter may target: 2-D matrices of the blocks, and the LM head.
bool adaptable(const Tensor& t) {
    if (t.ne[2] != 1 || t.ne[3] != 1 || t.ne[1] == 1) return false;
    if (t.name == "output.weight") return true;
    return t.name.rfind("blk.", 0) == 0 && t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".weight") == 0 &&
           t.name.find("norm") == std::string::npos;
}

double rms_of(const Tensor& t) {
    std::vector<float> row(static_cast<size_t>(t.ne[0]));
    double sum = 0;
    for (int64_t r = 0; r < t.ne[1]; ++r) {
        quant::dequantize_row(t.type, static_cast<const uint8_t*>(t.data) + r * t.row_size(), row.data(), t.ne[0]);
        for (float v : row) sum += double(v) * v;
    }
    return std::sqrt(sum / double(t.n_elements()));
}

}  // namespace

int write_random_lora(const Model& model, const std::string& path, const LoraOptions& opt) {
    if (opt.rank < 1) fail("synth-lora: the rank must be at least 1, got ", opt.rank);
    if (opt.type != DType::F32 && opt.type != DType::F16) fail("synth-lora: adapters are written as F32 or F16");
    if (!std::isfinite(opt.alpha) || !std::isfinite(opt.strength)) fail("synth-lora: alpha and strength must be finite");
    gguf::Writer w;
    w.set_str("general.architecture", opt.arch.empty() ? model.profile().arch : opt.arch);
    w.set_str("general.type", "adapter");
    w.set_str("general.name", "random LoRA adapter (glia synth-lora)");
    w.set_str("adapter.type", "lora");
    w.set_f32("adapter.lora.alpha", opt.alpha);
    std::mt19937_64 rng(opt.seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const float factor = opt.alpha != 0.0f ? opt.alpha / float(opt.rank) : 1.0f;
    int n = 0;
    for (const Tensor& t : model.weights().all()) {
        if (!adaptable(t)) continue;
        bool wanted = opt.targets.empty();
        for (const std::string& s : opt.targets) wanted = wanted || t.name.find(s) != std::string::npos;
        if (!wanted) continue;
        const int64_t in = t.ne[0], out = t.ne[1], r = opt.rank;
        // var((f B A)_ij) = f^2 r var(B) var(A): A ~ N(0, 1/in), B sized to reach strength * rms(W).
        const float sd_a = 1.0f / std::sqrt(float(in));
        const float sd_b = float(opt.strength * rms_of(t)) * std::sqrt(float(in) / float(r)) / std::fabs(factor);
        auto emit = [&](const std::string& name, int64_t ne0, int64_t ne1, float sd) {
            std::vector<float> v(static_cast<size_t>(ne0 * ne1));
            for (float& x : v) x = sd * normal(rng);
            if (opt.type == DType::F32) {
                w.add_tensor(name, DType::F32, {ne0, ne1}, v.data(), v.size() * 4);
            } else {
                std::vector<uint16_t> h(v.size());
                for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_f16(v[i]);
                w.add_tensor(name, DType::F16, {ne0, ne1}, h.data(), h.size() * 2);
            }
        };
        emit(t.name + ".lora_a", in, r, sd_a);
        emit(t.name + ".lora_b", r, out, sd_b);
        ++n;
    }
    if (n == 0) fail("synth-lora: no weight of '", model.file().path(), "' matches the targets");
    w.write(path);
    return n;
}

}  // namespace glia::synth
