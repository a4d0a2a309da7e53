// The goldens' tokenization: prompt ids (BOS added, special text parsed), the pieces of
// the prompt and of the greedy continuation, and end-of-generation flags.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "tok_test_util.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using glia::test::shared_path;
using glia::test::to_hex;

struct Loaded {
    std::unique_ptr<glia::gguf::File> file;
    std::unique_ptr<glia::tok::Vocab> vocab;
};

// Checks one golden JSON; returns the number of mismatches (each one reported).
int check_golden(const fs::path& json_path, const nlohmann::json& j, const glia::tok::Vocab& v) {
    const std::string where = json_path.parent_path().filename().string() + "/" + json_path.filename().string();
    int bad = 0;
    auto expect = [&](bool ok, const std::string& what) {
        if (!ok) {
            ++bad;
            ADD_FAILURE() << where << ": " << what;
        }
    };
    const auto& tz = j.at("tokenize");
    expect(tz.at("bos_id").get<int>() == v.bos(), "bos id");
    expect(tz.at("eos_id").get<int>() == v.eos(), "eos id");
    expect(tz.at("vocab_add_bos").get<bool>() == v.add_bos(), "add_bos flag");
    expect(tz.at("vocab_add_eos").get<bool>() == v.add_eos(), "add_eos flag");
    expect(j.at("n_vocab").get<int>() == v.n_tokens(), "n_vocab");

    const std::string prompt = j.at("prompt").get<std::string>();
    const auto want = j.at("prompt_tokens").get<std::vector<int32_t>>();
    const auto got = v.tokenize(prompt, tz.at("add_special").get<bool>(), tz.at("parse_special").get<bool>());
    if (got != want) {
        size_t k = 0;
        while (k < got.size() && k < want.size() && got[k] == want[k]) ++k;
        expect(false, "prompt tokens differ at index " + std::to_string(k) + " (got " + std::to_string(got.size()) +
                          " tokens, expected " + std::to_string(want.size()) + ")");
    }
    const auto pieces = j.at("prompt_token_pieces").get<std::vector<std::string>>();
    expect(pieces.size() == want.size(), "prompt_token_pieces size");
    for (size_t k = 0; k < pieces.size() && k < want.size(); ++k)
        expect(glia::json::sanitize_utf8(v.token_to_piece(want[k], true)) == pieces[k],
               "prompt piece " + std::to_string(k) + " of token " + std::to_string(want[k]));

    const auto& g = j.at("greedy");
    const auto toks = g.at("tokens").get<std::vector<int32_t>>();
    const auto gp = g.at("pieces").get<std::vector<std::string>>();
    const auto hex = g.at("pieces_hex").get<std::vector<std::string>>();
    const auto eog = g.at("is_eog").get<std::vector<bool>>();
    expect(gp.size() == toks.size() && hex.size() == toks.size() && eog.size() == toks.size(), "greedy array sizes");
    std::string joined;
    for (size_t k = 0; k < toks.size() && k < hex.size() && k < gp.size() && k < eog.size(); ++k) {
        const std::string piece = v.token_to_piece(toks[k], true);
        joined += piece;
        expect(to_hex(piece) == hex[k], "greedy piece " + std::to_string(k) + " of token " + std::to_string(toks[k]) +
                                            ": bytes " + to_hex(piece) + ", expected " + hex[k]);
        expect(glia::json::sanitize_utf8(piece) == gp[k], "greedy piece text " + std::to_string(k));
        expect(v.is_eog(toks[k]) == eog[k], "greedy is_eog " + std::to_string(k) + " token " + std::to_string(toks[k]));
    }
    expect(v.detokenize(toks, true) == joined, "detokenize(render_special) == joined pieces");
    // `text` is the joined bytes with each invalid byte replaced by U+FFFD.
    expect(glia::json::sanitize_utf8(joined) == g.at("text").get<std::string>(), "greedy.text");
    return bad;
}

TEST(GoldenTokens, Stories260K) {
    const std::string dir = shared_path("golden/stories260K");
    auto file = glia::gguf::File::open(shared_path("models/stories260K.gguf"));
    auto vocab = glia::tok::Vocab::from_gguf(*file);
    // stories260K stores 0xFFFFFFFF for the separator and padding ids: "none".
    EXPECT_EQ(vocab->bos(), 1);
    EXPECT_EQ(vocab->eos(), 2);
    EXPECT_EQ(vocab->unk(), 0);
    EXPECT_EQ(vocab->pad(), -1);
    EXPECT_TRUE(vocab->is_eog(2));
    EXPECT_FALSE(vocab->is_eog(1));
    EXPECT_FALSE(vocab->is_eog(-1));
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().extension() != ".json") continue;
        ++n;
        const auto j = nlohmann::json::parse(glia::test::read_text(e.path().string()));
        EXPECT_EQ(check_golden(e.path(), j, *vocab), 0) << e.path();
    }
    EXPECT_EQ(n, 6);
}

// Every model in the zoo shares the same vocabulary; check each file's own copy against
// its goldens (pieces of random continuations exercise byte tokens, <s> and </s>).
TEST(GoldenTokens, AllModels) {
    const fs::path golden = shared_path("golden");
    int n_json = 0, n_models = 0;
    for (const auto& d : fs::directory_iterator(golden)) {
        if (!d.is_directory()) continue;
        Loaded m;
        for (const auto& e : fs::directory_iterator(d.path())) {
            if (e.path().extension() != ".json") continue;
            const auto j = nlohmann::json::parse(glia::test::read_text(e.path().string()));
            if (!j.contains("prompt_tokens")) continue;  // not a model golden (e.g. dequant/index.json)
            if (!m.vocab) {
                m.file = glia::gguf::File::open(shared_path("models/" + j.at("model_file").get<std::string>()));
                m.vocab = glia::tok::Vocab::from_gguf(*m.file);
                ++n_models;
            }
            ++n_json;
            EXPECT_EQ(check_golden(e.path(), j, *m.vocab), 0) << e.path();
        }
    }
    EXPECT_GE(n_models, 52);
    EXPECT_GE(n_json, 6 * 52);
}

}  // namespace
