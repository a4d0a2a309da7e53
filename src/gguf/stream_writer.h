// A GGUF v3 writer that streams tensor data to disk, for files too large to hold in
// memory (quantizing or synthesizing a multi-GB model). Encoding and validation are the
// whole-file Writer's (encode.h); only the key semantics and the data path differ.
//
// Declare every key and tensor first (name, type, shape: the header is then fully known),
// then open() writes the header and each tensor's data is appended in declaration order,
// in as many pieces as convenient. finish() checks that every byte arrived and renames the
// temporary file into place; until then (or on error) no file is left at the target path.
//
// Key semantics follow the reference's gguf library: setting a key that exists removes it
// and appends the new value at the end (so "general.file_type" moves behind the keys
// copied from an input file, as in files written by the reference quantizer).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "gguf/gguf.h"

namespace glia::gguf {

class StreamWriter {
public:
    StreamWriter() = default;
    ~StreamWriter();
    StreamWriter(const StreamWriter&) = delete;
    StreamWriter& operator=(const StreamWriter&) = delete;

    // Metadata (before open()).
    void set(const std::string& key, const Value& v);
    void set_u32(const std::string& key, uint32_t v);
    void set_f32(const std::string& key, float v);
    void set_bool(const std::string& key, bool v);
    void set_str(const std::string& key, const std::string& v);
    void remove(const std::string& key);
    bool has(const std::string& key) const;
    size_t kv_count() const { return kvs_.size(); }

    // Tensors (before open()), written in this order. Trailing dimensions of size 1 are
    // dropped from the header, as the reference does (a [4,1,256,1] tensor is 3-D).
    // Returns the tensor's index.
    size_t add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne);
    uint64_t tensor_bytes(size_t i) const { return tensors_[i].nbytes; }
    size_t tensor_count() const { return tensors_.size(); }
    // Total file size once written.
    uint64_t file_size() const;
    // The header as open() writes it (without the padding before the data): with
    // File::header_only, the file's metadata and tensor list without writing the file.
    std::string header() const;

    // Creates the temporary file and writes the header.
    void open(const std::string& path);
    // Appends data of the current tensor (the first one not yet complete). A piece may not
    // run past the end of that tensor.
    void write(const void* data, uint64_t nbytes);
    // Checks completeness, flushes and renames into place.
    void finish();

private:
    struct KVBytes { std::string key; std::string bytes; };  // bytes: type + payload
    struct TensorDecl { std::string name; DType type; std::vector<int64_t> ne; uint64_t nbytes, offset; };
    uint64_t data_start() const;
    void put(const void* p, size_t n);
    void abandon();

    uint64_t alignment_ = 32;
    std::vector<KVBytes> kvs_;
    std::vector<TensorDecl> tensors_;
    std::string path_, tmp_;
    std::FILE* f_ = nullptr;
    std::vector<char> buf_;
    size_t cur_ = 0;          // tensor being written
    uint64_t cur_done_ = 0;   // bytes of it written
};

}  // namespace glia::gguf
