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

// One block's weights; absent tensors stay nullptr (the file says which exist).
struct LayerWeights {
    // attention
    Tensor *attn_norm = nullptr;
    Tensor *wq = nullptr, *wk = nullptr, *wv = nullptr, *wqkv = nullptr;  // separate or fused
    Tensor *bq = nullptr, *bk = nullptr, *bv = nullptr;                    // biases
    Tensor *q_norm = nullptr, *k_norm = nullptr;                           // per-head RMSNorm
    Tensor *wo = nullptr;
    Tensor *post_attn_norm = nullptr;
    // feed-forward: dense (gate/up separate or fused in ffn_up) or mixture of experts
    Tensor *ffn_norm = nullptr, *ffn_gate = nullptr, *ffn_up = nullptr, *ffn_down = nullptr;
    Tensor *ffn_router = nullptr, *ffn_gate_exps = nullptr, *ffn_up_exps = nullptr, *ffn_down_exps = nullptr;
    Tensor *post_ffn_norm = nullptr;
    // short-convolution recurrent block
    Tensor *conv_in = nullptr, *conv_kernel = nullptr, *conv_out = nullptr;
    // attention extras: RoPE frequency factors, an output gate stacked in attn_q (per head:
    // query, then gate), and a constant that scales the block's output (0: none)
    Tensor *rope_freqs = nullptr;
    bool q_gated = false;
    float out_scale = 0.0f;
    // gated delta net block (wqkv: q, k, v channels; conv_kernel: their causal conv)
    Tensor *ssm_gate = nullptr, *ssm_dt_bias = nullptr, *ssm_a = nullptr, *ssm_beta = nullptr, *ssm_alpha = nullptr;
    Tensor *ssm_norm = nullptr, *ssm_out = nullptr;
};

class WeightSet {
public:
    explicit WeightSet(const gguf::File& f);
    // A set of given tensors (views into another set's memory: a tensor-parallel rank's
    // share, model/shard.h); `path` names the file in errors.
    WeightSet(std::string path, std::deque<Tensor> tensors);
    const std::string& path() const { return path_; }
    // The tensor, or nullptr when the file lacks it.
    Tensor* find(std::string_view name);
    // The tensor; error naming it (and the expected shape) when absent or misshapen.
    Tensor* get(std::string_view name, std::vector<int64_t> expect_ne = {});
    // Same with "blk.<il>." prepended.
    Tensor* layer(int il, std::string_view name, std::vector<int64_t> expect_ne = {});
    Tensor* layer_opt(int il, std::string_view name);
    size_t total_bytes() const { return total_bytes_; }
    // Every tensor of the file, in file order.
    const std::deque<Tensor>& all() const { return tensors_; }

private:
    std::string path_;
    std::deque<Tensor> tensors_;
    std::unordered_map<std::string, Tensor*> by_name_;
    size_t total_bytes_ = 0;
};

}  // namespace glia
