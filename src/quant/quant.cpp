// The type table: one entry per supported tensor type.
#include "quant/quant.h"

#include <array>
#include <string>

#include "core/error.h"
#include "quant/kernels.h"

namespace glia::quant {
namespace {

namespace k = kernels;

constexpr uint32_t kMaxId = 40;

#define GLIA_ENTRY(T, name, vdt)                                                          \
    TypeTraits{DType::T, 0, 0, k::dequantize_##name, k::quantize_##name, DType::vdt, \
               k::vec_dot_##name, k::quantize_##name}

struct Table {
    std::array<TypeTraits, kMaxId> entries{};
    std::array<bool, kMaxId> present{};
    std::string names;

    void add(TypeTraits t) {
        const DTypeInfo& info = dtype_info(t.type);
        t.block_size = info.block_size;
        t.type_size = info.type_size;
        const uint32_t id = static_cast<uint32_t>(t.type);
        entries[id] = t;
        present[id] = true;
        if (!names.empty()) names += ", ";
        names += info.name;
    }

    Table() {
        add(GLIA_ENTRY(F32, f32, F32));
        add(GLIA_ENTRY(F16, f16, F16));
        add(GLIA_ENTRY(BF16, bf16, BF16));
        add(GLIA_ENTRY(Q4_0, q4_0, Q8_0));
        add(GLIA_ENTRY(Q4_1, q4_1, Q8_1));
        add(GLIA_ENTRY(Q5_0, q5_0, Q8_0));
        add(GLIA_ENTRY(Q5_1, q5_1, Q8_1));
        TypeTraits q8_0 = GLIA_ENTRY(Q8_0, q8_0, Q8_0);
        q8_0.quantize_act = k::quantize_act_q8_0;
        add(q8_0);
        TypeTraits q8_1 = GLIA_ENTRY(Q8_1, q8_1, Q8_1);
        q8_1.quantize_act = k::quantize_act_q8_1;
        add(q8_1);
        add(GLIA_ENTRY(Q2_K, q2_k, Q8_K));
        add(GLIA_ENTRY(Q3_K, q3_k, Q8_K));
        add(GLIA_ENTRY(Q4_K, q4_k, Q8_K));
        add(GLIA_ENTRY(Q5_K, q5_k, Q8_K));
        add(GLIA_ENTRY(Q6_K, q6_k, Q8_K));
        add(GLIA_ENTRY(Q8_K, q8_k, Q8_K));
        add(GLIA_ENTRY(IQ4_NL, iq4_nl, Q8_0));
        add(GLIA_ENTRY(IQ4_XS, iq4_xs, Q8_K));
    }
};
#undef GLIA_ENTRY

const Table& table() {
    static const Table t;
    return t;
}

}  // namespace

const TypeTraits& traits(DType t) {
    const Table& tab = table();
    const uint32_t id = static_cast<uint32_t>(t);
    if (id >= kMaxId || !tab.present[id]) {
        const DTypeInfo* info = dtype_info(id);
        if (info)
            fail("tensor type ", info->name, " is not supported (supported: ", tab.names, ")");
        fail("tensor type id ", id, " is not supported (supported: ", tab.names, ")");
    }
    return tab.entries[id];
}

bool supported(DType t) {
    const uint32_t id = static_cast<uint32_t>(t);
    return id < kMaxId && table().present[id];
}

const char* supported_names() { return table().names.c_str(); }

namespace {
void check_row(const TypeTraits& tr, int64_t n) {
    if (n < 0 || n % tr.block_size != 0)
        fail("row of ", n, " elements is not a multiple of the ", dtype_name(tr.type),
             " block size ", tr.block_size);
}
}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
    const TypeTraits& tr = traits(t);
    check_row(tr, n);
    tr.dequantize_row(src, dst, n);
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
    const TypeTraits& tr = traits(t);
    check_row(tr, n);
    tr.quantize_row(src, dst, n);
}

void quantize_act_row(DType t, const float* src, void* dst, int64_t n) {
    const TypeTraits& tr = traits(t);
    check_row(tr, n);
    tr.quantize_act(src, dst, n);
}

void quantize_row_iq4_nl_fast(const float* src, void* dst, int64_t n) {
    check_row(traits(DType::IQ4_NL), n);
    kernels::quantize_iq4_nl_fast(src, dst, n);
}

}  // namespace glia::quant
