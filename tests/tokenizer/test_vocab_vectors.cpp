// The reference's tokenizer test vectors (../shared/vocab and ../shared/vocab-more,
// *.inp/.out): for every vocabulary, every case must give exactly the expected ids (no
// BOS/EOS, no special-token parsing). One test per vector file; each failing case is
// reported with its index, input, expected and actual ids (and the pieces of both, to see
// where they part). The vocab-more "specials" files hold texts made of the vocabulary's
// control and user-defined token strings: they pin which tokens plain text may produce.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>

#include "tokenizer/unicode.h"
#include "tok_test_util.h"
#include "test_util.h"

namespace {

namespace fs = std::filesystem;
using glia::test::read_vocab_cases;
using glia::test::shared_path;
using glia::tok::Kind;

struct VocabFile {
    const char* name;
    size_t n_cases;
    Kind kind;
    const char* gguf_dir = "vocab";   // where ggml-vocab-<name>.gguf is
    const char* cases_dir = "vocab";  // where the .inp/.out are
    const char* cases = ".gguf";      // ggml-vocab-<name><cases>.inp
};

// The vocabularies in ../shared/vocab (README.md there lists them), then those of
// ../shared/vocab-more and its special-token cases.
const VocabFile kFiles[] = {
    {"llama-spm", 46, Kind::SPM},
    {"phi-3", 46, Kind::SPM},
    {"llama-bpe", 46, Kind::BPE},
    {"qwen2", 46, Kind::BPE},
    {"qwen35", 50, Kind::BPE},
    {"gpt-2", 46, Kind::BPE},
    {"deepseek-llm", 46, Kind::BPE},
    {"gemma-4", 46, Kind::BPE},
    {"bert-bge", 46, Kind::WPM},
    {"aquila", 46, Kind::BPE, "vocab-more", "vocab-more"},
    {"gpt-neox", 46, Kind::BPE, "vocab-more", "vocab-more"},
    {"nomic-bert-moe", 46, Kind::UGM, "vocab-more", "vocab-more"},
    {"phi-3", 14, Kind::SPM, "vocab", "vocab-more", ".specials"},
    {"gemma-4", 14, Kind::BPE, "vocab", "vocab-more", ".specials"},
    {"aquila", 14, Kind::BPE, "vocab-more", "vocab-more", ".specials"},
    {"gpt-neox", 14, Kind::BPE, "vocab-more", "vocab-more", ".specials"},
};

void PrintTo(const VocabFile& f, std::ostream* os) { *os << f.name << f.cases; }

std::string cases_base(const VocabFile& f) {
    return std::string(f.cases_dir) + "/ggml-vocab-" + f.name + f.cases;
}

std::string ids_str(const std::vector<int32_t>& v) {
    std::ostringstream os;
    for (size_t i = 0; i < v.size(); ++i) os << (i ? " " : "") << v[i];
    return os.str();
}

std::string show(const std::string& s) {
    std::string o;
    for (unsigned char c : s) {
        if (c == '\n') o += "\\n";
        else if (c == '\t') o += "\\t";
        else if (c == '\r') o += "\\r";
        else o += static_cast<char>(c);
    }
    return o;
}

std::string pieces_str(const glia::tok::Vocab& v, const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) {
        if (id < 0 || id >= v.n_tokens()) {
            s += "[?]";
            continue;
        }
        s += '[';
        s += show(v.token_to_piece(id, true));
        s += ']';
    }
    return s;
}

class VocabVectors : public ::testing::TestWithParam<VocabFile> {};

TEST_P(VocabVectors, AllCasesMatch) {
    const VocabFile& vf = GetParam();
    const std::string gguf = std::string(vf.gguf_dir) + "/ggml-vocab-" + vf.name + ".gguf";
    const std::string base = cases_base(vf);
    auto file = glia::gguf::File::open(shared_path(gguf));
    if (vf.kind == Kind::BPE && !glia::tok::unicode::have_pcre2()) GTEST_SKIP() << "built without PCRE2";
    const auto t0 = std::chrono::steady_clock::now();
    auto vocab = glia::tok::Vocab::from_gguf(*file);
    const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(vocab->kind(), vf.kind) << vf.name;
    auto cases = read_vocab_cases(shared_path(base + ".inp"), shared_path(base + ".out"));
    ASSERT_EQ(cases.size(), vf.n_cases) << vf.name;
    int failed = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        const auto got = vocab->tokenize(cases[i].text, /*add_special=*/false, /*parse_special=*/false);
        if (got != cases[i].ids) {
            ++failed;
            ADD_FAILURE() << vf.name << " case " << i << " input '" << show(cases[i].text) << "'\n  expected: "
                          << ids_str(cases[i].ids) << "\n  got:      " << ids_str(got)
                          << "\n  expected pieces: " << pieces_str(*vocab, cases[i].ids)
                          << "\n  got pieces:      " << pieces_str(*vocab, got);
        }
    }
    EXPECT_EQ(failed, 0) << vf.name << ": " << failed << " of " << cases.size() << " cases failed";
    std::printf("[          ] %s%s: %zu/%zu cases pass, vocabulary loaded in %.1f ms\n", vf.name, vf.cases,
                cases.size() - failed, cases.size(), load_ms);
}

INSTANTIATE_TEST_SUITE_P(AllFiles, VocabVectors, ::testing::ValuesIn(kFiles),
                         [](const ::testing::TestParamInfo<VocabFile>& info) {
                             std::string n = info.param.name;
                             if (std::string(info.param.cases) == ".specials") n += "_specials";
                             for (char& c : n)
                                 if (c == '-') c = '_';
                             return n;
                         });

// Every vector file in the shared folders has a test above.
TEST(VocabVectorsList, CoversEveryFile) {
    std::set<std::string> listed;
    for (const auto& f : kFiles) listed.insert(cases_base(f) + ".inp");
    int n = 0;
    for (const char* dir : {"vocab", "vocab-more"}) {
        for (const auto& e : fs::directory_iterator(shared_path(dir))) {
            if (e.path().extension() != ".inp") continue;
            ++n;
            const std::string rel = std::string(dir) + "/" + e.path().filename().string();
            EXPECT_TRUE(listed.count(rel)) << rel << " has no test in kFiles";
        }
    }
    EXPECT_EQ(n, static_cast<int>(std::size(kFiles)));
}

}  // namespace
