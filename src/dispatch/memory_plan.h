// Offsets for a device's activations from their lifetimes: a greedy first-fit over a free
// list ordered by offset. A tensor defined at step `first` is placed before the memory of
// tensors whose last reader is `first` is released, so an op never writes over what it
// reads.
#pragma once
#include <cstddef>
#include <vector>

#include "core/tensor.h"

namespace glia {

struct Lifetime {
    const Tensor* t;
    size_t bytes;   // padded size
    int first;      // index of the node that writes it
    int last;       // index of the last node that reads it (>= first)
};

// offsets[i] for lives[i] (given in order of `first`); returns the bytes needed.
size_t plan_offsets(const std::vector<Lifetime>& lives, std::vector<size_t>& offsets);

}  // namespace glia
