// GGUF encoding shared by the whole-file writer (writer.cpp) and the streaming writer
// (stream_writer.cpp): header constants, little-endian scalars and strings, metadata
// values, tensor infos, and the checks every value and tensor declaration must pass.
// Internal to src/gguf: callers use gguf::Writer or gguf::StreamWriter.
//
// Output goes to a Sink: any type with put(const void*, size_t).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "gguf/gguf.h"

namespace glia::gguf::encode {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kVersion = 3;
constexpr int kMaxDepth = 8;              // the reader's nesting limit
constexpr uint64_t kMaxAlignment = uint64_t(1) << 20;

inline uint64_t pad_to(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// Appends to a string (the streaming writer keeps each encoded value as bytes).
struct StringSink {
    std::string& out;
    void put(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
};

// Counts bytes without storing them (header sizes for padding).
struct CountSink {
    uint64_t n = 0;
    void put(const void*, size_t k) { n += k; }
};

template <typename T, typename Sink>
void put(Sink& s, T v) {
    s.put(&v, sizeof v);
}

template <typename Sink>
void put_string(Sink& s, std::string_view str) {
    put<uint64_t>(s, str.size());
    s.put(str.data(), str.size());
}

template <typename Sink>
void put_zeros(Sink& s, uint64_t n) {
    static const uint8_t zeros[256] = {};
    while (n) {
        const size_t k = n < sizeof zeros ? static_cast<size_t>(n) : sizeof zeros;
        s.put(zeros, k);
        n -= k;
    }
}

// The payload of a value (without its type tag; an array carries its element type).
// The value must have passed check_value().
template <typename Sink>
void put_value(Sink& s, const Value& v) {
    switch (v.type) {
        case ValueType::UINT8: put<uint8_t>(s, static_cast<uint8_t>(v.u)); break;
        case ValueType::INT8: put<int8_t>(s, static_cast<int8_t>(v.i)); break;
        case ValueType::UINT16: put<uint16_t>(s, static_cast<uint16_t>(v.u)); break;
        case ValueType::INT16: put<int16_t>(s, static_cast<int16_t>(v.i)); break;
        case ValueType::UINT32: put<uint32_t>(s, static_cast<uint32_t>(v.u)); break;
        case ValueType::INT32: put<int32_t>(s, static_cast<int32_t>(v.i)); break;
        case ValueType::UINT64: put<uint64_t>(s, v.u); break;
        case ValueType::INT64: put<int64_t>(s, v.i); break;
        case ValueType::FLOAT32: put<float>(s, static_cast<float>(v.f)); break;
        case ValueType::FLOAT64: put<double>(s, v.f); break;
        case ValueType::BOOL: put<uint8_t>(s, v.u ? 1 : 0); break;
        case ValueType::STRING: put_string(s, v.s); break;
        case ValueType::ARRAY:
            put<uint32_t>(s, static_cast<uint32_t>(v.elem_type));
            put<uint64_t>(s, v.arr.size());
            for (const Value& e : v.arr) put_value(s, e);
            break;
    }
}

// A key with its type tag and payload.
template <typename Sink>
void put_kv(Sink& s, std::string_view key, const Value& v) {
    put_string(s, key);
    put<uint32_t>(s, static_cast<uint32_t>(v.type));
    put_value(s, v);
}

// The fixed start of a header.
template <typename Sink>
void put_header_start(Sink& s, uint64_t n_tensors, uint64_t n_kv) {
    put<uint32_t>(s, kMagic);
    put<uint32_t>(s, kVersion);
    put<uint64_t>(s, n_tensors);
    put<uint64_t>(s, n_kv);
}

// One tensor info; offset is relative to the data section.
template <typename Sink>
void put_tensor_info(Sink& s, std::string_view name, DType type, const std::vector<int64_t>& ne, uint64_t offset) {
    put_string(s, name);
    put<uint32_t>(s, static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) put<uint64_t>(s, static_cast<uint64_t>(d));
    put<uint32_t>(s, static_cast<uint32_t>(type));
    put<uint64_t>(s, offset);
}

// Checks that a value can be written: known types, array elements of the array's type,
// nesting within the reader's limit, integers that fit their declared width. `who` names
// the writer in messages ("gguf writer").
void check_value(const Value& v, const std::string& key, const char* who, int depth = 0);

// The alignment a "general.alignment" value sets (a power of two up to kMaxAlignment).
uint64_t alignment_from_value(const Value& v, const char* who);
void check_alignment(uint64_t a, const char* who, const char* what);

// Validates a tensor declaration (1..4 positive dimensions, element count within 64 bits,
// rows a whole number of blocks) and returns its data size in bytes.
uint64_t tensor_nbytes(const std::string& where, DType type, const std::vector<int64_t>& ne);

}  // namespace glia::gguf::encode
