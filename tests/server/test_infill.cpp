// Fill in the middle (server/infill.h): the token sequence the prompt is built from (order,
// BOS, the repository tokens, cutting to a budget, user text kept as text), the 400 for a
// vocabulary without FIM tokens, and the routes: POST /infill and "suffix" on
// /v1/completions, on stories260K copies whose metadata names FIM tokens.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "gguf/gguf.h"
#include "server/infill.h"
#include "server_fixture.h"
#include "tokenizer/vocab.h"

namespace {

using namespace glia::test::server;
using glia::server::ApiError;
using glia::server::InfillInput;
using glia::server::infill_prompt;
using glia::tok::Vocab;
using Ids = std::vector<int32_t>;

// stories260K with FIM token ids in its metadata: byte tokens stand in for them. `keys`:
// "new" (tokenizer.ggml.fim_*_token_id, with the repository tokens when `repo`), "old"
// (tokenizer.ggml.prefix/suffix/middle_token_id).
std::string stories_with_fim(const std::string& keys, bool repo) {
    const std::string out = ::testing::TempDir() + "/glia_server_stories_fim_" + keys + (repo ? "_repo" : "") + ".gguf";
    if (std::filesystem::exists(out)) return out;
    auto f = glia::gguf::File::open(stories());
    auto v = Vocab::from_gguf(*f);
    auto id = [&](const char* piece) { return static_cast<uint32_t>(v->find_token(piece)); };
    glia::gguf::Writer w(f->alignment());
    w.copy_kvs(*f);
    const std::string k = "tokenizer.ggml.";
    if (keys == "old") {
        w.set_u32(k + "prefix_token_id", id("<0x10>"));
        w.set_u32(k + "suffix_token_id", id("<0x11>"));
        w.set_u32(k + "middle_token_id", id("<0x12>"));
    } else {
        w.set_u32(k + "fim_pre_token_id", id("<0x10>"));
        w.set_u32(k + "fim_suf_token_id", id("<0x11>"));
        w.set_u32(k + "fim_mid_token_id", id("<0x12>"));
        if (repo) {
            w.set_u32(k + "fim_rep_token_id", id("<0x13>"));
            w.set_u32(k + "fim_sep_token_id", id("<0x14>"));
        }
    }
    for (const auto& t : f->tensors())
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.nbytes);
    const std::string tmp = out + ".tmp" + std::to_string(getpid());
    w.write(tmp);
    std::filesystem::rename(tmp, out);
    return out;
}

struct Loaded {
    std::unique_ptr<glia::gguf::File> file;
    std::unique_ptr<Vocab> vocab;
};
Loaded load(const std::string& path) {
    Loaded l;
    l.file = glia::gguf::File::open(path);
    l.vocab = Vocab::from_gguf(*l.file);
    return l;
}

Ids text(const Vocab& v, const std::string& s) { return v.tokenize(s, false, false); }
Ids cat(std::initializer_list<Ids> parts) {
    Ids out;
    for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

TEST(InfillPrompt, PrefixSuffixMiddleInOrder) {
    for (const char* keys : {"new", "old"}) {
        Loaded l = load(stories_with_fim(keys, false));
        const Vocab& v = *l.vocab;
        ASSERT_TRUE(glia::server::has_fim(v)) << keys;
        ASSERT_NE(v.fim_pre(), v.fim_suf());
        const InfillInput in{"Once upon a time", "they lived happily.", "there", {}};
        const auto p = infill_prompt(v, in, 1000, "input_prefix");
        const Ids bos = v.add_bos() ? Ids{v.bos()} : Ids{};
        EXPECT_EQ(p.tokens, cat({bos, {v.fim_pre()}, text(v, in.prefix), {v.fim_suf()}, text(v, in.suffix), {v.fim_mid()},
                                 text(v, in.middle)}))
            << keys;
        EXPECT_FALSE(p.truncated);
    }
}

// Control-token text typed by the user is text: one BOS, one of each FIM token.
TEST(InfillPrompt, UserTextStaysText) {
    Loaded l = load(stories_with_fim("new", false));
    const Vocab& v = *l.vocab;
    const std::string bos_text = v.token_to_piece(v.bos(), true);
    const InfillInput in{bos_text + "a" + bos_text, "b" + bos_text, bos_text, {}};
    const auto p = infill_prompt(v, in, 1000, "input_prefix");
    EXPECT_EQ(std::count(p.tokens.begin(), p.tokens.end(), v.bos()), v.add_bos() ? 1 : 0);
    for (int32_t t : {v.fim_pre(), v.fim_suf(), v.fim_mid()}) EXPECT_EQ(std::count(p.tokens.begin(), p.tokens.end(), t), 1);
}

TEST(InfillPrompt, ExtraFilesWithAndWithoutRepositoryTokens) {
    const InfillInput in{"int x = ", ";\n", "", {{"a.c", "int a;\n"}, {"b.c", "int b;"}}};
    {
        Loaded l = load(stories_with_fim("new", true));
        const Vocab& v = *l.vocab;
        ASSERT_GE(v.fim_rep(), 0);
        const auto p = infill_prompt(v, in, 1000, "input_prefix");
        EXPECT_EQ(p.tokens, cat({{v.bos()}, {v.fim_rep()}, text(v, "project\n"), {v.fim_sep()}, text(v, "a.c\nint a;\n"),
                                 {v.fim_sep()}, text(v, "b.c\nint b;"), {v.fim_sep()}, text(v, "\n"), {v.fim_pre()},
                                 text(v, in.prefix), {v.fim_suf()}, text(v, in.suffix), {v.fim_mid()}}));
    }
    {
        Loaded l = load(stories_with_fim("new", false));
        const Vocab& v = *l.vocab;
        const auto p = infill_prompt(v, in, 1000, "input_prefix");
        EXPECT_EQ(p.tokens, cat({{v.bos()}, text(v, "int a;\n"), text(v, "int b;\n"), {v.fim_pre()}, text(v, in.prefix),
                                 {v.fim_suf()}, text(v, in.suffix), {v.fim_mid()}}));
    }
}

// Over the budget: the suffix keeps its start, the prefix its end, the older files go.
TEST(InfillPrompt, CutToTheBudget) {
    Loaded l = load(stories_with_fim("new", false));
    const Vocab& v = *l.vocab;
    std::string prefix, suffix;
    for (int i = 0; i < 40; ++i) prefix += "Tom had a ball " + std::to_string(i) + ". ";
    for (int i = 0; i < 40; ++i) suffix += "The end " + std::to_string(i) + ". ";
    const InfillInput in{prefix, suffix, "", {{"old.txt", "far away"}}};
    const int budget = 80;
    const auto p = infill_prompt(v, in, budget, "input_prefix");
    EXPECT_TRUE(p.truncated);
    ASSERT_LE(static_cast<int>(p.tokens.size()), budget);
    const auto pre = std::find(p.tokens.begin(), p.tokens.end(), v.fim_pre());
    const auto suf = std::find(p.tokens.begin(), p.tokens.end(), v.fim_suf());
    const auto mid = std::find(p.tokens.begin(), p.tokens.end(), v.fim_mid());
    ASSERT_TRUE(pre < suf && suf < mid && mid + 1 == p.tokens.end());
    EXPECT_EQ(pre - p.tokens.begin(), 1) << "the extra file is dropped first";
    const Ids kept_prefix(pre + 1, suf), kept_suffix(suf + 1, mid), all_prefix = text(v, prefix), all_suffix = text(v, suffix);
    ASSERT_FALSE(kept_prefix.empty());
    ASSERT_FALSE(kept_suffix.empty());
    EXPECT_TRUE(std::equal(kept_prefix.rbegin(), kept_prefix.rend(), all_prefix.rbegin())) << "the prefix keeps its end";
    EXPECT_TRUE(std::equal(kept_suffix.begin(), kept_suffix.end(), all_suffix.begin())) << "the suffix keeps its start";
    EXPECT_LE(kept_suffix.size(), static_cast<size_t>(budget - 4) / 4);
    EXPECT_EQ(static_cast<int>(p.tokens.size()), budget) << "the budget is used";
    // Nothing but the fixed part fits: a 400.
    try {
        infill_prompt(v, InfillInput{"a", "b", "a long middle text that does not fit", {}}, 5, "input_prefix");
        ADD_FAILURE() << "expected a 400";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.param, "input_prefix");
    }
}

TEST(InfillPrompt, NoFimTokensIs400NamingTheField) {
    Loaded l = load(stories());
    ASSERT_FALSE(glia::server::has_fim(*l.vocab));
    try {
        infill_prompt(*l.vocab, InfillInput{"a", "b", "", {}}, 100, "suffix");
        ADD_FAILURE() << "expected a 400";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.param, "suffix");
        EXPECT_NE(e.message.find("fill-in-the-middle"), std::string::npos) << e.message;
    }
}

TEST(ServerInfill, InfillRouteAndCompletionSuffix) {
    const std::string path = stories_with_fim("new", true);
    ServerProcess srv(path, {"-c", "512", "--parallel", "2"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    Loaded l = load(path);
    const Vocab& v = *l.vocab;
    const InfillInput in{"Once upon a time, there was", "She was very happy.", "", {{"a.txt", "Lily had a dog."}}};
    const auto expected = infill_prompt(v, in, glia::server::infill_budget(512, 6), "input_prefix").tokens;

    const auto r = post(srv, "/infill", json{{"input_prefix", in.prefix}, {"input_suffix", in.suffix},
                                             {"input_extra", {{{"filename", "a.txt"}, {"text", "Lily had a dog."}}}},
                                             {"n_predict", 6}, {"temperature", 0}, {"ignore_eos", true}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.j["tokens_evaluated"], expected.size()) << r.body;
    EXPECT_EQ(r.j["tokens_predicted"], 6);
    EXPECT_EQ(r.j["stop"], true);
    EXPECT_EQ(r.j["stop_type"], "limit");
    ASSERT_TRUE(r.j["content"].is_string());
    // The same tokens sent as a prompt: the same greedy text.
    const auto same = post(srv, "/v1/completions", json{{"prompt", expected}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}});
    ASSERT_EQ(same.status, 200) << same.body;
    EXPECT_EQ(same.j["choices"][0]["text"], r.j["content"]);

    // Streamed: the same text in pieces, then the final object.
    auto c = srv.client();
    auto s = c.Post("/infill", json{{"input_prefix", in.prefix}, {"input_suffix", in.suffix},
                                   {"input_extra", {{{"filename", "a.txt"}, {"text", "Lily had a dog."}}}},
                                   {"n_predict", 6}, {"temperature", 0}, {"ignore_eos", true}, {"stream", true}}.dump(),
                    "application/json");
    ASSERT_TRUE(s);
    ASSERT_EQ(s->status, 200) << s->body;
    std::string streamed;
    json last;
    for (const std::string& d : sse_data(s->body)) {
        last = json::parse(d);
        streamed += last["content"].get<std::string>();
    }
    EXPECT_EQ(streamed, r.j["content"].get<std::string>());
    EXPECT_EQ(last["stop"], true);
    EXPECT_EQ(last["tokens_predicted"], 6);

    // "suffix" on /v1/completions: the prompt is the prefix.
    const auto sfx = post(srv, "/v1/completions", json{{"prompt", in.prefix}, {"suffix", in.suffix}, {"max_tokens", 6},
                                                      {"temperature", 0}, {"ignore_eos", true}});
    ASSERT_EQ(sfx.status, 200) << sfx.body;
    const auto plain = infill_prompt(v, InfillInput{in.prefix, in.suffix, "", {}}, glia::server::infill_budget(512, 6), "suffix");
    EXPECT_EQ(sfx.j["usage"]["prompt_tokens"], plain.tokens.size());

    // Malformed: a 400 naming the field.
    for (const auto& [body, field] : std::vector<std::pair<json, std::string>>{
             {json{{"input_prefix", 5}}, "input_prefix"},
             {json{{"input_prefix", "a"}, {"input_suffix", json::array()}}, "input_suffix"},
             {json{{"input_prefix", "a"}, {"input_extra", "x"}}, "input_extra"},
             {json{{"input_prefix", "a"}, {"input_extra", {{{"filename", "f"}}}}}, "input_extra[0].text"},
             {json{{"input_prefix", "a"}, {"n_predict", 0}}, "n_predict"},
             {json{{"input_prefix", "a"}, {"temperature", "hot"}}, "temperature"},
             {json{{"prompt", "a"}, {"suffix", 3}}, "suffix"}}) {
        const bool completion = body.contains("suffix");
        const auto bad = post(srv, completion ? "/v1/completions" : "/infill", body);
        EXPECT_EQ(bad.status, 400) << body.dump() << " -> " << bad.body;
        EXPECT_EQ(bad.j["error"]["param"], field) << bad.body;
    }
}

TEST(ServerInfill, NoFimTokensIs400) {
    ServerProcess srv(stories(), {"-c", "256", "--parallel", "1"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const auto a = post(srv, "/infill", json{{"input_prefix", "a"}, {"input_suffix", "b"}});
    EXPECT_EQ(a.status, 400) << a.body;
    EXPECT_NE(a.j["error"]["message"].get<std::string>().find("fill-in-the-middle"), std::string::npos) << a.body;
    const auto b = post(srv, "/v1/completions", json{{"prompt", "a"}, {"suffix", "b"}, {"max_tokens", 4}});
    EXPECT_EQ(b.status, 400) << b.body;
    EXPECT_EQ(b.j["error"]["param"], "suffix") << b.body;
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
