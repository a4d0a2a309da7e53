// Bit-exactness against the reference implementation:
//  - Dequant goldens: every tensor of /shared/golden/dequant/index.json dequantized row by
//    row must hash (sha256 of the f32 little-endian bytes) to the reference's value.
//  - Quantizer reproduction: the quantized tiny-llama files were written by the reference
//    quantizer (no importance matrix) from the F16 file, so quantizing the F16 weights
//    with quantize_row must reproduce their bytes exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/sha256.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "test_util.h"

namespace glia {
namespace {

static_assert(sizeof(float) == 4);

bool little_endian() {
    const uint32_t one = 1;
    uint8_t b;
    std::memcpy(&b, &one, 1);
    return b == 1;
}

class DequantGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(DequantGolden, WholeTensorSha256MatchesReference) {
    ASSERT_TRUE(little_endian());
    const std::string type_name = GetParam();
    const auto index = nlohmann::json::parse(test::read_text(test::shared_path("golden/dequant/index.json")));
    const nlohmann::json* entry = nullptr;
    for (const auto& e : index.at("tensors"))
        if (e.at("type").get<std::string>() == type_name) entry = &e;
    ASSERT_NE(entry, nullptr) << "no golden entry for " << type_name;

    const std::string model = test::shared_path("models/" + entry->at("model_file").get<std::string>());
    const std::string tname = entry->at("tensor").get<std::string>();
    std::unique_ptr<gguf::File> f = gguf::File::open(model);
    const gguf::TensorInfo& ti = f->tensor(tname);
    DType want;
    ASSERT_TRUE(dtype_from_name(type_name, want));
    ASSERT_EQ(ti.type, want) << tname;
    const auto ne = entry->at("ne").get<std::vector<int64_t>>();
    for (size_t i = 0; i < ne.size(); ++i) ASSERT_EQ(ti.ne[i], ne[i]) << "ne[" << i << "]";

    const int64_t row = ti.ne[0];
    const int64_t rows = ti.n_rows();
    const size_t rb = row_bytes(ti.type, row);
    ASSERT_EQ(ti.nbytes, rb * size_t(rows));
    const int64_t rows_stored = entry->at("rows_stored").get<int64_t>();
    const std::vector<uint8_t> stored =
        test::read_bytes(test::shared_path("golden/dequant/" + entry->at("values_file").get<std::string>()));
    ASSERT_EQ(stored.size(), size_t(rows_stored * row) * 4);

    Sha256 hash;
    std::vector<float> y(static_cast<size_t>(row));
    double sum = 0, sum_abs = 0;
    std::string first_diff;
    for (int64_t r = 0; r < rows; ++r) {
        quant::dequantize_row(ti.type, ti.data + size_t(r) * rb, y.data(), row);
        hash.update(y.data(), y.size() * 4);
        for (float v : y) { sum += v; sum_abs += std::fabs(v); }
        if (r < rows_stored && first_diff.empty()) {
            for (int64_t c = 0; c < row; ++c) {
                float ref;
                std::memcpy(&ref, stored.data() + size_t(r * row + c) * 4, 4);
                if (std::memcmp(&ref, &y[size_t(c)], 4) != 0) {
                    std::ostringstream os;
                    os.precision(9);
                    os << "first difference at row " << r << " column " << c << ": got " << y[size_t(c)]
                       << ", reference " << ref;
                    first_diff = os.str();
                    break;
                }
            }
        }
    }
    const std::string got = hash.hex();
    const std::string expected = entry->at("sha256_full_tensor_f32le").get<std::string>();
    EXPECT_EQ(got, expected) << type_name << " " << tname << ": "
                             << (first_diff.empty() ? "the first " + std::to_string(rows_stored) +
                                                          " rows match; the mismatch is further on"
                                                    : first_diff);
    EXPECT_TRUE(first_diff.empty()) << first_diff;
    EXPECT_NEAR(sum, entry->at("sum_full_tensor").get<double>(), 1e-9 * sum_abs + 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Types, DequantGolden,
                         ::testing::Values("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                           "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
                                           "IQ4_NL", "IQ4_XS"),
                         [](const auto& info) { return info.param; });

// Quantizer reproduction: one model file per quantizer under test; every tensor whose type
// is one of the types checked there is re-quantized from the F16 file and compared.
struct QuantCase {
    const char* file;
    std::vector<DType> types;
};

class QuantizerReproduces : public ::testing::TestWithParam<QuantCase> {};

TEST_P(QuantizerReproduces, ReferenceModelFileBytes) {
    const QuantCase& qc = GetParam();
    std::unique_ptr<gguf::File> src = gguf::File::open(test::shared_path("models/tiny-llama-f16.gguf"));
    std::unique_ptr<gguf::File> dst = gguf::File::open(test::shared_path(std::string("models/") + qc.file));
    std::map<DType, int> checked;
    for (const gguf::TensorInfo& ti : dst->tensors()) {
        bool want = false;
        for (DType t : qc.types) want |= ti.type == t;
        if (!want) continue;
        const gguf::TensorInfo* si = src->find_tensor(ti.name);
        ASSERT_NE(si, nullptr) << ti.name;
        ASSERT_EQ(si->n_elements(), ti.n_elements()) << ti.name;
        const int64_t row = ti.ne[0];
        const size_t rb = row_bytes(ti.type, row);
        const size_t srb = row_bytes(si->type, row);
        std::vector<float> x(static_cast<size_t>(row));
        std::vector<uint8_t> q(rb);
        for (int64_t r = 0; r < ti.n_rows(); ++r) {
            quant::dequantize_row(si->type, si->data + size_t(r) * srb, x.data(), row);
            quant::quantize_row(ti.type, x.data(), q.data(), row);
            const uint8_t* ref = ti.data + size_t(r) * rb;
            if (std::memcmp(q.data(), ref, rb) != 0) {
                size_t byte = 0;
                while (q[byte] == ref[byte]) ++byte;
                const size_t block = byte / quant::traits(ti.type).type_size;
                FAIL() << qc.file << " " << ti.name << " (" << dtype_name(ti.type) << ") row " << r
                       << ": first differing byte " << byte << " (block " << block << ", offset "
                       << byte % quant::traits(ti.type).type_size << "): got " << int(q[byte])
                       << ", reference " << int(ref[byte]);
            }
        }
        ++checked[ti.type];
    }
    for (DType t : qc.types) EXPECT_GT(checked[t], 0) << "no " << dtype_name(t) << " tensor in " << qc.file;
}

INSTANTIATE_TEST_SUITE_P(
    Files, QuantizerReproduces,
    ::testing::Values(QuantCase{"tiny-llama-q8_0.gguf", {DType::Q8_0}},
                      QuantCase{"tiny-llama-q4_0.gguf", {DType::Q4_0, DType::Q6_K}},
                      QuantCase{"tiny-llama-q4_1.gguf", {DType::Q4_1}},
                      QuantCase{"tiny-llama-q5_0.gguf", {DType::Q5_0}},
                      QuantCase{"tiny-llama-q5_1.gguf", {DType::Q5_1}},
                      QuantCase{"tiny-llama-q2_k.gguf", {DType::Q2_K, DType::Q3_K}},
                      QuantCase{"tiny-llama-q3_k_m.gguf", {DType::Q3_K, DType::Q4_K, DType::Q5_K}},
                      QuantCase{"tiny-llama-q4_k_m.gguf", {DType::Q4_K, DType::Q6_K}},
                      QuantCase{"tiny-llama-q5_k_m.gguf", {DType::Q5_K, DType::Q6_K}},
                      QuantCase{"tiny-llama-q6_k.gguf", {DType::Q6_K}},
                      QuantCase{"tiny-llama-iq4_nl.gguf", {DType::IQ4_NL}},
                      QuantCase{"tiny-llama-iq4_xs.gguf", {DType::IQ4_XS}}),
    [](const auto& info) {
        std::string n = info.param.file;
        n = n.substr(std::string("tiny-llama-").size());
        n = n.substr(0, n.find('.'));
        return n;
    });

}  // namespace
}  // namespace glia
