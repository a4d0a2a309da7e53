// GGUF v3 writer: header, KVs in insertion order, tensor infos, aligned tensor data.
// Whatever it writes, the reader reads back identically (tests/gguf/test_writer.cpp).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gguf/encode.h"
#include "gguf/gguf.h"

namespace glia::gguf {
namespace {

using namespace encode;
constexpr const char* kWho = "gguf writer";

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

}  // namespace

Writer::Writer(uint64_t alignment) : alignment_(alignment) {
    check_alignment(alignment, kWho, "constructor");
}

// A deep copy whose strings the writer owns (the value was checked by check_value).
Value Writer::own(const Value& v) {
    Value out;
    out.type = v.type;
    switch (v.type) {
        case ValueType::STRING:
            if (!strings_) strings_ = std::make_unique<std::deque<std::string>>();
            strings_->emplace_back(v.s);
            out.s = strings_->back();
            break;
        case ValueType::ARRAY:
            out.elem_type = v.elem_type;
            out.arr.reserve(v.arr.size());
            for (const Value& e : v.arr) out.arr.push_back(own(e));
            break;
        default:
            out.u = v.u;
            out.i = v.i;
            out.f = v.type == ValueType::FLOAT32 ? static_cast<float>(v.f) : v.f;
            break;
    }
    return out;
}

void Writer::set(const std::string& key, const Value& v) {
    if (key.empty()) fail("gguf writer: empty key name");
    check_value(v, key, kWho);
    Value owned = own(v);
    if (key == "general.alignment") alignment_ = alignment_from_value(owned, kWho);
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
    const uint64_t expect = tensor_nbytes(where, type, ne);
    if (nbytes != expect) fail(where, ": ", nbytes, " bytes of data given, the shape and type need ", expect);
    if (!data) fail(where, ": no data");
    const auto* b = static_cast<const uint8_t*>(data);
    tensor_pos_.emplace(name, tensors_.size());
    tensors_.push_back(PendingTensor{name, type, ne, std::vector<uint8_t>(b, b + nbytes)});
}

template <typename Sink>
void Writer::emit(Sink& s) const {
    put_header_start(s, tensors_.size(), kv_count());
    if (implicit_alignment_key()) {
        Value a;
        a.type = ValueType::UINT32;
        a.u = alignment_;
        put_kv(s, "general.alignment", a);
    }
    for (const auto& [key, v] : kvs_) put_kv(s, key, v);
    // Tensor data offsets (relative to the data section), each aligned.
    uint64_t off = 0;
    for (const PendingTensor& t : tensors_) {
        put_tensor_info(s, t.name, t.type, t.ne, off);
        off += pad_to(t.data.size(), alignment_);
    }
}

// The data section starts at the next aligned offset; a file without tensors (a vocabulary)
// ends right after its header, as the reference tooling writes it.
uint64_t Writer::data_section_start(uint64_t header_bytes) const {
    if (tensors_.empty()) return header_bytes;
    return pad_to(header_bytes, alignment_);
}

std::vector<uint8_t> Writer::to_bytes() const {
    CountSink count;
    emit(count);
    const uint64_t data_start = data_section_start(count.n);
    uint64_t total = data_start;
    for (const auto& t : tensors_) total += pad_to(t.data.size(), alignment_);
    std::vector<uint8_t> out;
    out.reserve(total);
    VectorSink vs{out};
    emit(vs);
    put_zeros(vs, data_start - count.n);
    for (const auto& t : tensors_) {
        vs.put(t.data.data(), t.data.size());
        put_zeros(vs, pad_to(t.data.size(), alignment_) - t.data.size());
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
            put_zeros(fs, pad_to(t.data.size(), alignment_) - t.data.size());
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
