// Per-sequence state of recurrent layers (next to the KV cache of attention layers):
// for a short-convolution layer, the last (kernel - 1) inputs of every channel. One slot
// per sequence.
#pragma once
#include <algorithm>
#include <vector>

namespace glia {

class RecurrentState {
public:
    // floats_per_layer[il]: state size of layer il (0 for attention layers).
    RecurrentState(const std::vector<int>& floats_per_layer, int n_seq = 1) : per_layer_(floats_per_layer) {
        state_.resize(n_seq);
        for (auto& s : state_) {
            s.resize(per_layer_.size());
            for (size_t il = 0; il < per_layer_.size(); ++il) s[il].assign(per_layer_[il], 0.0f);
        }
    }
    float* layer(int il, int seq = 0) { return state_.at(seq)[il].data(); }
    size_t size(int il) const { return static_cast<size_t>(per_layer_[il]); }
    void clear(int seq) {
        for (auto& l : state_.at(seq)) std::fill(l.begin(), l.end(), 0.0f);
    }
    void clear() {
        for (size_t s = 0; s < state_.size(); ++s) clear(static_cast<int>(s));
    }

private:
    std::vector<int> per_layer_;
    std::vector<std::vector<std::vector<float>>> state_;  // [seq][layer][values]
};

}  // namespace glia
