#include "debug/dump.h"

#include <string>

#include "core/f16.h"

namespace glia {

static float value_at(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const uint8_t* p = static_cast<const uint8_t*>(t.data) + i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
    switch (t.type) {
        case DType::F32: return *reinterpret_cast<const float*>(p);
        case DType::F16: return f16_to_f32(*reinterpret_cast<const uint16_t*>(p));
        case DType::I32: return static_cast<float>(*reinterpret_cast<const int32_t*>(p));
        default: return 0.0f;
    }
}

void dump_tensor(FILE* out, const Node& n) {
    const Tensor& t = *n.out;
    std::string srcs;
    for (const Tensor* s : n.src) {
        if (!s) break;
        if (!srcs.empty()) srcs += ", ";
        srcs += s->name + s->shape_str();
    }
    std::fprintf(out, "glia_debug: %24s = (%s) %10s(%s) = %s\n", t.name.c_str(), dtype_name(t.type), op_name(n.op),
                 srcs.c_str(), t.shape_str().c_str());
    const int64_t N = 3;
    auto skip = [&](int64_t i, int64_t ne) { return ne > 2 * N && i == N; };
    for (int64_t i3 = 0; i3 < t.ne[3]; ++i3) {
        if (skip(i3, t.ne[3])) { std::fprintf(out, "    ...\n"); i3 = t.ne[3] - N - 1; continue; }
        std::fprintf(out, "    [\n");
        for (int64_t i2 = 0; i2 < t.ne[2]; ++i2) {
            if (skip(i2, t.ne[2])) { std::fprintf(out, "        ...,\n"); i2 = t.ne[2] - N - 1; continue; }
            std::fprintf(out, "        [\n");
            for (int64_t i1 = 0; i1 < t.ne[1]; ++i1) {
                if (skip(i1, t.ne[1])) { std::fprintf(out, "            ...,\n"); i1 = t.ne[1] - N - 1; continue; }
                std::fprintf(out, "            [");
                for (int64_t i0 = 0; i0 < t.ne[0]; ++i0) {
                    if (skip(i0, t.ne[0])) { std::fprintf(out, "    ..., "); i0 = t.ne[0] - N - 1; continue; }
                    std::fprintf(out, "%12.4f%s", value_at(t, i0, i1, i2, i3), i0 + 1 < t.ne[0] ? ", " : "");
                }
                std::fprintf(out, "  ],\n");
            }
            std::fprintf(out, "        ],\n");
        }
        std::fprintf(out, "    ]\n");
    }
    double sum = 0;
    for (int64_t i3 = 0; i3 < t.ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t.ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t.ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < t.ne[0]; ++i0) sum += value_at(t, i0, i1, i2, i3);
    std::fprintf(out, "    sum = %f\n", sum);
}

}  // namespace glia
