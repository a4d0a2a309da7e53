#include "synth/synth.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/f16.h"
#include "core/parallel.h"
#include "core/progress.h"
#include "gguf/gguf.h"
#include "gguf/stream_writer.h"
#include "quant/quant.h"

namespace glia::synth {
namespace {

Shape shape(const char* name, const char* arch, int embd, int layers, int heads, int kv, int ff, int hd,
                 double rope, bool qk_norm, int ctx, float eps, const char* vocab, int n_vocab) {
    Shape s;
    s.name = name; s.arch = arch; s.n_embd = embd; s.n_layer = layers; s.n_head = heads; s.n_head_kv = kv;
    s.n_ff = ff; s.head_dim = hd; s.rope_base = rope; s.qk_norm = qk_norm; s.n_ctx_train = ctx; s.norm_eps = eps;
    s.vocab_hint = vocab;
    s.n_vocab = n_vocab;
    return s;
}

// splitmix64: a fast, well-mixed 64-bit generator; one stream per (tensor, row).
struct Rng {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // uniform in (0, 1]
    double uniform() { return (double((next() >> 11) + 1)) * (1.0 / 9007199254740992.0); }
};

uint64_t mix_seed(uint64_t seed, uint64_t tensor, uint64_t row) {
    Rng r{seed ^ (tensor * 0x9e3779b97f4a7c15ull)};
    r.next();
    Rng r2{r.next() ^ (row * 0xd1b54a32d192ed03ull)};
    return r2.next();
}

// One row of N(0, sigma) values, rounded through F16 and never exactly zero.
void normal_row(float* out, int64_t n, float sigma, uint64_t seed) {
    Rng r{seed};
    constexpr float kTiny = 6.0e-8f;  // the smallest F16 subnormal
    for (int64_t i = 0; i < n; i += 2) {
        const double u1 = r.uniform(), u2 = r.uniform();
        const double rad = std::sqrt(-2.0 * std::log(u1)) * sigma;
        const double th = 6.283185307179586 * u2;
        float v[2] = {float(rad * std::cos(th)), float(rad * std::sin(th))};
        for (int k = 0; k < 2 && i + k < n; ++k) {
            float x = round_f16(v[k]);
            if (x == 0.0f) x = std::signbit(v[k]) ? -kTiny : kTiny;
            out[i + k] = x;
        }
    }
}

enum class Init { Normal, Ones };

struct TensorSpec {
    std::string name;
    std::vector<int64_t> ne;
    DType src;   // the type in the notional F16 file (F16 weights, F32 norms/router)
    Init init;
};

std::vector<TensorSpec> tensor_specs(const Shape& s, int64_t n_vocab) {
    const int64_t E = s.n_embd, Dq = int64_t(s.n_head) * s.head_dim, Dkv = int64_t(s.n_head_kv) * s.head_dim;
    std::vector<TensorSpec> t;
    auto w = [&](std::string n, std::vector<int64_t> ne) { t.push_back({std::move(n), std::move(ne), DType::F16, Init::Normal}); };
    auto norm = [&](std::string n, int64_t d) { t.push_back({std::move(n), {d}, DType::F32, Init::Ones}); };
    w("token_embd.weight", {E, n_vocab});
    for (int il = 0; il < s.n_layer; ++il) {
        const std::string b = cat("blk.", il, ".");
        norm(b + "attn_norm.weight", E);
        w(b + "attn_q.weight", {E, Dq});
        w(b + "attn_k.weight", {E, Dkv});
        w(b + "attn_v.weight", {E, Dkv});
        w(b + "attn_output.weight", {Dq, E});
        if (s.qk_norm) {
            norm(b + "attn_q_norm.weight", s.head_dim);
            norm(b + "attn_k_norm.weight", s.head_dim);
        }
        norm(b + "ffn_norm.weight", E);
        if (s.n_expert > 0) {
            t.push_back({b + "ffn_gate_inp.weight", {E, s.n_expert}, DType::F32, Init::Normal});
            w(b + "ffn_gate_exps.weight", {E, s.n_ff_exp, s.n_expert});
            w(b + "ffn_up_exps.weight", {E, s.n_ff_exp, s.n_expert});
            w(b + "ffn_down_exps.weight", {s.n_ff_exp, E, s.n_expert});
        } else {
            w(b + "ffn_gate.weight", {E, s.n_ff});
            w(b + "ffn_up.weight", {E, s.n_ff});
            w(b + "ffn_down.weight", {s.n_ff, E});
        }
    }
    norm("output_norm.weight", E);
    w("output.weight", {E, n_vocab});
    return t;
}

void check_shape(const Shape& s) {
    const std::string w = cat("shape '", s.name, "': ");
    if (s.arch != "llama" && s.arch != "qwen3" && s.arch != "qwen3moe")
        fail(w, "architecture '", s.arch, "' is not one synth can write (llama, qwen3, qwen3moe)");
    if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.head_dim <= 0)
        fail(w, "embd, layers, heads, kv heads and head dim must be positive");
    if (s.n_head % s.n_head_kv != 0) fail(w, s.n_head, " heads are not a multiple of ", s.n_head_kv, " kv heads");
    if (s.head_dim % 2 != 0) fail(w, "head dim ", s.head_dim, " must be even (RoPE)");
    if (s.arch == "qwen3moe") {
        if (s.n_expert <= 0 || s.n_expert_used <= 0 || s.n_ff_exp <= 0 || s.n_expert_used > s.n_expert)
            fail(w, "a qwen3moe shape needs experts > 0, 0 < experts used <= experts, expert ffn > 0");
    } else if (s.n_ff <= 0) {
        fail(w, "ffn must be positive");
    } else if (s.n_expert > 0) {
        fail(w, "experts need the qwen3moe architecture");
    }
}

}  // namespace

const std::vector<Shape>& shapes() {
    static const std::vector<Shape> all = [] {
        std::vector<Shape> v;
        const char* bpe = "vocab/ggml-vocab-llama-bpe.gguf";
        const char* qwen = "vocab/ggml-vocab-qwen2.gguf";
        // The released models' vocabulary sizes (rows of their token_embd).
        const int n_llama3 = 128256, n_qwen3 = 151936;
        v.push_back(shape("llama3-1b", "llama", 2048, 16, 32, 8, 8192, 64, 5e5, false, 131072, 1e-5f, bpe, n_llama3));
        v.push_back(shape("llama3-8b", "llama", 4096, 32, 32, 8, 14336, 128, 5e5, false, 131072, 1e-5f, bpe,
                          n_llama3));
        v.push_back(shape("qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 3072, 128, 1e6, true, 40960, 1e-6f, qwen, n_qwen3));
        v.push_back(shape("qwen3-8b", "qwen3", 4096, 36, 32, 8, 12288, 128, 1e6, true, 40960, 1e-6f, qwen, n_qwen3));
        Shape moe =
            shape("qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 6144, 128, 1e6, true, 40960, 1e-6f, qwen, n_qwen3);
        moe.n_expert = 128;
        moe.n_expert_used = 8;
        moe.n_ff_exp = 768;
        v.push_back(moe);
        // The shared tiny-llama zoo shape: small enough for tests.
        v.push_back(
            shape("tiny", "llama", 256, 2, 4, 2, 256, 64, 5e5, false, 8192, 1e-5f, "models/stories260K.gguf", 512));
        return v;
    }();
    return all;
}

const Shape* find_shape(const std::string& name) {
    for (const auto& s : shapes())
        if (s.name == name) return &s;
    return nullptr;
}

namespace {

// The tensors with their final types, in the order they are written.
struct Layout {
    std::vector<TensorSpec> specs;
    std::vector<size_t> order;   // write order (the reference quantizer's)
    std::vector<DType> types;    // per spec: the type after the mix rules
    uint64_t n_params = 0;
};

Layout layout(const Shape& s, quant::FileType ftype, int64_t n_vocab) {
    Layout l;
    l.specs = tensor_specs(s, n_vocab);
    std::vector<std::string> names;
    for (const auto& t : l.specs) names.push_back(t.name);
    l.order = quant::reference_order(names);
    quant::MixPlanner planner(ftype, quant::model_facts(s.arch, s.n_layer, s.n_head, s.n_head_kv, s.n_expert, names));
    l.types.resize(l.specs.size());
    for (size_t i : l.order) {
        const TensorSpec& t = l.specs[i];
        l.types[i] = planner.choose(t.name, t.src, static_cast<int>(t.ne.size()), t.ne[0]);
        uint64_t n = 1;
        for (int64_t d : t.ne) n *= uint64_t(d);
        l.n_params += n;
    }
    return l;
}

// Every key and tensor of the file. vocab (may be null) gives the tokenizer keys.
void declare(gguf::StreamWriter& w, const Shape& s, quant::FileType ftype, const Layout& l, int64_t n_vocab,
             const gguf::File* vocab) {
    const std::string& a = s.arch;
    w.set_str("general.architecture", a);
    w.set_str("general.name", "synth " + s.name);
    w.set_u32(a + ".context_length", static_cast<uint32_t>(s.n_ctx_train));
    w.set_u32(a + ".embedding_length", static_cast<uint32_t>(s.n_embd));
    w.set_u32(a + ".block_count", static_cast<uint32_t>(s.n_layer));
    w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
    w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(s.n_head));
    w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
    w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(s.head_dim));
    w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(s.head_dim));
    w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(s.head_dim));
    w.set_f32(a + ".rope.freq_base", static_cast<float>(s.rope_base));
    w.set_f32(a + ".attention.layer_norm_rms_epsilon", s.norm_eps);
    w.set_u32(a + ".vocab_size", static_cast<uint32_t>(n_vocab));
    if (s.n_expert > 0) {
        w.set_u32(a + ".expert_count", static_cast<uint32_t>(s.n_expert));
        w.set_u32(a + ".expert_used_count", static_cast<uint32_t>(s.n_expert_used));
        w.set_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(s.n_ff_exp));
    }
    if (vocab)
        for (const auto& kv : vocab->kvs())
            if (kv.key.rfind("tokenizer.", 0) == 0) w.set(kv.key, kv.value);
    w.set_u32("general.quantization_version", 2);
    w.set_u32("general.file_type", static_cast<uint32_t>(ftype));
    for (size_t i : l.order) w.add_tensor(l.specs[i].name, l.types[i], l.specs[i].ne);
}

int64_t vocab_size(const gguf::File& vocab, const std::string& path) {
    const gguf::Value* tokens = vocab.find("tokenizer.ggml.tokens");
    if (!tokens || !tokens->is_array() || tokens->arr.empty())
        fail(path, ": no tokenizer.ggml.tokens array; give a vocabulary GGUF "
             "(e.g. ../shared/vocab/ggml-vocab-llama-bpe.gguf)");
    return int64_t(tokens->arr.size());
}

}  // namespace

std::unique_ptr<gguf::File> model_header(const Options& opt) {
    const Shape& s = opt.shape;
    check_shape(s);
    std::unique_ptr<gguf::File> vocab;
    int64_t n_vocab = s.n_vocab;
    if (!opt.vocab_path.empty()) {
        vocab = gguf::File::open(opt.vocab_path);
        n_vocab = vocab_size(*vocab, opt.vocab_path);
    }
    if (n_vocab <= 0) fail("shape '", s.name, "': no vocabulary size; give a vocabulary file");
    const Layout l = layout(s, opt.ftype, n_vocab);
    gguf::StreamWriter w;
    declare(w, s, opt.ftype, l, n_vocab, vocab.get());
    const std::string h = w.header();
    return gguf::File::header_only(std::vector<uint8_t>(h.begin(), h.end()),
                                   cat("synth ", s.name, " ", quant::file_type_name(static_cast<uint32_t>(opt.ftype))));
}

Result write_model(const std::string& out_path, const Options& opt) {
    const auto t0 = std::chrono::steady_clock::now();
    const Shape& s = opt.shape;
    check_shape(s);
    auto vocab = gguf::File::open(opt.vocab_path);
    const int64_t n_vocab = vocab_size(*vocab, opt.vocab_path);

    // Tensors in the order the reference quantizer writes them, with their final types.
    const Layout l = layout(s, opt.ftype, n_vocab);
    const std::vector<TensorSpec>& specs = l.specs;
    const std::vector<size_t>& order = l.order;
    const std::vector<DType>& types = l.types;
    const uint64_t total = l.n_params;
    gguf::StreamWriter w;
    declare(w, s, opt.ftype, l, n_vocab, vocab.get());
    w.open(out_path);

    Progress bar("synth", total, opt.progress);
    Progress* pb = bar.enabled() ? &bar : nullptr;
    std::vector<uint8_t> buf;
    for (size_t i : order) {
        const TensorSpec& t = specs[i];
        const DType to = types[i];
        if (pb) pb->set_status(t.name);
        const int64_t ne0 = t.ne[0];
        int64_t rows = 1;
        for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
        const size_t out_row = row_bytes(to, ne0);
        const int64_t chunk = std::max<int64_t>(1, int64_t((size_t(64) << 20) / std::max<size_t>(out_row, 1)));
        const quant::TypeTraits& tt = quant::traits(to);
        const float sigma = 0.02f;
        for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
            const int64_t n = std::min(chunk, rows - r0);
            buf.resize(out_row * size_t(n));
            parallel_for(n, opt.n_threads, 4, [&](int64_t a0, int64_t a1) {
                std::vector<float> f(static_cast<size_t>(ne0));
                for (int64_t r = a0; r < a1; ++r) {
                    if (t.init == Init::Ones) std::fill(f.begin(), f.end(), 1.0f);
                    else normal_row(f.data(), ne0, sigma, mix_seed(opt.seed, i, uint64_t(r0 + r)));
                    tt.quantize_row(f.data(), buf.data() + size_t(r) * out_row, ne0);
                }
                if (pb) pb->add(uint64_t((a1 - a0) * ne0));
            });
            w.write(buf.data(), buf.size());
        }
    }
    w.finish();
    bar.done();

    Result r;
    r.n_tensors = static_cast<int>(specs.size());
    r.n_params = total;
    r.n_vocab = static_cast<int>(n_vocab);
    r.file_bytes = std::filesystem::file_size(out_path);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

}  // namespace glia::synth
