// LoRA adapters (model/lora.h): the adapted model against a merged copy (W + s alpha/r B A
// written in F32, computed here in double), scale 0 against no adapter bit for bit, two
// adapters, malformed files refused naming what, and the serving engine's per-request
// adapters (batched with other requests, and kept apart in the prefix cache).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/lora.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/session.h"
#include "synth/lora.h"
#include "temp_path.h"
#include "test_util.h"
#include "tokenizer/vocab.h"

namespace glia {
namespace {

std::string stories() { return test::shared_path("models/stories260K.gguf"); }

// Reads an F32 tensor of a GGUF file as floats.
std::vector<float> floats_of(const gguf::File& f, const std::string& name) {
    const gguf::TensorInfo& t = f.tensor(name);
    EXPECT_EQ(t.type, DType::F32) << name;
    std::vector<float> v(static_cast<size_t>(t.n_elements()));
    std::memcpy(v.data(), t.data, v.size() * 4);
    return v;
}

// The model with every adapter's B A added into its weights, in F32 (the sums in double).
std::string merged_copy(const std::string& model_path, const std::vector<std::pair<std::string, float>>& adapters,
                        const std::string& out) {
    auto base = gguf::File::open(model_path);
    std::vector<std::unique_ptr<gguf::File>> ads;
    for (const auto& [p, s] : adapters) ads.push_back(gguf::File::open(p));
    gguf::Writer w(base->alignment());
    w.copy_kvs(*base);
    for (const auto& t : base->tensors()) {
        std::vector<double> sum;
        for (size_t k = 0; k < ads.size(); ++k) {
            const gguf::File& a = *ads[k];
            if (!a.find_tensor(t.name + ".lora_a")) continue;
            const std::vector<float> A = floats_of(a, t.name + ".lora_a"), B = floats_of(a, t.name + ".lora_b");
            const int64_t in = t.ne[0], out_n = t.ne[1], r = a.tensor(t.name + ".lora_a").ne[1];
            const double alpha = a.get<float>("adapter.lora.alpha");
            const double f = adapters[k].second * (alpha != 0 ? alpha / double(r) : 1.0);
            if (sum.empty()) {
                const std::vector<float> W = floats_of(*base, t.name);
                sum.assign(W.begin(), W.end());
            }
            for (int64_t o = 0; o < out_n; ++o)
                for (int64_t i = 0; i < in; ++i) {
                    double d = 0;
                    for (int64_t j = 0; j < r; ++j) d += double(B[o * r + j]) * A[j * in + i];
                    sum[o * in + i] += f * d;
                }
        }
        const std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
        if (sum.empty()) {
            w.add_tensor(t.name, t.type, ne, t.data, t.nbytes);
        } else {
            std::vector<float> v(sum.begin(), sum.end());
            w.add_tensor(t.name, DType::F32, ne, v.data(), v.size() * 4);
        }
    }
    w.write(out);
    return out;
}

std::vector<float> all_logits(const Model& m, const std::vector<const LoraAdapter*>& lora, const std::vector<int32_t>& toks) {
    SessionOptions so;
    so.n_ctx = 256;
    so.n_threads = 2;
    so.lora = lora;
    Session s(m, so);
    return s.decode(toks, true);
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    float d = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
    return d;
}

class Lora : public ::testing::Test {
protected:
    void SetUp() override {
        model = Model::load(stories());
        tokens = model->vocab().tokenize("Once upon a time, there was a little girl named Lily. She had a red ball.", true,
                                         false);
    }
    std::string adapter(const std::string& name, synth::LoraOptions o) {
        const std::string p = test::temp_path(name);
        synth::write_random_lora(*model, p, o);
        return p;
    }
    std::unique_ptr<Model> model;
    std::vector<int32_t> tokens;
};

TEST_F(Lora, MatchesTheMergedModel) {
    synth::LoraOptions o;
    o.rank = 4;
    o.alpha = 8;  // factor 2
    o.strength = 0.3f;
    const std::string path = adapter("all.gguf", o);
    const float scale = 0.7f;
    auto ad = LoraAdapter::load(path, *model, scale);
    EXPECT_EQ(ad->pairs().size(), size_t(model->profile().n_layer) * 7 + 1);  // every block matrix and the LM head
    EXPECT_FLOAT_EQ(ad->pairs()[0].factor, 2.0f);
    auto merged = Model::load(merged_copy(stories(), {{path, scale}}, test::temp_path("merged.gguf")));
    const std::vector<float> with = all_logits(*model, {ad.get()}, tokens);
    const std::vector<float> ref = all_logits(*merged, {}, tokens);
    const std::vector<float> base = all_logits(*model, {}, tokens);
    const float err = max_abs_diff(with, ref);
    std::printf("adapter vs merged F32 model: max abs logit difference %.3g over %zu positions (adapter moved the "
                "logits by up to %.3g)\n", err, tokens.size(), max_abs_diff(with, base));
    EXPECT_LE(err, 0.05f);                         // the F32 bound of the goldens' README
    EXPECT_GT(max_abs_diff(with, base), 0.5f);     // and the adapter does change the model
}

TEST_F(Lora, ScaleZeroIsTheModelBitForBit) {
    synth::LoraOptions o;
    o.strength = 1.0f;
    auto ad = LoraAdapter::load(adapter("zero.gguf", o), *model, 0.0f);
    const std::vector<float> with = all_logits(*model, {ad.get()}, tokens);
    const std::vector<float> base = all_logits(*model, {}, tokens);
    ASSERT_EQ(with.size(), base.size());
    EXPECT_EQ(std::memcmp(with.data(), base.data(), with.size() * 4), 0);
    // Decoding token by token too (the last-row graphs).
    SessionOptions so;
    so.n_ctx = 128;
    so.n_threads = 2;
    Session plain(*model, so);
    so.lora = {ad.get()};
    Session zero(*model, so);
    std::vector<float> a = plain.decode(tokens), b = zero.decode(tokens);
    for (int i = 0; i < 8; ++i) {
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "step " << i;
        const int32_t next = int32_t(std::max_element(a.begin(), a.end()) - a.begin());
        a = plain.decode({next});
        b = zero.decode({next});
    }
}

TEST_F(Lora, TwoAdaptersMatchTheMergedModel) {
    synth::LoraOptions o1;
    o1.rank = 2;
    o1.alpha = 0;  // no alpha: the scale alone
    o1.targets = {"attn_q", "attn_v", "ffn_down"};
    o1.seed = 7;
    synth::LoraOptions o2;
    o2.rank = 8;
    o2.alpha = 4;
    o2.targets = {"attn_q", "ffn_up", "output"};
    o2.seed = 9;
    const std::string p1 = adapter("one.gguf", o1), p2 = adapter("two.gguf", o2);
    auto a1 = LoraAdapter::load(p1, *model, 0.5f);
    auto a2 = LoraAdapter::load(p2, *model, -1.25f);
    EXPECT_FLOAT_EQ(a1->pairs()[0].factor, 1.0f);
    auto merged = Model::load(merged_copy(stories(), {{p1, 0.5f}, {p2, -1.25f}}, test::temp_path("merged2.gguf")));
    const std::vector<float> with = all_logits(*model, {a1.get(), a2.get()}, tokens);
    const std::vector<float> ref = all_logits(*merged, {}, tokens);
    EXPECT_LE(max_abs_diff(with, ref), 0.05f);
    // Each alone differs from both together.
    EXPECT_GT(max_abs_diff(with, all_logits(*model, {a1.get()}, tokens)), 0.1f);
    EXPECT_GT(max_abs_diff(with, all_logits(*model, {a2.get()}, tokens)), 0.1f);
}

TEST_F(Lora, F16PairsLoadAndApply) {
    synth::LoraOptions o;
    o.type = DType::F16;
    o.targets = {"attn_output"};
    auto ad = LoraAdapter::load(adapter("f16.gguf", o), *model, 1.0f);
    EXPECT_EQ(ad->pairs()[0].a->type, DType::F16);
    EXPECT_GT(max_abs_diff(all_logits(*model, {ad.get()}, tokens), all_logits(*model, {}, tokens)), 0.01f);
}

// A hand-made adapter file: general.type / adapter.type / arch, and the given tensors.
struct RawTensor {
    std::string name;
    std::vector<int64_t> ne;
};
std::string raw_adapter(const std::string& name, const std::vector<RawTensor>& ts, const std::string& arch = "llama",
                        const std::string& type = "adapter", const std::string& kind = "lora") {
    gguf::Writer w;
    w.set_str("general.architecture", arch);
    if (!type.empty()) w.set_str("general.type", type);
    if (!kind.empty()) w.set_str("adapter.type", kind);
    w.set_f32("adapter.lora.alpha", 4.0f);
    for (const RawTensor& t : ts) {
        int64_t n = 1;
        for (int64_t x : t.ne) n *= x;
        std::vector<float> v(static_cast<size_t>(n), 0.01f);
        w.add_tensor(t.name, DType::F32, t.ne, v.data(), v.size() * 4);
    }
    const std::string p = test::temp_path(name);
    w.write(p);
    return p;
}

TEST_F(Lora, MalformedAdaptersAreRefusedNamingWhat) {
    const int64_t E = model->profile().n_embd;  // attn_q: {E, E}
    const std::string q = "blk.0.attn_q.weight";
    auto refuse = [&](const std::string& path, std::vector<std::string> parts) {
        const std::string e = test::error_of([&] { LoraAdapter::load(path, *model); });
        ASSERT_FALSE(e.empty()) << path << " was accepted";
        EXPECT_NE(e.find(path), std::string::npos) << e;
        for (const std::string& p : parts) EXPECT_NE(e.find(p), std::string::npos) << "'" << p << "' not in: " << e;
    };
    // The good shape loads (so that each case below fails for its own reason).
    EXPECT_NO_THROW(LoraAdapter::load(raw_adapter("good.gguf", {{q + ".lora_a", {E, 2}}, {q + ".lora_b", {2, E}}}), *model));
    refuse(raw_adapter("shape_a.gguf", {{q + ".lora_a", {E + 1, 2}}, {q + ".lora_b", {2, E}}}),
           {q + ".lora_a", "shape", "{" + std::to_string(E + 1) + ", 2}"});
    refuse(raw_adapter("shape_b.gguf", {{q + ".lora_a", {E, 2}}, {q + ".lora_b", {2, E - 1}}}), {q + ".lora_b", "shape"});
    refuse(raw_adapter("rank.gguf", {{q + ".lora_a", {E, 2}}, {q + ".lora_b", {3, E}}}), {"ranks", q + ".lora_a"});
    refuse(raw_adapter("half.gguf", {{q + ".lora_a", {E, 2}}}), {q + ".lora_a", q + ".lora_b"});
    refuse(raw_adapter("arch.gguf", {{q + ".lora_a", {E, 2}}, {q + ".lora_b", {2, E}}}, "qwen2"),
           {"architecture 'qwen2'", "'llama'"});
    refuse(raw_adapter("missing.gguf", {{"blk.99.attn_q.weight.lora_a", {E, 2}}, {"blk.99.attn_q.weight.lora_b", {2, E}}}),
           {"blk.99.attn_q.weight", "does not have"});
    refuse(raw_adapter("suffix.gguf", {{q + ".lora_a", {E, 2}}, {q + ".lora_b", {2, E}}, {q + ".lora_c", {2, E}}}),
           {q + ".lora_c"});
    refuse(raw_adapter("kind.gguf", {{q + ".lora_a", {E, 2}}, {q + ".lora_b", {2, E}}}, "llama", "adapter", "control_vector"),
           {"adapter.type", "control_vector"});
    refuse(raw_adapter("untyped.gguf", {{q + ".lora_a", {E, 2}}, {q + ".lora_b", {2, E}}}, "llama", ""),
           {"not a LoRA adapter", "general.type"});
    refuse(raw_adapter("empty.gguf", {}), {"no lora_a / lora_b"});
    refuse(raw_adapter("embd.gguf", {{"token_embd.weight.lora_a", {E, 2}}, {"token_embd.weight.lora_b", {2, 512}}}),
           {"token_embd.weight"});
    // A model file is not an adapter.
    refuse(stories(), {"not a LoRA adapter"});
}

TEST_F(Lora, SpecsParseFileAndScale) {
    EXPECT_EQ(parse_lora_spec("a.gguf", "--lora").path, "a.gguf");
    EXPECT_FLOAT_EQ(parse_lora_spec("a.gguf", "--lora").scale, 1.0f);
    const LoraSpec s = parse_lora_spec("dir:x/a.gguf:0.25", "--lora");
    EXPECT_EQ(s.path, "dir:x/a.gguf");
    EXPECT_FLOAT_EQ(s.scale, 0.25f);
    EXPECT_EQ(parse_lora_spec("c:/x.gguf", "--lora").path, "c:/x.gguf");  // not a number after the colon
    EXPECT_NE(test::error_of([] { parse_lora_spec(":0.5", "--lora"); }).find("--lora"), std::string::npos);
    EXPECT_NE(test::error_of([] { parse_lora_spec("a.gguf:inf", "--lora"); }).find("finite"), std::string::npos);
}

// Greedy tokens of one request on an engine.
std::vector<int32_t> generate(Engine& e, const std::vector<int32_t>& prompt, std::vector<float> scales, int n = 12) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = n;
    r.ignore_eos = true;
    r.sampling.temperature = 0;
    r.lora_scales = std::move(scales);
    auto out = std::make_shared<EventStream>();
    e.submit(r, out);
    std::vector<int32_t> toks;
    for (bool done = false; !done;)
        for (const TokenEvent& ev : out->wait()) {
            if (ev.token >= 0) toks.push_back(ev.token);
            if (ev.done) {
                EXPECT_NE(ev.finish, FinishReason::ERROR) << ev.error;
                done = true;
            }
        }
    return toks;
}

TEST_F(Lora, EngineRequestsWithDifferentAdaptersShareStepsAndKeepTheirTokens) {
    synth::LoraOptions o;
    o.strength = 0.6f;
    auto ad = LoraAdapter::load(adapter("engine.gguf", o), *model, 1.0f);
    EngineOptions eo;
    eo.n_ctx = 1024;
    eo.n_parallel = 4;
    eo.n_threads = 2;
    eo.lora = {ad.get()};
    eo.prefix_cache = false;
    // Alone, one at a time.
    std::vector<std::vector<int32_t>> alone;
    const std::vector<std::vector<float>> scales = {{1.0f}, {0.0f}, {0.5f}, {1.0f}};
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 4; ++i) {
        std::vector<int32_t> p = tokens;
        p.resize(tokens.size() - size_t(i));  // different lengths: prompt chunks and decodes mix
        prompts.push_back(p);
    }
    {
        Engine e(*model, eo);
        for (size_t i = 0; i < prompts.size(); ++i) alone.push_back(generate(e, prompts[i], scales[i]));
    }
    EXPECT_NE(alone[0], alone[1]);  // the adapter changes the answer
    // Together: submitted at once, batched in the same steps.
    Engine e(*model, eo);
    std::vector<std::shared_ptr<EventStream>> outs;
    std::vector<std::pair<GenerationRequest, std::shared_ptr<EventStream>>> batch;
    for (size_t i = 0; i < prompts.size(); ++i) {
        GenerationRequest r;
        r.prompt = prompts[i];
        r.max_tokens = 12;
        r.ignore_eos = true;
        r.sampling.temperature = 0;
        r.lora_scales = scales[i];
        outs.push_back(std::make_shared<EventStream>());
        batch.emplace_back(r, outs.back());
    }
    e.submit_batch(std::move(batch));
    for (size_t i = 0; i < outs.size(); ++i) {
        std::vector<int32_t> toks;
        for (bool done = false; !done;)
            for (const TokenEvent& ev : outs[i]->wait()) {
                if (ev.token >= 0) toks.push_back(ev.token);
                done = done || ev.done;
            }
        EXPECT_EQ(toks, alone[i]) << "request " << i;
    }
    // A wrong number of scales is refused.
    GenerationRequest bad;
    bad.prompt = tokens;
    bad.lora_scales = {1.0f, 1.0f};
    EXPECT_NE(test::error_of([&] { e.submit(bad, std::make_shared<EventStream>()); }).find("lora"), std::string::npos);
}

TEST_F(Lora, PrefixCacheKeepsAdapterScalesApart) {
    synth::LoraOptions o;
    o.strength = 0.6f;
    auto ad = LoraAdapter::load(adapter("cache.gguf", o), *model, 1.0f);
    EngineOptions eo;
    eo.n_ctx = 1024;
    eo.n_parallel = 2;
    eo.n_threads = 2;
    eo.block_size = 8;
    eo.lora = {ad.get()};
    std::vector<int32_t> with_fresh, without_fresh;
    {
        Engine e(*model, eo);
        with_fresh = generate(e, tokens, {1.0f});
    }
    {
        Engine e(*model, eo);
        without_fresh = generate(e, tokens, {0.0f});
    }
    // The same prompt without, then with, then without the adapter on one engine: no page
    // computed under one scale serves the other.
    Engine e(*model, eo);
    EXPECT_EQ(generate(e, tokens, {0.0f}), without_fresh);
    EXPECT_EQ(generate(e, tokens, {1.0f}), with_fresh);
    EXPECT_EQ(generate(e, tokens, {0.0f}), without_fresh);
    EXPECT_EQ(generate(e, tokens, {1.0f}), with_fresh);
    const EngineStats st = e.stats();
    EXPECT_GT(st.prefix_tokens_reused, 0u);  // the cache was used, within each scale
    EXPECT_NE(with_fresh, without_fresh);
}

}  // namespace
}  // namespace glia
