// The split of a model for tensor parallelism: the profile arithmetic, the weights as
// views of the mapped file (no copies), and the refusals with their remedies.
#include <gtest/gtest.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "model/shard.h"
#include "placement/tensor_parallel.h"
#include "runtime/runner.h"
#include "test_util.h"

namespace glia {
namespace {

std::string model_path(const std::string& stem) { return test::shared_dir() + "/models/" + stem + ".gguf"; }

using test::error_of;

TEST(ShardProfile, HeadsKvHeadsAndFfnDivide) {
    auto m = Model::load(model_path("tiny-llama-f16"));  // 4 heads, 2 KV heads, FFN 256, vocab 512
    const ModelProfile& p = m->profile();
    const ModelProfile r2 = shard_profile(p, 1, 2);
    EXPECT_EQ(r2.n_head, 2);
    EXPECT_EQ(r2.n_head_kv[0], 1);
    EXPECT_EQ(r2.n_ff[0], 128);
    EXPECT_TRUE(r2.tp.lm_head_split);
    EXPECT_EQ(r2.n_vocab_local(), 256);
    EXPECT_EQ(r2.n_vocab, 512);
    const ModelProfile r4 = shard_profile(p, 3, 4);  // fewer KV heads than ranks: repeated
    EXPECT_EQ(r4.n_head, 1);
    EXPECT_EQ(r4.n_head_kv[1], 1);
    EXPECT_EQ(r4.n_ff[1], 64);
    EXPECT_EQ(tp_worlds(p), (std::vector<int>{1, 2, 4}));
    const std::string e = error_of([&] { shard_profile(p, 0, 3); });
    EXPECT_NE(e.find("4 attention heads do not divide into 3 ranks"), std::string::npos) << e;
    EXPECT_NE(e.find("use -tp 2, 4"), std::string::npos) << e;
    // stories260K: 8 heads, 4 KV heads, FFN 172 (= 4 x 43).
    auto s = Model::load(model_path("stories260K"));
    EXPECT_EQ(tp_worlds(s->profile()), (std::vector<int>{1, 2, 4}));
    EXPECT_NE(error_of([&] { shard_profile(s->profile(), 0, 8); }).find("feed-forward width 172"), std::string::npos);
}

TEST(ShardWeights, RowAndColumnSplitsAreViewsOfTheMappedFile) {
    auto m = Model::load(model_path("tiny-llama-f16"));
    auto r1 = m->shard(1, 2);
    WeightSet& full = const_cast<WeightSet&>(m->weights());
    WeightSet& mine = const_cast<WeightSet&>(r1->weights());
    // attn_q: rows 128..255 (heads 2, 3) start 128 rows in.
    const Tensor* q = full.find("blk.0.attn_q.weight");
    const Tensor* q1 = mine.find("blk.0.attn_q.weight");
    EXPECT_EQ(q1->ne[1], 128);
    EXPECT_EQ(q1->data, static_cast<uint8_t*>(q->data) + 128 * q->nb[1]);
    // attn_output along K: columns 128..255 of every row, same row stride (F16: 2 bytes).
    const Tensor* o = full.find("blk.0.attn_output.weight");
    const Tensor* o1 = mine.find("blk.0.attn_output.weight");
    EXPECT_EQ(o1->ne[0], 128);
    EXPECT_EQ(o1->ne[1], 256);
    EXPECT_EQ(o1->nb[1], o->nb[1]);
    EXPECT_EQ(o1->data, static_cast<uint8_t*>(o->data) + 128 * 2);
    // ffn_down along K; the LM head by rows; norms and embeddings shared as they are.
    EXPECT_EQ(mine.find("blk.1.ffn_down.weight")->ne[0], 128);
    EXPECT_EQ(mine.find("output.weight")->ne[1], 256);
    EXPECT_EQ(mine.find("output.weight")->data,
              static_cast<uint8_t*>(full.find("output.weight")->data) + 256 * full.find("output.weight")->nb[1]);
    EXPECT_EQ(mine.find("token_embd.weight")->data, full.find("token_embd.weight")->data);
    EXPECT_EQ(mine.find("blk.0.attn_norm.weight")->data, full.find("blk.0.attn_norm.weight")->data);
    // Every rank tensor lies inside the mapped file: nothing was copied.
    const auto* lo = static_cast<const uint8_t*>(full.all().front().data);
    for (const Tensor& t : mine.all()) {
        const auto* p = static_cast<const uint8_t*>(t.data);
        EXPECT_TRUE(p >= lo - (1 << 20) && p < lo + (64 << 20)) << t.name;
    }
}

TEST(ShardWeights, FusedProjectionsAreSplitIntoTheirParts) {
    auto m = Model::load(model_path("tiny-phi3-f16"));  // attn_qkv [256, 512], ffn_up = gate + up [256, 512]
    auto r1 = m->shard(1, 2);
    WeightSet& mine = const_cast<WeightSet&>(r1->weights());
    const Tensor* qkv = const_cast<WeightSet&>(m->weights()).find("blk.0.attn_qkv.weight");
    EXPECT_EQ(mine.find("blk.0.attn_qkv.weight"), nullptr);
    EXPECT_EQ(mine.find("blk.0.attn_q.weight")->data, static_cast<uint8_t*>(qkv->data) + 128 * qkv->nb[1]);
    EXPECT_EQ(mine.find("blk.0.attn_k.weight")->data, static_cast<uint8_t*>(qkv->data) + (256 + 64) * qkv->nb[1]);
    EXPECT_EQ(mine.find("blk.0.attn_v.weight")->data, static_cast<uint8_t*>(qkv->data) + (384 + 64) * qkv->nb[1]);
    EXPECT_EQ(mine.find("blk.0.ffn_gate.weight")->ne[1], 128);
    EXPECT_EQ(mine.find("blk.0.ffn_up.weight")->ne[1], 128);
}

TEST(ShardRefusals, AnUnalignedQuantizedKSplitNamesTheTensorAndTheRemedy) {
    auto m = Model::load(model_path("tiny-llama-q4_k_m"));  // attn_output Q4_K: 256-value blocks, K 256
    const std::string e = error_of([&] { m->shard(0, 2); });
    EXPECT_NE(e.find("'blk.0.attn_output.weight' (Q4_K, blocks of 256 values)"), std::string::npos) << e;
    EXPECT_NE(e.find("into 128 per rank, not a whole number of blocks"), std::string::npos) << e;
    EXPECT_NE(e.find("Q8_0"), std::string::npos) << e;
    EXPECT_NE(e.find("-sm layer"), std::string::npos) << e;
    // Q8_0's 32-value blocks split at 128 (and 64) columns.
    auto q8 = Model::load(model_path("tiny-llama-q8_0"));
    EXPECT_NO_THROW(q8->shard(1, 2));
    EXPECT_NO_THROW(q8->shard(3, 4));
}

TEST(ShardRefusals, FamiliesWithoutASplitNameWhatIsMissing) {
    struct Case { const char* stem; const char* family; const char* missing; };
    for (const Case& c : {Case{"tiny-lfm2-f16", "lfm2", "recurrent layers (blocks 0, 2)"},
                          Case{"tiny-qwen35-f16", "qwen35", "recurrent layers"},
                          Case{"tiny-kimi-k3-f16", "kimi-k3", "recurrent layers"}}) {
        auto m = Model::load(model_path(c.stem));
        const std::string e = error_of([&] { m->shard(0, 2); });
        EXPECT_NE(e.find(std::string("the ") + c.family + " family cannot be split"), std::string::npos) << e;
        EXPECT_NE(e.find(c.missing), std::string::npos) << e;
        EXPECT_NE(e.find("-tp 1"), std::string::npos) << e;
        EXPECT_NO_THROW(m->shard(0, 1));
    }
}

TEST(ShardRefusals, RunnerRefusesGpuRanks) {
    auto m = Model::load(model_path("tiny-llama-f16"));
    RunnerOptions ro;
    ro.tp = 2;
    ro.n_ctx = 64;
    ro.placement = Placement::all_cpu(m->profile().n_layer);
    ro.placement.devices.push_back(DeviceSpec{Device::CUDA, 0, "cuda:0", 1 << 30});
    ro.placement.layer.assign(size_t(m->profile().n_layer), 1);
    const std::string e = error_of([&] { Runner r(*m, ro); });
    EXPECT_NE(e.find("NCCL"), std::string::npos) << e;
    EXPECT_NE(e.find("not been run"), std::string::npos) << e;
}

// glia plan -tp: the bytes of each rank follow the split.
TEST(TensorParallelPlan, BytesPerRank) {
    auto f = gguf::File::open(model_path("tiny-llama-f16"));
    const ModelProfile p = derive_profile(*f);
    PlanRequest req;
    req.n_ctx = 1024;
    const TpPlan one = plan_tensor_parallel(p, *f, 1, req);
    const TpPlan two = plan_tensor_parallel(p, *f, 2, req);
    ASSERT_EQ(two.usage.size(), 2u);
    // KV: 2 KV heads x (64 + 64) x F16 x 2 layers x 1024 cells, halved per rank.
    EXPECT_EQ(one.usage[0].kv, 2ull * 128 * 2 * 2 * 1024);
    EXPECT_EQ(two.usage[1].kv, one.usage[0].kv / 2);
    // Weights: token_embd (256 x 512 F16) and the norms replicated, everything else halved.
    const uint64_t embd = 256ull * 512 * 2;
    uint64_t norms = 0;
    for (const auto& t : f->tensors())
        if (t.ne[1] == 1) norms += t.nbytes;
    EXPECT_EQ(two.usage[0].weights, two.usage[1].weights);
    EXPECT_EQ(two.usage[0].weights, embd + norms + (one.usage[0].weights - embd - norms) / 2);
    // A rank that does not fit its GPU is refused with the numbers.
    req.gpu_mem = {1 << 20, 1 << 20};
    try {
        plan_tensor_parallel(p, *f, 2, req);
        FAIL() << "fits";
    } catch (const PlanError& e) {
        EXPECT_NE(std::string(e.what()).find("rank 0 needs"), std::string::npos) << e.what();
    }
    req.gpu_mem = {1 << 30};
    EXPECT_THROW(plan_tensor_parallel(p, *f, 2, req), PlanError);  // one GPU for two ranks
}

}  // namespace
}  // namespace glia
