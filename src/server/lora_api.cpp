#if GLIA_HAVE_SERVER
#include "server/lora_api.h"

#include <cmath>

#include "model/lora.h"
#include "server/json_depth.h"

namespace glia::server {

std::vector<LoraEntry> parse_lora_field(const json& v, const std::string& field) {
    if (!v.is_array()) wrong_type(field, "an array of {\"id\", \"scale\"} objects", v);
    std::vector<LoraEntry> out;
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string at = field + "[" + std::to_string(i) + "]";
        const json& e = v[i];
        if (!e.is_object()) wrong_type(at, "an object {\"id\", \"scale\"}", e);
        for (const auto& [k, x] : e.items())
            if (k != "id" && k != "scale")
                throw_api(400, "'" + at + "' has an unknown field '" + k + "' (expected id and scale)", at + "." + k,
                          "unknown_field");
        if (!e.contains("id")) throw_api(400, "'" + at + ".id' is required", at + ".id", "missing_field");
        if (!e["id"].is_number_integer()) wrong_type(at + ".id", "an integer", e["id"]);
        LoraEntry le;
        le.id = e["id"].is_number_unsigned() && e["id"].get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX
                                                                                                : e["id"].get<int64_t>();
        if (e.contains("scale")) {
            if (!e["scale"].is_number()) wrong_type(at + ".scale", "a number", e["scale"]);
            const double s = e["scale"].get<double>();
            if (!std::isfinite(s) || std::fabs(s) > 1e6)
                throw_api(400, "'" + at + ".scale' must be a finite number between -1e6 and 1e6", at + ".scale",
                          "invalid_value");
            le.scale = static_cast<float>(s);
        } else {
            le.scale = 1.0f;  // listed without a scale: applied at full strength
        }
        out.push_back(le);
    }
    return out;
}

LoraState::LoraState(std::vector<const LoraAdapter*> adapters) : adapters_(std::move(adapters)) {
    for (const LoraAdapter* a : adapters_) scales_.push_back(a->scale);
}

std::vector<float> LoraState::global() const {
    std::lock_guard<std::mutex> lk(mu_);
    return scales_;
}

std::vector<float> LoraState::resolve(const std::vector<LoraEntry>& entries, const std::string& field) const {
    std::vector<float> out(adapters_.size(), 0.0f);
    std::vector<bool> seen(adapters_.size(), false);
    for (size_t i = 0; i < entries.size(); ++i) {
        const std::string at = field + "[" + std::to_string(i) + "].id";
        const int64_t id = entries[i].id;
        if (id < 0 || id >= static_cast<int64_t>(adapters_.size()))
            throw_api(400, "'" + at + "' is " + std::to_string(id) + ", but " +
                               (adapters_.empty() ? std::string("no LoRA adapter is loaded (glia serve --lora FILE)")
                                                  : "the loaded adapters are 0.." + std::to_string(adapters_.size() - 1) +
                                                        " (GET /lora-adapters)"),
                      at, "invalid_value");
        if (seen[size_t(id)]) throw_api(400, "'" + at + "' names adapter " + std::to_string(id) + " twice", at, "invalid_value");
        seen[size_t(id)] = true;
        out[size_t(id)] = entries[i].scale;
    }
    return out;
}

void LoraState::set_global(std::vector<float> scales) {
    std::lock_guard<std::mutex> lk(mu_);
    scales_ = std::move(scales);
}

json LoraState::list() const {
    const std::vector<float> s = global();
    json out = json::array();
    for (size_t i = 0; i < adapters_.size(); ++i)
        out.push_back({{"id", i}, {"path", adapters_[i]->path()}, {"scale", s[i]}});
    return out;
}

std::vector<float> parse_lora_post(const LoraState& state, const std::string& body) {
    check_json_depth(body);
    const json j = json::parse(body, nullptr, false);
    if (j.is_discarded())
        throw_api(400, "the body is not valid JSON; send an array of {\"id\", \"scale\"} objects", "", "invalid_json");
    if (j.is_object()) {
        if (!j.contains("lora")) throw_api(400, "'lora' (an array of {\"id\", \"scale\"}) is required", "lora", "missing_field");
        return state.resolve(parse_lora_field(j["lora"]), "lora");
    }
    return state.resolve(parse_lora_field(j, "body"), "body");
}

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
