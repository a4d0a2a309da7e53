// Golden tests: `glia eval` on every shared model of a supported architecture, for
// every prompt, compared with the reference's records (golden_compare.h has the rules).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "golden_compare.h"
#include "gguf/gguf.h"
#include "model/model.h"
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

// Sums of each named layer node in a dump (the last occurrence of each name).
std::map<std::string, double> layer_sums(const std::string& text, const std::string& prefix,
                                         std::vector<std::string>* order) {
    std::map<std::string, double> sums;
    std::istringstream in(text);
    std::string line, current;
    while (std::getline(in, line)) {
        if (line.rfind(prefix, 0) == 0) {
            std::string rest = line.substr(prefix.size());
            const size_t b = rest.find_first_not_of(' ');
            const size_t e = rest.find(" = ");
            current = (b == std::string::npos || e == std::string::npos) ? "" : rest.substr(b, e - b);
        } else if (!current.empty() && line.find("sum = ") != std::string::npos) {
            const double s = std::stod(line.substr(line.find("sum = ") + 6));
            if (!sums.count(current) && order) order->push_back(current);
            sums[current] = s;
            current.clear();
        }
    }
    return sums;
}

// Runs the per-layer dump on "Once upon a time" and names the first node whose sum
// departs from the reference's layers-once.txt.
std::string first_diverging_layer(const std::string& model, const std::string& stem) {
    const std::string ref_path = shared_dir() + "/golden/" + stem + "/layers-once.txt";
    if (!fs::exists(ref_path)) return "(no layer dump in the golden folder)";
    const std::string prompt_file = testing::TempDir() + "/layers_prompt.txt";
    std::ofstream(prompt_file, std::ios::binary) << "Once upon a time";
    std::string out;
    glia::test::run_command("GLIA_DEBUG_LAYERS=1 " + glia::test::glia_binary() + " eval " + model + " -f " +
                                prompt_file + " -n 0 -t 2 2>&1 >/dev/null",
                            &out);
    std::vector<std::string> order;
    auto ours = layer_sums(out, "glia_debug:", &order);
    auto ref = layer_sums(glia::test::read_text(ref_path), "common_debug_cb_eval:", nullptr);
    for (const auto& name : order) {
        if (!ref.count(name) || name.find('-') == std::string::npos) continue;
        const double a = ours[name], b = ref[name];
        if (std::fabs(a - b) > 1e-3 * std::max(1.0, std::fabs(b)) + 1e-2) {
            std::ostringstream os;
            os << "first diverging node on p1_short: '" << name << "' sum " << a << ", reference " << b;
            return os.str();
        }
    }
    return "no layer node diverges on p1_short (compared " + std::to_string(order.size()) + " nodes)";
}

class Golden : public testing::TestWithParam<Case> {};

TEST_P(Golden, MatchesReference) {
    const Case& c = GetParam();
    const std::string model = shared_dir() + "/models/" + c.stem + ".gguf";
    const std::string gdir = shared_dir() + "/golden/" + c.stem + "/";
    const nlohmann::json golden = nlohmann::json::parse(glia::test::read_text(gdir + c.prompt + ".json"));
    const std::vector<float> golden_logits = read_floats(gdir + c.prompt + ".logits.bin");

    const std::string tmp = testing::TempDir() + "/golden_" + c.stem + "_" + c.prompt;
    std::ofstream(tmp + ".txt", std::ios::binary) << golden["prompt"].get<std::string>();
    std::string out;
    const std::string cmd = glia::test::glia_binary() + " eval " + model + " -f " + tmp + ".txt -n " +
                            std::to_string(golden["greedy"]["n_predict"].get<int>()) + " -t 2 --json-out " + tmp +
                            ".json --logits-out " + tmp + ".bin 2>&1";
    ASSERT_EQ(glia::test::run_command(cmd, &out), 0) << cmd << "\n" << out;
    const nlohmann::json ours = nlohmann::json::parse(glia::test::read_text(tmp + ".json"));
    const std::vector<float> our_logits = read_floats(tmp + ".bin");

    const auto tol = glia::test::tolerance_for(c.stem);
    const auto r = glia::test::compare_golden(golden, ours, golden_logits, our_logits, tol);
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
    for (const char* fam : {"qwen2", "qwen3", "qwen3moe", "gemma", "gemma2", "gemma3", "phi3", "lfm2"})
        EXPECT_EQ(per_family[fam], 3u * 6u) << fam << ": F16, Q8_0 and Q4_K_M x 6 prompts";
}

}  // namespace
