// Helpers for the GGUF tests: a raw byte builder (to write malformed files on purpose), a
// layout scanner that records where each field of a valid file lives (to corrupt it in
// place), and an expect-error helper.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "test_util.h"

namespace glia::test {

// Appends little-endian GGUF primitives.
struct Raw {
    std::vector<uint8_t> b;
    Raw& u8(uint8_t v) { b.push_back(v); return *this; }
    Raw& u32(uint32_t v) { return put(&v, 4); }
    Raw& u64(uint64_t v) { return put(&v, 8); }
    Raw& i32(int32_t v) { return put(&v, 4); }
    Raw& f32(float v) { return put(&v, 4); }
    Raw& str(const std::string& s) { u64(s.size()); return put(s.data(), s.size()); }
    Raw& put(const void* p, size_t n) {
        const auto* c = static_cast<const uint8_t*>(p);
        b.insert(b.end(), c, c + n);
        return *this;
    }
    Raw& pad(uint64_t align) {
        while (b.size() % align) b.push_back(0);
        return *this;
    }
    Raw& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
        return u32(0x46554747).u32(version).u64(n_tensors).u64(n_kv);
    }
    Raw& kv_u32(const std::string& k, uint32_t v) { return str(k).u32(4).u32(v); }
    Raw& kv_str(const std::string& k, const std::string& v) { return str(k).u32(8).str(v); }
    // A tensor info with up to 4 dims.
    Raw& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
        str(name).u32(static_cast<uint32_t>(ne.size()));
        for (uint64_t d : ne) u64(d);
        return u32(type).u64(offset);
    }
};

// Where each field of a (valid) GGUF file lives.
struct Layout {
    struct Str { uint64_t len_at; uint64_t len; };
    struct Arr { std::string key; uint64_t type_at, len_at, len; uint32_t elem_type; };
    struct KvPos { std::string key; uint64_t key_at, type_at; uint32_t type; };
    struct TPos { std::string name; uint64_t name_at, ndims_at, ne_at, type_at, offset_at; uint32_t n_dims; uint64_t offset; };
    std::vector<KvPos> kvs;
    std::vector<Arr> arrays;
    std::vector<Str> strings;  // every string value (keys excluded)
    std::vector<TPos> tensors;
    uint64_t header_end = 0;
};

inline Layout scan_layout(const std::vector<uint8_t>& b) {
    Layout L;
    uint64_t o = 24;
    auto u32 = [&] { uint32_t v; std::memcpy(&v, &b[o], 4); o += 4; return v; };
    auto u64 = [&] { uint64_t v; std::memcpy(&v, &b[o], 8); o += 8; return v; };
    auto skip_value = [&](auto& self, uint32_t t, const std::string& key) -> void {
        static const int sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
        if (t == 8) {
            const uint64_t at = o;
            const uint64_t n = u64();
            L.strings.push_back({at, n});
            o += n;
        } else if (t == 9) {
            const uint64_t type_at = o;
            const uint32_t et = u32();
            const uint64_t len_at = o;
            const uint64_t n = u64();
            L.arrays.push_back({key, type_at, len_at, n, et});
            for (uint64_t k = 0; k < n; ++k) self(self, et, key);
        } else {
            o += sz[t];
        }
    };
    uint64_t n_t, n_kv;
    std::memcpy(&n_t, &b[8], 8);
    std::memcpy(&n_kv, &b[16], 8);
    for (uint64_t k = 0; k < n_kv; ++k) {
        Layout::KvPos kp;
        kp.key_at = o;
        const uint64_t n = u64();
        kp.key.assign(reinterpret_cast<const char*>(&b[o]), n);
        o += n;
        kp.type_at = o;
        kp.type = u32();
        skip_value(skip_value, kp.type, kp.key);
        L.kvs.push_back(kp);
    }
    for (uint64_t k = 0; k < n_t; ++k) {
        Layout::TPos tp;
        tp.name_at = o;
        const uint64_t n = u64();
        tp.name.assign(reinterpret_cast<const char*>(&b[o]), n);
        o += n;
        tp.ndims_at = o;
        tp.n_dims = u32();
        tp.ne_at = o;
        o += 8 * tp.n_dims;
        tp.type_at = o;
        u32();
        tp.offset_at = o;
        tp.offset = u64();
        L.tensors.push_back(tp);
    }
    L.header_end = o;
    return L;
}

template <typename T>
inline void poke(std::vector<uint8_t>& b, uint64_t at, T v) {
    std::memcpy(&b[at], &v, sizeof v);
}

// Parses `bytes`; expects a glia::Error whose message contains each of `needles`.
// Returns the message ("" when no error was raised).
inline std::string expect_gguf_error(const std::vector<uint8_t>& bytes, const std::vector<std::string>& needles,
                                     const std::string& what) {
    try {
        auto f = gguf::File::from_memory(bytes, "mem.gguf");
        ADD_FAILURE() << what << ": parsed without error";
        return "";
    } catch (const glia::Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("mem.gguf"), std::string::npos) << what << ": message lacks the file name: " << msg;
        for (const auto& n : needles)
            EXPECT_NE(msg.find(n), std::string::npos) << what << ": message lacks '" << n << "': " << msg;
        return msg;
    } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": threw a non-glia exception: " << e.what();
        return "";
    }
}

// Every .gguf under shared/<sub>, sorted.
inline std::vector<std::string> shared_ggufs(const std::string& sub) {
    std::vector<std::string> out;
    const std::string dir = shared_dir() + "/" + sub;
    if (!std::filesystem::is_directory(dir)) return out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".gguf") out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace glia::test
