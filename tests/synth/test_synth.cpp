// glia synth: shapes, metadata and names of the synthesized files; they load and run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/f16.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/session.h"
#include "synth/synth.h"
#include "cli_util.h"

namespace glia::test {
namespace {

std::string stories() { return shared_path("models/stories260K.gguf"); }

std::vector<int64_t> shape_of(const gguf::TensorInfo& t) { return std::vector<int64_t>(t.ne, t.ne + t.n_dims); }

TEST(Synth, TinyLlamaMetadataShapesAndDecode) {
    ScratchDir dir("synth-llama");
    const std::string out = dir.file("tiny.gguf");
    std::string log;
    ASSERT_EQ(0, run_glia(cat("synth ", out, " --shape tiny --type q4_k_m --vocab-from ", stories(), " -t 2"), &log)) << log;
    auto f = gguf::File::open(out);
    EXPECT_EQ(f->get<std::string>("general.architecture"), "llama");
    EXPECT_EQ(f->get<uint32_t>("llama.embedding_length"), 256u);
    EXPECT_EQ(f->get<uint32_t>("llama.block_count"), 2u);
    EXPECT_EQ(f->get<uint32_t>("llama.attention.head_count"), 4u);
    EXPECT_EQ(f->get<uint32_t>("llama.attention.head_count_kv"), 2u);
    EXPECT_EQ(f->get<uint32_t>("llama.rope.dimension_count"), 64u);
    EXPECT_FLOAT_EQ(f->get<float>("llama.rope.freq_base"), 5e5f);
    EXPECT_EQ(f->get<uint32_t>("llama.vocab_size"), 512u);
    EXPECT_EQ(f->get<uint32_t>("general.file_type"), 15u);
    EXPECT_EQ(f->get<std::string>("tokenizer.ggml.model"), "llama");
    EXPECT_EQ(f->get_array<std::string>("tokenizer.ggml.tokens").size(), 512u);
    EXPECT_EQ(f->tensors().size(), 3u + 2u * 9u);
    EXPECT_EQ(shape_of(f->tensor("token_embd.weight")), (std::vector<int64_t>{256, 512}));
    EXPECT_EQ(shape_of(f->tensor("output.weight")), (std::vector<int64_t>{256, 512}));
    EXPECT_EQ(shape_of(f->tensor("blk.1.attn_k.weight")), (std::vector<int64_t>{256, 128}));
    EXPECT_EQ(shape_of(f->tensor("blk.0.ffn_down.weight")), (std::vector<int64_t>{256, 256}));
    EXPECT_EQ(f->tensor("output.weight").type, DType::Q6_K);
    EXPECT_EQ(f->tensor("blk.1.attn_v.weight").type, DType::Q6_K);
    EXPECT_EQ(f->tensor("blk.0.attn_q.weight").type, DType::Q4_K);
    // norms: F32 ones
    const auto& norm = f->tensor("blk.0.attn_norm.weight");
    ASSERT_EQ(norm.type, DType::F32);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(reinterpret_cast<const float*>(norm.data)[i], 1.0f);

    ASSERT_EQ(0, run_glia("inspect " + out, &log)) << log;
    EXPECT_NE(log.find("synth tiny"), std::string::npos);

    auto model = Model::load(out);
    SessionOptions so;
    so.n_ctx = 16;
    so.n_threads = 2;
    Session s(*model, so);
    const auto& logits = s.decode({1, 403, 407}, false);
    ASSERT_EQ(logits.size(), 512u);
    double sum = 0;
    for (float x : logits) { ASSERT_TRUE(std::isfinite(x)); sum += std::fabs(x); }
    EXPECT_GT(sum, 0.0);
}

// "Generated as F16, then quantized": quantizing the F16 synth gives the quantized synth,
// byte for byte; and the thread count does not change the result.
TEST(Synth, F16ThenQuantizeEqualsDirectAndThreadIndependent) {
    ScratchDir dir("synth-eq");
    std::string log;
    const std::string vocab = stories();
    ASSERT_EQ(0, run_glia(cat("synth ", dir.file("f16.gguf"), " --shape tiny --seed 7 --vocab-from ", vocab, " -t 2"), &log)) << log;
    ASSERT_EQ(0, run_glia(cat("synth ", dir.file("q1.gguf"), " --shape tiny --seed 7 --type q4_k_m --vocab-from ", vocab, " -t 1"), &log)) << log;
    ASSERT_EQ(0, run_glia(cat("synth ", dir.file("q2.gguf"), " --shape tiny --seed 7 --type q4_k_m --vocab-from ", vocab, " -t 2"), &log)) << log;
    ASSERT_EQ(0, run_glia(cat("quantize ", dir.file("f16.gguf"), " ", dir.file("q3.gguf"), " q4_k_m"), &log)) << log;
    const auto q1 = read_bytes(dir.file("q1.gguf"));
    EXPECT_TRUE(q1 == read_bytes(dir.file("q2.gguf")));
    EXPECT_TRUE(q1 == read_bytes(dir.file("q3.gguf")));
    // F16 weights ~N(0, 0.02), never zero
    auto f = gguf::File::open(dir.file("f16.gguf"));
    const auto& t = f->tensor("blk.0.ffn_up.weight");
    ASSERT_EQ(t.type, DType::F16);
    const auto* h = reinterpret_cast<const uint16_t*>(t.data);
    double s2 = 0;
    const int64_t n = t.n_elements();
    for (int64_t i = 0; i < n; ++i) {
        ASSERT_NE(h[i] & 0x7fff, 0) << "zero weight at " << i;
        const float x = f16_to_f32(h[i]);
        s2 += double(x) * x;
    }
    EXPECT_NEAR(std::sqrt(s2 / double(n)), 0.02, 0.001);
    // a different seed gives different weights
    ASSERT_EQ(0, run_glia(cat("synth ", dir.file("s8.gguf"), " --shape tiny --seed 8 --vocab-from ", vocab), &log)) << log;
    auto g = gguf::File::open(dir.file("s8.gguf"));
    EXPECT_NE(0, std::memcmp(g->tensor("blk.0.ffn_up.weight").data, t.data, t.nbytes));
}

// The header model_header() computes without writing is the written file's header: same
// keys (but the tokenizer's when no vocabulary is given), same tensors, types and sizes.
TEST(Synth, ModelHeaderIsTheWrittenFilesLayout) {
    ScratchDir dir("synth-header");
    std::string log;
    ASSERT_EQ(0, run_glia(cat("synth ", dir.file("t.gguf"), " --shape tiny --type q4_k_m --vocab-from ", stories()), &log))
        << log;
    auto written = gguf::File::open(dir.file("t.gguf"));
    synth::Options o;
    o.shape = *synth::find_shape("tiny");
    o.ftype = quant::FileType::Q4_K_M;
    for (bool with_vocab : {true, false}) {
        SCOPED_TRACE(with_vocab);
        o.vocab_path = with_vocab ? stories() : "";
        auto h = synth::model_header(o);
        EXPECT_FALSE(h->has_data());
        EXPECT_EQ(h->path(), "synth tiny Q4_K_M");
        ASSERT_EQ(h->tensors().size(), written->tensors().size());
        for (size_t i = 0; i < h->tensors().size(); ++i) {
            const auto& a = h->tensors()[i];
            const auto& b = written->tensors()[i];
            EXPECT_EQ(a.name, b.name);
            EXPECT_EQ(a.type, b.type) << a.name;
            EXPECT_EQ(shape_of(a), shape_of(b)) << a.name;
            EXPECT_EQ(a.nbytes, b.nbytes) << a.name;
            EXPECT_EQ(a.offset, b.offset) << a.name;
            EXPECT_EQ(a.data, nullptr);
        }
        size_t n_keys = 0;
        for (const auto& kv : written->kvs()) {
            if (!with_vocab && kv.key.rfind("tokenizer.", 0) == 0) continue;
            ++n_keys;
            EXPECT_TRUE(h->has(kv.key)) << kv.key;
        }
        EXPECT_EQ(h->kvs().size(), n_keys);
        if (with_vocab) {
            EXPECT_EQ(h->data_offset(), written->data_offset());
        }
    }
    o.shape.n_head = 5;  // the same shape checks as writing
    EXPECT_THROW(synth::model_header(o), Error);
}

TEST(Synth, Qwen3SmallShape) {
    ScratchDir dir("synth-qwen3");
    const std::string out = dir.file("q3.gguf");
    std::string log;
    ASSERT_EQ(0, run_glia(cat("synth ", out, " --shape qwen3-0.6b --embd 256 --layers 2 --heads 4 --kv-heads 2 --ffn 256 "
                              "--head-dim 128 --type q8_0 --vocab-from ", stories()), &log)) << log;
    auto f = gguf::File::open(out);
    EXPECT_EQ(f->get<std::string>("general.architecture"), "qwen3");
    EXPECT_EQ(f->get<uint32_t>("qwen3.attention.key_length"), 128u);
    EXPECT_EQ(f->get<uint32_t>("qwen3.attention.value_length"), 128u);
    EXPECT_FLOAT_EQ(f->get<float>("qwen3.rope.freq_base"), 1e6f);
    EXPECT_FLOAT_EQ(f->get<float>("qwen3.attention.layer_norm_rms_epsilon"), 1e-6f);
    EXPECT_EQ(shape_of(f->tensor("blk.0.attn_q.weight")), (std::vector<int64_t>{256, 512}));
    EXPECT_EQ(shape_of(f->tensor("blk.0.attn_output.weight")), (std::vector<int64_t>{512, 256}));
    EXPECT_EQ(shape_of(f->tensor("blk.1.attn_q_norm.weight")), (std::vector<int64_t>{128}));
    EXPECT_EQ(f->tensor("blk.1.attn_k_norm.weight").type, DType::F32);
    EXPECT_EQ(f->tensor("output.weight").type, DType::Q8_0);
    ASSERT_EQ(0, run_glia("inspect " + out, &log)) << log;
}

TEST(Synth, Qwen3MoeSmallShape) {
    ScratchDir dir("synth-moe");
    const std::string out = dir.file("moe.gguf");
    std::string log;
    ASSERT_EQ(0, run_glia(cat("synth ", out, " --shape qwen3-30b-a3b --embd 256 --layers 2 --heads 4 --kv-heads 2 "
                              "--head-dim 64 --experts 4 --experts-used 2 --expert-ffn 256 --type q4_k_m --vocab-from ", stories()), &log)) << log;
    auto f = gguf::File::open(out);
    EXPECT_EQ(f->get<std::string>("general.architecture"), "qwen3moe");
    EXPECT_EQ(f->get<uint32_t>("qwen3moe.expert_count"), 4u);
    EXPECT_EQ(f->get<uint32_t>("qwen3moe.expert_used_count"), 2u);
    EXPECT_EQ(f->get<uint32_t>("qwen3moe.expert_feed_forward_length"), 256u);
    EXPECT_EQ(shape_of(f->tensor("blk.0.ffn_gate_inp.weight")), (std::vector<int64_t>{256, 4}));
    EXPECT_EQ(f->tensor("blk.0.ffn_gate_inp.weight").type, DType::F32);
    EXPECT_EQ(shape_of(f->tensor("blk.1.ffn_down_exps.weight")), (std::vector<int64_t>{256, 256, 4}));
    EXPECT_EQ(shape_of(f->tensor("blk.1.ffn_up_exps.weight")), (std::vector<int64_t>{256, 256, 4}));
    EXPECT_EQ(f->find_tensor("blk.0.ffn_up.weight"), nullptr);
    // the same per-tensor types as the shared tiny qwen3moe Q4_K_M (same rules, same shapes but n_layer)
    EXPECT_EQ(f->tensor("blk.1.ffn_down_exps.weight").type, DType::Q6_K);
    ASSERT_EQ(0, run_glia("inspect " + out, &log)) << log;
}

TEST(Synth, BadShapesAreClearErrors) {
    ScratchDir dir("synth-err");
    std::string log;
    EXPECT_NE(0, run_glia(cat("synth ", dir.file("x.gguf"), " --shape tiny --heads 5 --vocab-from ", stories()), &log));
    EXPECT_NE(log.find("not a multiple"), std::string::npos) << log;
    EXPECT_NE(0, run_glia(cat("synth ", dir.file("x.gguf"), " --shape nope --vocab-from ", stories()), &log));
    EXPECT_NE(log.find("unknown shape 'nope'"), std::string::npos) << log;
    EXPECT_NE(0, run_glia(cat("synth ", dir.file("x.gguf"), " --shape tiny"), &log));
    EXPECT_NE(log.find("--vocab-from"), std::string::npos) << log;
    EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));
}

}  // namespace
}  // namespace glia::test
