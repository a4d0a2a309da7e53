#include "placement/report.h"

#include <cstdio>

#include "core/json.h"

namespace glia {
namespace {

struct Unit { double div; const char* name; };

Unit unit_for(uint64_t n) {
    if (n >= (uint64_t(1) << 30)) return {double(uint64_t(1) << 30), "GiB"};
    if (n >= (uint64_t(1) << 20)) return {double(uint64_t(1) << 20), "MiB"};
    if (n >= (uint64_t(1) << 10)) return {1024.0, "KiB"};
    return {1.0, "B"};
}

std::string fixed1(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", x);
    return buf;
}

const char* kind_name(Device d) {
    switch (d) {
        case Device::CPU: return "cpu";
        case Device::CUDA: return "cuda";
        case Device::STANDIN: return "standin";
    }
    return "?";
}

}  // namespace

std::string format_bytes(uint64_t n) {
    const Unit u = unit_for(n);
    if (u.div == 1.0) return cat(n, " B");
    return fixed1(double(n) / u.div) + " " + u.name;
}

std::string format_parts(const DeviceUsage& u) {
    const Unit un = unit_for(u.total());
    auto part = [&](uint64_t n) { return un.div == 1.0 ? cat(n) : fixed1(double(n) / un.div); };
    std::string s = "(weights " + part(u.weights);
    if (u.repacked) s += ", repacked " + part(u.repacked);
    if (u.kv) s += ", KV " + part(u.kv);
    if (u.state) s += ", state " + part(u.state);
    return s + ", scratch " + part(u.scratch) + ")";
}

std::vector<LayerRange> layer_ranges(const Placement& p) {
    std::vector<LayerRange> out;
    for (int il = 0; il < static_cast<int>(p.layer.size()); ++il) {
        if (!out.empty() && out.back().device == p.layer[il] && out.back().last == il - 1) out.back().last = il;
        else out.push_back({il, il, p.layer[il]});
    }
    return out;
}

std::string describe_layers(const Placement& p) {
    std::string s;
    for (const LayerRange& r : layer_ranges(p)) {
        if (!s.empty()) s += ", ";
        s += r.first == r.last ? cat(r.first) : cat(r.first, "-", r.last);
        s += " on " + p.devices[r.device].name;
    }
    return s.empty() ? "no layers" : s;
}

std::string placement_json(const Placement& p) {
    json::Writer w;
    w.begin_object();
    w.key("devices").begin_array();
    for (size_t d = 0; d < p.devices.size(); ++d) {
        const DeviceUsage u = d < p.usage.size() ? p.usage[d] : DeviceUsage{};
        w.begin_object()
            .key("name").value(p.devices[d].name)
            .key("kind").value(kind_name(p.devices[d].kind))
            .key("ordinal").value(p.devices[d].ordinal)
            .key("memory_bytes").value(uint64_t(p.devices[d].memory_bytes))
            .key("weights").value(uint64_t(u.weights))
            .key("repacked").value(uint64_t(u.repacked))
            .key("kv").value(uint64_t(u.kv))
            .key("state").value(uint64_t(u.state))
            .key("scratch").value(uint64_t(u.scratch))
            .key("total").value(uint64_t(u.total()))
            .end_object();
    }
    w.end_array();
    w.key("layers").begin_array();
    for (const LayerRange& r : layer_ranges(p))
        w.begin_object().key("first").value(r.first).key("last").value(r.last)
            .key("device").value(p.devices[r.device].name).end_object();
    w.end_array();
    w.key("layer_device").array(p.layer);
    w.key("n_gpu_layers").value(p.n_gpu_layers());
    w.key("embeddings").value(p.devices[p.embeddings].name);
    w.key("output").value(p.devices[p.output].name);
    w.key("output_copies_embeddings").value(p.output_copies_embeddings);
    w.key("experts_on_host").value(p.experts_on_host);
    w.key("n_ctx").value(p.n_ctx);
    w.key("cache_type_k").value(cache_type_name(p.cache.k));
    w.key("cache_type_v").value(cache_type_name(p.cache.v));
    w.key("n_ctx_asked").value(p.n_ctx_asked);
    w.key("ctx_shrunk").value(p.ctx_shrunk());
    w.key("n_seq").value(p.n_seq);
    w.key("n_batch").value(p.n_batch);
    w.key("notes").begin_array();
    for (const std::string& n : p.notes) w.value(n);
    w.end_array();
    w.end_object();
    return w.str();
}

}  // namespace glia
