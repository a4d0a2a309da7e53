// Quantization mixes: the named file types (Q4_K_M, Q8_0, ...) and the per-tensor type
// rules that go with them.
//
// The rules reproduce what the reference quantizer (llama.cpp's llama-quantize, without an
// importance matrix) chooses for each tensor, so that files of the same name have the same
// per-tensor types and sizes in both engines:
//  - which tensors are quantized at all (2-D/3-D ".weight" tensors, not norms, not the MoE
//    router, not conv kernels ...); the others keep their type;
//  - the mix rules (output.weight gets Q6_K; attn_v / ffn_down get more bits in the layers
//    use_more_bits() picks; Q3_K_M and Q2_K raise attn_output ...);
//  - the fallback when a row length is not a multiple of the type's block size
//    (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0, IQ4_XS -> IQ4_NL, a
//    32-wide type -> F16; when the fallback still does not fit, F16).
// The rules depend on the order in which the tensors are visited (counters of attn_v
// tensors); the reference visits them in reference_order().
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace glia::gguf { class File; }

namespace glia::quant {

// general.file_type values (the reference's llama_ftype).
enum class FileType : uint32_t {
    ALL_F32 = 0, MOSTLY_F16 = 1, Q4_0 = 2, Q4_1 = 3, Q8_0 = 7, Q5_0 = 8, Q5_1 = 9,
    Q2_K = 10, Q3_K_S = 11, Q3_K_M = 12, Q3_K_L = 13, Q4_K_S = 14, Q4_K_M = 15,
    Q5_K_S = 16, Q5_K_M = 17, Q6_K = 18, IQ4_NL = 25, IQ4_XS = 30, MOSTLY_BF16 = 32,
};

// Parses a mix name ("q4_k_m", "Q8_0", "f16" ...). Like the reference tool, the bare
// K-quant names are aliases: Q3_K = Q3_K_M, Q4_K = Q4_K_M, Q5_K = Q5_K_M.
bool file_type_from_name(std::string_view name, FileType& out);
// Canonical name ("Q4_K_M", "F16" ...); "unknown(N)" for other values.
std::string file_type_name(uint32_t ftype);
// Human description as the reference prints it ("Q4_K - Medium").
std::string file_type_description(uint32_t ftype);
// The names accepted by file_type_from_name, for messages.
std::string file_type_names();
// The default tensor type of a mix (Q4_K for Q4_K_M ...).
DType base_type(FileType ft);

// What the rules need to know about the model.
struct ModelFacts {
    std::string arch;         // general.architecture
    int n_layer = 0;          // <arch>.block_count
    int n_head = 0;           // <arch>.attention.head_count (layer 0)
    int n_head_kv = 0;        // <arch>.attention.head_count_kv (layer 0)
    int n_expert = 0;         // <arch>.expert_count (0: dense)
    bool has_output = false;  // an output.weight tensor exists (else: tied embeddings)
    int n_attention_wv = 0;   // number of attn_v / attn_qkv / attn_kv_b tensors
    int n_gqa() const { return n_head_kv > 0 ? n_head / n_head_kv : 0; }
    // The reference's "70B" model class (llama, 80 layers, grouped-query attention).
    bool is_70b() const { return arch == "llama" && n_layer == 80 && n_head != n_head_kv; }
};

// Reads the facts from a file's metadata and tensor names.
ModelFacts model_facts(const gguf::File& f);
// Same from metadata values and a list of tensor names (synth, tests).
ModelFacts model_facts(std::string arch, int n_layer, int n_head, int n_head_kv, int n_expert,
                       const std::vector<std::string>& tensor_names);

// The order in which the reference quantizer visits (and writes) tensors: tensors outside
// blocks first, then block by block ("blk.N."), by name within each group.
std::vector<size_t> reference_order(const std::vector<std::string>& names);

// Whether the reference quantizes a tensor of this name and number of dimensions at all.
bool allows_quantization(const std::string& name, int n_dims);

// Chooses the type of each tensor. Call choose() once per tensor, in reference_order().
class MixPlanner {
public:
    // pure: every quantizable tensor gets the base type (only the row-length fallback
    // applies), like the reference tool's --pure.
    MixPlanner(FileType ft, ModelFacts facts, bool pure = false);
    // The type the tensor is written as. `cur` is its type in the input file.
    DType choose(const std::string& name, DType cur, int n_dims, int64_t ne0);
    // Tensors that needed the row-length fallback so far.
    int n_fallback() const { return n_fallback_; }
    FileType file_type() const { return ft_; }

private:
    DType mix_rule(const std::string& name, DType t, int64_t ne0);
    DType fallback(DType t, int64_t ne0);
    FileType ft_;
    ModelFacts m_;
    bool pure_;
    int i_attention_wv_ = 0, i_ffn_down_ = 0, i_ffn_gate_ = 0, i_ffn_up_ = 0;
    int n_fallback_ = 0;
};

}  // namespace glia::quant
