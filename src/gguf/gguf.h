// GGUF v2/v3 reader (memory-mapped, validated) and writer.
//
// Every error is a glia::Error whose message names the file, the byte offset and the
// field that was wrong. Nothing here may crash or read out of bounds on malformed input.
//
// A mapped file that is truncated while in use would make every read of a page past its
// new end raise SIGBUS and kill the process. The reader installs a SIGBUS handler (once,
// chaining to the previous one for other addresses) that replaces such a mapping with
// zero pages and records it: the read that faulted, and every later one, sees zeros, and
// File::changed() says what happened. Users of a file check changed() and report it (a
// computation over the zeros is garbage, not a crash).
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace glia::gguf {

enum class ValueType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* value_type_name(ValueType t);

struct Value;

// The elements of an ARRAY value. Arrays read from a file are compact: scalar elements are
// viewed in place in the file image (valid while the File lives, like strings), string
// elements are one view each; an element is made as a Value when asked for, so a 262k-token
// vocabulary costs a few allocations, not one object per element. Arrays built by code
// (push_back, assignment) and nested arrays hold their Values.
class ValueArray {
public:
    ValueArray() = default;
    ValueArray(std::vector<Value> v);  // NOLINT: a vector of Values converts
    ValueArray& operator=(std::vector<Value> v);

    size_t size() const;
    bool empty() const { return size() == 0; }
    Value operator[](size_t k) const;  // by value: made from the compact form
    void push_back(Value v);
    void reserve(size_t n);
    void resize(size_t n);

    class iterator {
    public:
        using value_type = Value;
        using difference_type = std::ptrdiff_t;
        iterator(const ValueArray* a, size_t k) : a_(a), k_(k) {}
        Value operator*() const;
        iterator& operator++() { ++k_; return *this; }
        bool operator==(const iterator& o) const { return k_ == o.k_; }
        bool operator!=(const iterator& o) const { return k_ != o.k_; }
    private:
        const ValueArray* a_;
        size_t k_;
    };
    iterator begin() const { return {this, 0}; }
    iterator end() const { return {this, size()}; }

    // The compact forms (the reader): n scalars of `type` at `data` (little-endian, in the
    // file image; already validated), or string views.
    void view_scalars(ValueType type, const uint8_t* data, size_t n);
    void set_strings(std::vector<std::string_view> s);

private:
    enum class Form : uint8_t { BOXED, SCALARS, STRINGS };
    Form form_ = Form::BOXED;
    ValueType type_ = ValueType::UINT8;  // SCALARS: element type
    const uint8_t* raw_ = nullptr;       // SCALARS
    size_t n_raw_ = 0;
    std::vector<std::string_view> strings_;  // STRINGS
    std::vector<Value> boxed_;                // BOXED
    void box();                               // converts a compact form before a change
};

// One metadata value. Scalars keep their value in the matching field; strings view the
// mapped file (valid while the File lives); arrays hold their elements (ValueArray).
struct Value {
    ValueType type = ValueType::UINT8;
    ValueType elem_type = ValueType::UINT8;  // ARRAY: element type
    uint64_t u = 0;             // unsigned integers and bool
    int64_t i = 0;              // signed integers
    double f = 0;               // floats
    std::string_view s;         // STRING
    ValueArray arr;             // ARRAY: elements

    bool is_integer() const;
    bool is_float() const;
    bool is_array() const { return type == ValueType::ARRAY; }
    // Human-readable rendering (arrays abbreviated after `max_items` items).
    std::string to_string(size_t max_items = 8) const;
};

struct KV {
    std::string key;
    Value value;
    uint64_t offset = 0;  // byte offset of the key in the file (for error messages)
};

struct TensorInfo {
    std::string name;
    uint32_t n_dims = 0;
    int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension
    DType type = DType::F32;
    uint64_t offset = 0;           // relative to the data section
    uint64_t nbytes = 0;
    const uint8_t* data = nullptr; // into the mapping
    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

// Which form a per-layer key used in the file.
template <typename T>
struct PerLayer {
    std::vector<T> values;  // always n_layer entries
    bool from_array = false;
};

class File {
public:
    // Maps and validates the whole header. Throws glia::Error.
    static std::unique_ptr<File> open(const std::string& path);
    // Parses an in-memory image (tests, fuzzing). `name` is used in error messages.
    static std::unique_ptr<File> from_memory(std::vector<uint8_t> bytes, std::string name);
    // Parses a header alone (metadata and tensor infos, no data section): a file's layout
    // for planning, before or instead of writing it. Every tensor's data is nullptr.
    static std::unique_ptr<File> header_only(std::vector<uint8_t> header, std::string name);
    ~File();
    File(const File&) = delete;
    File& operator=(const File&) = delete;

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
    uint64_t file_size() const { return size_; }
    const uint8_t* bytes() const { return base_; }
    bool has_data() const { return !header_only_; }  // false: made by header_only()
    // "" while the file is as it was opened; else a message naming it and saying what
    // changed: truncated (a read of its mapping failed, or its size differs) or modified
    // (its modification time differs). Cheap (an fstat): callers check it per request.
    std::string changed() const;

    const std::vector<KV>& kvs() const { return kvs_; }
    const Value* find(std::string_view key) const;  // nullptr when absent
    bool has(std::string_view key) const { return find(key) != nullptr; }

    // Typed access. T: bool, any integer type, float, double, std::string.
    // Integers convert between widths when the value fits; a float key accepts
    // integer values. A missing key or a wrong type is an error naming the key.
    template <typename T> T get(std::string_view key) const;
    template <typename T> T get_or(std::string_view key, T fallback) const;
    // Arrays of T (same conversions per element).
    template <typename T> std::vector<T> get_array(std::string_view key) const;
    // A key given either as one scalar for all layers or an array of n_layer values.
    template <typename T> PerLayer<T> per_layer(std::string_view key, int n_layer) const;
    template <typename T> std::optional<PerLayer<T>> per_layer_opt(std::string_view key, int n_layer) const;

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent
    const TensorInfo& tensor(std::string_view name) const;       // error when absent

private:
    File() = default;
    void parse();
    std::string where(std::string_view key) const;  // "file: offset N: key 'k'" for errors
    std::string path_;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    const uint8_t* base_ = nullptr;
    uint64_t size_ = 0;
    void* map_ = nullptr;             // mmap'd region (or nullptr)
    int fd_ = -1;                     // kept open to notice changes (fstat)
    int64_t mtime_ns_ = 0;            // modification time when opened
    int map_slot_ = -1;               // registration with the SIGBUS handler (-1: none)
    std::vector<uint8_t> owned_;      // from_memory storage
    bool header_only_ = false;
    std::vector<KV> kvs_;
    std::vector<TensorInfo> tensors_;
    // Name -> index; the views point into the file image, which outlives them.
    std::unordered_map<std::string_view, size_t> kv_index_;
    std::unordered_map<std::string_view, size_t> tensor_index_;
};

// Builds a GGUF v3 file. Values are written in insertion order; tensors are laid out
// in insertion order, each aligned to `alignment`.
//
// The writer owns copies of every string it is given (also those of copy_kvs), so the
// source File may be closed before write(). Setting a key again replaces its value in
// place. "general.alignment" and the constructor's alignment are one setting: setting the
// key changes the alignment, and an alignment other than 32 is written as that key (first,
// unless the key is set later: then where it is set, so copy_kvs keeps a file's key order).
// Every input is validated (types, shapes, sizes, duplicate tensor names): errors throw.
class Writer {
public:
    explicit Writer(uint64_t alignment = 32);
    Writer(Writer&&) = default;
    Writer& operator=(Writer&&) = default;
    void set(const std::string& key, const Value& v);
    void set_u32(const std::string& key, uint32_t v);
    void set_i32(const std::string& key, int32_t v);
    void set_u64(const std::string& key, uint64_t v);
    void set_f32(const std::string& key, float v);
    void set_bool(const std::string& key, bool v);
    void set_str(const std::string& key, const std::string& v);
    // Copies every KV of another file (e.g. tokenizer keys), optionally by key prefix.
    void copy_kvs(const File& src, std::string_view prefix = "");
    // ne has n_dims entries; data must hold row_bytes(type, ne[0]) * rows bytes.
    void add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne,
                    const void* data, uint64_t nbytes);
    // Writes to `path` through a temporary file renamed into place (no partial file is
    // left behind on error). Throws on I/O error.
    void write(const std::string& path) const;
    std::vector<uint8_t> to_bytes() const;

    uint64_t alignment() const { return alignment_; }
    size_t kv_count() const { return kvs_.size() + (implicit_alignment_key() ? 1 : 0); }
    size_t tensor_count() const { return tensors_.size(); }

private:
    struct PendingTensor {
        std::string name; DType type; std::vector<int64_t> ne; std::vector<uint8_t> data;
    };
    template <typename Sink> void emit(Sink& sink) const;
    uint64_t data_section_start(uint64_t header_bytes) const;
    Value own(const Value& v);
    // An alignment other than 32 that no key set: written as the first key.
    bool implicit_alignment_key() const { return alignment_ != 32 && !kv_pos_.count("general.alignment"); }
    uint64_t alignment_;
    std::vector<std::pair<std::string, Value>> kvs_;
    std::vector<PendingTensor> tensors_;
    std::unordered_map<std::string, size_t> kv_pos_, tensor_pos_;
    std::unique_ptr<std::deque<std::string>> strings_ = std::make_unique<std::deque<std::string>>();
};

}  // namespace glia::gguf
