// The packed layout of quantized matmul weights, made once at load by prepare_weight.
//
// Rows go in groups of 32, one warp lane per row. For every 256-value superblock j of a
// group, each row's block is a record of C 16-byte chunks, stored chunk-major and
// lane-minor: chunk c of row (32 g + l) is int4 number ((g * nsb + j) * C + c) * 32 + l.
// So one warp-wide 16-byte load reads 512 contiguous bytes, and a lane walks its own row
// along K in order. Records:
//   Q4_K  C = 9:  the GGUF block as is (d, dmin, scales[12], qs[128]).
//   Q6_K  C = 13: ql[128], qh[64], scales[16]; the f16 d of each record goes to a side
//                 stream after the records, u16 number (g * nsb + j) * 32 + l.
//   Q8_0  C = 17: the eight blocks' qs[32] one after another, then their eight f16 d.
// Rows past N (the last group) are zero. The matmul kernels accumulate every output in
// one fixed order that depends on K alone (k_mmvq.cu), so a batch changes no bits.
// A stack of MoE expert matrices [K, F, E] (F a multiple of 32) packs as one matrix of
// F x E rows: expert e's row groups are F / 32 consecutive groups from e F / 32.
#pragma once
#include "common.cuh"
#include "prologue.h"
#include "placement/placement.h"

namespace glia::cuda {

inline int packed_chunks(DType t) {
    switch (t) {
        case DType::Q4_K: return 9;
        case DType::Q6_K: return 13;
        case DType::Q8_0: return 17;
        default: return 0;
    }
}

// GLIA_CUDA_PACK=0: no packed weights (every product on the float-activation kernel of
// k_matmul.cu), for bisecting the 8-bit activation path. GLIA_MOE_PACK=0: no packed
// expert stacks (their products on k_gemv.cu's float kernels).
bool packing_enabled();
bool expert_packing_enabled();

// A weight this backend keeps packed: a whole tensor of a packed type, K a multiple of 256,
// either 2-D or a stack of MoE experts (by its GGUF name, as the placement tells them)
// whose matrices are whole row groups.
inline bool packable(const Tensor& w) {
    if (packed_chunks(w.type) == 0 || w.view_src || w.ne[0] % 256 != 0 || w.ne[3] != 1 || !w.is_contiguous() ||
        !packing_enabled())
        return false;
    return w.ne[2] == 1 ||
           (w.ne[1] % 32 == 0 && expert_packing_enabled() && tensor_site(w.name).role == SiteRole::EXPERT);
}

struct PackedShape {
    int64_t K = 0, N = 0, groups = 0, nsb = 0;
    int chunks = 0;
    size_t main_bytes() const { return size_t(groups) * size_t(nsb) * size_t(chunks) * 32 * 16; }
    size_t side_bytes(DType t) const { return t == DType::Q6_K ? size_t(groups) * size_t(nsb) * 32 * 2 : 0; }
};

inline PackedShape packed_shape(const Tensor& w) {
    PackedShape s;
    s.K = w.ne[0];
    s.N = w.ne[1] * w.ne[2];
    s.groups = (s.N + 31) / 32;
    s.nsb = s.K / 256;
    s.chunks = packed_chunks(w.type);
    return s;
}

// Device: packs the GGUF rows at `src` (device memory) into `dst` (main + side bytes).
void launch_pack(DType t, const uint8_t* src, size_t row_bytes, const PackedShape& s, void* dst, cudaStream_t st);

// MATMUL and GET_ROWS whose weight operand is packed. Products of one input with weights
// of one type and K (q/k/v, gate/up) may go in one launch: `count` nodes, at most
// matmul_packed_max_group(), each pair matmul_packed_fusable.
// pro: the activation row made by a prologue (prologue.h; matmul_packed_one_token only).
void launch_matmul_packed(const Node* const* nodes, int count, cudaStream_t s, void* scratch,
                          const ActPrologue* pro = nullptr);
// Whether the product runs on the one-token dp4a kernel that quantizes its own activations
// (no device needed); prologue: with room for one of this kind (prologue.h).
bool matmul_packed_one_token(const Node& n0, int prologue = PRO_NONE);
bool matmul_packed_fusable(const Node& a, const Node& b);
int matmul_packed_max_group();
size_t matmul_packed_scratch_bytes(const Node* const* nodes, int count);
void launch_get_rows_packed(const Node& n, cudaStream_t s);

// MOE_EXPERTS / MOE_EXPERTS_GLU with packed stacks among gate, up and down (k_mmvq.cu; the
// others on the float kernels of k_gemv.cu): the packed products on the packed kernels,
// each (token, selected expert) pair a column of its expert's matrix; from
// moe_packed_min_pairs() pairs, the pairs sorted by expert and each expert's matrix read
// once for all of its pairs (tensor cores), with the same bits.
bool moe_packed_ok(const Node& n);
int64_t moe_packed_min_pairs(int64_t n_exp);
size_t moe_packed_scratch_bytes(const Node& n);
void launch_moe_experts_packed(const Node& n, cudaStream_t s, void* scratch);

}  // namespace glia::cuda
