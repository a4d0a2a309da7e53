// Shared by the CUDA kernels: error checks that name the op, f16 helpers, launch sizes.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "core/error.h"
#include "graph/graph.h"
#include "ksplit.cuh"
#include "rowvec.cuh"

namespace glia::cuda {

#define GLIA_CUDA_CHECK(expr, what)                                                                  \
    do {                                                                                            \
        const cudaError_t err_ = (expr);                                                            \
        if (err_ != cudaSuccess) ::glia::fail("CUDA error in ", what, ": ", cudaGetErrorString(err_)); \
    } while (0)

// Where a kernel's operands are: row (i1, i2) of a tensor with byte strides.
struct Rows {
    const char* p;
    int64_t nb1, nb2;
    int64_t ne0, ne1;
    __host__ static Rows of(const Tensor& t) { return {static_cast<const char*>(t.data), int64_t(t.nb[1]), int64_t(t.nb[2]), t.ne[0], t.ne[1]}; }
    __device__ const float* f(int64_t i1, int64_t i2 = 0) const { return reinterpret_cast<const float*>(p + i1 * nb1 + i2 * nb2); }
};

// Programmatic dependent launch (sm_90). A kernel started with launch_pdl may begin while
// the kernel before it on the stream is still running: before pdl_wait() it may only read
// what no kernel writes during a step (weights); every read of activations, state or scratch
// and every write comes after it, on every path (a block that returns early waits first, so
// the grid never completes before its predecessor). pdl_wait() returns when the predecessor
// has completed and its writes are visible; it is a no-op for a kernel launched plainly.
// pdl_next() lets the next kernel start early (it takes effect once every block has called
// it or exited). GLIA_CUDA_PDL=0 launches everything plainly (A/B, bisecting).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_next() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
bool pdl_enabled();
int sm_count();  // the current GPU's multiprocessors (132 where the runtime cannot tell); k_mma16.cu
// Launches kernel k (which calls pdl_wait as above) allowed to overlap its predecessor.
template <typename... P, typename... A>
void launch_pdl(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A&&... args) {
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    cudaLaunchKernelEx(&cfg, k, std::forward<A>(args)...);  // errors: cudaGetLastError() after
}

__device__ inline float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ inline uint16_t f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
__device__ inline float round_h(float f) { return __half2float(__float2half_rn(f)); }
__device__ inline uint16_t f2bf(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }

__device__ inline float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
// The sum of v over the block (at most 1024 threads): one reduction order wherever it is
// used (the RMS norm kernels rely on it to give the same bits fused or not).
__device__ inline float block_sum(float v) {
    __shared__ float part[32];
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        float w = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
        w = warp_sum(w);
        if (threadIdx.x == 0) part[0] = w;
    }
    __syncthreads();
    return part[0];
}
__device__ inline float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Kernel launchers (one file each); each takes the node with operands in device memory.
void launch_get_rows(const Node& n, cudaStream_t s);
void launch_rms_norm(const Node& n, cudaStream_t s);
void launch_binary(const Node& n, cudaStream_t s);   // ADD, MUL, SCALE, SOFTCAP, SWIGLU, GEGLU
void launch_rope(const Node& n, cudaStream_t s);
// Two ROPE (or ROPE_FREQS) nodes of the same positions and parameters (q and k) in one
// launch, each element as launch_rope computes it; m null: n alone.
bool rope_pair_fusable(const Node& a, const Node& b, bool placed = true);
void launch_rope_pair(const Node& n, const Node* m, cudaStream_t s);
void launch_argmax(const Node& n, cudaStream_t s);  // ARGMAX, one block per row
// Activations as the reference's products see them (k_gemv.cu). The reference converts each
// activation row to its weight type's vec_dot_type before a product: 8-bit blocks of 32
// values with an f16 scale (Q8_0 / Q8_1: the 32-value weight types), of 256 with a float
// scale (Q8_K: the K-quants, IQ4_XS), f16 or bf16 values (F16, BF16 weights). The kernels that
// multiply float activations by dequantized weights take these values instead of x
// (out-of-place; rows of x at byte strides nb1 (rows 0..n1-1) and nb2, out contiguous).
bool act_rounding(DType weight_type);  // false: F32 weights (x as is)
void launch_act_round(DType weight_type, const char* x, int64_t nb1, int64_t nb2, int64_t K, int64_t n1, int64_t n2,
                      float* out, cudaStream_t s);
// xr: K x T floats of scratch for the rounded activations (act_rounding).
void launch_matmul(const Node& n, cudaStream_t s, float* xr);
// F16/BF16 weights on tensor cores (k_mma16.cu): any token count, the same bits for each
// token whatever the count; rows of 16-byte multiples, K a multiple of 32. GLIA_CUDA_MMA16=0:
// never (the generic kernel of launch_matmul). Products of one input (mma16_fusable with
// the first, at most mma16_max_group()) run as one launch. scratch: T x K 16-bit values.
bool mma16_usable(const Node& n);
bool mma16_fusable(const Node& a, const Node& b);
int mma16_max_group();
void launch_matmul_mma16(const Node* const* nodes, int count, cudaStream_t s, void* scratch);
// counters: attention_counters(n) ints, zero, left zero (null: a separate merge kernel).
void launch_attention(const Node& n, cudaStream_t s, float* scratch, int* counters);
size_t attention_counters(const Node& n);
size_t attention_scratch_bytes(const Node& n);  // the split results launch_attention needs
// The tensor-core attention (k_attention_tc.cu): head sizes 64 and 128 (K and V alike),
// groups of up to 16 query heads, f16 caches with 16-byte aligned rows: every step that fits,
// decode and prompt alike, so that a batch changes no token's bits (GLIA_CUDA_ATTN_TC=0: the
// CUDA-core kernel of k_attention.cu). launch_attention calls it after storing the K/V rows.
bool attention_tc_usable(const Node& n);
size_t attention_tc_scratch_bytes(const Node& n);
void launch_attention_tc(const Node& n, cudaStream_t s, float* scratch);
inline size_t attention_smem_bytes(int64_t group, int64_t hd, int64_t hd_v) {
    return size_t(group * hd) * 4 + size_t(32 * (hd + 8) + 32 * (hd_v + 8)) * 2;
}
// The most dynamic shared memory an attention block may take (sm_90 allows 227 KiB).
constexpr size_t attention_max_smem() { return 160 * 1024; }
bool matmul_type_supported(DType t);
void launch_moe_route(const Node& n, cudaStream_t s);   // MOE_TOPK, MOE_WEIGHTS
// Two RMS_NORMs of rows of one length (q and k norms) as one kernel (the same values).
// `placed`: the tensors' memory is assigned (false: whether they would fuse if it allowed).
bool norm_pair_fusable(const Node& a, const Node& b, bool placed = true);
void launch_norm_pair(const Node& a, const Node& b, cudaStream_t s);
// MOE_TOPK and the MOE_WEIGHTS of its selection as one kernel (the same values).
bool moe_route_fusable(const Node& topk, const Node& weights, bool placed = true);
void launch_moe_route_pair(const Node& topk, const Node& weights, cudaStream_t s);
void launch_moe_experts(const Node& n, cudaStream_t s, float* hidden);
size_t moe_scratch_bytes(const Node& n);                 // the hidden rows launch_moe_experts needs
// Stages of the expert products on stacks that are not packed, beside packed ones (k_mmvq.cu):
// out[b] = W_{ids[b]} . x_{b / n_used} for every pair b (xr: x.ne[0] x T floats of scratch),
// and out[t] = the sum over i in order of weight[t][i] * down_e . h[t n_used + i] (h: [pairs][F]
// floats, rounded in place for the down type).
void launch_experts_stack(const Tensor& w, const Tensor& x, const int32_t* ids, int n_used, float* out, float* xr,
                          cudaStream_t s);
void launch_experts_down(const Tensor& down, float* h, const int32_t* ids, int n_used, const float* weights, int64_t T,
                         float* out, cudaStream_t s);
void launch_shortconv(const Node& n, cudaStream_t s);
bool rows_type_supported(DType t);
// A residual ADD and the RMS_NORM of its result as one kernel (k_fused.cu).
bool add_rms_norm_fusable(const Node& add, const Node& norm);
void launch_add_rms_norm(const Node& add, const Node& norm, cudaStream_t s);

}  // namespace glia::cuda
