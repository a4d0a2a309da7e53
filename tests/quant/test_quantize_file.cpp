// glia quantize: files identical to what the reference quantizer wrote (the shared
// models were made with llama-quantize, without an importance matrix), per tensor and
// byte for byte; the mix rules; clear errors for bad input.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>

#include "core/dtype.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "quant/mix.h"
#include "cli_util.h"

namespace glia::test {
namespace {

// Per-tensor comparison first (a readable failure), then the whole file.
void expect_same_model(const std::string& got_path, const std::string& want_path) {
    auto got = gguf::File::open(got_path);
    auto want = gguf::File::open(want_path);
    ASSERT_EQ(got->tensors().size(), want->tensors().size());
    for (size_t i = 0; i < want->tensors().size(); ++i) {
        const auto& w = want->tensors()[i];
        const auto& g = got->tensors()[i];
        ASSERT_EQ(g.name, w.name) << "tensor order differs at " << i;
        EXPECT_EQ(dtype_name(g.type), std::string(dtype_name(w.type))) << w.name;
        EXPECT_EQ(g.n_dims, w.n_dims) << w.name;
        for (int d = 0; d < 4; ++d) EXPECT_EQ(g.ne[d], w.ne[d]) << w.name;
        ASSERT_EQ(g.nbytes, w.nbytes) << w.name;
        EXPECT_EQ(0, std::memcmp(g.data, w.data, w.nbytes)) << "tensor bytes differ: " << w.name;
    }
    ASSERT_EQ(got->kvs().size(), want->kvs().size());
    for (size_t i = 0; i < want->kvs().size(); ++i) EXPECT_EQ(got->kvs()[i].key, want->kvs()[i].key);
    EXPECT_EQ(got->get<uint32_t>("general.file_type"), want->get<uint32_t>("general.file_type"));
    EXPECT_TRUE(read_bytes(got_path) == read_bytes(want_path)) << "files differ outside the tensors";
}

struct Case { const char* src; const char* type; const char* want; };

class QuantizeMatchesReference : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeMatchesReference, SameTypesAndBytes) {
    const Case c = GetParam();
    ScratchDir dir(std::string("q-") + c.type);
    const std::string out = dir.file("out.gguf");
    std::string log;
    ASSERT_EQ(0, run_glia(cat("quantize ", shared_path(std::string("models/") + c.src), " ", out, " ", c.type, " -t 2"), &log)) << log;
    expect_same_model(out, shared_path(std::string("models/") + c.want));
}

INSTANTIATE_TEST_SUITE_P(
    Mixes, QuantizeMatchesReference,
    ::testing::Values(Case{"tiny-llama-f16.gguf", "Q4_K_M", "tiny-llama-q4_k_m.gguf"},
                      Case{"tiny-llama-f16.gguf", "q8_0", "tiny-llama-q8_0.gguf"},
                      Case{"tiny-llama-f16.gguf", "q4_0", "tiny-llama-q4_0.gguf"},
                      Case{"tiny-llama-f16.gguf", "q3_k_m", "tiny-llama-q3_k_m.gguf"},
                      Case{"tiny-llama-f16.gguf", "q2_k", "tiny-llama-q2_k.gguf"},
                      Case{"tiny-llama-f16.gguf", "q5_k_m", "tiny-llama-q5_k_m.gguf"},
                      Case{"tiny-llama-f16.gguf", "q6_k", "tiny-llama-q6_k.gguf"},
                      Case{"tiny-llama-f16.gguf", "iq4_xs", "tiny-llama-iq4_xs.gguf"},
                      Case{"tiny-llama-f16.gguf", "bf16", "tiny-llama-bf16.gguf"},
                      Case{"stories260K.gguf", "q8_0", "stories260K-q8_0.gguf"},
                      Case{"stories260K.gguf", "q4_0", "stories260K-q4_0.gguf"},
                      Case{"stories260K.gguf", "q4_k_m", "stories260K-q4_k_m.gguf"},
                      // other families: router, QK-norm, experts, tied embeddings, fallbacks
                      Case{"tiny-qwen3moe-f16.gguf", "q4_k_m", "tiny-qwen3moe-q4_k_m.gguf"},
                      Case{"tiny-qwen2-f16.gguf", "q4_k_m", "tiny-qwen2-q4_k_m.gguf"},
                      Case{"tiny-kimi-k3-f16.gguf", "q4_k_m", "tiny-kimi-k3-q4_k_m.gguf"}),
    [](const auto& info) {
        std::string n = std::string(info.param.want);
        for (char& ch : n) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
        return n;
    });

TEST(Quantize, AlreadyQuantizedInputIsAClearError) {
    ScratchDir dir("q-err");
    std::string log;
    const std::string out = dir.file("out.gguf");
    EXPECT_NE(0, run_glia(cat("quantize ", shared_path("models/tiny-llama-q8_0.gguf"), " ", out, " q4_0"), &log));
    EXPECT_NE(log.find("already quantized"), std::string::npos) << log;
    EXPECT_NE(log.find("Q8_0"), std::string::npos) << log;
    EXPECT_FALSE(std::filesystem::exists(out));
    // Nothing else is left in the folder either (no temporary file).
    EXPECT_TRUE(std::filesystem::is_empty(std::filesystem::path(out).parent_path()));
}

TEST(Quantize, UnknownTypeAndMissingFileAreClearErrors) {
    ScratchDir dir("q-err2");
    std::string log;
    EXPECT_NE(0, run_glia(cat("quantize ", shared_path("models/tiny-llama-f16.gguf"), " ", dir.file("o.gguf"), " q9_9"), &log));
    EXPECT_NE(log.find("unknown quantization type 'q9_9'"), std::string::npos) << log;
    EXPECT_NE(log.find("Q4_K_M"), std::string::npos) << log;  // lists the choices
    EXPECT_NE(0, run_glia(cat("quantize ", dir.file("missing.gguf"), " ", dir.file("o.gguf"), " q8_0"), &log));
    EXPECT_NE(log.find("missing.gguf"), std::string::npos) << log;
}

TEST(Quantize, JsonReportsThePlan) {
    ScratchDir dir("q-json");
    std::string out;
    ASSERT_EQ(0, run_glia(cat("quantize ", shared_path("models/stories260K.gguf"), " ", dir.file("o.gguf"), " q4_k_m --json"), &out)) << out;
    EXPECT_NE(out.find("\"file_type\":\"Q4_K_M\""), std::string::npos) << out;
    EXPECT_NE(out.find("\"name\":\"blk.2.attn_v.weight\",\"shape\":[64,32],\"from\":\"F32\",\"to\":\"Q8_0\""), std::string::npos) << out;
}

// A progress bar on a terminal (forced here with GLIA_PROGRESS=1), nothing in a pipe.
TEST(Quantize, ProgressBarOnlyWhenWanted) {
    ScratchDir dir("q-progress");
    const std::string in = shared_path("models/tiny-llama-f16.gguf");
    std::string out;
    ASSERT_EQ(0, run_command(cat("GLIA_PROGRESS=1 ", glia_binary(), " quantize ", in, " ", dir.file("a.gguf"), " q8_0 2>&1"), &out));
    EXPECT_NE(out.find("quantize ["), std::string::npos) << out;
    EXPECT_NE(out.find("100.0%"), std::string::npos) << out;
    ASSERT_EQ(0, run_command(cat("env -u GLIA_PROGRESS ", glia_binary(), " quantize ", in, " ", dir.file("b.gguf"), " q8_0 2>&1"), &out));
    EXPECT_EQ(out.find("quantize ["), std::string::npos) << out;
}

// The mix rules on a 32-layer llama with GQA (the reference's Q4_K_M layout of a 8B model).
TEST(MixRules, Q4KMOn32Layers) {
    std::vector<std::string> names = {"token_embd.weight", "output_norm.weight", "output.weight"};
    for (int i = 0; i < 32; ++i)
        for (const char* t : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"})
            names.push_back(cat("blk.", i, ".", t, ".weight"));
    const auto facts = quant::model_facts("llama", 32, 32, 8, 0, names);
    EXPECT_EQ(facts.n_attention_wv, 32);
    EXPECT_TRUE(facts.has_output);
    quant::MixPlanner p(quant::FileType::Q4_K_M, facts);
    std::map<std::string, DType> got;
    for (size_t i : quant::reference_order(names)) {
        const bool norm = names[i].find("norm") != std::string::npos;
        got[names[i]] = p.choose(names[i], norm ? DType::F32 : DType::F16, norm ? 1 : 2, 4096);
    }
    EXPECT_EQ(got["output.weight"], DType::Q6_K);
    EXPECT_EQ(got["token_embd.weight"], DType::Q4_K);
    EXPECT_EQ(got["output_norm.weight"], DType::F32);
    // more bits: layers < 4, >= 28, and (i - 4) % 3 == 2
    for (int i = 0; i < 32; ++i) {
        const bool more = i < 4 || i >= 28 || (i - 4) % 3 == 2;
        EXPECT_EQ(got[cat("blk.", i, ".attn_v.weight")], more ? DType::Q6_K : DType::Q4_K) << i;
        EXPECT_EQ(got[cat("blk.", i, ".ffn_down.weight")], more ? DType::Q6_K : DType::Q4_K) << i;
        EXPECT_EQ(got[cat("blk.", i, ".attn_q.weight")], DType::Q4_K);
        EXPECT_EQ(got[cat("blk.", i, ".ffn_norm.weight")], DType::F32);
    }
    EXPECT_EQ(p.n_fallback(), 0);
}

TEST(MixRules, FallbacksForOddRows) {
    const auto facts = quant::model_facts("llama", 1, 4, 4, 0, {"blk.0.ffn_up.weight"});
    quant::MixPlanner q4k(quant::FileType::Q4_K_M, facts);
    EXPECT_EQ(q4k.choose("blk.0.ffn_up.weight", DType::F16, 2, 96), DType::Q5_0);
    EXPECT_EQ(q4k.choose("blk.0.ffn_gate.weight", DType::F16, 2, 100), DType::F16);
    quant::MixPlanner q2k(quant::FileType::Q2_K, facts);
    EXPECT_EQ(q2k.choose("blk.0.ffn_up.weight", DType::F16, 2, 96), DType::Q4_0);
    quant::MixPlanner iq(quant::FileType::IQ4_XS, facts);
    EXPECT_EQ(iq.choose("blk.0.ffn_up.weight", DType::F16, 2, 96), DType::IQ4_NL);
    quant::MixPlanner q8(quant::FileType::Q8_0, facts);
    EXPECT_EQ(q8.choose("blk.0.ffn_up.weight", DType::F16, 2, 172), DType::F16);
    quant::MixPlanner f16(quant::FileType::MOSTLY_F16, facts);
    EXPECT_EQ(f16.choose("blk.0.ffn_up.weight", DType::F32, 2, 172), DType::F16);
    EXPECT_EQ(f16.choose("blk.0.ffn_gate_inp.weight", DType::F32, 2, 256), DType::F32);
}

TEST(MixRules, Names) {
    quant::FileType ft;
    ASSERT_TRUE(quant::file_type_from_name("q4_k", ft));
    EXPECT_EQ(ft, quant::FileType::Q4_K_M);
    ASSERT_TRUE(quant::file_type_from_name("F16", ft));
    EXPECT_EQ(static_cast<uint32_t>(ft), 1u);
    EXPECT_FALSE(quant::file_type_from_name("q4_k_x", ft));
    EXPECT_EQ(quant::file_type_name(15), "Q4_K_M");
}

}  // namespace
}  // namespace glia::test
