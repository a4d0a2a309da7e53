#include "placement/cache_types.h"

#include <cctype>

#include "core/error.h"
#include "model/profile.h"

namespace glia {

namespace {

struct Entry { DType type; const char* name; };
constexpr Entry kTypes[] = {{DType::F16, "f16"}, {DType::BF16, "bf16"}, {DType::Q8_0, "q8_0"}, {DType::Q4_0, "q4_0"}};

bool blocked(DType t) { return t == DType::Q8_0 || t == DType::Q4_0; }

// A head of `hd` values in rows of `n_heads` heads fits the type's blocks of 32.
bool head_fits(DType t, int64_t hd, int64_t n_heads) {
    if (!blocked(t)) return true;
    if (hd % 32 == 0) return true;
    return (hd == 8 || hd == 16) && (hd * n_heads) % 32 == 0;
}

void check_one(const char* flag, DType t, int64_t hd, int64_t n_heads, int il) {
    if (head_fits(t, hd, n_heads)) return;
    fail(flag, " ", cache_type_name(t), ": the cache is stored in blocks of 32 values, but layer ", il, " has heads of ",
         hd, " values (", n_heads, " KV heads a row); ", cache_type_name(t),
         " needs head sizes that are multiples of 32 (or 8 or 16 in rows of whole blocks). Use ", flag,
         " f16 or bf16 for this model");
}

}  // namespace

const char* cache_type_name(DType t) {
    for (const Entry& e : kTypes)
        if (e.type == t) return e.name;
    return dtype_name(t);
}

const char* cache_type_names() { return "f16, bf16, q8_0, q4_0"; }

DType cache_type_from_name(std::string_view name, const char* flag) {
    std::string low(name);
    for (char& c : low) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const Entry& e : kTypes)
        if (low == e.name) return e.type;
    fail(flag, " '", std::string(name), "': not a KV cache type; choose one of ", cache_type_names());
}

size_t cache_row_bytes(DType t, int64_t n_values) { return row_bytes(t, n_values); }

void check_cache_types(const ModelProfile& p, const CacheTypes& c) {
    if (c.is_default()) return;
    for (DType t : {c.k, c.v})
        if (t != DType::F16 && t != DType::BF16 && !blocked(t))
            fail("KV cache type ", dtype_name(t), " is not one of ", cache_type_names());
    if (p.mla_kv_lora_rank > 0)
        fail("--cache-type-k ", cache_type_name(c.k), " / --cache-type-v ", cache_type_name(c.v), ": the ", p.arch,
             " model caches one latent vector a token (its V is read from the K pages), which is kept in f16 only in "
             "this version; leave out --cache-type-k and --cache-type-v");
    for (int il = 0; il < p.n_layer; ++il) {
        if (p.layer_kind[il] == LayerKind::RECURRENT || p.n_head_kv[il] <= 0) continue;
        check_one("--cache-type-k", c.k, p.head_dim_k_of(il), p.n_head_kv[il], il);
        check_one("--cache-type-v", c.v, p.head_dim_v_of(il), p.n_head_kv[il], il);
    }
}

std::string cache_types_device_refusal(const CacheTypes& c, int il, const std::string& device) {
    const char* flag = c.k != DType::F16 ? "--cache-type-k" : "--cache-type-v";
    const DType t = c.k != DType::F16 ? c.k : c.v;
    return cat(flag, " ", cache_type_name(t), ": the attention kernels of ", device, " do not take layer ", il,
               "'s heads with a cache of this type; use ", flag, " f16, or fewer GPU layers (-ngl 0: everything "
               "on the CPU)");
}

}  // namespace glia
