// LoRA adapters over HTTP, in the reference server's shape:
//  - "lora": [{"id": N, "scale": S}, ...] in a generation request's body gives that
//    request's adapters and scales (the loaded adapters it does not list get scale 0);
//    without the field the global scales apply;
//  - GET /lora-adapters lists the loaded adapters: [{"id", "path", "scale"}] (global scales);
//  - POST /lora-adapters with such an array (or {"lora": [...]}) sets the global scales
//    (unlisted adapters: 0) and answers {"success": true}.
// Requests with different adapters or scales are batched together; each gets the tokens it
// would get alone (runtime/engine.h, GenerationRequest::lora_scales).
#pragma once
#if GLIA_HAVE_SERVER
#include <mutex>
#include <string>
#include <vector>

#include "server/openai.h"

namespace glia {
class LoraAdapter;
}

namespace glia::server {

struct LoraEntry {
    int64_t id = -1;
    float scale = 0.0f;
};

// The entries of a "lora" value; throws ApiError (400) naming the field ("lora",
// "lora[1].scale" ...) when it is not an array of {"id": integer, "scale": number}.
std::vector<LoraEntry> parse_lora_field(const json& v, const std::string& field = "lora");

class LoraState {
public:
    explicit LoraState(std::vector<const LoraAdapter*> adapters);
    size_t size() const { return adapters_.size(); }
    std::vector<float> global() const;
    // A request's scales, one per loaded adapter: the listed ones, 0 for the rest. Throws
    // ApiError (400) naming `field` for an id that is not a loaded adapter or a repeated one.
    std::vector<float> resolve(const std::vector<LoraEntry>& entries, const std::string& field) const;
    void set_global(std::vector<float> scales);
    json list() const;  // GET /lora-adapters

private:
    std::vector<const LoraAdapter*> adapters_;
    mutable std::mutex mu_;
    std::vector<float> scales_;
};

// The body of POST /lora-adapters: the scales it sets (ApiError 400 naming the field).
std::vector<float> parse_lora_post(const LoraState& state, const std::string& body);

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
