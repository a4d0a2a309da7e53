// The streaming GGUF writer: what it writes reads back; errors leave no file behind.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "gguf/gguf.h"
#include "cli_util.h"
#include "gguf/stream_writer.h"

namespace glia::test {
namespace {

TEST(StreamWriter, RoundTripInPieces) {
    ScratchDir dir("stream");
    const std::string path = dir.file("a.gguf");
    gguf::StreamWriter w;
    w.set_str("general.architecture", "llama");
    w.set_u32("general.file_type", 1);
    w.set_f32("x.eps", 1e-5f);
    w.set_bool("x.flag", true);
    w.set_u32("general.file_type", 7);  // replaced: moves to the end
    gguf::Value arr;
    arr.type = gguf::ValueType::ARRAY;
    arr.elem_type = gguf::ValueType::STRING;
    const std::vector<std::string> words = {"a", "bc", ""};
    for (const auto& s : words) { gguf::Value v; v.type = gguf::ValueType::STRING; v.s = s; arr.arr.push_back(v); }
    w.set("tok.words", arr);
    w.add_tensor("t0", DType::F32, {3, 2});
    w.add_tensor("t1", DType::F16, {5, 1, 1});  // stored as 1-D
    EXPECT_EQ(w.tensor_bytes(0), 24u);
    w.open(path);
    const float a[6] = {1, 2, 3, 4, 5, 6};
    w.write(a, 8);
    w.write(reinterpret_cast<const uint8_t*>(a) + 8, 16);
    const uint16_t h[5] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500};
    w.write(h, sizeof h);
    EXPECT_FALSE(std::filesystem::exists(path));  // only after finish()
    w.finish();
    EXPECT_EQ(std::filesystem::file_size(path), w.file_size());

    auto f = gguf::File::open(path);
    ASSERT_EQ(f->kvs().size(), 5u);
    EXPECT_EQ(f->kvs()[3].key, "general.file_type");
    EXPECT_EQ(f->get<uint32_t>("general.file_type"), 7u);
    EXPECT_FLOAT_EQ(f->get<float>("x.eps"), 1e-5f);
    EXPECT_TRUE(f->get<bool>("x.flag"));
    EXPECT_EQ(f->get_array<std::string>("tok.words"), words);
    const auto& t0 = f->tensor("t0");
    EXPECT_EQ(t0.n_dims, 2u);
    EXPECT_EQ(0, std::memcmp(t0.data, a, sizeof a));
    const auto& t1 = f->tensor("t1");
    EXPECT_EQ(t1.n_dims, 1u);
    EXPECT_EQ(t1.offset % 32, 0u);
    EXPECT_EQ(0, std::memcmp(t1.data, h, sizeof h));
}

TEST(StreamWriter, ErrorsLeaveNoFile) {
    ScratchDir dir("stream-err");
    const std::string path = dir.file("b.gguf");
    {
        gguf::StreamWriter w;
        w.add_tensor("t", DType::F32, {4});
        EXPECT_THROW(w.add_tensor("t", DType::F32, {4}), Error);          // duplicate
        EXPECT_THROW(w.add_tensor("q", DType::Q4_0, {16}), Error);        // row not a block multiple
        w.open(path);
        const float x[8] = {};
        EXPECT_THROW(w.write(x, sizeof x), Error);                        // past the tensor's end
    }
    EXPECT_FALSE(std::filesystem::exists(path));
    {
        gguf::StreamWriter w;
        w.add_tensor("t", DType::F32, {4});
        w.open(path);
        const float x[2] = {};
        w.write(x, sizeof x);
        EXPECT_THROW(w.finish(), Error);                                  // incomplete
    }
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_TRUE(std::filesystem::is_empty(std::filesystem::path(path).parent_path()));
}

// The header alone parses as a data-less File: the layout of a file before writing it.
TEST(StreamWriter, HeaderOnlyFileHasTheLayoutWithoutData) {
    gguf::StreamWriter w;
    w.set_str("general.architecture", "llama");
    w.set_u32("general.alignment", 64);
    w.add_tensor("a", DType::F32, {7});
    w.add_tensor("b", DType::Q8_0, {64, 3});
    const std::string h = w.header();
    auto f = gguf::File::header_only(std::vector<uint8_t>(h.begin(), h.end()), "layout");
    EXPECT_FALSE(f->has_data());
    EXPECT_EQ(f->get<std::string>("general.architecture"), "llama");
    ASSERT_EQ(f->tensors().size(), 2u);
    EXPECT_EQ(f->tensor("a").nbytes, 28u);
    EXPECT_EQ(f->tensor("b").nbytes, w.tensor_bytes(1));
    EXPECT_EQ(f->tensor("b").offset, 64u);
    EXPECT_EQ(f->tensor("b").data, nullptr);
    EXPECT_EQ(f->data_offset() + 64 + ((w.tensor_bytes(1) + 63) / 64) * 64, w.file_size());
    // A cut header is still an error naming the field.
    EXPECT_THROW(gguf::File::header_only(std::vector<uint8_t>(h.begin(), h.end() - 5), "cut"), Error);
    // The normal parse still requires the data.
    EXPECT_THROW(gguf::File::from_memory(std::vector<uint8_t>(h.begin(), h.end()), "no-data"), Error);
}

}  // namespace
}  // namespace glia::test
