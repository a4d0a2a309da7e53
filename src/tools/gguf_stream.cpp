#include "tools/gguf_stream.h"

#include <cerrno>
#include <cstring>
#include <limits>
#include <unistd.h>

#include "core/error.h"

namespace glia::tools {
namespace {

using gguf::Value;
using gguf::ValueType;

constexpr uint32_t kMagic = 0x46554747;  // "GGUF"
constexpr uint32_t kVersion = 3;

template <typename T>
void put_pod(std::string& s, T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_str(std::string& s, std::string_view v) {
    put_pod<uint64_t>(s, v.size());
    s.append(v.data(), v.size());
}

// The payload of a value of type t (without the type tag).
void put_payload(std::string& s, const Value& v, ValueType t, const std::string& key, int depth) {
    switch (t) {
        case ValueType::UINT8: put_pod<uint8_t>(s, static_cast<uint8_t>(v.u)); break;
        case ValueType::INT8: put_pod<int8_t>(s, static_cast<int8_t>(v.i)); break;
        case ValueType::UINT16: put_pod<uint16_t>(s, static_cast<uint16_t>(v.u)); break;
        case ValueType::INT16: put_pod<int16_t>(s, static_cast<int16_t>(v.i)); break;
        case ValueType::UINT32: put_pod<uint32_t>(s, static_cast<uint32_t>(v.u)); break;
        case ValueType::INT32: put_pod<int32_t>(s, static_cast<int32_t>(v.i)); break;
        case ValueType::UINT64: put_pod<uint64_t>(s, v.u); break;
        case ValueType::INT64: put_pod<int64_t>(s, v.i); break;
        case ValueType::FLOAT32: put_pod<float>(s, static_cast<float>(v.f)); break;
        case ValueType::FLOAT64: put_pod<double>(s, v.f); break;
        case ValueType::BOOL: put_pod<uint8_t>(s, v.u ? 1 : 0); break;
        case ValueType::STRING: put_str(s, v.s); break;
        case ValueType::ARRAY:
            if (depth > 8) fail("gguf stream writer: key '", key, "': arrays nested too deep");
            put_pod<uint32_t>(s, static_cast<uint32_t>(v.elem_type));
            put_pod<uint64_t>(s, v.arr.size());
            for (const Value& e : v.arr) put_payload(s, e, v.elem_type, key, depth + 1);
            break;
        default: fail("gguf stream writer: key '", key, "': unknown value type ", static_cast<uint32_t>(t));
    }
}

uint64_t pad_to(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

}  // namespace

GgufStreamWriter::~GgufStreamWriter() { abandon(); }

void GgufStreamWriter::abandon() {
    if (f_) {
        std::fclose(f_);
        f_ = nullptr;
        std::remove(tmp_.c_str());
    }
}

void GgufStreamWriter::remove(const std::string& key) {
    for (size_t i = 0; i < kvs_.size(); ++i)
        if (kvs_[i].key == key) { kvs_.erase(kvs_.begin() + long(i)); return; }
}

bool GgufStreamWriter::has(const std::string& key) const {
    for (const auto& kv : kvs_)
        if (kv.key == key) return true;
    return false;
}

void GgufStreamWriter::set(const std::string& key, const Value& v) {
    if (f_) fail("gguf stream writer: key '", key, "' set after the header was written");
    if (key.empty()) fail("gguf stream writer: empty key");
    if (key == "general.alignment") {
        uint64_t a = 0;
        if (v.type == ValueType::UINT32 || v.type == ValueType::UINT64 || v.type == ValueType::UINT16 || v.type == ValueType::UINT8) a = v.u;
        else if (v.is_integer() && v.i > 0) a = static_cast<uint64_t>(v.i);
        if (a == 0 || (a & (a - 1)) != 0 || a > (1u << 20))
            fail("gguf stream writer: general.alignment must be a power of two, got ", v.to_string());
        alignment_ = a;
    }
    remove(key);
    std::string bytes;
    put_pod<uint32_t>(bytes, static_cast<uint32_t>(v.type));
    put_payload(bytes, v, v.type, key, 0);
    kvs_.push_back({key, std::move(bytes)});
}

void GgufStreamWriter::set_u32(const std::string& key, uint32_t x) {
    Value v; v.type = ValueType::UINT32; v.u = x; set(key, v);
}
void GgufStreamWriter::set_f32(const std::string& key, float x) {
    Value v; v.type = ValueType::FLOAT32; v.f = x; set(key, v);
}
void GgufStreamWriter::set_bool(const std::string& key, bool x) {
    Value v; v.type = ValueType::BOOL; v.u = x; set(key, v);
}
void GgufStreamWriter::set_str(const std::string& key, const std::string& x) {
    Value v; v.type = ValueType::STRING; v.s = x; set(key, v);  // serialized at once
}

size_t GgufStreamWriter::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne_in) {
    if (f_) fail("gguf stream writer: tensor '", name, "' added after the header was written");
    const std::string where = cat("gguf stream writer: tensor '", name, "'");
    if (name.empty() || name.size() >= 64) fail(where, ": name must be 1..63 bytes");
    for (const auto& t : tensors_)
        if (t.name == name) fail(where, ": duplicate name");
    if (ne_in.empty() || ne_in.size() > 4) fail(where, ": ", ne_in.size(), " dimensions (1..4 allowed)");
    const DTypeInfo& info = dtype_info(type);
    uint64_t n = 1;
    for (int64_t d : ne_in) {
        if (d <= 0) fail(where, ": dimension ", d, " must be positive");
        if (n > std::numeric_limits<uint64_t>::max() / uint64_t(d)) fail(where, ": element count overflows");
        n *= uint64_t(d);
    }
    if (ne_in[0] % info.block_size != 0)
        fail(where, ": row length ", ne_in[0], " is not a multiple of the ", info.name, " block size ", info.block_size);
    std::vector<int64_t> ne = ne_in;
    while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
    TensorDecl t{name, type, ne, n / uint64_t(info.block_size) * info.type_size, 0};
    t.offset = tensors_.empty() ? 0 : pad_to(tensors_.back().offset + tensors_.back().nbytes, alignment_);
    tensors_.push_back(std::move(t));
    return tensors_.size() - 1;
}

std::string GgufStreamWriter::header() const {
    std::string s;
    put_pod<uint32_t>(s, kMagic);
    put_pod<uint32_t>(s, kVersion);
    put_pod<uint64_t>(s, tensors_.size());
    put_pod<uint64_t>(s, kvs_.size());
    for (const auto& kv : kvs_) {
        put_str(s, kv.key);
        s += kv.bytes;
    }
    // Offsets are recomputed here in case general.alignment changed after add_tensor().
    uint64_t off = 0;
    for (const auto& t : tensors_) {
        put_str(s, t.name);
        put_pod<uint32_t>(s, static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) put_pod<uint64_t>(s, static_cast<uint64_t>(d));
        put_pod<uint32_t>(s, static_cast<uint32_t>(t.type));
        put_pod<uint64_t>(s, off);
        off = pad_to(off + t.nbytes, alignment_);
    }
    return s;
}

uint64_t GgufStreamWriter::data_start() const {
    const uint64_t h = header().size();
    return tensors_.empty() ? h : pad_to(h, alignment_);
}

uint64_t GgufStreamWriter::file_size() const {
    uint64_t n = data_start();
    for (const auto& t : tensors_) n += pad_to(t.nbytes, alignment_);
    return n;
}

void GgufStreamWriter::put(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) {
        const std::string msg = std::strerror(errno);
        abandon();
        fail(path_, ": write failed: ", msg, " (disk full?)");
    }
}

void GgufStreamWriter::open(const std::string& path) {
    if (f_) fail("gguf stream writer: open() called twice");
    path_ = path;
    tmp_ = cat(path, ".tmp.", ::getpid());
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (!f_) fail(path, ": cannot create '", tmp_, "': ", std::strerror(errno));
    buf_.resize(1 << 22);
    std::setvbuf(f_, buf_.data(), _IOFBF, buf_.size());
    const std::string h = header();
    put(h.data(), h.size());
    const uint64_t start = tensors_.empty() ? h.size() : pad_to(h.size(), alignment_);
    const std::string zeros(start - h.size(), '\0');
    put(zeros.data(), zeros.size());
    cur_ = 0;
    cur_done_ = 0;
}

void GgufStreamWriter::write(const void* data, uint64_t nbytes) {
    if (!f_) fail("gguf stream writer: write() before open()");
    if (nbytes == 0) return;
    if (cur_ >= tensors_.size()) fail(path_, ": more tensor data written than declared");
    const TensorDecl& t = tensors_[cur_];
    if (cur_done_ + nbytes > t.nbytes)
        fail(path_, ": tensor '", t.name, "': ", cur_done_ + nbytes, " bytes written, ", t.nbytes, " declared");
    put(data, nbytes);
    cur_done_ += nbytes;
    if (cur_done_ == t.nbytes) {
        const std::string zeros(pad_to(t.nbytes, alignment_) - t.nbytes, '\0');
        put(zeros.data(), zeros.size());
        ++cur_;
        cur_done_ = 0;
    }
}

void GgufStreamWriter::finish() {
    if (!f_) fail("gguf stream writer: finish() before open()");
    if (cur_ != tensors_.size()) {
        const std::string name = tensors_[cur_].name;
        abandon();
        fail(path_, ": tensor '", name, "' is incomplete (", tensors_.size() - cur_, " tensors missing data)");
    }
    if (std::fflush(f_) != 0 || std::fclose(f_) != 0) {
        f_ = nullptr;
        const std::string msg = std::strerror(errno);
        std::remove(tmp_.c_str());
        fail(path_, ": write failed: ", msg);
    }
    f_ = nullptr;
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
        const std::string msg = std::strerror(errno);
        std::remove(tmp_.c_str());
        fail(path_, ": cannot rename '", tmp_, "': ", msg);
    }
}

}  // namespace glia::tools
