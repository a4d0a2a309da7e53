// glia plan: text and JSON for every shared model, synth shapes without a file, and the
// exit codes (0 planned, 1 bad input, 3 refused).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "core/error.h"
#include "plan_test_util.h"

namespace glia::test {
namespace {

// stdout only (stderr dropped), for JSON.
int run_plan_stdout(const std::string& args, std::string* out) {
    return run_command(cat(glia_binary(), " plan ", args, " 2>/dev/null"), out);
}

TEST(PlanCli, EveryModelTextAndJson) {
    int planned = 0, no_profile = 0;
    for (const std::string& path : shared_model_paths()) {
        SCOPED_TRACE(path);
        std::string profile_error;
        int n_layer = 0;
        try {
            n_layer = load_model_file(path).p.n_layer;
        } catch (const Error& e) {
            profile_error = e.what();
        }
        std::string text, js;
        const int rc_text = run_glia(cat("plan ", path, " --gpu-mem 64M -c 2048"), &text);
        const int rc_json = run_plan_stdout(cat(path, " --gpu-mem 64M -c 2048 --json"), &js);
        if (!profile_error.empty()) {
            // A model glia cannot derive a profile for: a one-line error naming the file.
            EXPECT_EQ(rc_text, 1) << text;
            EXPECT_NE(text.find(profile_error), std::string::npos) << text;
            ++no_profile;
            continue;
        }
        ASSERT_EQ(rc_text, 0) << text;
        EXPECT_NE(text.find("decision:    fit"), std::string::npos) << text;
        EXPECT_NE(text.find("layers:      0-"), std::string::npos) << text;
        EXPECT_NE(text.find("cuda:0"), std::string::npos) << text;
        ASSERT_EQ(rc_json, 0) << js;
        const auto j = nlohmann::json::parse(js);
        EXPECT_EQ(j["decision"], "fit");
        EXPECT_EQ(j["model"]["n_layer"], n_layer);
        const auto& pl = j["placement"];
        EXPECT_EQ(pl["layer_device"].size(), size_t(n_layer));
        EXPECT_EQ(pl["n_ctx"], 2048);
        ASSERT_EQ(pl["devices"].size(), 2u);
        EXPECT_EQ(pl["devices"][1]["name"], "cuda:0");
        EXPECT_EQ(pl["devices"][1]["memory_bytes"], 64u << 20);
        EXPECT_LE(pl["devices"][1]["total"].get<uint64_t>(), 64u << 20);
        uint64_t weights = 0;
        for (const auto& d : pl["devices"]) {
            EXPECT_EQ(d["total"].get<uint64_t>(), d["weights"].get<uint64_t>() + d["kv"].get<uint64_t>() +
                                                      d["state"].get<uint64_t>() + d["scratch"].get<uint64_t>());
            weights += d["weights"].get<uint64_t>();
        }
        const uint64_t copy = pl["output_copies_embeddings"].get<bool>()
                                  ? load_model_file(path).f->tensor("token_embd.weight").nbytes : 0;
        EXPECT_EQ(weights, j["model"]["weights_bytes"].get<uint64_t>() + copy);
        ++planned;
    }
    EXPECT_GE(planned, 40);
    EXPECT_EQ(planned + no_profile, int(shared_model_paths().size()));
}

TEST(PlanCli, NoAcceleratorMeansCpuAndSaysSo) {
    std::string out;
    ASSERT_EQ(0, run_glia(cat("plan ", shared_path("models/stories260K.gguf")), &out)) << out;
    EXPECT_NE(out.find("layers:      0-4 on cpu"), std::string::npos) << out;
    EXPECT_NE(out.find("no accelerator given"), std::string::npos) << out;
    EXPECT_EQ(out.find("cuda"), std::string::npos) << out;
}

TEST(PlanCli, RefusalExitsThreeWithTheRemedy) {
    const std::string lfm2 = shared_path("models/tiny-lfm2-q8_0.gguf");
    std::string out;
    EXPECT_EQ(3, run_glia(cat("plan ", lfm2, " -ngl 1 --gpu-mem 1G"), &out));
    EXPECT_NE(out.find("glia plan: refused: -ngl 1 would split"), std::string::npos) << out;
    EXPECT_NE(out.find("-ngl 0"), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line: " << out;

    ASSERT_EQ(3, run_plan_stdout(cat(lfm2, " -ngl 2 --gpu-mem 1G --json"), &out));
    const auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["decision"], "refused");
    EXPECT_NE(j["reason"].get<std::string>().find("uniform offload"), std::string::npos);
    EXPECT_EQ(j["model"]["uniform_offload_required"], true);

    EXPECT_EQ(0, run_glia(cat("plan ", lfm2, " -ngl 3 --gpu-mem 1G"), &out)) << out;
    EXPECT_EQ(0, run_glia(cat("plan ", lfm2, " -ngl 0 --gpu-mem 1G"), &out)) << out;

    EXPECT_EQ(3, run_glia("plan --shape llama3-8b --type Q4_K_M -ngl 32 --gpu-mem 4G -c 8192", &out));
    EXPECT_NE(out.find("-ngl 32 needs "), std::string::npos) << out;
    EXPECT_NE(out.find("but --gpu-mem gives 4.0 GiB: use -ngl "), std::string::npos) << out;
}

TEST(PlanCli, SynthShapeWithoutAFile) {
    std::string out;
    ASSERT_EQ(0, run_plan_stdout("--shape llama3-8b --type Q4_K_M --gpu-mem 24G --json", &out)) << out;
    const auto j = nlohmann::json::parse(out);
    const Model m = synth_model("llama3-8b", quant::FileType::Q4_K_M);
    EXPECT_EQ(j["model"]["n_layer"], 32);
    EXPECT_EQ(j["model"]["weights_bytes"].get<uint64_t>(), tensor_bytes(*m.f));
    EXPECT_EQ(j["model"]["path"], "synth llama3-8b Q4_K_M");
    EXPECT_EQ(j["placement"]["n_gpu_layers"], 32);
    EXPECT_EQ(j["placement"]["n_ctx"], 131072);
    // A Q4_K_M 8B llama weighs about 4.6 GiB.
    EXPECT_GT(tensor_bytes(*m.f), uint64_t(4.4 * kGiB));
    EXPECT_LT(tensor_bytes(*m.f), uint64_t(4.8 * kGiB));

    ASSERT_EQ(0, run_glia("plan --shape qwen3-30b-a3b --type q4_k_m --gpu-mem 24G,24G -c 32768", &out)) << out;
    EXPECT_NE(out.find("layers:      0-23 on cuda:0, 24-47 on cuda:1"), std::string::npos) << out;
    EXPECT_NE(out.find("experts:     with their layers"), std::string::npos) << out;
}

TEST(PlanCli, BadInputExitsOne) {
    std::string out;
    const std::string model = shared_path("models/stories260K.gguf");
    EXPECT_EQ(1, run_glia("plan", &out));
    EXPECT_NE(out.find("no model given"), std::string::npos) << out;
    EXPECT_EQ(1, run_glia("plan /nonexistent.gguf", &out));
    EXPECT_NE(out.find("/nonexistent.gguf"), std::string::npos) << out;
    EXPECT_EQ(1, run_glia(cat("plan ", model, " --gpu-mem 24Q"), &out));
    EXPECT_NE(out.find("--gpu-mem"), std::string::npos) << out;
    EXPECT_EQ(1, run_glia(cat("plan ", model, " -ngl -3"), &out));
    EXPECT_EQ(1, run_glia(cat("plan ", model, " -c 512 --min-ctx 1024"), &out));
    EXPECT_NE(out.find("--min-ctx 1024"), std::string::npos) << out;
    EXPECT_EQ(1, run_glia("plan --shape nope", &out));
    EXPECT_NE(out.find("unknown shape 'nope'"), std::string::npos) << out;
    EXPECT_EQ(1, run_glia(cat("plan ", model, " --shape tiny"), &out));
    EXPECT_EQ(1, run_glia(cat("plan ", model, " --type Q4_K_M"), &out));
    EXPECT_EQ(1, run_glia(cat("plan ", model, " --bogus"), &out));
    EXPECT_EQ(0, run_glia("plan --help", &out));
    EXPECT_NE(out.find("--gpu-mem"), std::string::npos) << out;
}

}  // namespace
}  // namespace glia::test
