// GGUF reader: maps the file, parses and validates the header, KV section and tensor
// infos. Every read is bounds-checked through Cursor; errors name file, offset and field.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "gguf/gguf.h"

namespace glia::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;

class Cursor {
public:
    Cursor(const std::string& name, const uint8_t* base, uint64_t size)
        : name_(name), base_(base), size_(size) {}
    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }

    [[noreturn]] void error(uint64_t at, const std::string& field, const std::string& what) const {
        fail(name_, ": offset ", at, ": ", field, ": ", what);
    }
    void need(uint64_t n, const std::string& field) const {
        if (n > remaining())
            error(pos_, field, cat("truncated file (need ", n, " bytes, ", remaining(), " left)"));
    }
    template <typename T>
    T read(const std::string& field) {
        need(sizeof(T), field);
        T v;
        std::memcpy(&v, base_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    std::string_view read_string(const std::string& field) {
        const uint64_t at = pos_;
        const uint64_t len = read<uint64_t>(field + " (string length)");
        if (len > remaining())
            error(at, field, cat("string length ", len, " exceeds the ", remaining(), " bytes left in the file"));
        std::string_view s(reinterpret_cast<const char*>(base_ + pos_), len);
        pos_ += len;
        return s;
    }

private:
    const std::string& name_;
    const uint8_t* base_;
    uint64_t size_;
    uint64_t pos_ = 0;
};

size_t scalar_size(ValueType t) {
    switch (t) {
        case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
        case ValueType::UINT16: case ValueType::INT16: return 2;
        case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
        case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
        default: return 0;
    }
}

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::FLOAT64); }

Value read_value(Cursor& c, ValueType type, const std::string& field, int depth) {
    Value v;
    v.type = type;
    switch (type) {
        case ValueType::UINT8: v.u = c.read<uint8_t>(field); break;
        case ValueType::INT8: v.i = c.read<int8_t>(field); break;
        case ValueType::UINT16: v.u = c.read<uint16_t>(field); break;
        case ValueType::INT16: v.i = c.read<int16_t>(field); break;
        case ValueType::UINT32: v.u = c.read<uint32_t>(field); break;
        case ValueType::INT32: v.i = c.read<int32_t>(field); break;
        case ValueType::UINT64: v.u = c.read<uint64_t>(field); break;
        case ValueType::INT64: v.i = c.read<int64_t>(field); break;
        case ValueType::FLOAT32: v.f = c.read<float>(field); break;
        case ValueType::FLOAT64: v.f = c.read<double>(field); break;
        case ValueType::BOOL: {
            const uint64_t at = c.pos();
            uint8_t b = c.read<uint8_t>(field);
            if (b > 1) c.error(at, field, cat("bool value ", int(b), " is neither 0 nor 1"));
            v.u = b;
            break;
        }
        case ValueType::STRING: v.s = c.read_string(field); break;
        case ValueType::ARRAY: {
            const uint64_t at = c.pos();
            if (depth >= kMaxArrayDepth) c.error(at, field, "arrays nested too deeply");
            uint32_t et = c.read<uint32_t>(field + " (array element type)");
            if (!valid_value_type(et)) c.error(at, field, cat("unknown array element type ", et));
            v.elem_type = static_cast<ValueType>(et);
            const uint64_t n = c.read<uint64_t>(field + " (array length)");
            // Every element takes at least one byte (strings and arrays at least 8).
            const uint64_t min_size = scalar_size(v.elem_type) ? scalar_size(v.elem_type)
                                     : v.elem_type == ValueType::ARRAY ? 12 : 8;
            if (n > c.remaining() / min_size)
                c.error(at, field, cat("array length ", n, " exceeds what the remaining ", c.remaining(), " bytes can hold"));
            v.arr.reserve(n);
            for (uint64_t k = 0; k < n; ++k) v.arr.push_back(read_value(c, v.elem_type, field, depth + 1));
            break;
        }
    }
    return v;
}

}  // namespace

const char* value_type_name(ValueType t) {
    switch (t) {
        case ValueType::UINT8: return "u8";
        case ValueType::INT8: return "i8";
        case ValueType::UINT16: return "u16";
        case ValueType::INT16: return "i16";
        case ValueType::UINT32: return "u32";
        case ValueType::INT32: return "i32";
        case ValueType::FLOAT32: return "f32";
        case ValueType::BOOL: return "bool";
        case ValueType::STRING: return "string";
        case ValueType::ARRAY: return "array";
        case ValueType::UINT64: return "u64";
        case ValueType::INT64: return "i64";
        case ValueType::FLOAT64: return "f64";
    }
    return "?";
}

std::unique_ptr<File> File::open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        fail(path, ": cannot stat: ", std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        fail(path, ": not a regular file");
    }
    std::unique_ptr<File> f(new File());
    f->path_ = path;
    f->size_ = static_cast<uint64_t>(st.st_size);
    if (f->size_ > 0) {
        void* m = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            ::close(fd);
            fail(path, ": cannot map ", f->size_, " bytes: ", std::strerror(e));
        }
        f->map_ = m;
        f->base_ = static_cast<const uint8_t*>(m);
    }
    ::close(fd);
    f->parse();
    return f;
}

std::unique_ptr<File> File::from_memory(std::vector<uint8_t> bytes, std::string name) {
    std::unique_ptr<File> f(new File());
    f->path_ = std::move(name);
    f->owned_ = std::move(bytes);
    f->base_ = f->owned_.data();
    f->size_ = f->owned_.size();
    f->parse();
    return f;
}

File::~File() {
    if (map_) munmap(map_, size_);
}

void File::parse() {
    static const uint8_t kEmpty = 0;
    Cursor c(path_, base_ ? base_ : &kEmpty, size_);
    if (size_ < 4) c.error(0, "magic", cat("file too small to be GGUF (", size_, " bytes)"));
    const uint32_t magic = c.read<uint32_t>("magic");
    if (magic != kMagic) c.error(0, "magic", "not a GGUF file (bad magic)");
    version_ = c.read<uint32_t>("version");
    if (version_ != 2 && version_ != 3)
        c.error(4, "version", cat("unsupported GGUF version ", version_, " (supported: 2, 3)"));
    const uint64_t n_tensors = c.read<uint64_t>("tensor_count");
    const uint64_t n_kv = c.read<uint64_t>("metadata_kv_count");
    // Each KV takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info at least 8+4+8+4+8.
    if (n_kv > c.remaining() / 13) c.error(16, "metadata_kv_count", cat(n_kv, " key-value pairs cannot fit in the file"));
    if (n_tensors > c.remaining() / 32) c.error(8, "tensor_count", cat(n_tensors, " tensors cannot fit in the file"));

    std::unordered_set<std::string_view> keys;
    kvs_.reserve(n_kv);
    for (uint64_t k = 0; k < n_kv; ++k) {
        KV kv;
        kv.offset = c.pos();
        std::string_view key = c.read_string(cat("key #", k));
        kv.key = std::string(key);
        if (!keys.insert(key).second) c.error(kv.offset, cat("key '", kv.key, "'"), "duplicate key");
        const uint64_t tpos = c.pos();
        uint32_t t = c.read<uint32_t>(cat("type of key '", kv.key, "'"));
        if (!valid_value_type(t)) c.error(tpos, cat("key '", kv.key, "'"), cat("unknown value type ", t));
        kv.value = read_value(c, static_cast<ValueType>(t), cat("key '", kv.key, "'"), 0);
        kvs_.push_back(std::move(kv));
    }

    if (const Value* a = find("general.alignment")) {
        if (!a->is_integer() || a->u == 0 || (a->u & (a->u - 1)) != 0 || a->u > (1u << 20))
            fail(path_, ": key 'general.alignment': must be a power of two integer, got ", a->to_string());
        alignment_ = a->u;
    }

    std::unordered_set<std::string_view> names;
    tensors_.reserve(n_tensors);
    for (uint64_t k = 0; k < n_tensors; ++k) {
        TensorInfo ti;
        const uint64_t at = c.pos();
        std::string_view name = c.read_string(cat("tensor #", k, " name"));
        ti.name = std::string(name);
        const std::string field = cat("tensor '", ti.name, "'");
        if (!names.insert(name).second) c.error(at, field, "duplicate tensor name");
        const uint64_t dpos = c.pos();
        ti.n_dims = c.read<uint32_t>(field + " n_dims");
        if (ti.n_dims == 0 || ti.n_dims > kMaxDims)
            c.error(dpos, field, cat("n_dims ", ti.n_dims, " outside 1..", kMaxDims));
        uint64_t n_elem = 1;
        for (uint32_t d = 0; d < ti.n_dims; ++d) {
            const uint64_t epos = c.pos();
            const uint64_t ne = c.read<uint64_t>(cat(field, " ne[", d, "]"));
            if (ne == 0 || ne > uint64_t(std::numeric_limits<int64_t>::max()))
                c.error(epos, field, cat("dimension ne[", d, "] = ", ne, " is invalid"));
            if (n_elem > uint64_t(std::numeric_limits<int64_t>::max()) / ne)
                c.error(epos, field, "element count overflows 64 bits");
            n_elem *= ne;
            ti.ne[d] = static_cast<int64_t>(ne);
        }
        const uint64_t tpos = c.pos();
        const uint32_t type = c.read<uint32_t>(field + " type");
        const DTypeInfo* info = dtype_info(type);
        if (!info) c.error(tpos, field, cat("unknown tensor type id ", type));
        ti.type = info->type;
        if (ti.ne[0] % info->block_size != 0)
            c.error(tpos, field, cat("row length ", ti.ne[0], " is not a multiple of the ", info->name,
                                     " block size ", info->block_size));
        const uint64_t n_blocks = n_elem / info->block_size;
        if (n_blocks > std::numeric_limits<uint64_t>::max() / info->type_size)
            c.error(tpos, field, "byte size overflows 64 bits");
        ti.nbytes = n_blocks * info->type_size;
        const uint64_t opos = c.pos();
        ti.offset = c.read<uint64_t>(field + " offset");
        if (ti.offset % alignment_ != 0)
            c.error(opos, field, cat("data offset ", ti.offset, " is not a multiple of the alignment ", alignment_));
        tensors_.push_back(std::move(ti));
    }

    // The data section starts at the next aligned offset after the header.
    data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
    if (!tensors_.empty() && data_offset_ > size_)
        fail(path_, ": offset ", c.pos(), ": tensor data section: starts past the end of the file (truncated)");

    // Bounds and overlap: sort by offset, check each against the file end and the next one.
    std::vector<const TensorInfo*> order;
    for (auto& t : tensors_) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    const uint64_t data_size = size_ >= data_offset_ ? size_ - data_offset_ : 0;
    for (size_t k = 0; k < order.size(); ++k) {
        const TensorInfo& t = *order[k];
        if (t.offset > data_size || t.nbytes > data_size - t.offset)
            fail(path_, ": offset ", data_offset_ + t.offset, ": tensor '", t.name, "': data (", t.nbytes,
                 " bytes) extends past the end of the file (", size_, " bytes): truncated or corrupt");
        if (k + 1 < order.size() && t.offset + t.nbytes > order[k + 1]->offset)
            fail(path_, ": offset ", data_offset_ + t.offset, ": tensor '", t.name, "': data overlaps tensor '",
                 order[k + 1]->name, "'");
    }
    for (auto& t : tensors_) t.data = base_ + data_offset_ + t.offset;
}

const Value* File::find(std::string_view key) const {
    for (const auto& kv : kvs_)
        if (kv.key == key) return &kv.value;
    return nullptr;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
    for (const auto& t : tensors_)
        if (t.name == name) return &t;
    return nullptr;
}

const TensorInfo& File::tensor(std::string_view name) const {
    const TensorInfo* t = find_tensor(name);
    if (!t) fail(path_, ": tensor '", name, "' not found");
    return *t;
}

}  // namespace glia::gguf
