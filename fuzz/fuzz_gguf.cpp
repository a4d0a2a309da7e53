// libFuzzer target for the GGUF reader (and, as an oracle, the writer).
//
// Every input must either parse or throw glia::Error; anything else (a crash, an
// out-of-bounds read, UB, another exception type, an allocation past libFuzzer's limit) is
// a finding. A file that parses is touched everywhere (every KV through every typed
// getter, every tensor's first and last data byte) and must survive a write/re-read round
// trip unchanged.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "gguf/gguf.h"

using glia::gguf::File;
using glia::gguf::Value;

namespace {

volatile uint64_t g_sink;

template <typename T>
void try_get(const File& f, const std::string& key) {
    const Value* v = f.find(key);
    if (!v->is_array()) {
        try { (void)f.get<T>(key); } catch (const glia::Error&) {}
        try { (void)f.get_or<T>(key, T{}); } catch (const glia::Error&) {}
    }
    // Long arrays (vocabularies) are converted by a few types only, to keep the fuzzer fast.
    if (v->is_array() && v->arr.size() > 64 && !std::is_same_v<T, std::string> && !std::is_same_v<T, float> &&
        !std::is_same_v<T, int32_t>)
        return;
    try { (void)f.get_array<T>(key); } catch (const glia::Error&) {}
    try {
        const int n = v && v->is_array() ? static_cast<int>(v->arr.size() & 0xffff) : 3;
        auto pl = f.per_layer<T>(key, n);
        if (pl.values.size() != static_cast<size_t>(n)) std::abort();
    } catch (const glia::Error&) {}
}

void touch(const File& f) {
    uint64_t acc = 0;
    for (const auto& kv : f.kvs()) {
        if (f.find(kv.key) != &kv.value) std::abort();  // keys are unique, lookup is exact
        acc += kv.value.to_string(4).size();
        try_get<bool>(f, kv.key);
        try_get<int8_t>(f, kv.key);
        try_get<uint8_t>(f, kv.key);
        try_get<int16_t>(f, kv.key);
        try_get<uint16_t>(f, kv.key);
        try_get<int32_t>(f, kv.key);
        try_get<uint32_t>(f, kv.key);
        try_get<int64_t>(f, kv.key);
        try_get<uint64_t>(f, kv.key);
        try_get<float>(f, kv.key);
        try_get<double>(f, kv.key);
        try_get<std::string>(f, kv.key);
    }
    for (const auto& t : f.tensors()) {
        if (f.find_tensor(t.name) != &t) std::abort();
        if (t.nbytes == 0 || t.data < f.bytes() || t.data + t.nbytes > f.bytes() + f.file_size()) std::abort();
        acc += t.data[0] + t.data[t.nbytes - 1];
        acc += static_cast<uint64_t>(t.n_elements()) + static_cast<uint64_t>(t.n_rows());
        if (glia::row_bytes(t.type, t.ne[0]) * static_cast<uint64_t>(t.n_rows()) != t.nbytes) std::abort();
    }
    g_sink = acc;
}

bool same(const Value& a, const Value& b) {
    if (a.type != b.type || a.u != b.u || a.i != b.i || a.s != b.s || a.arr.size() != b.arr.size()) return false;
    if (std::memcmp(&a.f, &b.f, sizeof a.f) != 0 && !(a.f != a.f && b.f != b.f)) return false;  // NaN: any payload
    if (a.type == glia::gguf::ValueType::ARRAY && a.elem_type != b.elem_type) return false;
    for (size_t k = 0; k < a.arr.size(); ++k)
        if (!same(a.arr[k], b.arr[k])) return false;
    return true;
}

// A file that parsed must be written back and re-read with the same content.
void round_trip(const File& f) {
    glia::gguf::Writer w(f.alignment());
    w.copy_kvs(f);
    for (const auto& t : f.tensors())
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.nbytes);
    auto g = File::from_memory(w.to_bytes(), "fuzz-rewritten.gguf");
    if (g->kvs().size() != f.kvs().size() || g->tensors().size() != f.tensors().size()) std::abort();
    for (size_t k = 0; k < f.kvs().size(); ++k)
        if (g->kvs()[k].key != f.kvs()[k].key || !same(g->kvs()[k].value, f.kvs()[k].value)) std::abort();
    for (size_t k = 0; k < f.tensors().size(); ++k) {
        const auto& a = f.tensors()[k];
        const auto& b = g->tensors()[k];
        if (a.name != b.name || a.type != b.type || a.nbytes != b.nbytes || std::memcmp(a.data, b.data, a.nbytes) != 0)
            std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::unique_ptr<File> f;
    try {
        f = File::from_memory(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
    } catch (const glia::Error& e) {
        // Every error names the file.
        if (std::strstr(e.what(), "fuzz.gguf") == nullptr) {
            std::fprintf(stderr, "error without the file name: %s\n", e.what());
            std::abort();
        }
        return 0;
    }
    touch(*f);
    round_trip(*f);  // a glia::Error here is a finding too: the writer must accept what the reader accepts
    return 0;
}
