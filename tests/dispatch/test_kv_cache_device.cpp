// Quantized KV caches with layers on a device (the stand-in, which computes with the CPU
// kernels on its own memory): the layers' pages live on the device and the logits are the
// CPU run's bits (fails if the refusal of non-f16 caches on a device comes back); a device
// whose attention does not read the cache's type is refused naming the flag, the layer and
// the remedies (unless the user forces the attention to the CPU).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/model.h"
#include "runtime/runner.h"
#include "standin_backend.h"
#include "test_util.h"

namespace glia {
namespace {

using test::StandinBackend;

// Layers il >= first on the stand-in (device 1), the head on the CPU.
Placement split_at(const ModelProfile& p, int first, CacheTypes cache) {
    Placement pl;
    pl.devices = {DeviceSpec{Device::CPU, 0, "cpu", 0}, DeviceSpec{Device::STANDIN, 0, "standin:0", 0}};
    pl.layer.assign(p.n_layer, 0);
    for (int il = first; il < p.n_layer; ++il) pl.layer[il] = 1;
    pl.cache = cache;
    return pl;
}

// The last token's logits after a 20-token prompt and 3 single-token steps.
std::vector<float> logits(const Model& m, RunnerOptions ro) {
    Runner r(m, ro);
    const int n_vocab = m.profile().n_vocab;
    std::vector<int32_t> toks, pos, seq;
    for (int i = 0; i < 23; ++i) toks.push_back(3 + (i * 37) % (n_vocab - 3)), pos.push_back(i), seq.push_back(0);
    EXPECT_TRUE(r.pages().reserve(0, 23));
    const float* l = nullptr;
    for (int t0 = 0; t0 < 23; t0 += t0 == 0 ? 20 : 1) {
        StepInputs in;
        const int nt = t0 == 0 ? 20 : 1;
        in.tokens = toks.data() + t0;
        in.pos = pos.data() + t0;
        in.seq = seq.data() + t0;
        in.n_tokens = nt;
        l = r.forward(in);
    }
    return std::vector<float>(l, l + n_vocab);
}

TEST(KvCacheDevice, QuantizedCachesRunOnTheDevice) {
    auto m = Model::load(test::shared_path("models/tiny-llama-f16.gguf"));
    const ModelProfile& p = m->profile();
    for (const CacheTypes c : {CacheTypes{DType::Q8_0, DType::Q4_0}, CacheTypes{DType::BF16, DType::Q8_0},
                               CacheTypes{DType::F16, DType::Q4_0}}) {
        SCOPED_TRACE(std::string(cache_type_name(c.k)) + "/" + cache_type_name(c.v));
        RunnerOptions ro;
        ro.n_ctx = 64;
        ro.n_threads = 1;
        ro.placement.cache = c;
        const std::vector<float> cpu = logits(*m, ro);
        StandinBackend dev;
        ro.placement = split_at(p, 1, c);
        ro.devices = {&dev};
        std::vector<float> split;
        {
            Runner r(*m, ro);
            for (int il = 0; il < p.n_layer; ++il) EXPECT_EQ(r.state_device(il), il >= 1 ? 1 : 0) << "layer " << il;
        }
        ASSERT_NO_THROW(split = logits(*m, ro));
        EXPECT_GT(dev.ran[Op::ATTENTION], 0);
        ASSERT_EQ(split.size(), cpu.size());
        EXPECT_EQ(0, std::memcmp(split.data(), cpu.data(), cpu.size() * sizeof(float)));
    }
}

TEST(KvCacheDevice, RefusedWhereTheDeviceCannotReadTheType) {
    auto m = Model::load(test::shared_path("models/tiny-llama-f16.gguf"));
    const ModelProfile& p = m->profile();
    StandinBackend dev;
    // A device whose attention reads f16 caches only.
    dev.set_filter([](const Node& n) {
        return n.op != Op::ATTENTION || (n.src[AttnArg::K_CACHE]->type == DType::F16 &&
                                         n.src[AttnArg::V_CACHE]->type == DType::F16);
    });
    RunnerOptions ro;
    ro.n_ctx = 64;
    ro.n_threads = 1;
    ro.devices = {&dev};
    ro.placement = split_at(p, p.n_layer - 1, {DType::F16, DType::Q8_0});
    try {
        Runner r(*m, ro);
        ADD_FAILURE() << "a q8_0 cache went to a device that cannot read it";
    } catch (const Error& e) {
        const std::string w = e.what();
        EXPECT_NE(w.find("--cache-type-v q8_0"), std::string::npos) << w;
        EXPECT_NE(w.find("layer " + std::to_string(p.n_layer - 1)), std::string::npos) << w;
        EXPECT_NE(w.find("--cache-type-v f16"), std::string::npos) << w;
        EXPECT_NE(w.find("-ngl 0"), std::string::npos) << w;
    }
    // f16, which it reads: the layer's pages on the device.
    ro.placement.cache = {};
    Runner r(*m, ro);
    EXPECT_EQ(r.state_device(p.n_layer - 1), 1);
    // A cache the device cannot read with the attention forced to the CPU (GLIA_CPU_OPS):
    // the user's choice, the pages go with the op.
    ro.placement.cache = {DType::F16, DType::Q8_0};
    ro.cpu_ops = {Op::ATTENTION};
    Runner forced(*m, ro);
    EXPECT_EQ(forced.state_device(p.n_layer - 1), 0);
}

}  // namespace
}  // namespace glia
