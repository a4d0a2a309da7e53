// MATMUL out[t][r] = W[r] . x[t] for every weight type in dequant.cuh, first version:
// one warp per weight row and group of up to 8 tokens; each lane dequantizes 32-value
// chunks of the row (lane, lane + 32, ...) and multiplies them with the tokens' values,
// then the warp sums its lanes. The order of every output's sum depends on K only, never
// on the number of tokens, so a batch changes no row's bits. Decode reads each weight
// byte once per 8 tokens. F16/BF16 weights go to tensor cores where they can (k_mma16.cu).
#include "dequant.cuh"

namespace glia::cuda {
namespace {

constexpr int kTok = 8;    // tokens per warp pass
constexpr int kWarps = 4;  // rows per block

template <DType D>
__global__ void __launch_bounds__(kWarps * 32) matmul_kernel(const uint8_t* w, int64_t w_row, const float* x,
                                                             int64_t x_row, float* out, int64_t K, int64_t N,
                                                             int64_t T) {
    const int lane = threadIdx.x % 32;
    const int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
    const int64_t t0 = int64_t(blockIdx.y) * kTok;
    if (r >= N) return;
    const int nt = int(T - t0 < kTok ? T - t0 : kTok);
    const uint8_t* row = w + r * w_row;
    float acc[kTok] = {};
    for (int64_t c = lane; c < K / 32; c += 32) {
        float v[32];
        Dq<D>::chunk(row, c, v);
#pragma unroll
        for (int j = 0; j < kTok; ++j) {
            if (j >= nt) break;
            const float4* xp = reinterpret_cast<const float4*>(x + (t0 + j) * x_row + c * 32);
            float a = 0.0f;
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                const float4 xv = xp[q];
                a = fmaf(v[4 * q], xv.x, a);
                a = fmaf(v[4 * q + 1], xv.y, a);
                a = fmaf(v[4 * q + 2], xv.z, a);
                a = fmaf(v[4 * q + 3], xv.w, a);
            }
            acc[j] += a;
        }
    }
#pragma unroll
    for (int j = 0; j < kTok; ++j) {
        if (j >= nt) break;
        const float s = warp_sum(acc[j]);
        if (lane == 0) out[(t0 + j) * N + r] = s;
    }
}

}  // namespace

bool matmul_type_supported(DType t) { return type_supported(t); }

void launch_matmul(const Node& n, cudaStream_t s, float* xr) {
    if (mma16_usable(n)) {  // F16/BF16: tensor cores
        const Node* one = &n;
        launch_matmul_mma16(&one, 1, s, xr);
        return;
    }
    const Tensor& w = *n.src[MatmulArg::W];
    const Tensor& x = *n.src[MatmulArg::X];
    const int64_t K = w.ne[0], N = w.ne[1], T = x.n_rows();
    const dim3 grid(unsigned((N + kWarps - 1) / kWarps), unsigned((T + kTok - 1) / kTok));
    const float* xp = x.ptr<float>();
    int64_t x_row = int64_t(x.nb[1] / 4);
    if (act_rounding(w.type)) {  // the values the reference's product sees
        launch_act_round(w.type, static_cast<const char*>(x.data), int64_t(x.nb[1]), 0, K, T, 1, xr, s);
        xp = xr;
        x_row = K;
    }
    GLIA_CUDA_TYPE_SWITCH(w.type, (matmul_kernel<D><<<grid, kWarps * 32, 0, s>>>(
                                      static_cast<const uint8_t*>(w.data), int64_t(w.nb[1]), xp, x_row,
                                      n.out->ptr<float>(), K, N, T)));
}

}  // namespace glia::cuda
