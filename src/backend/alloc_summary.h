// The GLIA_TRACE_ALLOC=1 summary a device backend prints after load: its live memory by
// kind and by purpose (layer numbers folded: "blk.*.attn_q.weight" counts every layer's).
// Backend-neutral (the CUDA backend uses it; tests/debug checks the folding).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace glia {

struct AllocRecord {
    size_t bytes = 0;
    MemoryKind kind = MemoryKind::ACTIVATIONS;
    std::string purpose;
};

// "blk.12.attn_q.weight" -> "blk.*.attn_q.weight"; other names unchanged.
std::string purpose_group(const std::string& purpose);

// The summary table: per kind, then the largest purpose groups (at most `max_groups`), then
// the device's free and total memory when known (total 0: unknown).
std::string alloc_summary(const std::string& device, const std::vector<AllocRecord>& live, size_t free_bytes,
                          size_t total_bytes, size_t max_groups = 24);

}  // namespace glia
