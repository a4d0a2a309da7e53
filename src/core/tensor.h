// Tensor: element type, shape (ne, ggml order: ne[0] contiguous), byte strides (nb),
// and a data pointer. Views share storage with their source; nbytes() is the span
// a view actually covers (not ne * element size), which matters for strided views.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace glia {

// STANDIN: the tests' second backend (its own memory, a chosen subset of ops).
enum class Device : uint8_t { CPU = 0, CUDA = 1, STANDIN = 2 };

// What a tensor is to the runtime: a node's output (memory planned per step), a step
// input filled on the host, a weight (prepared once per device at load), or state that
// persists across steps (KV pages, recurrent state; allocated by the backend of its layer).
enum class TensorRole : uint8_t { ACTIVATION = 0, INPUT = 1, WEIGHT = 2, STATE = 3 };

struct Tensor {
    DType type = DType::F32;
    int64_t ne[4] = {1, 1, 1, 1};
    size_t nb[4] = {0, 0, 0, 0};
    void* data = nullptr;
    Device device = Device::CPU;
    TensorRole role = TensorRole::ACTIVATION;
    // A view: the tensor whose memory this one points into, and where (bytes). The root of
    // a chain of views is the tensor with view_src == nullptr.
    Tensor* view_src = nullptr;
    size_t view_offs = 0;
    std::string name;

    // A contiguous tensor of `type` with shape ne0..ne3 (data not allocated).
    static Tensor make(DType type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1);

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
    int n_dims() const;           // highest dimension with ne > 1, plus one (at least 1)
    size_t row_size() const;      // bytes of one ne[0] row
    size_t nbytes() const;        // bytes spanned, correct for views
    bool is_contiguous() const;

    template <typename T = float> T* ptr() const { return static_cast<T*>(data); }
    // Pointer to row (i1, i2, i3).
    uint8_t* row(int64_t i1, int64_t i2 = 0, int64_t i3 = 0) const {
        return static_cast<uint8_t*>(data) + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
    }
    std::string shape_str() const;  // "{256, 5, 1, 1}"
    const Tensor* root() const {
        const Tensor* t = this;
        while (t->view_src) t = t->view_src;
        return t;
    }
    size_t root_offset() const {
        size_t o = 0;
        for (const Tensor* t = this; t->view_src; t = t->view_src) o += t->view_offs;
        return o;
    }
};

}  // namespace glia
