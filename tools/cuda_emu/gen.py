#!/usr/bin/env python3
"""Writes kernels_emu.h: the CUDA backend's newer kernel files (src/backend/cuda/) turned
into host C++ for emu.h (kernel launches become emu_launch calls, __shared__ becomes static,
namespace glia::emucuda so that the real objects can be linked beside them)."""
import re, sys
W = sys.argv[1] + '/src/backend/cuda/'
out_path = sys.argv[2]

def body(f):
    s = open(W + f).read()
    s = re.sub(r'#include "[^"]*"\n', '', s)
    s = s.replace('#include <cuda_bf16.h>\n', '')
    return s.replace('#pragma once\n', '')

head = '''#define GLIA_CUDA_SM90A 1
#include "emu.h"
#include "core/error.h"
#include "core/f16.h"
#include "graph/graph.h"
#include "placement/placement.h"
#include "quant/quant.h"
namespace glia::cuda {
using std::isnan;
inline float h2f(uint16_t h) { return glia::f16_to_f32(h); }
inline float round_h(float f) { return glia::f16_to_f32(glia::f32_to_f16(f)); }
inline float warp_sum(float v) { for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o); return v; }
inline float block_sum(float v) {  // the device's order: warp sums, then warp 0 adds them
    static float part[32];
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    __syncthreads();
    // Every thread takes part in the emulated shuffles; warp 0's sum is the one kept.
    float w = threadIdx.x < 32 && threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.0f;
    w = warp_sum(w);
    __syncthreads();
    if (threadIdx.x == 0) part[0] = w;
    __syncthreads();
    const float r = part[0];
    __syncthreads();
    return r;
}
inline uint16_t __float2bfloat16_rn(float f) { return glia::f32_to_bf16(f); }
inline float __bfloat162float(uint16_t h) { return glia::bf16_to_f32(h); }
inline uint16_t f2h(float f) { return glia::f32_to_f16(f); }
inline uint16_t f2bf(float f) { return glia::f32_to_bf16(f); }
struct __half { uint16_t v; };
struct __half2 { __half x, y; };
inline float2 __half22float2(__half2 h) { return {glia::f16_to_f32(h.x.v), glia::f16_to_f32(h.y.v)}; }
inline __half __float2half_rn(float f) { return {glia::f32_to_f16(f)}; }
inline float __half2float(__half h) { return glia::f16_to_f32(h.v); }
inline int __float2int_rn(float x) { return int(std::nearbyint(x)); }
inline int min(int a, int b) { return a < b ? a : b; }
inline float warp_max(float v) { for (int o = 16; o > 0; o >>= 1) v = std::fmax(v, __shfl_xor_sync(0xffffffffu, v, o)); return v; }
bool act_rounding(DType weight_type);
void launch_act_round(DType weight_type, const char* x, int64_t nb1, int64_t nb2, int64_t K, int64_t n1, int64_t n2,
                      float* out, cudaStream_t s);
void launch_experts_stack(const Tensor& w, const Tensor& x, const int32_t* ids, int n_used, float* out, float* xr,
                          cudaStream_t s);
void launch_experts_down(const Tensor& down, float* h, const int32_t* ids, int n_used, const float* weights, int64_t T,
                         float* out, cudaStream_t s);
// Programmatic dependent launch: the emulator runs launches one after another.
inline void pdl_wait() {}
inline void pdl_next() {}
template <class K, class... A> void launch_pdl(K k, dim3 g, dim3 b, size_t sm, cudaStream_t s, A&&... a) {
    emu_launch(g, b, sm, s, [&](auto... a_) { k(a_...); }, a...);
}
struct Rows {
    const char* p; int64_t nb1, nb2; int64_t ne0, ne1;
    static Rows of(const Tensor& t) { return {static_cast<const char*>(t.data), int64_t(t.nb[1]), int64_t(t.nb[2]), t.ne[0], t.ne[1]}; }
    const float* f(int64_t i1, int64_t i2 = 0) const { return reinterpret_cast<const float*>(p + i1 * nb1 + i2 * nb2); }
};
}
'''
# the attention launchers' declarations and shared-memory sizes, as common.cuh has them
common = open(W + 'common.cuh').read()
attn_decls = '\n'.join(m.group(0) for m in re.finditer(
    r'(int sm_count\(\);|bool attention_tc_usable[^;]*;|size_t attention_tc_scratch_bytes[^;]*;|void launch_attention_tc[^;]*;|'
    r'inline size_t attention_smem_bytes[^}]*}|constexpr size_t attention_max_smem[^}]*})', common))
head = head.rstrip()[:-1] + 'inline void __threadfence() {}\n' + attn_decls + '\n}\n'

def dyn_smem(s):
    # dynamic shared memory as the emulator's buffer (the inline-assembly helpers of mma.cuh,
    # tensor-core mma and cp.async, come from emu.h)
    s = s.replace('extern __shared__ float part[];', 'float* part = reinterpret_cast<float*>(g_dyn.data());')
    s = s.replace('extern __shared__ float qs[];', 'float* qs = reinterpret_cast<float*>(g_dyn.data());')
    return s.replace('extern __shared__ __align__(16) uint8_t smem[];',
                     'uint8_t* smem = reinterpret_cast<uint8_t*>(g_dyn.data());')

parts = [body('ksplit.cuh'), body('rowvec.cuh'), body('glu.cuh'), body('prologue.h'), body('act_prologue.cuh'),
         body('dequant.cuh'), body('strided.cuh'), body('launch.cuh'), body('packed.cuh'), body('packed_terms.cuh'),
         dyn_smem(body('mmq_tile.cuh')), dyn_smem(body('k_mmvq.cu')), dyn_smem(body('k_mma16.cu'))]
parts.append(body('kv_rows.cuh'))  # the KV cache row types of k_attention.cu
for f in ['k_gemv.cu', 'k_mix.cu', 'k_recurrent.cu', 'k_moe_conv.cu', 'k_rows.cu', 'k_fused.cu', 'prologue.cu',
          'k_matmul.cu', 'k_attention.cu', 'k_attention_tc.cu']:
    # names each file keeps to itself on the device (one translation unit each there)
    parts.append(dyn_smem(body(f)).replace('kThreads', 'kThreads_' + f.split('.')[0])
                 .replace('kWarps', 'kWarps_' + f.split('.')[0])
                 .replace('block_sum(', 'block_sum(' if f != 'k_mix.cu' else 'block_sum_mix('))
txt = head + '\n'.join(parts)
txt = txt.replace('extern __shared__ float p[];', 'float* p = reinterpret_cast<float*>(g_dyn.data());')
txt = txt.replace('__shared__', 'static')
txt = re.sub(r'([A-Za-z_][\w:]*(?:<[^<>;]*>)?)<<<(.*?)>>>\(',
             lambda m: 'emu_launch(%s, [&](auto... a_) { %s(a_...); }, ' % (m.group(2), m.group(1)), txt, flags=re.S)
txt = txt.replace('namespace glia::cuda', 'namespace glia::emucuda')
open(out_path, 'w').write(txt)
