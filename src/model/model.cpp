#include "model/model.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/shard.h"
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
        {"llama", make_llama, true},    {"qwen2", make_llama, true},  {"qwen3", make_llama, true},
        {"qwen3moe", make_llama, true}, {"phi3", make_llama, true},   {"gemma", make_gemma, true},
        {"gemma2", make_gemma, true},   {"gemma3", make_gemma, true}, {"lfm2", make_lfm2},
        {"gemma4", make_gemma4, true},  {"qwen35", make_qwen35},      {"kimi-k3", make_kimi_k3},
    };
    return archs;
}

std::string supported_architectures() {
    std::string s;
    for (const auto& a : architectures()) s += (s.empty() ? "" : ", ") + std::string(a.name);
    return s;
}

Model::~Model() = default;

static const ArchEntry* find_arch(const std::string& name) {
    for (const auto& a : architectures())
        if (name == a.name) return &a;
    return nullptr;
}

std::unique_ptr<Model> Model::shard(int rank, int world) const {
    const ArchEntry* entry = find_arch(profile_.arch);
    if (world > 1 && !entry->tensor_parallel) {
        // Say what is missing: the profile knows the layers no split exists for.
        const std::string why = tp_missing(profile_);
        fail("tensor parallelism: the ", profile_.arch, " family cannot be split across ranks yet: ",
             why.empty() ? "its graph builder has no per-rank split" : why, "; run it with -tp 1");
    }
    std::unique_ptr<Model> m(new Model());
    m->file_ = file_;
    m->vocab_ = vocab_;
    m->profile_ = shard_profile(profile_, rank, world);
    m->weights_ = shard_weights(*weights_, profile_, m->profile_);
    m->arch_ = entry->make(*m->weights_, m->profile_);
    return m;
}

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
