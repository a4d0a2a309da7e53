#include "model/lora.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/quant.h"

namespace glia {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A string key's value, or "" when absent; an error when it is there with another type.
std::string string_key(const gguf::File& f, const char* key) {
    const gguf::Value* v = f.find(key);
    if (!v) return "";
    if (v->type != gguf::ValueType::STRING)
        fail(f.path(), ": key '", key, "' is a ", gguf::value_type_name(v->type), ", expected a string");
    return std::string(v->s);
}

std::string ne_str(const int64_t* ne, int n) {
    std::string s = "{";
    for (int d = 0; d < n; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
    return s + "}";
}

}  // namespace

LoraAdapter::~LoraAdapter() = default;

std::unique_ptr<LoraAdapter> LoraAdapter::load(const std::string& path, const Model& model, float scale) {
    if (!std::isfinite(scale)) fail(path, ": LoRA scale ", scale, " is not a finite number");
    std::unique_ptr<LoraAdapter> ad(new LoraAdapter());
    ad->path_ = path;
    ad->scale = scale;
    ad->file_ = gguf::File::open(path);
    const gguf::File& f = *ad->file_;

    const std::string type = string_key(f, "general.type");
    if (type != "adapter")
        fail(path, ": not a LoRA adapter: general.type is ",
             type.empty() ? "missing (a model file? give the model as the first argument)" : "'" + type + "'",
             ", expected 'adapter'");
    const std::string kind = string_key(f, "adapter.type");
    if (kind != "lora")
        fail(path, ": adapter.type is ", kind.empty() ? "missing" : "'" + kind + "'",
             ", expected 'lora' (glia applies LoRA adapters only)");
    const std::string arch = string_key(f, "general.architecture");
    if (arch != model.profile().arch)
        fail(path, ": the adapter is for architecture '", arch, "' but the model '", model.file().path(), "' is '",
             model.profile().arch, "'");
    if (const gguf::Value* a = f.find("adapter.lora.alpha")) {
        if (!a->is_float() && !a->is_integer())
            fail(path, ": key 'adapter.lora.alpha' is a ", gguf::value_type_name(a->type), ", expected a float");
        ad->alpha_ = static_cast<float>(f.get<float>("adapter.lora.alpha"));
        if (!std::isfinite(ad->alpha_)) fail(path, ": adapter.lora.alpha is not a finite number");
    }

    // The file's tensors, paired by the weight they adapt.
    struct Half { const gguf::TensorInfo* a = nullptr; const gguf::TensorInfo* b = nullptr; };
    std::map<std::string, Half> halves;  // ordered: the graph adds pairs in a fixed order
    for (const auto& ti : f.tensors()) {
        if (ends_with(ti.name, ".lora_a")) {
            halves[ti.name.substr(0, ti.name.size() - 7)].a = &ti;
        } else if (ends_with(ti.name, ".lora_b")) {
            halves[ti.name.substr(0, ti.name.size() - 7)].b = &ti;
        } else if (ends_with(ti.name, "_norm.weight")) {
            ad->ignored_.push_back(ti.name);
        } else {
            fail(path, ": tensor '", ti.name, "' is not part of a LoRA pair (names end in .lora_a or .lora_b)");
        }
    }
    if (halves.empty()) fail(path, ": the adapter has no lora_a / lora_b tensor pairs");

    std::unordered_map<std::string, const Tensor*> weights;
    for (const Tensor& w : model.weights().all()) weights[w.name] = &w;
    for (const auto& [name, h] : halves) {
        if (!h.a || !h.b)
            fail(path, ": tensor '", name, h.a ? ".lora_a" : ".lora_b", "' has no '", name, h.a ? ".lora_b" : ".lora_a",
                 "' to pair with");
        auto it = weights.find(name);
        if (it == weights.end())
            fail(path, ": tensor '", name, ".lora_a' adapts '", name, "', which the model '", model.file().path(),
                 "' does not have (an adapter for another model?)");
        const Tensor& w = *it->second;
        if (name == "token_embd.weight")
            fail(path, ": an adapter of '", name, "' (the token embeddings) is not supported by glia");
        if (w.ne[2] != 1 || w.ne[3] != 1)
            fail(path, ": '", name, "' has shape ", w.shape_str(), ": glia adapts 2-D weight matrices only");
        const gguf::TensorInfo &a = *h.a, &b = *h.b;
        for (const gguf::TensorInfo* t : {h.a, h.b}) {
            if (t->ne[2] != 1 || t->ne[3] != 1) fail(path, ": tensor '", t->name, "' has shape ", ne_str(t->ne, 4), ", expected 2-D");
            if (!quant::supported(t->type))
                fail(path, ": tensor '", t->name, "' has type ", dtype_name(t->type), ", which glia cannot compute with");
        }
        const int64_t in = w.ne[0], out = w.ne[1], r = a.ne[1];
        if (a.ne[0] != in)
            fail(path, ": tensor '", a.name, "' has shape ", ne_str(a.ne, 2), " but '", name, "' is ", ne_str(w.ne, 2),
                 ": lora_a must be {", in, ", rank}");
        if (b.ne[1] != out)
            fail(path, ": tensor '", b.name, "' has shape ", ne_str(b.ne, 2), " but '", name, "' is ", ne_str(w.ne, 2),
                 ": lora_b must be {rank, ", out, "}");
        if (b.ne[0] != r)
            fail(path, ": the ranks of '", a.name, "' ", ne_str(a.ne, 2), " and '", b.name, "' ", ne_str(b.ne, 2),
                 " differ: lora_a is {in, rank}, lora_b {rank, out}");
        auto tensor_of = [&](const gguf::TensorInfo& ti) {
            Tensor t = Tensor::make(ti.type, ti.ne[0], ti.ne[1]);
            t.role = TensorRole::WEIGHT;
            t.data = const_cast<uint8_t*>(ti.data);
            t.name = ti.name;
            ad->tensors_.push_back(std::move(t));
            return &ad->tensors_.back();
        };
        LoraPair p;
        p.base = &w;
        p.a = tensor_of(a);
        p.b = tensor_of(b);
        p.factor = ad->alpha_ != 0.0f ? ad->alpha_ / static_cast<float>(r) : 1.0f;
        ad->pairs_.push_back(p);
    }
    return ad;
}

LoraSpec parse_lora_spec(const std::string& s, const std::string& what) {
    LoraSpec spec;
    spec.path = s;
    if (const size_t colon = s.rfind(':'); colon != std::string::npos) {
        const std::string num = s.substr(colon + 1);
        char* end = nullptr;
        const double v = std::strtod(num.c_str(), &end);
        if (!num.empty() && end && *end == '\0') {
            if (!std::isfinite(v)) fail(what, " '", s, "': the scale must be a finite number");
            spec.path = s.substr(0, colon);
            spec.scale = static_cast<float>(v);
        }
    }
    if (spec.path.empty()) fail(what, " '", s, "': no adapter file given");
    return spec;
}

}  // namespace glia
