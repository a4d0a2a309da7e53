// Golden tests: `glia eval` on every shared model of a supported architecture, for
// every prompt, compared with the reference's records (golden_compare.h has the rules).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "golden_compare.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "cli_util.h"
#include "test_util.h"

namespace fs = std::filesystem;
using glia::test::shared_dir;

namespace {

struct Case {
    std::string stem;    // model file stem
    std::string prompt;  // prompt id
};

bool arch_supported(const std::string& arch) {
    for (const auto& a : glia::architectures())
        if (arch == a.name) return true;
    return false;
}

std::vector<Case> all_cases() {
    std::vector<Case> cases;
    const fs::path golden = fs::path(shared_dir()) / "golden";
    const fs::path models = fs::path(shared_dir()) / "models";
    if (!fs::exists(golden)) return cases;
    std::vector<std::string> stems;
    for (const auto& e : fs::directory_iterator(golden))
        if (e.is_directory() && fs::exists(models / (e.path().filename().string() + ".gguf")))
            stems.push_back(e.path().filename().string());
    std::sort(stems.begin(), stems.end());
    for (const auto& stem : stems) {
        std::string arch;
        try {
            arch = glia::gguf::File::open((models / (stem + ".gguf")).string())->get<std::string>("general.architecture");
        } catch (const std::exception&) {
            continue;
        }
        if (!arch_supported(arch)) continue;
        std::vector<std::string> prompts;
        for (const auto& e : fs::directory_iterator(golden / stem))
            if (e.path().extension() == ".json") prompts.push_back(e.path().stem().string());
        std::sort(prompts.begin(), prompts.end());
        for (const auto& p : prompts) cases.push_back({stem, p});
    }
    return cases;
}

std::vector<float> read_floats(const std::string& path) {
    auto bytes = glia::test::read_bytes(path);
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
    return v;
}

// Runs `glia dump --compare` on "Once upon a time" and names the first node whose sum
// departs from the reference's layers-once.txt.
std::string first_diverging_layer(const std::string& model, const std::string& stem) {
    const std::string ref_path = shared_dir() + "/golden/" + stem + "/layers-once.txt";
    if (!fs::exists(ref_path)) return "(no layer dump in the golden folder)";
    std::string out;
    glia::test::run_command(glia::test::glia_binary() + " dump " + model + " -p 'Once upon a time' -t 2 --compare " +
                                ref_path + " --json 2>&1",
                            &out);
    try {
        const auto j = nlohmann::json::parse(out);
        if (j["first_divergence"].is_null())
            return "no layer node diverges on p1_short (" + std::to_string(j["nodes"].size()) + " nodes compared)";
        for (const auto& n : j["nodes"])
            if (n["name"] == j["first_divergence"])
                return "first diverging node on p1_short: '" + n["name"].get<std::string>() + "' sum " +
                       std::to_string(n["ours"].get<double>()) + ", reference " +
                       std::to_string(n["reference"].get<double>());
    } catch (const std::exception&) {
    }
    return "layer comparison failed: " + out.substr(0, 300);
}

// $GLIA_GOLDEN_ARGS: more glia eval options, e.g. "-ngl 99" to run the goldens on the GPU
// (the device machine; CI leaves it unset).
std::string extra_eval_args() {
    const char* e = std::getenv("GLIA_GOLDEN_ARGS");
    return e && *e ? std::string(" ") + e : std::string();
}

class Golden : public testing::TestWithParam<Case> {};

TEST_P(Golden, MatchesReference) {
    const Case& c = GetParam();
    const std::string model = shared_dir() + "/models/" + c.stem + ".gguf";
    const std::string gdir = shared_dir() + "/golden/" + c.stem + "/";
    const nlohmann::json golden = nlohmann::json::parse(glia::test::read_text(gdir + c.prompt + ".json"));
    const std::vector<float> golden_logits = read_floats(gdir + c.prompt + ".logits.bin");

    const glia::test::ScratchDir scratch("golden");
    const std::string tmp = scratch.file(c.stem + "_" + c.prompt);
    std::ofstream(tmp + ".txt", std::ios::binary) << golden["prompt"].get<std::string>();
    std::string out;
    // MoE goldens: run with the recorded routing (the README's recommended check), so a
    // router near-tie cannot flip an expert and move every later position.
    const bool forced = golden.contains("moe_selected_experts");
    const std::string cmd = glia::test::glia_binary() + " eval " + model + " -f " + tmp + ".txt -n " +
                            std::to_string(golden["greedy"]["n_predict"].get<int>()) + " -t 2 --json-out " + tmp +
                            ".json --logits-out " + tmp + ".bin" +
                            (forced ? " --force-routing " + gdir + c.prompt + ".json" : std::string()) +
                            extra_eval_args() + " 2>&1";
    ASSERT_EQ(glia::test::run_command(cmd, &out), 0) << cmd << "\n" << out;
    const nlohmann::json ours = nlohmann::json::parse(glia::test::read_text(tmp + ".json"));
    const std::vector<float> our_logits = read_floats(tmp + ".bin");

    const auto tol = glia::test::tolerance_for(c.stem);
    const auto r = glia::test::compare_golden(golden, ours, golden_logits, our_logits, tol, forced);
    std::printf("[golden] %-22s %-16s tau %.2f bound %.2f: %s\n", c.stem.c_str(), c.prompt.c_str(), tol.tau, tol.bound,
                r.summary().c_str());
    RecordProperty("last_max_abs", std::to_string(r.last_max_abs));
    RecordProperty("top10_max_abs", std::to_string(r.top10_max_abs));
    if (!r.ok) {
        std::string msg;
        for (const auto& f : r.failures) msg += "  " + f + "\n";
        ADD_FAILURE() << c.stem << " / " << c.prompt << " differs from the reference:\n"
                      << msg << "  " << r.summary() << "\n  " << first_diverging_layer(model, c.stem);
    }
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
    std::string s = info.param.stem + "__" + info.param.prompt;
    for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return s;
}

INSTANTIATE_TEST_SUITE_P(Shared, Golden, testing::ValuesIn(all_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Golden);

// The golden data must be present: an empty case list would pass vacuously.
TEST(GoldenData, CoversEverySupportedFamily) {
    std::map<std::string, size_t> per_family;
    for (const auto& c : all_cases()) {
        std::string fam = c.stem.rfind("stories260K", 0) == 0 ? "llama" : c.stem.substr(5, c.stem.rfind('-') - 5);
        ++per_family[fam];
    }
    EXPECT_EQ(per_family["llama"], 19u * 6u) << "4 stories260K + 15 tiny-llama models x 6 prompts under " << shared_dir();
    for (const char* fam :
         {"qwen2", "qwen3", "qwen3moe", "gemma", "gemma2", "gemma3", "phi3", "lfm2", "gemma4", "qwen35", "kimi-k3"})
        EXPECT_EQ(per_family[fam], 3u * 6u) << fam << ": F16, Q8_0 and Q4_K_M x 6 prompts";
}

}  // namespace

namespace {

// Per-node sums of one forward pass on "Once upon a time" match the reference's dump
// (layers-once.txt) for every float model of a supported family.
class LayerDump : public testing::TestWithParam<std::string> {};

TEST_P(LayerDump, MatchesReferenceNodeByNode) {
    const std::string stem = GetParam();
    std::string out;
    const int rc = glia::test::run_command(glia::test::glia_binary() + " dump " + shared_dir() + "/models/" + stem +
                                               ".gguf -t 2 --compare " + shared_dir() + "/golden/" + stem +
                                               "/layers-once.txt --json 2>&1",
                                           &out);
    const auto j = nlohmann::json::parse(out);
    EXPECT_GE(j["nodes"].size(), 10u) << "too few nodes matched by name: " << out.substr(0, 400);
    EXPECT_TRUE(j["first_divergence"].is_null()) << stem << ": first divergence at " << j["first_divergence"];
    EXPECT_EQ(rc, 0);
}

std::vector<std::string> float_models() {
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (const auto& c : all_cases()) {
        const bool is_float = c.stem == "stories260K" ||
                              (c.stem.size() > 4 && (c.stem.substr(c.stem.size() - 4) == "-f16" ||
                                                     c.stem.substr(c.stem.size() - 4) == "-f32"));
        if (is_float && seen.insert(c.stem).second) out.push_back(c.stem);
    }
    return out;
}

std::string stem_name(const testing::TestParamInfo<std::string>& info) {
    std::string s = info.param;
    for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return s;
}

INSTANTIATE_TEST_SUITE_P(Shared, LayerDump, testing::ValuesIn(float_models()), stem_name);

}  // namespace
