// GGUF v3 writer: header, KVs in insertion order, tensor infos, aligned tensor data.
// Whatever it writes, the reader reads back identically (tests/gguf/test_writer.cpp).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "gguf/gguf.h"

namespace glia::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kVersion = 3;
constexpr int kMaxDepth = 8;              // the reader's nesting limit
constexpr uint64_t kMaxAlignment = uint64_t(1) << 20;

bool valid_type(ValueType t) { return static_cast<uint32_t>(t) <= static_cast<uint32_t>(ValueType::FLOAT64); }

bool is_signed(ValueType t) {
    return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 || t == ValueType::INT64;
}

void check_alignment(uint64_t a, const char* what) {
    if (a == 0 || (a & (a - 1)) != 0 || a > kMaxAlignment)
        fail("gguf writer: ", what, ": alignment ", a, " must be a power of two between 1 and ", kMaxAlignment);
}

struct VectorSink {
    std::vector<uint8_t>& out;
    void put(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        out.insert(out.end(), b, b + n);
    }
};

struct FileSink {
    FILE* f;
    const std::string& path;
    void put(const void* p, size_t n) {
        if (n && std::fwrite(p, 1, n, f) != n) fail(path, ": write failed: ", std::strerror(errno));
    }
};

template <typename Sink, typename T>
void put(Sink& s, T v) {
    s.put(&v, sizeof v);
}

template <typename Sink>
void put_string(Sink& s, std::string_view str) {
    put<Sink, uint64_t>(s, str.size());
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

template <typename Sink>
void put_value(Sink& s, const Value& v) {
    switch (v.type) {
        case ValueType::UINT8: put<Sink, uint8_t>(s, static_cast<uint8_t>(v.u)); break;
        case ValueType::INT8: put<Sink, int8_t>(s, static_cast<int8_t>(v.i)); break;
        case ValueType::UINT16: put<Sink, uint16_t>(s, static_cast<uint16_t>(v.u)); break;
        case ValueType::INT16: put<Sink, int16_t>(s, static_cast<int16_t>(v.i)); break;
        case ValueType::UINT32: put<Sink, uint32_t>(s, static_cast<uint32_t>(v.u)); break;
        case ValueType::INT32: put<Sink, int32_t>(s, static_cast<int32_t>(v.i)); break;
        case ValueType::UINT64: put<Sink, uint64_t>(s, v.u); break;
        case ValueType::INT64: put<Sink, int64_t>(s, v.i); break;
        case ValueType::FLOAT32: put<Sink, float>(s, static_cast<float>(v.f)); break;
        case ValueType::FLOAT64: put<Sink, double>(s, v.f); break;
        case ValueType::BOOL: put<Sink, uint8_t>(s, v.u ? 1 : 0); break;
        case ValueType::STRING: put_string(s, v.s); break;
        case ValueType::ARRAY:
            put<Sink, uint32_t>(s, static_cast<uint32_t>(v.elem_type));
            put<Sink, uint64_t>(s, v.arr.size());
            for (const Value& e : v.arr) put_value(s, e);
            break;
    }
}

// Checks that an integer value fits its declared width (a Value built by hand may not).
void check_range(const Value& v, const std::string& where) {
    auto bad = [&] { fail("gguf writer: ", where, ": value does not fit type ", value_type_name(v.type)); };
    switch (v.type) {
        case ValueType::UINT8: if (v.u > 0xff) bad(); break;
        case ValueType::UINT16: if (v.u > 0xffff) bad(); break;
        case ValueType::UINT32: if (v.u > 0xffffffffu) bad(); break;
        case ValueType::BOOL: if (v.u > 1) bad(); break;
        case ValueType::INT8: if (v.i < -128 || v.i > 127) bad(); break;
        case ValueType::INT16: if (v.i < -32768 || v.i > 32767) bad(); break;
        case ValueType::INT32:
            if (v.i < std::numeric_limits<int32_t>::min() || v.i > std::numeric_limits<int32_t>::max()) bad();
            break;
        default: break;
    }
}

}  // namespace

Writer::Writer(uint64_t alignment) : alignment_(alignment) {
    check_alignment(alignment, "constructor");
    if (alignment != 32) set_u32("general.alignment", static_cast<uint32_t>(alignment));
}

Value Writer::own(const Value& v, const std::string& key, int depth) {
    if (!valid_type(v.type)) fail("gguf writer: key '", key, "': invalid value type ", static_cast<uint32_t>(v.type));
    Value out;
    out.type = v.type;
    switch (v.type) {
        case ValueType::STRING:
            if (!strings_) strings_ = std::make_unique<std::deque<std::string>>();
            strings_->emplace_back(v.s);
            out.s = strings_->back();
            break;
        case ValueType::ARRAY:
            if (depth >= kMaxDepth) fail("gguf writer: key '", key, "': arrays nested more than ", kMaxDepth, " deep");
            if (!valid_type(v.elem_type))
                fail("gguf writer: key '", key, "': invalid array element type ", static_cast<uint32_t>(v.elem_type));
            out.elem_type = v.elem_type;
            out.arr.reserve(v.arr.size());
            for (size_t k = 0; k < v.arr.size(); ++k) {
                if (v.arr[k].type != v.elem_type)
                    fail("gguf writer: key '", key, "'[", k, "]: element of type ", value_type_name(v.arr[k].type),
                         " in an array of ", value_type_name(v.elem_type));
                out.arr.push_back(own(v.arr[k], key, depth + 1));
            }
            break;
        default:
            check_range(v, cat("key '", key, "'"));
            out.u = v.u;
            out.i = v.i;
            out.f = v.f;
            if (v.type == ValueType::FLOAT32) out.f = static_cast<float>(v.f);
            break;
    }
    return out;
}

void Writer::set(const std::string& key, const Value& v) {
    if (key.empty()) fail("gguf writer: empty key name");
    Value owned = own(v, key, 0);
    if (key == "general.alignment") {
        uint64_t a = 0;
        if (owned.is_integer()) a = is_signed(owned.type) ? (owned.i > 0 ? uint64_t(owned.i) : 0) : owned.u;
        else fail("gguf writer: key 'general.alignment' must be an integer, got ", value_type_name(owned.type));
        check_alignment(a, "key 'general.alignment'");
        alignment_ = a;
    }
    if (auto it = kv_pos_.find(key); it != kv_pos_.end()) {
        kvs_[it->second].second = std::move(owned);
        return;
    }
    kv_pos_.emplace(key, kvs_.size());
    kvs_.emplace_back(key, std::move(owned));
}

void Writer::set_u32(const std::string& key, uint32_t v) {
    Value x; x.type = ValueType::UINT32; x.u = v; set(key, x);
}
void Writer::set_i32(const std::string& key, int32_t v) {
    Value x; x.type = ValueType::INT32; x.i = v; set(key, x);
}
void Writer::set_u64(const std::string& key, uint64_t v) {
    Value x; x.type = ValueType::UINT64; x.u = v; set(key, x);
}
void Writer::set_f32(const std::string& key, float v) {
    Value x; x.type = ValueType::FLOAT32; x.f = v; set(key, x);
}
void Writer::set_bool(const std::string& key, bool v) {
    Value x; x.type = ValueType::BOOL; x.u = v ? 1 : 0; set(key, x);
}
void Writer::set_str(const std::string& key, const std::string& v) {
    Value x; x.type = ValueType::STRING; x.s = v; set(key, x);
}

void Writer::copy_kvs(const File& src, std::string_view prefix) {
    for (const KV& kv : src.kvs())
        if (std::string_view(kv.key).substr(0, prefix.size()) == prefix) set(kv.key, kv.value);
}

void Writer::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne,
                        const void* data, uint64_t nbytes) {
    const std::string where = cat("gguf writer: tensor '", name, "'");
    if (name.empty()) fail("gguf writer: empty tensor name");
    if (tensor_pos_.count(name)) fail(where, ": duplicate tensor name");
    const DTypeInfo* info = dtype_info(static_cast<uint32_t>(type));
    if (!info) fail(where, ": unknown tensor type id ", static_cast<uint32_t>(type));
    if (ne.empty() || ne.size() > 4) fail(where, ": ", ne.size(), " dimensions (must be 1..4)");
    uint64_t n_elem = 1;
    for (size_t d = 0; d < ne.size(); ++d) {
        if (ne[d] <= 0) fail(where, ": ne[", d, "] = ", ne[d], " (must be positive)");
        if (n_elem > uint64_t(std::numeric_limits<int64_t>::max()) / uint64_t(ne[d]))
            fail(where, ": element count overflows 64 bits");
        n_elem *= uint64_t(ne[d]);
    }
    if (ne[0] % info->block_size != 0)
        fail(where, ": row length ", ne[0], " is not a multiple of the ", info->name, " block size ", info->block_size);
    const uint64_t n_blocks = n_elem / uint64_t(info->block_size);
    if (n_blocks > std::numeric_limits<uint64_t>::max() / info->type_size) fail(where, ": byte size overflows 64 bits");
    const uint64_t expect = n_blocks * info->type_size;
    if (nbytes != expect) fail(where, ": ", nbytes, " bytes of data given, the shape and type need ", expect);
    if (!data) fail(where, ": no data");
    const auto* b = static_cast<const uint8_t*>(data);
    tensor_pos_.emplace(name, tensors_.size());
    tensors_.push_back(PendingTensor{name, type, ne, std::vector<uint8_t>(b, b + nbytes)});
}

template <typename Sink>
void Writer::emit(Sink& s) const {
    put<Sink, uint32_t>(s, kMagic);
    put<Sink, uint32_t>(s, kVersion);
    put<Sink, uint64_t>(s, tensors_.size());
    put<Sink, uint64_t>(s, kvs_.size());
    for (const auto& [key, v] : kvs_) {
        put_string(s, key);
        put<Sink, uint32_t>(s, static_cast<uint32_t>(v.type));
        put_value(s, v);
    }
    // Tensor data offsets (relative to the data section), each aligned.
    std::vector<uint64_t> offsets(tensors_.size());
    uint64_t off = 0;
    for (size_t k = 0; k < tensors_.size(); ++k) {
        offsets[k] = off;
        const uint64_t n = tensors_[k].data.size();
        off += (n + alignment_ - 1) / alignment_ * alignment_;
    }
    for (size_t k = 0; k < tensors_.size(); ++k) {
        const PendingTensor& t = tensors_[k];
        put_string(s, t.name);
        put<Sink, uint32_t>(s, static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) put<Sink, uint64_t>(s, static_cast<uint64_t>(d));
        put<Sink, uint32_t>(s, static_cast<uint32_t>(t.type));
        put<Sink, uint64_t>(s, offsets[k]);
    }
}

namespace {
// Counts bytes without storing them: used to compute the header size for padding.
struct CountSink {
    uint64_t n = 0;
    void put(const void*, size_t k) { n += k; }
};
}  // namespace

// The data section starts at the next aligned offset; a file without tensors (a vocabulary)
// ends right after its header, as the reference tooling writes it.
uint64_t Writer::data_section_start(uint64_t header_bytes) const {
    if (tensors_.empty()) return header_bytes;
    return (header_bytes + alignment_ - 1) / alignment_ * alignment_;
}

std::vector<uint8_t> Writer::to_bytes() const {
    CountSink count;
    emit(count);
    const uint64_t data_start = data_section_start(count.n);
    uint64_t total = data_start;
    for (const auto& t : tensors_) total += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
    std::vector<uint8_t> out;
    out.reserve(total);
    VectorSink vs{out};
    emit(vs);
    put_zeros(vs, data_start - count.n);
    for (const auto& t : tensors_) {
        vs.put(t.data.data(), t.data.size());
        put_zeros(vs, (t.data.size() + alignment_ - 1) / alignment_ * alignment_ - t.data.size());
    }
    return out;
}

void Writer::write(const std::string& path) const {
    const std::string tmp = cat(path, ".tmp.", ::getpid());
    std::vector<char> buf(1 << 20);  // outlives every use of f (fclose flushes it)
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) fail(path, ": cannot create '", tmp, "': ", std::strerror(errno));
    try {
        std::setvbuf(f, buf.data(), _IOFBF, buf.size());
        CountSink count;
        emit(count);
        FileSink fs{f, path};
        emit(fs);
        const uint64_t data_start = data_section_start(count.n);
        put_zeros(fs, data_start - count.n);
        for (const auto& t : tensors_) {
            fs.put(t.data.data(), t.data.size());
            put_zeros(fs, (t.data.size() + alignment_ - 1) / alignment_ * alignment_ - t.data.size());
        }
        if (std::fflush(f) != 0) fail(path, ": write failed: ", std::strerror(errno));
        if (std::fclose(f) != 0) {
            f = nullptr;
            fail(path, ": write failed: ", std::strerror(errno));
        }
        f = nullptr;
        if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, ": cannot rename '", tmp, "': ", std::strerror(errno));
    } catch (...) {
        if (f) std::fclose(f);
        std::remove(tmp.c_str());
        throw;
    }
}

}  // namespace glia::gguf
