// Per-sequence state of recurrent layers (next to the KV cache of attention layers):
// for a short-convolution layer, the last (kernel - 1) inputs of every channel.
#pragma once
#include <algorithm>
#include <vector>

namespace glia {

class RecurrentState {
public:
    // floats_per_layer[il]: state size of layer il (0 for attention layers).
    explicit RecurrentState(const std::vector<int>& floats_per_layer) {
        state_.resize(floats_per_layer.size());
        for (size_t il = 0; il < floats_per_layer.size(); ++il) state_[il].assign(floats_per_layer[il], 0.0f);
    }
    float* layer(int il) { return state_[il].data(); }
    size_t size(int il) const { return state_[il].size(); }
    void clear() {
        for (auto& s : state_) std::fill(s.begin(), s.end(), 0.0f);
    }

private:
    std::vector<std::vector<float>> state_;
};

}  // namespace glia
