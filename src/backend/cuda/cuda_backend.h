// The CUDA backend (H100/H200, sm_90): our own kernels for the ops it supports, each
// enabled only with its error and speed logged (bench/LOG.md, glia bench-ops --ops
// --device cuda); every other op runs on the CPU through the dispatcher. This header is
// plain C++: the rest of the tree creates the backend without CUDA headers.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"

namespace glia::cuda {

struct DeviceInfo {
    std::string name;
    size_t total_bytes = 0, free_bytes = 0;
    int sm_count = 0, major = 0, minor = 0;
};

// Devices the driver reports (0 when there is no driver or no device; never throws).
int device_count();
DeviceInfo device_info(int ordinal);
// A new backend on device `ordinal`; throws glia::Error naming what is missing.
std::unique_ptr<Backend> create_backend(int ordinal);
// What the backend's supports() answers for this node (types, shapes and strides; no
// device needed): the tests check every model's graph against it on machines without a GPU.
bool node_supported(const Node& n);
// Whether a segment launches node a and the node after it, b, as one kernel (ADD + RMS_NORM,
// the RoPE of q and of k, the norms of q and of k, a MoE selection and its weights): only when the pair computes what the two launches would, which
// includes that neither writes where the other reads. No device needed.
bool launched_together(const Node& a, const Node& b);
// Whether nodes pre[0..npre) (a SWIGLU, an RMS_NORM, or an ADD and the RMS_NORM of its sum)
// launch as the prologue of the one-token packed products[0..count) that read their output
// (prologue.h), their memory as placed. No device needed.
bool prologue_launches_with(const Node* const* pre, int npre, const Node* const* products, int count);
// What the backend's launches_with_next() answers (the pairs above and the prologues, memory
// aside, and the products of one packed group).
bool pairs_with_next(const Node& a, const Node& b);
// Whether F16/BF16 products a (the group's first) and b run as one tensor-core launch: the
// same input, weight type and K, 16-byte weight rows, and no output over the input. No
// device needed.
bool products_grouped(const Node& a, const Node& b);

}  // namespace glia::cuda
