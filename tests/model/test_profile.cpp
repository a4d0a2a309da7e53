// ModelProfile is derived from the file alone: these tests build small GGUF images
// in memory and check what the profile concludes from them.
#include <gtest/gtest.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/profile.h"
#include "temp_path.h"
#include "test_util.h"

using namespace glia;

namespace {

gguf::Value int_array(const std::vector<int>& v) {
    gguf::Value a;
    a.type = gguf::ValueType::ARRAY;
    a.elem_type = gguf::ValueType::INT32;
    for (int x : v) {
        gguf::Value e;
        e.type = gguf::ValueType::INT32;
        e.i = x;
        a.arr.push_back(e);
    }
    return a;
}

gguf::Value bool_array(const std::vector<bool>& v) {
    gguf::Value a;
    a.type = gguf::ValueType::ARRAY;
    a.elem_type = gguf::ValueType::BOOL;
    for (bool x : v) {
        gguf::Value e;
        e.type = gguf::ValueType::BOOL;
        e.u = x;
        a.arr.push_back(e);
    }
    return a;
}

std::unique_ptr<gguf::File> make_file(const std::string& arch, const gguf::Value* kv_heads_array, int kv_heads_scalar,
                                      void (*extra)(gguf::Writer&) = nullptr) {
    gguf::Writer w;
    w.set_str("general.architecture", arch);
    w.set_u32(arch + ".block_count", 3);
    w.set_u32(arch + ".embedding_length", 64);
    w.set_u32(arch + ".attention.head_count", 4);
    w.set_u32(arch + ".feed_forward_length", 128);
    if (kv_heads_array) w.set(arch + ".attention.head_count_kv", *kv_heads_array);
    else w.set_u32(arch + ".attention.head_count_kv", kv_heads_scalar);
    if (extra) extra(w);
    return gguf::File::from_memory(w.to_bytes(), "test.gguf");
}

}  // namespace

TEST(Profile, KvHeadArrayWithZerosMarksRecurrentLayersAndRequiresUniformOffload) {
    const gguf::Value arr = int_array({0, 2, 0});
    auto f = make_file("lfm2", &arr, 0);
    ModelProfile p = derive_profile(*f);
    EXPECT_TRUE(p.n_head_kv_is_array);
    EXPECT_TRUE(p.uniform_offload_required);
    ASSERT_EQ(p.layer_kind.size(), 3u);
    EXPECT_EQ(p.layer_kind[0], LayerKind::RECURRENT);
    EXPECT_EQ(p.layer_kind[1], LayerKind::ATTENTION);
    EXPECT_EQ(p.layer_kind[2], LayerKind::RECURRENT);
}

TEST(Profile, ScalarKvHeadsIsNotHybrid) {
    auto f = make_file("llama", nullptr, 2);
    ModelProfile p = derive_profile(*f);
    EXPECT_FALSE(p.n_head_kv_is_array);
    EXPECT_FALSE(p.uniform_offload_required);
    EXPECT_EQ(p.n_head_kv, (std::vector<int>{2, 2, 2}));
    for (auto k : p.layer_kind) EXPECT_EQ(k, LayerKind::ATTENTION);
}

TEST(Profile, ArrayWithoutZerosIsNotHybrid) {
    const gguf::Value arr = int_array({2, 4, 2});
    auto f = make_file("llama", &arr, 0);
    ModelProfile p = derive_profile(*f);
    EXPECT_TRUE(p.n_head_kv_is_array);
    EXPECT_FALSE(p.uniform_offload_required);
}

TEST(Profile, RejectsKvHeadsThatDoNotDivideHeads) {
    const gguf::Value arr = int_array({2, 3, 2});
    auto f = make_file("llama", &arr, 0);
    EXPECT_THROW(derive_profile(*f), Error);
}

TEST(Profile, RejectsWrongLengthPerLayerArray) {
    const gguf::Value arr = int_array({2, 2});
    auto f = make_file("llama", &arr, 0);
    try {
        derive_profile(*f);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("head_count_kv"), std::string::npos) << e.what();
    }
}

TEST(Profile, SlidingWindowPatternFromMetadata) {
    auto f = make_file("gemma3", nullptr, 2, [](gguf::Writer& w) {
        w.set_u32("gemma3.attention.sliding_window", 128);
        w.set_u32("gemma3.attention.sliding_window_pattern", 3);
        w.set_f32("gemma3.rope.freq_base", 1e6f);
    });
    ModelProfile p = derive_profile(*f);
    EXPECT_EQ(p.sliding_window, 128);
    EXPECT_EQ(p.layer_kind[0], LayerKind::SLIDING_ATTENTION);
    EXPECT_EQ(p.layer_kind[1], LayerKind::SLIDING_ATTENTION);
    EXPECT_EQ(p.layer_kind[2], LayerKind::ATTENTION);
    EXPECT_FLOAT_EQ(p.rope.freq_base, 1e6f);
    EXPECT_FLOAT_EQ(p.rope_base_swa, 10000.0f);
}

// The layer kinds come from the file's per-layer arrays, whatever the architecture is called.
TEST(Profile, BoolArraysNameSlidingAndRecurrentLayers) {
    auto f = make_file("some-new-arch", nullptr, 2, [](gguf::Writer& w) {
        w.set_u32("some-new-arch.attention.sliding_window", 64);
        w.set("some-new-arch.attention.sliding_window_pattern", bool_array({false, true, false}));
    });
    ModelProfile p = derive_profile(*f);
    EXPECT_EQ(p.layer_kind, (std::vector<LayerKind>{LayerKind::ATTENTION, LayerKind::SLIDING_ATTENTION,
                                                    LayerKind::ATTENTION}));
    EXPECT_FALSE(p.uniform_offload_required);

    auto r = make_file("some-new-arch", nullptr, 2, [](gguf::Writer& w) {
        w.set("some-new-arch.attention.recurrent_layers", bool_array({true, false, true}));
    });
    p = derive_profile(*r);
    EXPECT_EQ(p.layer_kind,
              (std::vector<LayerKind>{LayerKind::RECURRENT, LayerKind::ATTENTION, LayerKind::RECURRENT}));
    EXPECT_TRUE(p.uniform_offload_required) << "a scalar head_count_kv does not hide recurrent layers";

    auto bad = make_file("some-new-arch", nullptr, 2, [](gguf::Writer& w) {
        w.set("some-new-arch.attention.recurrent_layers", bool_array({true, false}));
    });
    try {
        derive_profile(*bad);
        FAIL() << "a 2-entry array for 3 layers must be refused";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("recurrent_layers"), std::string::npos) << e.what();
    }
}

TEST(Profile, Gemma4LayerKindsHeadSizesAndRope) {
    auto f = gguf::File::open(test::shared_dir() + "/models/tiny-gemma4-f16.gguf");
    ModelProfile p = derive_profile(*f);
    EXPECT_EQ(p.layer_kind, (std::vector<LayerKind>{LayerKind::SLIDING_ATTENTION, LayerKind::SLIDING_ATTENTION,
                                                    LayerKind::ATTENTION, LayerKind::SLIDING_ATTENTION}));
    EXPECT_FALSE(p.uniform_offload_required);
    EXPECT_EQ(p.n_head_kv, (std::vector<int>{2, 2, 1, 2}));
    EXPECT_EQ(p.head_dim_k_of(0), 64);
    EXPECT_EQ(p.head_dim_k_of(2), 128);
    EXPECT_EQ(p.head_dim_v_of(2), 128);
    EXPECT_EQ(p.rope.n_dims, 128);
    EXPECT_EQ(p.rope_n_dims_swa, 64);
    EXPECT_FLOAT_EQ(p.rope.freq_base, 1e6f);
    EXPECT_FLOAT_EQ(p.rope_base_swa, 1e4f);
    EXPECT_FLOAT_EQ(p.attn_scale, 1.0f);
    EXPECT_FLOAT_EQ(p.final_softcap, 10.0f);
    EXPECT_EQ(p.recurrent_state_floats, 0);
}

TEST(Profile, Qwen35HybridFromRecurrentLayersArray) {
    auto f = gguf::File::open(test::shared_dir() + "/models/tiny-qwen35-q8_0.gguf");
    ModelProfile p = derive_profile(*f);
    EXPECT_EQ(p.layer_kind,
              (std::vector<LayerKind>{LayerKind::RECURRENT, LayerKind::RECURRENT, LayerKind::ATTENTION}));
    EXPECT_TRUE(p.uniform_offload_required);
    EXPECT_EQ(p.rope.n_dims, 16);
    EXPECT_EQ(p.rope.type, RopeType::NEOX);
    // Conv taps of q, k, v (3 x 512) and four 64 x 64 matrices.
    EXPECT_EQ(p.recurrent_state_floats, 3 * 512 + 4 * 64 * 64);
}

TEST(Profile, SharedModelsDeriveTheirFeatures) {
    const std::string dir = test::shared_dir() + "/models/";
    {
        auto f = gguf::File::open(dir + "tiny-gemma2-f16.gguf");
        ModelProfile p = derive_profile(*f);
        EXPECT_FLOAT_EQ(p.attn_softcap, 10.0f);
        EXPECT_FLOAT_EQ(p.final_softcap, 10.0f);
        EXPECT_EQ(p.layer_kind[0], LayerKind::SLIDING_ATTENTION);  // default pattern 2
        EXPECT_EQ(p.layer_kind[1], LayerKind::ATTENTION);
        EXPECT_TRUE(p.tied_output);
        EXPECT_FLOAT_EQ(p.embed_scale, 16.0f);
    }
    {
        auto f = gguf::File::open(dir + "tiny-qwen3moe-f16.gguf");
        ModelProfile p = derive_profile(*f);
        EXPECT_EQ(p.n_expert, 4);
        EXPECT_EQ(p.n_expert_used, 2);
        EXPECT_FALSE(p.tied_output);
    }
    {
        auto f = gguf::File::open(dir + "stories260K.gguf");
        ModelProfile p = derive_profile(*f);
        EXPECT_EQ(p.rope.type, RopeType::NORMAL);
        EXPECT_FLOAT_EQ(p.rope.freq_base, 10000.0f);  // key absent: the default
        EXPECT_EQ(p.head_dim_k, 8);
        EXPECT_EQ(p.n_head_kv, (std::vector<int>(5, 4)));
    }
}

TEST(Model, UnsupportedArchitectureFailsAtLoadNamingTheSupportedList) {
    gguf::Writer w;
    w.set_str("general.architecture", "mamba-next");
    w.set_u32("mamba-next.block_count", 2);
    w.set_u32("mamba-next.embedding_length", 64);
    w.set_u32("mamba-next.attention.head_count", 4);
    const std::string path = glia::test::temp_path("unsupported_arch.gguf");
    w.write(path);
    try {
        Model::load(path);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("mamba-next"), std::string::npos) << msg;
        EXPECT_NE(msg.find("supported: llama"), std::string::npos) << msg;
        EXPECT_NE(msg.find("kimi-k3"), std::string::npos) << msg;
    }
}

TEST(Profile, KimiK3KdaMlaAndLatentMoe) {
    auto f = gguf::File::open(test::shared_dir() + "/models/tiny-kimi-k3-q4_k_m.gguf");
    ModelProfile p = derive_profile(*f);
    EXPECT_EQ(p.layer_kind,
              (std::vector<LayerKind>{LayerKind::RECURRENT, LayerKind::RECURRENT, LayerKind::ATTENTION}));
    EXPECT_TRUE(p.uniform_offload_required);
    EXPECT_EQ(p.mla_kv_lora_rank, 256);
    EXPECT_EQ(p.head_dim_k, 320) << "the cache row: latent and rope part";
    EXPECT_EQ(p.mla_head_dim_k, 128);
    EXPECT_EQ(p.mla_head_dim_v, 64);
    EXPECT_TRUE(p.kda_gate_bounded);
    EXPECT_FLOAT_EQ(p.kda_gate_lower_bound, -5.0f);
    // Three conv tap sets (3 x 256 channels) and four 64 x 64 matrices.
    EXPECT_EQ(p.recurrent_state_floats, 3 * 3 * 256 + 4 * 64 * 64);
    EXPECT_TRUE(p.moe_sigmoid);
    EXPECT_FLOAT_EQ(p.moe_weights_scale, 2.5f);
    EXPECT_EQ(p.n_expert_latent, 128);
    EXPECT_EQ(p.n_layer_dense_lead, 1);
    EXPECT_EQ(p.ffn_act, Activation::SITU);
    EXPECT_EQ(p.attn_res_block_size, 2);
}
