// Weight tensors of a loaded model: views into the mapped GGUF file, by name.
#pragma once
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace glia::gguf { class File; }

namespace glia {

struct LayerWeights {
    Tensor *attn_norm = nullptr, *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr;
    Tensor *ffn_norm = nullptr, *ffn_gate = nullptr, *ffn_up = nullptr, *ffn_down = nullptr;
};

class WeightSet {
public:
    explicit WeightSet(const gguf::File& f);
    // The tensor, or nullptr when the file lacks it.
    Tensor* find(std::string_view name);
    // The tensor; error naming it (and the expected shape) when absent or misshapen.
    Tensor* get(std::string_view name, std::vector<int64_t> expect_ne = {});
    // Same with "blk.<il>." prepended.
    Tensor* layer(int il, std::string_view name, std::vector<int64_t> expect_ne = {});
    Tensor* layer_opt(int il, std::string_view name);
    size_t total_bytes() const { return total_bytes_; }

private:
    std::string path_;
    std::deque<Tensor> tensors_;
    std::unordered_map<std::string, Tensor*> by_name_;
    size_t total_bytes_ = 0;
};

}  // namespace glia
