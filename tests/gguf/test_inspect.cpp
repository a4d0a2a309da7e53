// `glia inspect` end to end: every shared file inspects (text and JSON), key facts are
// right, and malformed or missing files give a one-line error and a non-zero exit.
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "gguf_test_util.h"

using namespace glia;
using namespace glia::test;
using nlohmann::json;

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Runs glia inspect; returns the exit code, stdout in *out and stderr in *err.
int inspect(const std::string& args, std::string* out, std::string* err = nullptr) {
    const std::string errfile = cat(::testing::TempDir(), "/glia_inspect_err_", ::getpid(), ".txt");
    const int rc = run_command(glia_binary() + " inspect " + args + " 2>" + quoted(errfile), out);
    if (err) *err = read_text(errfile);
    std::remove(errfile.c_str());
    return rc;
}

json inspect_json(const std::string& rel) {
    std::string out, err;
    const int rc = inspect(quoted(shared_path(rel)) + " --json", &out, &err);
    EXPECT_EQ(rc, 0) << rel << ": " << err;
    try {
        return json::parse(out);
    } catch (const std::exception& e) {
        ADD_FAILURE() << rel << ": JSON does not parse: " << e.what();
        return json::object();
    }
}

void write_file(const std::string& path, const std::vector<uint8_t>& b) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

}  // namespace

TEST(GliaInspect, EverySharedFile) {
    auto files = shared_ggufs("models");
    auto vocab = shared_ggufs("vocab");
    files.insert(files.end(), vocab.begin(), vocab.end());
    ASSERT_GT(files.size(), 10u);
    for (const auto& p : files) {
        SCOPED_TRACE(p);
        std::string out, err;
        EXPECT_EQ(inspect(quoted(p), &out, &err), 0) << err;
        EXPECT_NE(out.find("architecture:"), std::string::npos);
        EXPECT_NE(out.find("uniform_offload_required"), std::string::npos);
        EXPECT_EQ(inspect(quoted(p) + " --json", &out, &err), 0) << err;
        json j;
        ASSERT_NO_THROW(j = json::parse(out)) << out.substr(0, 400);
        auto f = gguf::File::open(p);
        EXPECT_EQ(j["tensor_count"], f->tensors().size());
        EXPECT_EQ(j["tensors"].size(), f->tensors().size());
        EXPECT_EQ(j["kv_count"], f->kvs().size());
        EXPECT_EQ(j["version"], f->version());
        EXPECT_EQ(j["architecture"], f->get<std::string>("general.architecture"));
        EXPECT_TRUE(j["profile"]["uniform_offload_required"].is_boolean());
        uint64_t total = 0;
        for (const auto& t : f->tensors()) total += t.nbytes;
        EXPECT_EQ(j["total_tensor_bytes"], total);
        EXPECT_LE(j["decode_bytes_per_token"].get<uint64_t>(), total);
        if (!f->tensors().empty()) {
            EXPECT_GT(j["decode_bytes_per_token"].get<uint64_t>(), 0u);
        }
    }
}

TEST(GliaInspect, Stories260KFacts) {
    json j = inspect_json("models/stories260K.gguf");
    EXPECT_EQ(j["architecture"], "llama");
    EXPECT_EQ(j["tensor_count"], 48);
    EXPECT_EQ(j["hyperparameters"]["block_count"], 5);
    EXPECT_EQ(j["hyperparameters"]["embedding_length"], 64);
    EXPECT_EQ(j["hyperparameters"]["head_count"], 8);
    EXPECT_EQ(j["hyperparameters"]["head_count_kv"], 4);
    EXPECT_EQ(j["profile"]["head_count_kv_form"], "scalar");
    EXPECT_EQ(j["profile"]["uniform_offload_required"], false);
    EXPECT_EQ(j["profile"]["moe"], false);
    EXPECT_EQ(j["profile"]["tied_output"], false);
    EXPECT_EQ(j["tokenizer"]["model"], "llama");
    EXPECT_EQ(j["tokenizer"]["vocab_size"], 512);
    EXPECT_EQ(j["tokenizer"]["chat_template"], false);
    EXPECT_EQ(j["totals_by_type"]["F32"]["tensors"], 48);
    // All f32: everything is read once per token except token_embd (one 64-float row).
    const uint64_t total = j["total_tensor_bytes"];
    EXPECT_EQ(j["decode_bytes_per_token"], total - 64 * 512 * 4 + 64 * 4);
    EXPECT_EQ(j["tensors"][0]["name"], "token_embd.weight");
    EXPECT_EQ(j["tensors"][0]["shape"], json::array({64, 512}));
    EXPECT_EQ(j["tensors"][0]["bytes"], 64 * 512 * 4);

    std::string out;
    ASSERT_EQ(inspect(quoted(shared_path("models/stories260K.gguf")), &out), 0);
    EXPECT_NE(out.find("token_embd.weight"), std::string::npos);
    EXPECT_NE(out.find("block_count"), std::string::npos);
    EXPECT_NE(out.find("chat template: no"), std::string::npos);
    EXPECT_NE(out.find("decode step reads"), std::string::npos);
}

TEST(GliaInspect, HybridAndDenseProfiles) {
    json lfm = inspect_json("models/tiny-lfm2-f16.gguf");
    EXPECT_EQ(lfm["profile"]["head_count_kv_form"], "array");
    EXPECT_TRUE(lfm["hyperparameters"]["head_count_kv"].is_array());
    EXPECT_EQ(lfm["profile"]["head_count_kv"], json::array({0, 2, 0}));
    EXPECT_EQ(lfm["profile"]["recurrent_layers"], json::array({0, 2}));
    EXPECT_EQ(lfm["profile"]["uniform_offload_required"], true);
    EXPECT_EQ(lfm["profile"]["tied_output"], true);

    json llama = inspect_json("models/tiny-llama-f16.gguf");
    EXPECT_EQ(llama["profile"]["head_count_kv_form"], "scalar");
    EXPECT_EQ(llama["profile"]["uniform_offload_required"], false);
    EXPECT_TRUE(llama["profile"]["recurrent_layers"].empty());

    std::string out;
    ASSERT_EQ(inspect(quoted(shared_path("models/tiny-lfm2-f16.gguf")), &out), 0);
    EXPECT_NE(out.find("per-layer array"), std::string::npos) << out;
    EXPECT_NE(out.find("uniform_offload_required: true"), std::string::npos) << out;
}

TEST(GliaInspect, MixtureOfExperts) {
    json j = inspect_json("models/tiny-qwen3moe-f16.gguf");
    EXPECT_EQ(j["profile"]["moe"], true);
    const int64_t ne = j["profile"]["expert_count"], nu = j["profile"]["expert_used_count"];
    ASSERT_GT(ne, 1);
    ASSERT_GT(nu, 0);
    // Recompute the decode bytes from the tensor table.
    double expect = 0;
    for (const auto& t : j["tensors"]) {
        const std::string name = t["name"];
        const double b = t["bytes"].get<double>();
        if (name == "token_embd.weight") expect += double(t["shape"][0].get<int64_t>()) * 2;  // one f16 row
        else if (name.find("_exps") != std::string::npos) expect += b * double(nu) / double(ne);
        else expect += b;
    }
    EXPECT_NEAR(j["decode_bytes_per_token"].get<double>(), expect, 1.0);
    EXPECT_LT(j["decode_bytes_per_token"].get<uint64_t>(), j["total_tensor_bytes"].get<uint64_t>());
}

TEST(GliaInspect, VocabularyFile) {
    json j = inspect_json("vocab/ggml-vocab-qwen2.gguf");
    EXPECT_EQ(j["tensor_count"], 0);
    EXPECT_EQ(j["tokenizer"]["model"], "gpt2");
    EXPECT_EQ(j["tokenizer"]["vocab_size"], 151936);
    EXPECT_EQ(j["decode_bytes_per_token"], 0);
    // Long arrays are summarised, not dumped.
    EXPECT_EQ(j["metadata"]["tokenizer.ggml.tokens"]["length"], 151936);
}

// Tokens whose type the vocabulary overrides are listed, with the reason, in both forms.
TEST(GliaInspect, TokenTypeOverrides) {
    json j = inspect_json("vocab/ggml-vocab-phi-3.gguf");
    ASSERT_TRUE(j["tokenizer"]["type_overrides"].is_array());
    ASSERT_EQ(j["tokenizer"]["type_overrides"].size(), 1u) << j["tokenizer"].dump();
    const json& o = j["tokenizer"]["type_overrides"][0];
    EXPECT_EQ(o["id"], 2);
    EXPECT_EQ(o["text"], "</s>");
    EXPECT_EQ(o["file_type"], "user-defined");
    EXPECT_NE(o["attributes"].get<std::string>().find("control"), std::string::npos);
    EXPECT_NE(o["reason"].get<std::string>().find("end-of-generation"), std::string::npos);
    EXPECT_TRUE(j["tokenizer"]["load_error"].is_null());

    // A NORMAL token is retyped too (qwen2's "</s>").
    j = inspect_json("vocab/ggml-vocab-qwen2.gguf");
    bool found = false;
    for (const json& e : j["tokenizer"]["type_overrides"])
        if (e["id"] == 128247) found = e["file_type"] == "normal" && e["text"] == "</s>";
    EXPECT_TRUE(found) << j["tokenizer"].dump();

    EXPECT_EQ(inspect_json("models/stories260K.gguf")["tokenizer"]["type_overrides"].size(), 0u);

    std::string out, err;
    ASSERT_EQ(inspect(quoted(shared_path("vocab/ggml-vocab-phi-3.gguf")), &out, &err), 0) << err;
    EXPECT_NE(out.find("token type overrides (1"), std::string::npos) << out;
    EXPECT_NE(out.find("2 \"</s>\": user-defined -> control"), std::string::npos) << out;
}

TEST(GliaInspect, ErrorsAreOneLineAndNonZero) {
    const std::string dir = ::testing::TempDir();
    const auto good = read_bytes(shared_path("models/stories260K.gguf"));
    struct Case { std::string name; std::vector<uint8_t> bytes; std::string needle; };
    std::vector<Case> cases;
    cases.push_back({"empty", {}, "magic"});
    cases.push_back({"text", {'h', 'e', 'l', 'l', 'o', '\n', 'x', 'y', 'z'}, "magic"});
    cases.push_back({"truncated", std::vector<uint8_t>(good.begin(), good.begin() + 5000), "offset"});
    auto b = good;
    poke<uint32_t>(b, 4, 9);
    cases.push_back({"version", b, "version"});
    b = good;
    poke<uint64_t>(b, 8, UINT64_MAX);
    cases.push_back({"tensor_count", b, "tensor_count"});
    cases.push_back({"data_cut", std::vector<uint8_t>(good.begin(), good.end() - 1), "past the end"});
    for (const auto& c : cases) {
        const std::string p = cat(dir, "/glia_bad_", c.name, "_", ::getpid(), ".gguf");
        write_file(p, c.bytes);
        for (const char* flags : {"", " --json"}) {
            std::string out, err;
            const int rc = inspect(quoted(p) + flags, &out, &err);
            EXPECT_NE(rc, 0) << c.name;
            EXPECT_TRUE(out.empty()) << c.name << ": stdout: " << out;
            EXPECT_NE(err.find(c.needle), std::string::npos) << c.name << ": " << err;
            EXPECT_NE(err.find(p), std::string::npos) << c.name << ": error does not name the file: " << err;
            ASSERT_FALSE(err.empty());
            EXPECT_EQ(err.find('\n'), err.size() - 1) << c.name << ": not one line: " << err;
        }
        std::remove(p.c_str());
    }
    std::string out, err;
    EXPECT_NE(inspect("/nonexistent/model.gguf", &out, &err), 0);
    EXPECT_NE(err.find("/nonexistent/model.gguf"), std::string::npos) << err;
    EXPECT_NE(inspect("", &out, &err), 0);
    EXPECT_NE(err.find("no file"), std::string::npos) << err;
    EXPECT_NE(inspect("--bogus x.gguf", &out, &err), 0);
    EXPECT_NE(err.find("--bogus"), std::string::npos) << err;
    EXPECT_EQ(inspect("--help", &out, &err), 0);
    EXPECT_NE(out.find("--json"), std::string::npos);
}
