// glia eval: computes what a golden holds, in the golden's own schema
// (gguf-golden-v1): prompt tokens, top-10 at every prompt position, the full
// last-position logits, and a greedy continuation.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "command.h"
#include "common.h"
#include "lora_options.h"
#include "core/json.h"
#include "gguf/gguf.h"
#include "jinja/value.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/vocab.h"

namespace glia::cli {
namespace {

constexpr int kTopK = 10;

std::vector<int32_t> top_ids(const float* l, int n, int k) {
    std::vector<int32_t> ids(n);
    std::iota(ids.begin(), ids.end(), 0);
    k = std::min(k, n);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    ids.resize(k);
    return ids;
}

std::string hex(const std::string& s) {
    static const char* d = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) { out += d[c >> 4]; out += d[c & 15]; }
    return out;
}

// Recorded MoE routing: ids[layer][position][n_used]. Position n_prompt - 1 + s is
// greedy step s (step 0 is the last prompt position).
struct ForcedRouting {
    int n_used = 0;
    std::vector<std::vector<std::vector<int32_t>>> by_layer;  // empty: layer not forced
    std::vector<std::vector<int32_t>> bufs;  // per layer: the graph holds every layer's pointer
    const int32_t* ids(int il, int pos0, int n) {
        if (il < 0 || il >= static_cast<int>(by_layer.size()) || by_layer[il].empty()) return nullptr;
        const auto& L = by_layer[il];
        if (pos0 + n > static_cast<int>(L.size()))
            fail("--force-routing: the golden records ", L.size(), " positions, asked for ", pos0 + n);
        bufs.resize(by_layer.size());
        auto& buf = bufs[il];
        buf.clear();
        for (int p = pos0; p < pos0 + n; ++p) buf.insert(buf.end(), L[p].begin(), L[p].end());
        return buf.data();
    }
};

ForcedRouting read_forced_routing(const std::string& path, int n_used, int n_prompt, int n_predict) {
    const jinja::Value g = jinja::Value::parse_json(read_file(path));
    const jinja::Value* sel = g.is_object() ? g.object_data().find("moe_selected_experts") : nullptr;
    if (!sel || !sel->is_object()) fail("--force-routing: '", path, "' has no moe_selected_experts");
    const jinja::Value* layers = sel->object_data().find("layers");
    const jinja::Value* prompt = sel->object_data().find("prompt");
    const jinja::Value* greedy = sel->object_data().find("greedy");
    if (!layers || !prompt || !greedy || !layers->is_array() || !prompt->is_array() || !greedy->is_array())
        fail("--force-routing: '", path, "': moe_selected_experts needs layers, prompt and greedy arrays");
    if (static_cast<int>(prompt->items().size()) != n_prompt)
        fail("--force-routing: '", path, "' records ", prompt->items().size(), " prompt positions, the prompt has ", n_prompt);
    if (static_cast<int>(greedy->items().size()) < n_predict)
        fail("--force-routing: '", path, "' records ", greedy->items().size(), " greedy steps, ", n_predict, " asked");
    ForcedRouting f;
    f.n_used = n_used;
    const int n_pos = n_prompt + std::max(0, n_predict - 1);
    for (size_t l = 0; l < layers->items().size(); ++l) {
        const int il = static_cast<int>(layers->items()[l].as_int());
        if (il < 0 || il > 4096) fail("--force-routing: bad layer index ", il);
        if (static_cast<int>(f.by_layer.size()) <= il) f.by_layer.resize(il + 1);
        auto& L = f.by_layer[il];
        L.resize(n_pos);
        for (int p = 0; p < n_pos; ++p) {
            const jinja::Value& at = p < n_prompt ? prompt->items()[p] : greedy->items()[p - n_prompt + 1];
            if (!at.is_array() || l >= at.items().size() || !at.items()[l].is_array() ||
                static_cast<int>(at.items()[l].items().size()) != n_used)
                fail("--force-routing: '", path, "': position ", p, " layer ", il, " does not hold ", n_used, " ids");
            for (size_t k = 0; k < at.items()[l].items().size(); ++k) L[p].push_back(static_cast<int32_t>(at.items()[l].items()[k].as_int()));
        }
    }
    return f;
}

int cmd_eval(const std::vector<std::string>& argv) {
    Args a("eval", "MODEL (--prompt-file FILE | -p TEXT) [options]");
    add_runtime_options(a);
    add_device_options(a);
    a.opt("-f,--prompt-file", "FILE", "prompt text, read byte for byte")
        .opt("-p,--prompt", "TEXT", "prompt text")
        .opt("--prompt-id", "ID", "prompt_id to record (default: the prompt file's stem)")
        .opt("-n,--n-predict", "N", "greedy tokens to generate", "48")
        .opt("--json-out", "FILE", "where to write the JSON (default: stdout)")
        .opt("--logits-out", "FILE", "where to write the last-position logits (float32 LE)")
        .opt("--force-routing", "GOLDEN", "MoE models: use the experts a golden JSON records (moe_selected_experts) "
                                          "at every position instead of our own top-k (weights still ours)");
    add_lora_options(a);
    if (!a.parse(argv)) return 0;
    std::string prompt, prompt_id = a.str("--prompt-id");
    if (a.has("-f")) {
        prompt = read_file(a.str("-f"));
        if (prompt_id.empty()) prompt_id = std::filesystem::path(a.str("-f")).stem().string();
    } else if (a.has("-p")) {
        prompt = a.str("-p");
    } else {
        fail("no prompt: give --prompt-file FILE or -p TEXT");
    }
    const int n_predict = static_cast<int>(a.integer("-n"));
    if (n_predict < 0) fail("--n-predict must be >= 0");

    auto model = load_model(model_path(a));
    const tok::Vocab& vocab = model->vocab();
    const std::vector<int32_t> tokens = vocab.tokenize(prompt, true, true);
    if (tokens.empty()) fail("the prompt produced no tokens");
    const int n_prompt = static_cast<int>(tokens.size());

    SessionOptions so;
    so.n_threads = static_cast<int>(a.integer("-t"));
    so.n_ctx = a.integer("-c") > 0 ? static_cast<int>(a.integer("-c")) : n_prompt + n_predict;
    so.cpu_ops = cpu_ops_option(a);
    use_devices(a, *model, so.n_ctx, 1, so);
    const LoraAdapters loras = load_lora_options(a, *model);
    so.lora = loras.list();
    Session s(*model, so);
    const int V = s.n_vocab();
    ForcedRouting forced;
    if (a.has("--force-routing")) {
        forced = read_forced_routing(a.str("--force-routing"), model->profile().n_expert_used, n_prompt, n_predict);
        s.set_forced_experts([&forced](int il, int pos0, int n) { return forced.ids(il, pos0, n); });
    }

    // The whole prompt in one forward pass, logits at every position.
    std::vector<float> prompt_logits = s.decode(tokens, true);
    std::vector<float> last(prompt_logits.end() - V, prompt_logits.end());

    json::Writer w;
    w.begin_object();
    w.key("format").value("gguf-golden-v1");
    w.key("model_file").value(std::filesystem::path(model->file().path()).filename().string());
    w.key("model_desc").value(model->profile().arch + " " + std::to_string(model->profile().n_layer) + " layers");
    w.key("reference").value("glia");
    w.key("settings").begin_object()
        .key("backend").value(so.devices.empty() ? "CPU" : "CPU+CUDA")
        .key("n_threads").value(static_cast<int64_t>(so.n_threads))
        .key("n_ctx").value(static_cast<int64_t>(s.n_ctx()))
        .key("n_batch").value(static_cast<int64_t>(n_prompt))
        .key("prompt_in_one_batch").value(true)
        .key("kv_cache_type_k").value(cache_type_name(so.placement.cache.k))
        .key("kv_cache_type_v").value(cache_type_name(so.placement.cache.v))
        .key("sampling").value("greedy argmax over raw logits (ties -> lowest token id), no penalties")
        .key("stop_on_eog").value(false);
    w.key("lora_adapters").begin_array();  // as applied: the path given and the scale
    for (const LoraAdapter* ad : so.lora)
        w.begin_object().key("path").value(ad->path()).key("scale").value(static_cast<double>(ad->scale), 9).end_object();
    w.end_array();
    w.end_object();
    w.key("prompt_id").value(prompt_id);
    w.key("prompt").value(prompt);
    w.key("tokenize").begin_object()
        .key("add_special").value(true)
        .key("parse_special").value(true)
        .key("vocab_add_bos").value(vocab.add_bos())
        .key("vocab_add_eos").value(vocab.add_eos())
        .key("bos_id").value(static_cast<int64_t>(vocab.bos()))
        .key("eos_id").value(static_cast<int64_t>(vocab.eos()))
        .end_object();
    w.key("n_vocab").value(static_cast<int64_t>(V));
    w.key("n_prompt_tokens").value(static_cast<int64_t>(n_prompt));
    w.key("prompt_tokens").array(std::vector<int64_t>(tokens.begin(), tokens.end()));
    w.key("prompt_token_pieces").begin_array();
    for (int32_t t : tokens) w.value(vocab.token_to_piece(t, true));
    w.end_array();

    const std::string logits_file = a.has("--logits-out")
                                        ? std::filesystem::path(a.str("--logits-out")).filename().string()
                                        : prompt_id + ".logits.bin";
    double mean = 0;
    for (float x : last) mean += x;
    mean /= V;
    const int32_t am = argmax(last.data(), V);
    w.key("last_logits").begin_object()
        .key("file").value(logits_file)
        .key("dtype").value("float32")
        .key("byte_order").value("little")
        .key("count").value(static_cast<int64_t>(V))
        .key("position").value(static_cast<int64_t>(n_prompt - 1))
        .key("argmax").value(static_cast<int64_t>(am))
        .key("max").value(static_cast<double>(last[am]), 9)
        .key("mean").value(mean, 9)
        .end_object();
    w.key("prompt_top_k").value(static_cast<int64_t>(kTopK));
    std::vector<std::vector<int32_t>> tops(n_prompt);
    for (int i = 0; i < n_prompt; ++i) tops[i] = top_ids(&prompt_logits[size_t(i) * V], V, kTopK);
    w.key("prompt_top_ids").begin_array();
    for (const auto& t : tops) w.array(std::vector<int64_t>(t.begin(), t.end()));
    w.end_array();
    w.key("prompt_top_logits").begin_array();
    for (int i = 0; i < n_prompt; ++i) {
        w.begin_array();
        for (int32_t id : tops[i]) w.value(static_cast<double>(prompt_logits[size_t(i) * V + id]), 7);
        w.end_array();
    }
    w.end_array();

    // Greedy continuation, one token per forward pass.
    std::vector<int32_t> gen;
    std::vector<std::vector<int32_t>> step_ids;
    std::vector<std::vector<float>> step_logits;
    std::vector<double> gaps;
    std::vector<float> cur = last;
    for (int i = 0; i < n_predict; ++i) {
        auto ids = top_ids(cur.data(), V, kTopK);
        const int32_t next = ids[0];
        gen.push_back(next);
        gaps.push_back(ids.size() > 1 ? double(cur[ids[0]]) - double(cur[ids[1]]) : 0.0);
        std::vector<float> vals;
        for (int32_t id : ids) vals.push_back(cur[id]);
        step_ids.push_back(ids);
        step_logits.push_back(vals);
        if (i + 1 < n_predict) cur = s.decode({next}, false);
    }
    w.key("greedy").begin_object();
    w.key("n_predict").value(static_cast<int64_t>(n_predict));
    w.key("tokens").array(std::vector<int64_t>(gen.begin(), gen.end()));
    std::string text;
    w.key("pieces").begin_array();
    for (int32_t t : gen) { std::string p = vocab.token_to_piece(t, true); text += p; w.value(p); }
    w.end_array();
    w.key("pieces_hex").begin_array();
    for (int32_t t : gen) w.value(hex(vocab.token_to_piece(t, true)));
    w.end_array();
    w.key("text").value(text);
    w.key("is_eog").begin_array();
    for (int32_t t : gen) w.value(vocab.is_eog(t));
    w.end_array();
    w.key("top1_minus_top2").begin_array();
    for (double g : gaps) w.value(static_cast<double>(static_cast<float>(g)), 9);
    w.end_array();
    w.key("step_top_ids").begin_array();
    for (const auto& ids : step_ids) w.array(std::vector<int64_t>(ids.begin(), ids.end()));
    w.end_array();
    w.key("step_top_logits").begin_array();
    for (const auto& v : step_logits) {
        w.begin_array();
        for (float x : v) w.value(static_cast<double>(x), 9);
        w.end_array();
    }
    w.end_array();
    w.end_object();
    w.end_object();

    if (a.has("--json-out")) {
        std::ofstream f(a.str("--json-out"), std::ios::binary);
        if (!f) fail("cannot write '", a.str("--json-out"), "'");
        f << w.str() << "\n";
    } else {
        std::fwrite(w.str().data(), 1, w.str().size(), stdout);
        std::fputc('\n', stdout);
    }
    if (a.has("--logits-out")) {
        std::ofstream f(a.str("--logits-out"), std::ios::binary);
        if (!f) fail("cannot write '", a.str("--logits-out"), "'");
        f.write(reinterpret_cast<const char*>(last.data()), static_cast<std::streamsize>(last.size() * sizeof(float)));
    }
    return 0;
}

const Command reg{"eval", "compute a golden-format record (top-10 logits, greedy tokens) for a prompt", cmd_eval};

}  // namespace
}  // namespace glia::cli
