#include "model/weights.h"

#include "core/error.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

namespace glia {

WeightSet::WeightSet(const gguf::File& f) : path_(f.path()) {
    for (const auto& ti : f.tensors()) {
        Tensor t = Tensor::make(ti.type, ti.ne[0], ti.ne[1], ti.ne[2], ti.ne[3]);
        t.role = TensorRole::WEIGHT;
        t.data = const_cast<uint8_t*>(ti.data);
        t.name = ti.name;
        tensors_.push_back(std::move(t));
        by_name_[ti.name] = &tensors_.back();
        total_bytes_ += ti.nbytes;
    }
}

WeightSet::WeightSet(std::string path, std::deque<Tensor> tensors) : path_(std::move(path)), tensors_(std::move(tensors)) {
    for (Tensor& t : tensors_) {
        by_name_[t.name] = &t;
        total_bytes_ += t.row_size() * static_cast<size_t>(t.n_rows());
    }
}

Tensor* WeightSet::find(std::string_view name) {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : it->second;
}

Tensor* WeightSet::get(std::string_view name, std::vector<int64_t> expect) {
    Tensor* t = find(name);
    if (!t) fail(path_, ": required tensor '", name, "' is missing");
    for (size_t d = 0; d < expect.size(); ++d)
        if (t->ne[d] != expect[d]) {
            std::string want = "{";
            for (size_t k = 0; k < expect.size(); ++k) want += (k ? ", " : "") + std::to_string(expect[k]);
            fail(path_, ": tensor '", name, "' has shape ", t->shape_str(), ", expected ", want, "}");
        }
    if (!quant::supported(t->type))
        fail(path_, ": tensor '", name, "' has type ", dtype_name(t->type), ", which glia cannot compute with yet");
    return t;
}

Tensor* WeightSet::layer(int il, std::string_view name, std::vector<int64_t> expect) {
    return get("blk." + std::to_string(il) + "." + std::string(name), std::move(expect));
}

Tensor* WeightSet::layer_opt(int il, std::string_view name) {
    return find("blk." + std::to_string(il) + "." + std::string(name));
}

}  // namespace glia
