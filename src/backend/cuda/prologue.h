// Prologues of the one-token packed products: the node (or pair of nodes) before a group of
// products that only makes its activation row (a SWIGLU, an RMS_NORM, a residual ADD and the
// RMS_NORM of its sum) runs inside the products' launch. Every block of the one-token dp4a
// kernel computes the row itself, with exactly the expressions and the reduction order of the
// separate kernels (k_rows.cu, k_fused.cu), and quantizes its slices of it; block (0, 0) also
// stores the nodes' outputs, so whatever else reads them finds what the separate kernels
// would have written. A decode step loses three launches a layer (llama: the two ADD +
// RMS_NORM pairs and the SWIGLU). GLIA_CUDA_PROLOGUE=1 turns them on (off by default: slower
// as first written, bench/LOG.md session 25); the memory plan is the same either way.
// Plain C++ (the tests ask it without a device).
#pragma once
#include "graph/graph.h"

namespace glia::cuda {

enum ProKind : int { PRO_NONE = 0, PRO_SWIGLU, PRO_NORM, PRO_ADD_NORM };

// What a prologue reads and writes (device pointers), by kind:
//   SWIGLU    out = x / (1 + exp(-x)) * y
//   NORM      out = x * scale * w (w null: 1), scale = 1 / sqrt(mean(x^2) + eps)
//   ADD_NORM  sum = x + y, out = the NORM of sum
struct ActPrologue {
    int kind = PRO_NONE;
    const float* x = nullptr;
    const float* y = nullptr;
    const float* w = nullptr;
    float* out = nullptr;
    float* sum = nullptr;
    float eps = 0.0f;
    int ne0 = 0;
    int norm_threads = 0;  // the separate norm kernel's block (its reduction order)
};

// Whether the nodes pre[0..npre) (a SWIGLU, an RMS_NORM, or an ADD and the RMS_NORM of its
// result) run as the prologue of the packed products that follow them (products[0..count),
// one group over one input, that input pre's last output). One token on the dp4a kernel,
// rows the norm kernels would read as float4 chunks. placed: their memory is assigned and no
// output of the launch may meet what it reads (false: what the memory plan asks,
// launches_with_next). Returns the kind (PRO_NONE: apart).
ProKind prologue_fusable(const Node* const* pre, int npre, const Node* const* products, int count, bool placed);
// The prologue of nodes pre[0..npre) (prologue_fusable said yes).
ActPrologue prologue_of(ProKind kind, const Node* const* pre);
// Whether segments launch prologues of this kind with their products: GLIA_CUDA_PROLOGUE=1
// (every kind) or a list of swiglu, norm, add_norm.
bool prologues_enabled(ProKind kind);
// The most blocks (32-row groups) of a product group that takes a prologue: each block reads
// the whole row to make it (GLIA_CUDA_PROLOGUE_MAX_BLOCKS; default: no limit).
int64_t prologue_max_blocks();

}  // namespace glia::cuda
