// Renderings of a placement for people and programs: byte sizes, a device's usage, the
// layers as ranges per device, and one JSON object (glia plan, and the runtime's -v).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "placement/placement.h"

namespace glia {

// "9.1 GiB", "312.0 MiB", "12.5 KiB", "100 B".
std::string format_bytes(uint64_t n);
// "(weights 7.9, KV 1.0, scratch 0.2)": the parts in the unit format_bytes gives the
// total; state and KV only where not zero.
std::string format_parts(const DeviceUsage& u);

struct LayerRange {
    int first = 0, last = 0;  // inclusive
    int device = 0;
};
// Consecutive layers on one device, in layer order.
std::vector<LayerRange> layer_ranges(const Placement& p);
// "0-4 on cpu, 5-31 on cuda:0"
std::string describe_layers(const Placement& p);

// The placement as a JSON object (devices with usage, layer ranges, embeddings/output
// device, context, notes).
std::string placement_json(const Placement& p);

}  // namespace glia
