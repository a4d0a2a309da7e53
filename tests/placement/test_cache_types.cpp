// KV cache types in the plan: names, the heads each type takes, the bytes a plan counts
// (q8_0 34 bytes per 32 values against f16's 64, q4_0 18), and quantized caches planned
// onto a GPU.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.h"
#include "placement/cache_types.h"
#include "placement/estimates.h"
#include "plan_test_util.h"

namespace glia::test {
namespace {

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(CacheTypes, NamesAsTheReferenceNamesThem) {
    EXPECT_EQ(cache_type_from_name("f16", "--cache-type-k"), DType::F16);
    EXPECT_EQ(cache_type_from_name("BF16", "--cache-type-k"), DType::BF16);
    EXPECT_EQ(cache_type_from_name("q8_0", "--cache-type-v"), DType::Q8_0);
    EXPECT_EQ(cache_type_from_name("Q4_0", "--cache-type-v"), DType::Q4_0);
    for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0})
        EXPECT_EQ(cache_type_from_name(cache_type_name(t), "-x"), t);
    for (const char* bad : {"q4_k", "f32", "q8", "", "q8_0 "}) {
        const std::string e = error_of([&] { cache_type_from_name(bad, "--cache-type-v"); });
        EXPECT_NE(e.find("--cache-type-v '"), std::string::npos) << bad << ": " << e;
        EXPECT_NE(e.find("q8_0"), std::string::npos) << e;  // the choices
    }
}

ModelProfile attention_profile(int hd_k, int hd_v, int n_kv) {
    ModelProfile p;
    p.arch = "llama";
    p.n_layer = 2;
    p.layer_kind.assign(2, LayerKind::ATTENTION);
    p.n_head_kv.assign(2, n_kv);
    p.head_dim_k = hd_k;
    p.head_dim_v = hd_v;
    return p;
}

TEST(CacheTypes, HeadsMustFitTheBlocks) {
    CacheTypes q8{DType::Q8_0, DType::Q8_0};
    EXPECT_NO_THROW(check_cache_types(attention_profile(64, 64, 8), q8));
    EXPECT_NO_THROW(check_cache_types(attention_profile(8, 8, 4), q8));    // a row of one block
    EXPECT_NO_THROW(check_cache_types(attention_profile(16, 16, 2), q8));
    const std::string k48 = error_of([&] { check_cache_types(attention_profile(48, 64, 8), q8); });
    EXPECT_NE(k48.find("--cache-type-k q8_0"), std::string::npos) << k48;
    EXPECT_NE(k48.find("heads of 48 values"), std::string::npos) << k48;
    const std::string v80 = error_of([&] { check_cache_types(attention_profile(64, 80, 8), CacheTypes{DType::F16, DType::Q4_0}); });
    EXPECT_NE(v80.find("--cache-type-v q4_0"), std::string::npos) << v80;
    EXPECT_NE(v80.find("heads of 80 values"), std::string::npos) << v80;
    // Heads of 8 in rows that do not fill a block.
    const std::string k8 = error_of([&] { check_cache_types(attention_profile(8, 8, 2), q8); });
    EXPECT_NE(k8.find("heads of 8 values"), std::string::npos) << k8;
    // bf16 and f16 take any head.
    EXPECT_NO_THROW(check_cache_types(attention_profile(48, 80, 3), CacheTypes{DType::BF16, DType::F16}));
    ModelProfile mla = attention_profile(64, 64, 1);
    mla.mla_kv_lora_rank = 64;
    EXPECT_NE(error_of([&] { check_cache_types(mla, q8); }).find("latent"), std::string::npos);
}

TEST(CacheTypes, PlanCountsTheCacheBytesByType) {
    for (const char* name : {"stories260K.gguf", "tiny-llama-f16.gguf", "tiny-qwen35-q8_0.gguf"}) {
        SCOPED_TRACE(name);
        const Model m = shared_model(name);
        PlanRequest req;
        req.n_ctx = 1024;
        const Placement f16 = plan_placement(m.p, *m.f, req);
        req.cache = {DType::Q8_0, DType::Q8_0};
        const Placement q8 = plan_placement(m.p, *m.f, req);
        req.cache = {DType::Q4_0, DType::Q8_0};
        const Placement mixed = plan_placement(m.p, *m.f, req);
        req.cache = {DType::BF16, DType::BF16};
        const Placement bf16 = plan_placement(m.p, *m.f, req);
        ASSERT_GT(f16.usage[0].kv, 0u);
        EXPECT_EQ(q8.usage[0].kv * 64, f16.usage[0].kv * 34);
        EXPECT_EQ(mixed.usage[0].kv * 128, f16.usage[0].kv * (18 + 34));  // K and V rows of equal size here
        EXPECT_EQ(bf16.usage[0].kv, f16.usage[0].kv);
        EXPECT_EQ(q8.usage[0].weights, f16.usage[0].weights);
        EXPECT_EQ(q8.cache.k, DType::Q8_0);
    }
}

// The CUDA attention reads every cache type (backend/cuda/kv_rows.cuh): the plan puts the
// layers on the GPU with a quantized cache and counts the cache there by its type (fails if
// the refusal of non-f16 caches on a GPU comes back).
TEST(CacheTypes, GpuLayersPlannedWithQuantizedCaches) {
    const Model m = shared_model("tiny-llama-f16.gguf");
    PlanRequest req;
    req.gpu_mem = {64 * kGiB};
    req.n_ctx = 1024;
    const Placement f16 = plan_placement(m.p, *m.f, req);
    ASSERT_EQ(f16.n_gpu_layers(), m.p.n_layer);
    for (const CacheTypes c : {CacheTypes{DType::F16, DType::Q8_0}, CacheTypes{DType::Q4_0, DType::Q4_0},
                               CacheTypes{DType::BF16, DType::Q8_0}}) {
        SCOPED_TRACE(std::string(cache_type_name(c.k)) + "/" + cache_type_name(c.v));
        req.cache = c;
        const Placement pl = plan_placement(m.p, *m.f, req);
        EXPECT_EQ(pl.n_gpu_layers(), m.p.n_layer);
        EXPECT_EQ(pl.cache.k, c.k);
        EXPECT_EQ(pl.cache.v, c.v);
        ASSERT_EQ(pl.usage.size(), f16.usage.size());
        const size_t k = cache_row_bytes(c.k, 64), v = cache_row_bytes(c.v, 64);
        EXPECT_EQ(pl.usage[1].kv * 256, f16.usage[1].kv * (k + v));  // f16: 128 + 128 bytes per 64 values
    }
}

}  // namespace
}  // namespace glia::test
