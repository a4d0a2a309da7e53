#include "model/model.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

namespace glia {

std::unique_ptr<Architecture> make_llama(WeightSet& w, const ModelProfile& p);
std::unique_ptr<Architecture> make_gemma(WeightSet& w, const ModelProfile& p);
std::unique_ptr<Architecture> make_lfm2(WeightSet& w, const ModelProfile& p);
std::unique_ptr<Architecture> make_gemma4(WeightSet& w, const ModelProfile& p);
std::unique_ptr<Architecture> make_qwen35(WeightSet& w, const ModelProfile& p);
std::unique_ptr<Architecture> make_kimi_k3(WeightSet& w, const ModelProfile& p);

const std::vector<ArchEntry>& architectures() {
    static const std::vector<ArchEntry> archs = {
        {"llama", make_llama},    {"qwen2", make_llama}, {"qwen3", make_llama},
        {"qwen3moe", make_llama}, {"phi3", make_llama},  {"gemma", make_gemma},
        {"gemma2", make_gemma},   {"gemma3", make_gemma}, {"lfm2", make_lfm2},
        {"gemma4", make_gemma4},  {"qwen35", make_qwen35}, {"kimi-k3", make_kimi_k3},
    };
    return archs;
}

std::string supported_architectures() {
    std::string s;
    for (const auto& a : architectures()) s += (s.empty() ? "" : ", ") + std::string(a.name);
    return s;
}

Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path) {
    std::unique_ptr<Model> m(new Model());
    m->file_ = gguf::File::open(path);
    m->profile_ = derive_profile(*m->file_);
    const ArchEntry* entry = nullptr;
    for (const auto& a : architectures())
        if (m->profile_.arch == a.name) entry = &a;
    if (!entry)
        fail(path, ": architecture '", m->profile_.arch, "' is not supported (supported: ", supported_architectures(), ")");
    m->weights_ = std::make_unique<WeightSet>(*m->file_);
    m->arch_ = entry->make(*m->weights_, m->profile_);
    m->vocab_ = tok::Vocab::from_gguf(*m->file_);
    return m;
}

}  // namespace glia
