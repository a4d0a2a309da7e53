// Malformed-file corpus, generated from the real shared files: every case must throw
// glia::Error (never crash, never read out of bounds), naming the file, field and offset.
// Runs under ASan+UBSan via scripts/sanitize.sh.
#include <random>

#include "gguf_test_util.h"

using namespace glia;
using namespace glia::test;
using gguf::File;

namespace {

const uint64_t kHuge[] = {UINT64_MAX, uint64_t(1) << 63, uint64_t(1) << 40, 0xffffffffull};

struct Real {
    std::string path;
    std::vector<uint8_t> bytes;
    Layout L;
    uint64_t data_offset = 0, data_end = 0;  // end of the last tensor's data
};

Real load(const std::string& rel) {
    Real r;
    r.path = shared_path(rel);
    r.bytes = read_bytes(r.path);
    r.L = scan_layout(r.bytes);
    auto f = File::from_memory(r.bytes, r.path);
    r.data_offset = f->data_offset();
    r.data_end = r.L.header_end;
    for (const auto& t : f->tensors()) r.data_end = std::max(r.data_end, r.data_offset + t.offset + t.nbytes);
    return r;
}

std::vector<uint8_t> prefix(const std::vector<uint8_t>& b, uint64_t n) {
    return std::vector<uint8_t>(b.begin(), b.begin() + static_cast<ptrdiff_t>(n));
}

// Truncation at `n` must fail with a message that names the offset.
void expect_truncation_fails(const Real& r, uint64_t n) {
    expect_gguf_error(prefix(r.bytes, n), {"offset"}, cat(r.path, " truncated to ", n, " bytes"));
}

}  // namespace

TEST(GgufMalformed, TruncateModelAtEveryHeaderOffset) {
    const Real r = load("models/stories260K.gguf");
    ASSERT_GT(r.L.header_end, 10000u);
    for (uint64_t n = 0; n < r.L.header_end; ++n) expect_truncation_fails(r, n);
    // Between the header and the data section, and a sample of the data section.
    for (uint64_t n = r.L.header_end; n < r.data_offset; ++n) expect_truncation_fails(r, n);
    std::mt19937_64 rng(1);
    for (int k = 0; k < 300; ++k) expect_truncation_fails(r, r.data_offset + rng() % (r.data_end - r.data_offset));
    expect_truncation_fails(r, r.data_end - 1);
    auto msg = expect_gguf_error(prefix(r.bytes, r.data_end - 1), {"offset", "past the end"}, "last byte cut");
    EXPECT_NE(msg.find("tensor '"), std::string::npos) << msg;
}

TEST(GgufMalformed, TruncateVocabularyAtManyOffsets) {
    const Real r = load("vocab/ggml-vocab-llama-spm.gguf");
    ASSERT_EQ(r.L.header_end, r.bytes.size());  // a vocabulary is all header
    for (uint64_t n = 0; n < 8192; ++n) expect_truncation_fails(r, n);
    // Every field boundary (±1) of the first few thousand strings, then random offsets.
    for (size_t k = 0; k < r.L.strings.size() && k < 3000; k += 7)
        for (int d = -1; d <= 1; ++d) {
            const uint64_t n = r.L.strings[k].len_at + d;
            if (n < r.bytes.size()) expect_truncation_fails(r, n);
        }
    std::mt19937_64 rng(2);
    for (int k = 0; k < 400; ++k) expect_truncation_fails(r, rng() % r.bytes.size());
    expect_truncation_fails(r, r.bytes.size() - 1);
}

TEST(GgufMalformed, BadMagicAndVersion) {
    const Real r = load("models/stories260K.gguf");
    auto b = r.bytes;
    b[0] = 'X';
    expect_gguf_error(b, {"offset 0", "magic"}, "bad magic");
    for (uint32_t v : {0u, 1u, 4u, 0x03000000u, 0xffffffffu}) {
        b = r.bytes;
        poke<uint32_t>(b, 4, v);
        auto msg = expect_gguf_error(b, {"offset 4", "version", cat(v)}, cat("version ", v));
        if (v == 0x03000000u) {
            EXPECT_NE(msg.find("big-endian"), std::string::npos) << msg;
        }
    }
    // v2 is accepted (same layout as v3 for little-endian files).
    b = r.bytes;
    poke<uint32_t>(b, 4, 2);
    EXPECT_NO_THROW(File::from_memory(b, "v2.gguf"));
}

TEST(GgufMalformed, HugeCounts) {
    const Real r = load("models/stories260K.gguf");
    for (uint64_t h : kHuge) {
        auto b = r.bytes;
        poke<uint64_t>(b, 8, h);
        expect_gguf_error(b, {"offset 8", "tensor_count"}, cat("tensor_count ", h));
        b = r.bytes;
        poke<uint64_t>(b, 16, h);
        expect_gguf_error(b, {"offset 16", "metadata_kv_count"}, cat("kv_count ", h));
    }
    // Counts that are plausible but wrong still fail cleanly somewhere.
    for (uint64_t d : {1, 2, 3, 100}) {
        auto b = r.bytes;
        poke<uint64_t>(b, 8, r.L.tensors.size() + d);
        expect_gguf_error(b, {"offset"}, cat("tensor_count +", d));
        b = r.bytes;
        poke<uint64_t>(b, 16, r.L.kvs.size() + d);
        expect_gguf_error(b, {"offset"}, cat("kv_count +", d));
    }
}

TEST(GgufMalformed, HugeArrayAndStringLengths) {
    for (const char* rel : {"models/stories260K.gguf", "vocab/ggml-vocab-llama-spm.gguf"}) {
        const Real r = load(rel);
        ASSERT_FALSE(r.L.arrays.empty());
        for (const auto& a : r.L.arrays)
            for (uint64_t h : kHuge) {
                auto b = r.bytes;
                poke<uint64_t>(b, a.len_at, h);
                expect_gguf_error(b, {cat("offset ", a.type_at), cat("key '", a.key, "'"), "array length"},
                                  cat(rel, " array ", a.key, " length ", h));
            }
        // String values (first 200 and a sample), keys and tensor names.
        for (size_t k = 0; k < r.L.strings.size(); k += (k < 200 ? 1 : 97))
            for (uint64_t h : kHuge) {
                auto b = r.bytes;
                poke<uint64_t>(b, r.L.strings[k].len_at, h);
                expect_gguf_error(b, {cat("offset ", r.L.strings[k].len_at), "string length"},
                                  cat(rel, " string #", k, " length ", h));
            }
        for (const auto& kv : r.L.kvs) {
            auto b = r.bytes;
            poke<uint64_t>(b, kv.key_at, UINT64_MAX);
            expect_gguf_error(b, {cat("offset ", kv.key_at), "key #", "string length"}, "key length");
        }
        for (const auto& t : r.L.tensors) {
            auto b = r.bytes;
            poke<uint64_t>(b, t.name_at, uint64_t(1) << 40);
            expect_gguf_error(b, {cat("offset ", t.name_at), "tensor #", "name"}, "tensor name length");
        }
    }
}

TEST(GgufMalformed, UnknownValueTypes) {
    const Real r = load("models/stories260K.gguf");
    for (const auto& kv : r.L.kvs)
        for (uint32_t t : {13u, 100u, 0xffffffffu}) {
            auto b = r.bytes;
            poke<uint32_t>(b, kv.type_at, t);
            expect_gguf_error(b, {cat("offset ", kv.type_at), cat("key '", kv.key, "'"), "unknown value type"},
                              cat("type of ", kv.key));
        }
    for (const auto& a : r.L.arrays) {
        auto b = r.bytes;
        poke<uint32_t>(b, a.type_at, 13);
        expect_gguf_error(b, {cat("offset ", a.type_at), "unknown array element type"}, "array element type");
    }
    // Bool other than 0/1.
    Raw raw;
    raw.header(0, 1).str("b").u32(7).u8(2);
    expect_gguf_error(raw.b, {"offset 37", "key 'b'", "bool"}, "bool 2");
}

TEST(GgufMalformed, TensorInfoFields) {
    const Real r = load("models/stories260K.gguf");
    const auto& t = r.L.tensors[3];  // blk.0.attn_q.weight, 2-D f32
    ASSERT_EQ(t.n_dims, 2u);
    const std::string name = cat("tensor '", t.name, "'");
    auto b = r.bytes;
    for (uint32_t ty : {4u, 5u, 31u, 1000u}) {
        b = r.bytes;
        poke<uint32_t>(b, t.type_at, ty);
        expect_gguf_error(b, {cat("offset ", t.type_at), name, "unknown tensor type"}, cat("tensor type ", ty));
    }
    for (uint32_t nd : {0u, 5u, 0xffffffffu}) {
        b = r.bytes;
        poke<uint32_t>(b, t.ndims_at, nd);
        expect_gguf_error(b, {cat("offset ", t.ndims_at), name, "n_dims"}, cat("n_dims ", nd));
    }
    b = r.bytes;
    poke<uint64_t>(b, t.ne_at, 0);
    expect_gguf_error(b, {cat("offset ", t.ne_at), name, "ne[0]"}, "ne 0");
    b = r.bytes;
    poke<uint64_t>(b, t.ne_at + 8, UINT64_MAX);
    expect_gguf_error(b, {cat("offset ", t.ne_at + 8), name, "ne[1]"}, "ne > int64");
    b = r.bytes;
    poke<uint64_t>(b, t.ne_at, uint64_t(1) << 62);
    poke<uint64_t>(b, t.ne_at + 8, 4);
    expect_gguf_error(b, {cat("offset ", t.ne_at + 8), name, "overflow"}, "element-count overflow");
    // Byte-size overflow: huge f32 element count that fits int64 but not in the file.
    b = r.bytes;
    poke<uint64_t>(b, t.ne_at, uint64_t(1) << 40);
    expect_gguf_error(b, {"offset", name, "past the end"}, "huge tensor");
    // Misaligned offset, offset past the end, overlap.
    b = r.bytes;
    poke<uint64_t>(b, t.offset_at, t.offset + 1);
    expect_gguf_error(b, {cat("offset ", t.offset_at), name, "alignment"}, "misaligned");
    b = r.bytes;
    poke<uint64_t>(b, t.offset_at, uint64_t(1) << 50);
    expect_gguf_error(b, {"offset", name, "past the end"}, "tensor past the end");
    b = r.bytes;
    poke<uint64_t>(b, t.offset_at, UINT64_MAX - 31);  // aligned, near-wrap
    expect_gguf_error(b, {"offset", name, "past the end"}, "offset near 2^64");
    b = r.bytes;
    poke<uint64_t>(b, t.offset_at, r.L.tensors[4].offset);
    expect_gguf_error(b, {"offset", "overlap"}, "overlapping tensors");
    // Quantized row length not a multiple of the block size.
    b = r.bytes;
    poke<uint32_t>(b, t.type_at, 2);  // Q4_0: 64 is fine; make ne[0] 48
    poke<uint64_t>(b, t.ne_at, 48);
    expect_gguf_error(b, {cat("offset ", t.type_at), "block size"}, "row not a block multiple");
}

TEST(GgufMalformed, DuplicatesAndAlignment) {
    {   // duplicate key
        Raw r;
        r.header(0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2);
        expect_gguf_error(r.b, {"offset 43", "key 'a.b'", "duplicate key"}, "duplicate key");
    }
    {   // duplicate tensor name
        Raw r;
        r.header(2, 0).tensor("t", {4}, 0, 0).tensor("t", {4}, 0, 32).pad(32);
        r.b.resize(r.b.size() + 64);
        expect_gguf_error(r.b, {"offset", "tensor 't'", "duplicate tensor name"}, "duplicate tensor");
    }
    {   // empty key
        Raw r;
        r.header(0, 1).kv_u32("", 1);
        expect_gguf_error(r.b, {"offset 24", "key #0", "empty"}, "empty key");
    }
    auto with_alignment = [](auto put_value) {
        Raw r;
        r.header(1, 1).str("general.alignment");
        put_value(r);
        r.tensor("t", {4}, 0, 0).pad(32);
        r.b.resize(r.b.size() + 64);
        return r.b;
    };
    for (uint32_t a : {0u, 3u, 48u, 1u << 21, 0xffffffffu})
        expect_gguf_error(with_alignment([&](Raw& r) { r.u32(4).u32(a); }),
                          {"offset 24", "general.alignment", "power-of-two"}, cat("alignment ", a));
    expect_gguf_error(with_alignment([](Raw& r) { r.u32(8).str("32"); }), {"general.alignment"}, "string alignment");
    expect_gguf_error(with_alignment([](Raw& r) { r.u32(5).i32(-32); }), {"general.alignment"}, "negative alignment");
    expect_gguf_error(with_alignment([](Raw& r) { r.u32(6).f32(32); }), {"general.alignment"}, "float alignment");
    // Valid alignments of other types and sizes are accepted.
    EXPECT_EQ(File::from_memory(with_alignment([](Raw& r) { r.u32(5).i32(16); }), "ok")->alignment(), 16u);
    EXPECT_EQ(File::from_memory(with_alignment([](Raw& r) { r.u32(10).u64(1); }), "ok")->alignment(), 1u);
    // With alignment 64, an offset of 32 is misaligned.
    Raw r;
    r.header(1, 1).kv_u32("general.alignment", 64).tensor("t", {4}, 0, 32).pad(64);
    r.b.resize(r.b.size() + 128);
    expect_gguf_error(r.b, {"offset", "tensor 't' offset", "alignment 64"}, "misaligned for 64");
}

TEST(GgufMalformed, NestingAndManyTinyArrays) {
    {   // nested 9 deep: rejected (limit 8)
        Raw r;
        r.header(0, 1).str("deep").u32(9);
        for (int d = 0; d < 9; ++d) r.u32(9).u64(1);
        r.u32(4).u64(0);
        expect_gguf_error(r.b, {"offset", "key 'deep'", "nested"}, "deep nesting");
    }
    {   // nested 1000 deep in a tiny file: no stack overflow
        Raw r;
        r.header(0, 1).str("deep").u32(9);
        for (int d = 0; d < 1000; ++d) r.u32(9).u64(1);
        expect_gguf_error(r.b, {"offset", "nested"}, "very deep nesting");
    }
    {   // an array of 1M empty arrays parses (12 MB), and costs memory in proportion
        Raw r;
        r.header(0, 1).str("many").u32(9).u32(9).u64(1 << 20);
        for (int k = 0; k < (1 << 20); ++k) r.u32(4).u64(0);
        auto f = File::from_memory(r.b, "many.gguf");
        EXPECT_EQ(f->find("many")->arr.size(), size_t(1) << 20);
    }
    {   // an array that claims 2^40 tiny arrays: rejected before allocating anything
        Raw r;
        r.header(0, 1).str("many").u32(9).u32(9).u64(uint64_t(1) << 40);
        expect_gguf_error(r.b, {"offset 40", "key 'many'", "array length"}, "huge nested count");
    }
    {   // element error inside a nested array names the path
        Raw r;
        r.header(0, 1).str("n").u32(9).u32(9).u64(2).u32(7).u64(1).u8(1).u32(7).u64(2).u8(0).u8(5);
        expect_gguf_error(r.b, {"key 'n'[1][1]", "bool"}, "nested bool");
    }
    {   // element error inside a flat array names the index
        Raw r;
        r.header(0, 1).str("s").u32(9).u32(8).u64(3).str("a").str("b").u64(1000);
        expect_gguf_error(r.b, {"key 's'[2]", "string length"}, "string in array");
    }
}

TEST(GgufMalformed, RandomByteFlipsNeverCrash) {
    // Not a fuzzer (see fuzz/), but a quick deterministic smoke test over real headers.
    for (const char* rel : {"models/stories260K.gguf", "models/tiny-qwen3moe-q4_k_m.gguf"}) {
        const Real r = load(rel);
        std::mt19937_64 rng(3);
        int errors = 0;
        for (int k = 0; k < 400; ++k) {
            auto b = r.bytes;
            const int flips = 1 + static_cast<int>(rng() % 4);
            for (int j = 0; j < flips; ++j) b[rng() % r.data_offset] ^= static_cast<uint8_t>(1u << (rng() % 8));
            try {
                auto f = File::from_memory(std::move(b), "flip.gguf");
                for (const auto& kv : f->kvs()) (void)kv.value.to_string();
            } catch (const glia::Error& e) {
                ++errors;
                EXPECT_NE(std::string(e.what()).find("flip.gguf"), std::string::npos);
            }
        }
        EXPECT_GT(errors, 0);
        EXPECT_LT(errors, 400);
    }
}
