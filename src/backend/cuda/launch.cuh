// Launchers of the kernels for the ops of the newer families (qwen35, kimi-k3, gemma4) and
// the stacked-matrix products, with the shape limits their supports() entries check:
// k_mix.cu, k_recurrent.cu (as the CPU's ops_mix.cpp and ops_recurrent.cpp), k_gemv.cu,
// k_moe_conv.cu.
#pragma once
#include "common.cuh"

namespace glia::cuda {

void launch_mix(const Node& n, cudaStream_t s);  // MUL_BCAST, CONCAT, SITU, RES_MIX
bool res_mix_shape_supported(const Node& n);     // saved streams <= 255
void launch_unary(const Node& n, cudaStream_t s);
void launch_delta_net(const Node& n, cudaStream_t s);
bool delta_net_shape_supported(const Node& n);   // key head size <= 256
void launch_matmul_heads(const Node& n, cudaStream_t s, float* xr);  // xr: x's size in floats
void launch_moe_gather_weights(const Node& n, cudaStream_t s);
// Products with stacked matrices of K inputs and N outputs (MATMUL_HEADS, expert FFNs).
bool experts_shape_supported(int64_t K, int64_t N);
bool experts_type_supported(DType t);  // the weight types of dequant.cuh
// MATMUL with F32/F16/BF16 weights of any row length (the chunked kernels need K % 32 == 0).
bool matmul_any_k_supported(const Tensor& w);
void launch_matmul_any_k(const Node& n, cudaStream_t s, float* xr);  // xr: x's size in floats

}  // namespace glia::cuda
