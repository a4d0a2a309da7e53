// The plan of tensor parallelism (-tp N): what each rank holds (its share of the heads,
// KV heads and FFN columns; the LM head split or not) and its bytes, computed with the
// same split the runtime makes (model/shard.h) from the file's tensor list. Each rank is
// a device of its own: a GPU per rank when --gpu-mem lists them, else a CPU rank.
#pragma once
#include <string>
#include <vector>

#include "model/profile.h"
#include "placement/placement.h"

namespace glia {

struct TpPlan {
    int world = 1;
    std::vector<ModelProfile> ranks;  // each rank's profile
    std::vector<DeviceSpec> devices;  // rank r runs on devices[r]
    std::vector<DeviceUsage> usage;   // per rank
    int n_ctx = 0;
};

// Throws PlanError when the model cannot be split into `world` ranks (the reason and the
// remedy, as the runtime would say it) or a rank does not fit its GPU's memory.
TpPlan plan_tensor_parallel(const ModelProfile& p, const gguf::File& f, int world, const PlanRequest& req);

// "heads 32 -> 16 per rank, KV heads 8 -> 4, FFN 14336 -> 7168, LM head split (64128 rows each)"
std::string describe_split(const ModelProfile& full, const ModelProfile& rank);

}  // namespace glia
