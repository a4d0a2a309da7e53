// glia inspect: a GGUF file's metadata, tensors and the profile derived from them.
//
// Works on any valid GGUF (models and tensor-less vocabulary files) and reads only what
// the file declares: no architecture-specific tables. Malformed files get the reader's
// one-line error (file, offset, field) and a non-zero exit.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "args.h"
#include "command.h"
#include "model/model.h"
#include "model/profile.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/json.h"
#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

namespace {

using glia::cat;
using glia::gguf::File;
using glia::gguf::Value;
using glia::gguf::ValueType;

bool is_unsigned(ValueType t) {
    return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 || t == ValueType::UINT64;
}

// Numeric value of a scalar metadata value (nullopt for strings, arrays).
std::optional<double> as_number(const Value& v) {
    if (v.is_float()) return v.f;
    if (v.is_integer()) return is_unsigned(v.type) ? double(v.u) : double(v.i);
    if (v.type == ValueType::BOOL) return double(v.u);
    return std::nullopt;
}

std::string human_bytes(uint64_t n) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = double(n);
    int u = 0;
    while (x >= 1024 && u < 4) { x /= 1024; ++u; }
    char buf[32];
    if (u == 0) std::snprintf(buf, sizeof buf, "%" PRIu64 " B", n);
    else std::snprintf(buf, sizeof buf, "%.2f %s", x, units[u]);
    return buf;
}

std::string shape_str(const glia::gguf::TensorInfo& t) {
    std::string s = "[";
    for (uint32_t d = 0; d < t.n_dims; ++d) s += cat(d ? ", " : "", t.ne[d]);
    return s + "]";
}

// A hyperparameter: scalar or per-layer array, as the file declares it.
struct Param {
    std::string name;   // short name, e.g. "head_count_kv"
    std::string key;    // full key
    const Value* v = nullptr;
};

struct Facts {
    std::string arch, name;
    std::vector<Param> params;
    int64_t n_layer = -1;
    // head_count_kv
    std::vector<int64_t> kv_heads;
    bool kv_heads_array = false;
    std::vector<int64_t> recurrent_layers;
    std::string recurrent_source;  // which key declared them
    // What glia's graph builder derives from the file (empty for vocabulary-only files).
    std::vector<std::pair<std::string, std::string>> features;
    std::string arch_support;  // "supported" or why not
    int64_t n_expert = 0, n_expert_used = 0, n_expert_shared = 0;
    bool moe = false;
    bool tied_output = false;
    bool has_token_embd = false;
    bool uniform_offload_required = false;
    std::string tokenizer_model;
    int64_t vocab_size = -1;  // tokenizer.ggml.tokens length
    int64_t merges = -1;
    bool chat_template = false;
    // The vocabulary as glia loads it: tokens whose type was overridden (and why), or why it
    // does not load.
    bool vocab_loaded = false;
    std::string vocab_error;
    struct Override {
        int32_t id;
        std::string text, file_type, used_as, reason;
    };
    std::vector<Override> overrides;
    uint64_t total_bytes = 0, decode_bytes = 0;
    std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // type -> (count, bytes)
    std::vector<std::string> warnings;
};

int64_t int_or(const File& f, const std::string& key, int64_t fallback) {
    const Value* v = f.find(key);
    if (!v) return fallback;
    auto n = as_number(*v);
    return n ? static_cast<int64_t>(*n) : fallback;
}

Facts derive(const File& f) {
    Facts x;
    if (const Value* v = f.find("general.architecture"); v && v->type == ValueType::STRING) x.arch = std::string(v->s);
    if (const Value* v = f.find("general.name"); v && v->type == ValueType::STRING) x.name = std::string(v->s);
    const std::string a = x.arch + ".";
    static const char* kParams[][2] = {
        {"context_length", "context_length"},
        {"embedding_length", "embedding_length"},
        {"block_count", "block_count"},
        {"feed_forward_length", "feed_forward_length"},
        {"head_count", "attention.head_count"},
        {"head_count_kv", "attention.head_count_kv"},
        {"key_length", "attention.key_length"},
        {"value_length", "attention.value_length"},
        {"rope_dimension_count", "rope.dimension_count"},
        {"rope_freq_base", "rope.freq_base"},
        {"rms_norm_eps", "attention.layer_norm_rms_epsilon"},
        {"norm_eps", "attention.layer_norm_epsilon"},
        {"sliding_window", "attention.sliding_window"},
        {"expert_count", "expert_count"},
        {"expert_used_count", "expert_used_count"},
        {"expert_shared_count", "expert_shared_count"},
        {"expert_feed_forward_length", "expert_feed_forward_length"},
        {"vocab_size", "vocab_size"},
    };
    if (!x.arch.empty())
        for (const auto& p : kParams)
            if (const Value* v = f.find(a + p[1])) x.params.push_back({p[0], a + p[1], v});

    x.n_layer = int_or(f, a + "block_count", -1);
    x.n_expert = int_or(f, a + "expert_count", 0);
    x.n_expert_used = int_or(f, a + "expert_used_count", 0);
    x.n_expert_shared = int_or(f, a + "expert_shared_count", 0);
    x.moe = x.n_expert > 1;

    // KV heads: one scalar for every layer, or one entry per layer (zeros: recurrent layers).
    if (const Value* v = f.find(a + "attention.head_count_kv")) {
        if (v->is_array()) {
            x.kv_heads_array = true;
            for (const Value& e : v->arr) x.kv_heads.push_back(as_number(e) ? static_cast<int64_t>(*as_number(e)) : -1);
            if (x.n_layer >= 0 && static_cast<int64_t>(v->arr.size()) != x.n_layer)
                x.warnings.push_back(cat(a, "attention.head_count_kv has ", v->arr.size(), " entries but block_count is ",
                                         x.n_layer));
            for (size_t il = 0; il < x.kv_heads.size(); ++il)
                if (x.kv_heads[il] == 0) x.recurrent_layers.push_back(static_cast<int64_t>(il));
            if (!x.recurrent_layers.empty()) x.recurrent_source = a + "attention.head_count_kv";
        } else if (auto n = as_number(*v)) {
            x.kv_heads.assign(1, static_cast<int64_t>(*n));
        }
    }
    // Some files declare recurrent layers with a per-layer flag array instead.
    if (x.recurrent_layers.empty())
        if (const Value* v = f.find(a + "attention.recurrent_layers"); v && v->is_array()) {
            for (size_t il = 0; il < v->arr.size(); ++il)
                if (auto n = as_number(v->arr[il]); n && *n != 0) x.recurrent_layers.push_back(static_cast<int64_t>(il));
            if (!x.recurrent_layers.empty()) x.recurrent_source = a + "attention.recurrent_layers";
        }
    x.uniform_offload_required = !x.recurrent_layers.empty();

    if (const Value* v = f.find("tokenizer.ggml.model"); v && v->type == ValueType::STRING)
        x.tokenizer_model = std::string(v->s);
    if (const Value* v = f.find("tokenizer.ggml.tokens"); v && v->is_array()) x.vocab_size = static_cast<int64_t>(v->arr.size());
    if (const Value* v = f.find("tokenizer.ggml.merges"); v && v->is_array()) x.merges = static_cast<int64_t>(v->arr.size());
    x.chat_template = f.has("tokenizer.chat_template");
    if (!x.tokenizer_model.empty()) {
        try {
            const auto vocab = glia::tok::Vocab::from_gguf(f);
            x.vocab_loaded = true;
            for (const auto& o : vocab->type_overrides())
                x.overrides.push_back({o.id, vocab->raw_piece(o.id), glia::tok::token_type_name(o.file_type),
                                       glia::tok::attr_names(o.attrs), o.reason});
        } catch (const glia::Error& e) {
            x.vocab_error = e.what();
        }
    }

    const auto* embd = f.find_tensor("token_embd.weight");
    x.has_token_embd = embd != nullptr;
    x.tied_output = embd && !f.find_tensor("output.weight");
    // Bytes a decode step (one token) reads: every weight once, the used fraction of the
    // routed-expert tensors, and one row of the token embedding (all of it when it is also
    // the output head).
    double decode = 0;
    for (const auto& t : f.tensors()) {
        x.total_bytes += t.nbytes;
        auto& tt = x.by_type[glia::dtype_name(t.type)];
        tt.first += 1;
        tt.second += t.nbytes;
        if (&t == embd && !x.tied_output) {
            decode += double(glia::row_bytes(t.type, t.ne[0]));
        } else if (x.moe && x.n_expert_used > 0 && t.name.find("_exps") != std::string::npos) {
            decode += double(t.nbytes) * double(std::min(x.n_expert_used, x.n_expert)) / double(x.n_expert);
        } else {
            decode += double(t.nbytes);
        }
    }
    x.decode_bytes = static_cast<uint64_t>(decode + 0.5);
    if (x.n_layer > 0 && f.has("general.architecture")) {
        try {
            const glia::ModelProfile p = glia::derive_profile(f);
            x.features = glia::describe_profile(p, f);
            bool known = false;
            for (const auto& a : glia::architectures()) known = known || p.arch == a.name;
            x.arch_support = known ? "supported" : "architecture '" + p.arch + "' not supported yet (supported: " +
                                                       glia::supported_architectures() + ")";
        } catch (const glia::Error& e) {
            x.arch_support = std::string("cannot derive a profile: ") + e.what();
        }
    }
    return x;
}

// ---- JSON ----------------------------------------------------------------------------

void json_value(glia::json::Writer& w, const Value& v, size_t max_array) {
    switch (v.type) {
        case ValueType::STRING: w.value(glia::json::sanitize_utf8(v.s)); break;
        case ValueType::BOOL: w.value(v.u != 0); break;
        case ValueType::FLOAT32: w.value(v.f, 9); break;
        case ValueType::FLOAT64: w.value(v.f, 17); break;
        case ValueType::ARRAY:
            if (v.arr.size() > max_array) {
                w.begin_object().key("array_of").value(glia::gguf::value_type_name(v.elem_type));
                w.key("length").value(uint64_t(v.arr.size())).end_object();
            } else {
                w.begin_array();
                for (const Value& e : v.arr) json_value(w, e, max_array);
                w.end_array();
            }
            break;
        default:
            if (is_unsigned(v.type)) w.value(v.u); else w.value(v.i);
    }
}

std::string to_json(const File& f, const Facts& x) {
    glia::json::Writer w;
    w.begin_object();
    w.key("file").value(f.path());
    w.key("file_size").value(f.file_size());
    w.key("version").value(uint64_t(f.version()));
    w.key("alignment").value(f.alignment());
    w.key("data_offset").value(f.data_offset());
    w.key("architecture"); x.arch.empty() ? w.null() : w.value(x.arch);
    w.key("name"); x.name.empty() ? w.null() : w.value(glia::json::sanitize_utf8(x.name));
    w.key("kv_count").value(uint64_t(f.kvs().size()));
    w.key("tensor_count").value(uint64_t(f.tensors().size()));

    w.key("hyperparameters").begin_object();
    for (const auto& p : x.params) {
        w.key(p.name);
        json_value(w, *p.v, 4096);
    }
    w.end_object();

    w.key("tokenizer").begin_object();
    w.key("model"); x.tokenizer_model.empty() ? w.null() : w.value(x.tokenizer_model);
    w.key("vocab_size"); x.vocab_size < 0 ? w.null() : w.value(x.vocab_size);
    w.key("merges"); x.merges < 0 ? w.null() : w.value(x.merges);
    w.key("chat_template").value(x.chat_template);
    w.key("load_error"); x.vocab_error.empty() ? w.null() : w.value(glia::json::sanitize_utf8(x.vocab_error));
    w.key("type_overrides").begin_array();
    for (const auto& o : x.overrides) {
        w.begin_object();
        w.key("id").value(int64_t(o.id));
        w.key("text").value(glia::json::sanitize_utf8(o.text));
        w.key("file_type").value(o.file_type);
        w.key("attributes").value(o.used_as);
        w.key("reason").value(glia::json::sanitize_utf8(o.reason));
        w.end_object();
    }
    w.end_array();
    w.end_object();

    w.key("profile").begin_object();
    w.key("n_layer"); x.n_layer < 0 ? w.null() : w.value(x.n_layer);
    w.key("moe").value(x.moe);
    w.key("expert_count").value(x.n_expert);
    w.key("expert_used_count").value(x.n_expert_used);
    w.key("expert_shared_count").value(x.n_expert_shared);
    w.key("head_count_kv_form");
    x.kv_heads.empty() ? w.null() : w.value(x.kv_heads_array ? "array" : "scalar");
    w.key("head_count_kv").begin_array();
    for (int64_t h : x.kv_heads) w.value(h);
    w.end_array();
    w.key("recurrent_layers").begin_array();
    for (int64_t il : x.recurrent_layers) w.value(il);
    w.end_array();
    w.key("recurrent_layers_key"); x.recurrent_source.empty() ? w.null() : w.value(x.recurrent_source);
    w.key("uniform_offload_required").value(x.uniform_offload_required);
    w.key("tied_output").value(x.tied_output);
    w.key("features").begin_object();
    for (const auto& [k, v] : x.features) w.key(k).value(v);
    w.end_object();
    w.key("glia_support"); x.arch_support.empty() ? w.null() : w.value(x.arch_support);
    w.end_object();

    w.key("tensors").begin_array();
    for (const auto& t : f.tensors()) {
        w.begin_object();
        w.key("name").value(glia::json::sanitize_utf8(t.name));
        w.key("type").value(glia::dtype_name(t.type));
        w.key("shape").begin_array();
        for (uint32_t d = 0; d < t.n_dims; ++d) w.value(t.ne[d]);
        w.end_array();
        w.key("bytes").value(t.nbytes);
        w.key("offset").value(t.offset);
        w.end_object();
    }
    w.end_array();
    w.key("totals_by_type").begin_object();
    for (const auto& [type, cb] : x.by_type) {
        w.key(type).begin_object().key("tensors").value(cb.first).key("bytes").value(cb.second).end_object();
    }
    w.end_object();
    w.key("total_tensor_bytes").value(x.total_bytes);
    w.key("decode_bytes_per_token").value(x.decode_bytes);

    w.key("metadata").begin_object();
    for (const auto& kv : f.kvs()) {
        w.key(glia::json::sanitize_utf8(kv.key));
        json_value(w, kv.value, 64);
    }
    w.end_object();
    w.key("warnings").array(x.warnings);
    w.end_object();
    return w.str();
}

// ---- text ----------------------------------------------------------------------------

void print_text(const File& f, const Facts& x, bool all_kvs, bool no_tensors) {
    std::printf("file:          %s\n", f.path().c_str());
    std::printf("format:        GGUF v%u, %s, alignment %" PRIu64 ", %zu keys, %zu tensors, data at offset %" PRIu64 "\n",
                f.version(), human_bytes(f.file_size()).c_str(), f.alignment(), f.kvs().size(), f.tensors().size(),
                f.data_offset());
    std::printf("architecture:  %s\n", x.arch.empty() ? "(none)" : x.arch.c_str());
    std::printf("name:          %s\n", x.name.empty() ? "(none)" : x.name.c_str());
    if (!x.params.empty()) {
        std::printf("hyperparameters:\n");
        for (const auto& p : x.params) {
            std::string val = p.v->to_string(64);
            if (p.v->is_array()) val += " (per-layer array)";
            else if (p.name == "head_count_kv") val += " (scalar: same for every layer)";
            std::printf("  %-28s %s\n", p.name.c_str(), val.c_str());
        }
    }
    std::printf("tokenizer:     %s", x.tokenizer_model.empty() ? "(none)" : x.tokenizer_model.c_str());
    if (x.vocab_size >= 0) std::printf(", %" PRId64 " tokens", x.vocab_size);
    if (x.merges >= 0) std::printf(", %" PRId64 " merges", x.merges);
    std::printf(", chat template: %s\n", x.chat_template ? "yes" : "no");
    if (!x.vocab_error.empty()) std::printf("  does not load: %s\n", x.vocab_error.c_str());
    if (x.vocab_loaded) {
        if (x.overrides.empty()) std::printf("  token type overrides: none\n");
        else std::printf("  token type overrides (%zu; plain text never produces a control token):\n", x.overrides.size());
        for (const auto& o : x.overrides)
            std::printf("    %d %s: %s -> %s (%s)\n", o.id, glia::json::quote(glia::json::sanitize_utf8(o.text)).c_str(), o.file_type.c_str(),
                        o.used_as.c_str(), o.reason.c_str());
    }

    std::printf("profile:\n");
    if (x.moe)
        std::printf("  moe:                      yes (%" PRId64 " experts, %" PRId64 " used per token%s)\n", x.n_expert,
                    x.n_expert_used, x.n_expert_shared ? cat(", ", x.n_expert_shared, " shared").c_str() : "");
    else
        std::printf("  moe:                      no\n");
    if (x.kv_heads.empty()) {
        std::printf("  kv heads per layer:       (not declared)\n");
    } else if (x.kv_heads_array) {
        std::string s;
        for (size_t k = 0; k < x.kv_heads.size(); ++k) s += cat(k ? ", " : "", x.kv_heads[k]);
        std::printf("  kv heads per layer:       array [%s]\n", s.c_str());
    } else {
        std::printf("  kv heads per layer:       scalar %" PRId64 "\n", x.kv_heads[0]);
    }
    if (!x.recurrent_layers.empty()) {
        std::string s;
        for (size_t k = 0; k < x.recurrent_layers.size(); ++k) s += cat(k ? ", " : "", x.recurrent_layers[k]);
        std::printf("  recurrent layers:         [%s] (from %s)\n", s.c_str(), x.recurrent_source.c_str());
    }
    std::printf("  uniform_offload_required: %s\n", x.uniform_offload_required ? "true (recurrent layers: cannot split by layers across devices)" : "false");
    if (x.has_token_embd) std::printf("  tied output:              %s\n", x.tied_output ? "yes (no output.weight; LM head is token_embd)" : "no");
    for (const auto& w : x.warnings) std::printf("  warning: %s\n", w.c_str());
    if (!x.features.empty()) {
        std::printf("derived features:\n");
        for (const auto& [k, v] : x.features) std::printf("  %-25s %s\n", (k + ":").c_str(), v.c_str());
    }
    if (!x.arch_support.empty()) std::printf("glia support: %s\n", x.arch_support.c_str());

    if (all_kvs) {
        std::printf("metadata (%zu keys):\n", f.kvs().size());
        for (const auto& kv : f.kvs())
            std::printf("  %-44s %-7s %s\n", kv.key.c_str(),
                        kv.value.is_array() ? cat("[", glia::gguf::value_type_name(kv.value.elem_type), "]").c_str()
                                            : glia::gguf::value_type_name(kv.value.type),
                        kv.value.to_string(8).c_str());
    }
    if (!f.tensors().empty()) {
        if (!no_tensors) {
            size_t w = 4;
            for (const auto& t : f.tensors()) w = std::max(w, t.name.size());
            std::printf("tensors (%zu):\n", f.tensors().size());
            std::printf("  %-*s  %-7s  %-24s  %12s\n", int(w), "name", "type", "shape", "bytes");
            for (const auto& t : f.tensors())
                std::printf("  %-*s  %-7s  %-24s  %12" PRIu64 "\n", int(w), t.name.c_str(), glia::dtype_name(t.type),
                            shape_str(t).c_str(), t.nbytes);
        }
        std::printf("totals by type:\n");
        for (const auto& [type, cb] : x.by_type)
            std::printf("  %-7s %5" PRIu64 " tensors  %14" PRIu64 " bytes  (%s)\n", type.c_str(), cb.first, cb.second,
                        human_bytes(cb.second).c_str());
        std::printf("  %-7s %5zu tensors  %14" PRIu64 " bytes  (%s)\n", "total", f.tensors().size(), x.total_bytes,
                    human_bytes(x.total_bytes).c_str());
        std::printf("decode step reads: %" PRIu64 " bytes (%s) of weights per token%s\n", x.decode_bytes,
                    human_bytes(x.decode_bytes).c_str(),
                    x.moe ? cat(" (", x.n_expert_used, "/", x.n_expert, " of the expert tensors)").c_str() : "");
    } else {
        std::printf("tensors:       none (a vocabulary-only file)\n");
    }
}

int cmd_inspect(const std::vector<std::string>& argv) {
    glia::cli::Args a("inspect", "FILE [--json]");
    a.opt("-m,--model", "FILE", "the GGUF file (or give it as the first argument)");
    a.flag("--json", "print one JSON object instead of text");
    a.flag("-a,--all", "also list every metadata key (text output)");
    a.flag("--no-tensors", "omit the tensor table (text output)");
    if (!a.parse(argv)) return 0;
    std::string path = a.has("--model") ? a.str("--model") : "";
    if (path.empty()) {
        if (a.positional().empty()) glia::fail("no file given (usage: glia inspect FILE [--json])");
        path = a.positional()[0];
    }
    if (a.positional().size() > (a.has("--model") ? 0u : 1u))
        glia::fail("unexpected argument '", a.positional().back(), "' (usage: glia inspect FILE [--json])");
    auto f = File::open(path);
    const Facts x = derive(*f);
    if (a.has("--json")) {
        const std::string s = to_json(*f, x);
        std::fwrite(s.data(), 1, s.size(), stdout);
        std::fputc('\n', stdout);
    } else {
        print_text(*f, x, a.has("--all"), a.has("--no-tensors"));
    }
    return std::fflush(stdout) == 0 ? 0 : 1;
}

const glia::cli::Command reg{"inspect", "show a GGUF file's metadata, tensors and derived profile", cmd_inspect};

}  // namespace
