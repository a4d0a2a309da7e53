#include "core/tensor.h"

#include <sstream>

namespace glia {

Tensor Tensor::make(DType type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    Tensor t;
    t.type = type;
    t.ne[0] = ne0; t.ne[1] = ne1; t.ne[2] = ne2; t.ne[3] = ne3;
    const DTypeInfo& info = dtype_info(type);
    t.nb[0] = info.type_size;
    t.nb[1] = row_bytes(type, ne0);
    t.nb[2] = t.nb[1] * ne1;
    t.nb[3] = t.nb[2] * ne2;
    return t;
}

int Tensor::n_dims() const {
    for (int d = 3; d > 0; --d)
        if (ne[d] > 1) return d + 1;
    return 1;
}

size_t Tensor::row_size() const { return row_bytes(type, ne[0]); }

size_t Tensor::nbytes() const {
    if (n_elements() == 0) return 0;
    size_t last = row_size();
    for (int d = 1; d < 4; ++d) last += static_cast<size_t>(ne[d] - 1) * nb[d];
    return last;
}

bool Tensor::is_contiguous() const {
    const DTypeInfo& info = dtype_info(type);
    if (nb[0] != info.type_size) return false;
    if (nb[1] != row_size()) return false;
    return nb[2] == nb[1] * ne[1] && nb[3] == nb[2] * ne[2];
}

std::string Tensor::shape_str() const {
    std::ostringstream os;
    os << "{" << ne[0] << ", " << ne[1] << ", " << ne[2] << ", " << ne[3] << "}";
    return os.str();
}

}  // namespace glia
