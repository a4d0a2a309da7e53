#include "gguf/stream_writer.h"

#include <cerrno>
#include <cstring>
#include <unistd.h>

#include "core/error.h"
#include "gguf/encode.h"

namespace glia::gguf {
namespace {

using namespace encode;
constexpr const char* kWho = "gguf stream writer";

}  // namespace

StreamWriter::~StreamWriter() { abandon(); }

void StreamWriter::abandon() {
    if (f_) {
        std::fclose(f_);
        f_ = nullptr;
        std::remove(tmp_.c_str());
    }
}

void StreamWriter::remove(const std::string& key) {
    for (size_t i = 0; i < kvs_.size(); ++i)
        if (kvs_[i].key == key) { kvs_.erase(kvs_.begin() + long(i)); return; }
}

bool StreamWriter::has(const std::string& key) const {
    for (const auto& kv : kvs_)
        if (kv.key == key) return true;
    return false;
}

void StreamWriter::set(const std::string& key, const Value& v) {
    if (f_) fail("gguf stream writer: key '", key, "' set after the header was written");
    if (key.empty()) fail("gguf stream writer: empty key");
    check_value(v, key, kWho);
    if (key == "general.alignment") alignment_ = alignment_from_value(v, kWho);
    remove(key);
    std::string bytes;
    StringSink sink{bytes};
    encode::put<uint32_t>(sink, static_cast<uint32_t>(v.type));
    put_value(sink, v);
    kvs_.push_back({key, std::move(bytes)});
}

void StreamWriter::set_u32(const std::string& key, uint32_t x) {
    Value v; v.type = ValueType::UINT32; v.u = x; set(key, v);
}
void StreamWriter::set_f32(const std::string& key, float x) {
    Value v; v.type = ValueType::FLOAT32; v.f = x; set(key, v);
}
void StreamWriter::set_bool(const std::string& key, bool x) {
    Value v; v.type = ValueType::BOOL; v.u = x; set(key, v);
}
void StreamWriter::set_str(const std::string& key, const std::string& x) {
    Value v; v.type = ValueType::STRING; v.s = x; set(key, v);  // serialized at once
}

size_t StreamWriter::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne_in) {
    if (f_) fail("gguf stream writer: tensor '", name, "' added after the header was written");
    const std::string where = cat("gguf stream writer: tensor '", name, "'");
    if (name.empty() || name.size() >= 64) fail(where, ": name must be 1..63 bytes");
    for (const auto& t : tensors_)
        if (t.name == name) fail(where, ": duplicate name");
    const uint64_t nbytes = tensor_nbytes(where, type, ne_in);
    std::vector<int64_t> ne = ne_in;
    while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
    TensorDecl t{name, type, ne, nbytes, 0};
    t.offset = tensors_.empty() ? 0 : pad_to(tensors_.back().offset + tensors_.back().nbytes, alignment_);
    tensors_.push_back(std::move(t));
    return tensors_.size() - 1;
}

std::string StreamWriter::header() const {
    std::string s;
    StringSink sink{s};
    put_header_start(sink, tensors_.size(), kvs_.size());
    for (const auto& kv : kvs_) {
        put_string(sink, kv.key);
        s += kv.bytes;
    }
    // Offsets are recomputed here in case general.alignment changed after add_tensor().
    uint64_t off = 0;
    for (const auto& t : tensors_) {
        put_tensor_info(sink, t.name, t.type, t.ne, off);
        off = pad_to(off + t.nbytes, alignment_);
    }
    return s;
}

uint64_t StreamWriter::data_start() const {
    const uint64_t h = header().size();
    return tensors_.empty() ? h : pad_to(h, alignment_);
}

uint64_t StreamWriter::file_size() const {
    uint64_t n = data_start();
    for (const auto& t : tensors_) n += pad_to(t.nbytes, alignment_);
    return n;
}

void StreamWriter::put(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) {
        const std::string msg = std::strerror(errno);
        abandon();
        fail(path_, ": write failed: ", msg, " (disk full?)");
    }
}

void StreamWriter::open(const std::string& path) {
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

void StreamWriter::write(const void* data, uint64_t nbytes) {
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

void StreamWriter::finish() {
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

}  // namespace glia::gguf
