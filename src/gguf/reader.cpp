// GGUF reader: maps the file, parses and validates the header, KV section and tensor
// infos. Every read is bounds-checked through Cursor; errors name file, offset and field.
//
// Hardening notes (each one is exercised by tests/gguf/test_malformed.cpp and the fuzzer):
//  - every count is checked against the bytes left before anything is allocated for it;
//  - the total number of metadata values is capped (kMaxValues), so a file of many tiny or
//    nested arrays cannot make the reader allocate memory out of proportion;
//  - nesting depth is capped (kMaxArrayDepth): no unbounded recursion;
//  - field names for error messages are built only when an error is raised, so that a
//    150k-entry vocabulary parses without one allocation per element;
//  - all offsets and sizes are 64-bit (files larger than 4 GiB work).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <mutex>
#include <unordered_set>

#include "gguf/gguf.h"

namespace glia::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;
// Upper bound on metadata values held in memory (array elements at every depth). A real
// 262k-token vocabulary (tokens, scores, types, merges) needs about 1.3M; each value costs
// sizeof(Value) bytes, so this bounds the metadata to about 1.3 GB whatever the file says.
constexpr uint64_t kMaxValues = uint64_t(1) << 24;
// Upper bound on tensor infos (a real model has at most tens of thousands).
constexpr uint64_t kMaxTensors = uint64_t(1) << 22;
// Containers are reserved at most this far ahead of what has actually been parsed, so a
// count that lies costs nothing before the parse reaches the end of the file.
constexpr uint64_t kMaxReserve = uint64_t(1) << 16;
// Largest accepted general.alignment.
constexpr uint64_t kMaxAlignment = uint64_t(1) << 20;

// Names the field being read, rendered only when an error is raised.
struct Field {
    const std::string* base = nullptr;  // e.g. "key 'tokenizer.ggml.tokens'"
    const char* prefix = "";            // used when base is null
    uint64_t index = 0;                 // array element / key / tensor number
    bool has_index = false;
    const char* suffix = "";            // e.g. " (string length)"

    std::string str() const {
        std::string s = base ? *base : std::string(prefix);
        if (has_index) s += cat(base ? "[" : " #", index, base ? "]" : "");
        s += suffix;
        return s;
    }
    Field with_suffix(const char* sfx) const {
        Field f = *this;
        f.suffix = sfx;
        return f;
    }
};

Field named(const std::string& s) { return Field{&s, "", 0, false, ""}; }

class Cursor {
public:
    Cursor(const std::string& name, const uint8_t* base, uint64_t size)
        : name_(name), base_(base), size_(size) {}
    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }

    [[noreturn]] void error(uint64_t at, const std::string& field, const std::string& what) const {
        fail(name_, ": offset ", at, ": ", field, ": ", what);
    }
    [[noreturn]] void error(uint64_t at, const Field& field, const std::string& what) const {
        error(at, field.str(), what);
    }
    void need(uint64_t n, const Field& field) const {
        if (n > remaining())
            error(pos_, field, cat("truncated file (need ", n, " bytes, ", remaining(), " left)"));
    }
    template <typename T>
    T read(const Field& field) {
        need(sizeof(T), field);
        T v;
        std::memcpy(&v, base_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    template <typename T>
    T read(const std::string& field) { return read<T>(named(field)); }
    // The next n bytes, in place.
    const uint8_t* take(uint64_t n, const Field& field) {
        need(n, field);
        const uint8_t* p = base_ + pos_;
        pos_ += n;
        return p;
    }

    std::string_view read_string(const Field& field) {
        const uint64_t at = pos_;
        const uint64_t len = read<uint64_t>(field.with_suffix(" (string length)"));
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

// ---------------------------------------------------------------------------------------
// Truncation while mapped (see gguf.h). The handler only reads these slots (atomics, no
// locks): a mapping's range, and whether a read of it faulted.
struct MapSlot {
    std::atomic<uintptr_t> begin{0};
    std::atomic<size_t> size{0};
    std::atomic<bool> faulted{false};
};
constexpr int kMaxSlots = 256;  // files mapped at once with protection; more still work, unprotected
MapSlot g_slots[kMaxSlots];
std::mutex g_slots_mutex;       // taking and giving back slots (never in the handler)
struct sigaction g_prev_sigbus {};

void on_sigbus(int sig, siginfo_t* info, void* uctx) {
    const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    for (MapSlot& slot : g_slots) {
        const uintptr_t b = slot.begin.load(std::memory_order_acquire);
        const size_t n = slot.size.load(std::memory_order_acquire);
        if (b == 0 || addr < b || addr - b >= n) continue;
        // Zero pages in place of the whole mapping (mmap is a plain system call, safe in a
        // handler): the faulting read is retried and sees zeros, and so does every later one.
        if (mmap(reinterpret_cast<void*>(b), n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
            static const char msg[] = "glia: a model file was truncated while in use, and its mapping could not be replaced\n";
            if (write(2, msg, sizeof msg - 1) < 0) {
            }
            _exit(135);
        }
        slot.faulted.store(true, std::memory_order_release);
        return;
    }
    // Not a file of ours: what would have happened without us.
    if (g_prev_sigbus.sa_flags & SA_SIGINFO) {
        if (g_prev_sigbus.sa_sigaction) {
            g_prev_sigbus.sa_sigaction(sig, info, uctx);
            return;
        }
    } else if (g_prev_sigbus.sa_handler != SIG_DFL && g_prev_sigbus.sa_handler != SIG_IGN) {
        g_prev_sigbus.sa_handler(sig);
        return;
    }
    signal(SIGBUS, SIG_DFL);  // the read faults again on return and ends the process
}

// Registers a mapping with the handler (installed on first use); -1 when no slot is free.
int protect_mapping(const void* base, size_t bytes) {
    static std::once_flag installed;
    std::call_once(installed, [] {
        struct sigaction sa {};
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, &g_prev_sigbus);
    });
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::lock_guard<std::mutex> lk(g_slots_mutex);
    for (int k = 0; k < kMaxSlots; ++k) {
        MapSlot& slot = g_slots[k];
        if (slot.begin.load() != 0) continue;
        slot.faulted.store(false);
        slot.size.store((bytes + page - 1) / page * page);
        slot.begin.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
        return k;
    }
    return -1;
}

void unprotect_mapping(int k) {
    if (k < 0) return;
    std::lock_guard<std::mutex> lk(g_slots_mutex);
    g_slots[k].begin.store(0, std::memory_order_release);
}

int64_t mtime_ns(const struct stat& st) { return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }

struct ValueReader {
    Cursor& c;
    uint64_t n_values = 0;  // metadata values read so far (cap: kMaxValues)

    void read_scalar(Value& v, ValueType type, const Field& field) {
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
                const uint8_t b = c.read<uint8_t>(field);
                if (b > 1) c.error(at, field, cat("bool value ", int(b), " is neither 0 nor 1"));
                v.u = b;
                break;
            }
            case ValueType::STRING: v.s = c.read_string(field); break;
            case ValueType::ARRAY: break;  // handled by read()
        }
    }

    void read(Value& v, ValueType type, const Field& field, int depth) {
        v.type = type;
        if (type != ValueType::ARRAY) {
            read_scalar(v, type, field);
            return;
        }
        const uint64_t at = c.pos();
        if (depth >= kMaxArrayDepth)
            c.error(at, field, cat("arrays nested more than ", kMaxArrayDepth, " deep"));
        const uint32_t et = c.read<uint32_t>(field.with_suffix(" (array element type)"));
        if (!valid_value_type(et)) c.error(at, field, cat("unknown array element type ", et));
        v.elem_type = static_cast<ValueType>(et);
        const uint64_t n = c.read<uint64_t>(field.with_suffix(" (array length)"));
        // Every element takes at least its scalar size (strings 8 bytes, arrays 12).
        const uint64_t min_size = scalar_size(v.elem_type) ? scalar_size(v.elem_type)
                                  : v.elem_type == ValueType::ARRAY ? 12 : 8;
        if (n > c.remaining() / min_size)
            c.error(at, field, cat("array length ", n, " exceeds what the remaining ", c.remaining(),
                                   " bytes can hold"));
        if (n > kMaxValues - n_values)
            c.error(at, field, cat("array length ", n, " brings the metadata past ", kMaxValues,
                                   " values in total, the reader's limit (a real vocabulary needs ~1M)"));
        n_values += n;
        if (const size_t es = scalar_size(v.elem_type)) {
            // Scalars: viewed in place (bools checked first); element names built only on error.
            const uint64_t data_at = c.pos();
            const uint8_t* data = c.take(n * es, field);
            if (v.elem_type == ValueType::BOOL)
                for (uint64_t k = 0; k < n; ++k)
                    if (data[k] > 1) {
                        Field ef = field;
                        ef.has_index = true;
                        ef.index = k;
                        c.error(data_at + k, ef, cat("bool value ", int(data[k]), " is neither 0 nor 1"));
                    }
            v.arr.view_scalars(v.elem_type, data, n);
        } else if (v.elem_type == ValueType::STRING) {
            Field ef = field;
            ef.has_index = true;
            std::vector<std::string_view> strs(n);
            for (uint64_t k = 0; k < n; ++k) {
                ef.index = k;
                strs[k] = c.read_string(ef);
            }
            v.arr.set_strings(std::move(strs));
        } else {
            std::vector<Value> items(n);
            for (uint64_t k = 0; k < n; ++k) {
                const std::string sub = cat(field.str(), "[", k, "]");
                read(items[k], ValueType::ARRAY, named(sub), depth + 1);
            }
            v.arr = std::move(items);
        }
    }
};

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
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
    f->fd_ = fd;  // closed by ~File, also when parse() throws
    f->mtime_ns_ = mtime_ns(st);
    if (f->size_ > 0) {
        void* m = mmap(nullptr, static_cast<size_t>(f->size_), PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) fail(path, ": cannot map ", f->size_, " bytes: ", std::strerror(errno));
        f->map_ = m;
        f->base_ = static_cast<const uint8_t*>(m);
        f->map_slot_ = protect_mapping(m, static_cast<size_t>(f->size_));
    }
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

std::unique_ptr<File> File::header_only(std::vector<uint8_t> header, std::string name) {
    std::unique_ptr<File> f(new File());
    f->path_ = std::move(name);
    f->owned_ = std::move(header);
    f->base_ = f->owned_.data();
    f->size_ = f->owned_.size();
    f->header_only_ = true;
    f->parse();
    return f;
}

File::~File() {
    unprotect_mapping(map_slot_);
    if (map_) munmap(map_, static_cast<size_t>(size_));
    if (fd_ >= 0) ::close(fd_);
}

std::string File::changed() const {
    if (map_slot_ >= 0 && g_slots[map_slot_].faulted.load(std::memory_order_acquire))
        return cat(path_, ": the file was truncated while in use (reading its data failed); what was computed from it "
                          "is not valid: restart with an intact file");
    struct stat st {};
    if (fd_ < 0 || fstat(fd_, &st) != 0) return {};
    if (static_cast<uint64_t>(st.st_size) != size_)
        return cat(path_, ": the file was ", static_cast<uint64_t>(st.st_size) < size_ ? "truncated" : "changed",
                   " while in use: it has ", st.st_size, " bytes, ", size_, " when it was loaded; restart with an intact file");
    if (mtime_ns(st) != mtime_ns_)
        return cat(path_, ": the file was modified while in use (its modification time changed), so the loaded "
                          "weights may no longer be its contents: restart to load it again");
    return {};
}

void File::parse() {
    static const uint8_t kEmpty = 0;
    Cursor c(path_, base_ ? base_ : &kEmpty, size_);
    if (size_ < 8) c.error(0, "magic", cat("file too small to be GGUF (", size_, " bytes)"));
    const uint32_t magic = c.read<uint32_t>("magic");
    if (magic != kMagic) c.error(0, "magic", "not a GGUF file (bad magic; expected \"GGUF\")");
    version_ = c.read<uint32_t>("version");
    if (version_ != 2 && version_ != 3) {
        const bool big_endian = (version_ & 0xffff) == 0 && version_ != 0;
        c.error(4, "version", cat("unsupported GGUF version ", version_, " (supported: 2, 3)",
                                  big_endian ? "; the file looks big-endian, only little-endian is supported"
                                  : version_ == 1 ? "; GGUF v1 files must be converted with a current tool" : ""));
    }
    const uint64_t n_tensors = c.read<uint64_t>("tensor_count");
    const uint64_t n_kv = c.read<uint64_t>("metadata_kv_count");
    // Each KV takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info at least
    // 8 (name length) + 4 (n_dims) + 8 (one dim) + 4 (type) + 8 (offset).
    if (n_kv > c.remaining() / 13)
        c.error(16, "metadata_kv_count", cat(n_kv, " key-value pairs cannot fit in the ", c.remaining(), " bytes left"));
    if (n_tensors > c.remaining() / 32)
        c.error(8, "tensor_count", cat(n_tensors, " tensor infos cannot fit in the ", c.remaining(), " bytes left"));

    if (n_kv > kMaxValues)
        c.error(16, "metadata_kv_count", cat(n_kv, " key-value pairs exceed the reader's limit of ", kMaxValues));
    if (n_tensors > kMaxTensors)
        c.error(8, "tensor_count", cat(n_tensors, " tensors exceed the reader's limit of ", kMaxTensors));

    ValueReader vr{c};
    kv_index_.clear();
    kv_index_.reserve(std::min(n_kv, kMaxReserve));
    kvs_.reserve(std::min(n_kv, kMaxReserve));
    for (uint64_t k = 0; k < n_kv; ++k) {
        KV kv;
        kv.offset = c.pos();
        const Field kf{nullptr, "key", k, true, ""};
        std::string_view key = c.read_string(kf);
        if (key.empty()) c.error(kv.offset, kf, "empty key name");
        kv.key = std::string(key);
        const std::string field = cat("key '", kv.key, "'");
        if (!kv_index_.emplace(key, kvs_.size()).second) c.error(kv.offset, field, "duplicate key");
        const uint64_t tpos = c.pos();
        const uint32_t t = c.read<uint32_t>(named(field).with_suffix(" (value type)"));
        if (!valid_value_type(t)) c.error(tpos, field, cat("unknown value type ", t));
        if (vr.n_values >= kMaxValues) c.error(kv.offset, field, cat("more than ", kMaxValues, " metadata values"));
        ++vr.n_values;
        vr.read(kv.value, static_cast<ValueType>(t), named(field), 0);
        kvs_.push_back(std::move(kv));
    }

    if (auto it = kv_index_.find("general.alignment"); it != kv_index_.end()) {
        const KV& kv = kvs_[it->second];
        const Value& a = kv.value;
        uint64_t al = 0;
        if (a.is_integer()) {
            const bool is_signed = a.type == ValueType::INT8 || a.type == ValueType::INT16 ||
                                   a.type == ValueType::INT32 || a.type == ValueType::INT64;
            al = is_signed ? (a.i > 0 ? static_cast<uint64_t>(a.i) : 0) : a.u;
        }
        if (al == 0 || (al & (al - 1)) != 0 || al > kMaxAlignment)
            c.error(kv.offset, "key 'general.alignment'",
                    cat("must be a power-of-two integer between 1 and ", kMaxAlignment, ", got ",
                        value_type_name(a.type), " ", a.to_string()));
        alignment_ = al;
    }

    tensor_index_.clear();
    tensor_index_.reserve(std::min(n_tensors, kMaxReserve));
    tensors_.reserve(std::min(n_tensors, kMaxReserve));
    for (uint64_t k = 0; k < n_tensors; ++k) {
        TensorInfo ti;
        const uint64_t at = c.pos();
        const Field nf{nullptr, "tensor", k, true, " name"};
        std::string_view name = c.read_string(nf);
        if (name.empty()) c.error(at, nf, "empty tensor name");
        ti.name = std::string(name);
        const std::string field = cat("tensor '", ti.name, "'");
        if (!tensor_index_.emplace(name, tensors_.size()).second) c.error(at, field, "duplicate tensor name");
        const uint64_t dpos = c.pos();
        ti.n_dims = c.read<uint32_t>(field + " n_dims");
        if (ti.n_dims == 0 || ti.n_dims > kMaxDims)
            c.error(dpos, field, cat("n_dims ", ti.n_dims, " outside 1..", kMaxDims));
        uint64_t n_elem = 1;
        for (uint32_t d = 0; d < ti.n_dims; ++d) {
            const uint64_t epos = c.pos();
            const uint64_t ne = c.read<uint64_t>(cat(field, " ne[", d, "]"));
            if (ne == 0 || ne > uint64_t(std::numeric_limits<int64_t>::max()))
                c.error(epos, cat(field, " ne[", d, "]"), cat("dimension ", ne, " is invalid (must be 1..2^63-1)"));
            if (n_elem > uint64_t(std::numeric_limits<int64_t>::max()) / ne)
                c.error(epos, cat(field, " ne[", d, "]"), "element count overflows 64 bits");
            n_elem *= ne;
            ti.ne[d] = static_cast<int64_t>(ne);
        }
        const uint64_t tpos = c.pos();
        const uint32_t type = c.read<uint32_t>(field + " type");
        const DTypeInfo* info = dtype_info(type);
        if (!info) c.error(tpos, field + " type", cat("unknown tensor type id ", type));
        ti.type = info->type;
        if (ti.ne[0] % info->block_size != 0)
            c.error(tpos, field + " type", cat("row length ", ti.ne[0], " is not a multiple of the ", info->name,
                                               " block size ", info->block_size));
        const uint64_t n_blocks = n_elem / static_cast<uint64_t>(info->block_size);
        if (n_blocks > std::numeric_limits<uint64_t>::max() / info->type_size)
            c.error(tpos, field + " type", "byte size overflows 64 bits");
        ti.nbytes = n_blocks * info->type_size;
        const uint64_t opos = c.pos();
        ti.offset = c.read<uint64_t>(field + " offset");
        if (ti.offset % alignment_ != 0)
            c.error(opos, field + " offset",
                    cat("data offset ", ti.offset, " is not a multiple of the alignment ", alignment_));
        tensors_.push_back(std::move(ti));
    }

    // The data section starts at the next aligned offset after the header.
    const uint64_t header_end = c.pos();
    data_offset_ = (header_end + alignment_ - 1) / alignment_ * alignment_;  // no overflow: header_end <= size
    if (header_only_) return;  // no data: tensors keep data == nullptr
    if (!tensors_.empty() && data_offset_ > size_)
        fail(path_, ": offset ", header_end, ": tensor data section: starts at ", data_offset_,
             ", past the end of the file (", size_, " bytes): truncated");

    // Bounds and overlap: sort by offset, check each against the file end and the next one.
    std::vector<const TensorInfo*> order;
    order.reserve(tensors_.size());
    for (auto& t : tensors_) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    const uint64_t data_size = size_ >= data_offset_ ? size_ - data_offset_ : 0;
    auto abs_offset = [&](uint64_t rel) {
        return rel <= std::numeric_limits<uint64_t>::max() - data_offset_ ? cat(data_offset_ + rel)
                                                                         : cat(data_offset_, "+", rel);
    };
    for (size_t k = 0; k < order.size(); ++k) {
        const TensorInfo& t = *order[k];
        if (t.offset > data_size || t.nbytes > data_size - t.offset)
            fail(path_, ": offset ", abs_offset(t.offset), ": tensor '", t.name, "' data: ", t.nbytes,
                 " bytes at data offset ", t.offset, " extend past the end of the file (", size_,
                 " bytes): truncated or corrupt");
        if (k + 1 < order.size() && t.offset + t.nbytes > order[k + 1]->offset)
            fail(path_, ": offset ", abs_offset(t.offset), ": tensor '", t.name, "' data: bytes ", t.offset,
                 "..", t.offset + t.nbytes, " overlap tensor '", order[k + 1]->name, "' at data offset ",
                 order[k + 1]->offset);
    }
    for (auto& t : tensors_) t.data = base_ + data_offset_ + t.offset;
}

const Value* File::find(std::string_view key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& File::tensor(std::string_view name) const {
    const TensorInfo* t = find_tensor(name);
    if (!t) fail(path_, ": tensor '", name, "' not found");
    return *t;
}

}  // namespace glia::gguf
