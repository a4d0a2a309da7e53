// Matrix-vector products outside k_matmul.cu, first versions:
//   - products with stacks of matrices: MATMUL_HEADS (one matrix per head, absorbed MLA in
//     kimi-k3) and the MoE expert products MOE_EXPERTS / MOE_EXPERTS_GLU;
//   - MATMUL with float weights whose rows are not a whole number of 32-value chunks
//     (stories260K's ffn_down, K = 172), which the chunked kernels cannot take.
//
// The stacked products share one kernel: a warp computes one output y(b)[r] = sum over
// k < nk of scale(b, k) * W[m(b, k)][r] . x(b, k), dequantizing its row 32 values at a time
// (lane, lane + 32, ...) with float activations, the terms added in k order. Templated on
// the weight type only, so each type costs one instantiation, and the three products of
// an expert FFN may each have their own type (qwen3moe Q4_K_M: Q6_K down experts):
//   MATMUL_HEADS  b = (token, head), m = head, nk = 1
//   experts       1. gate:  b = (token, i-th selected), m = ids[b], into scratch h[b]
//                 2. up:    the same rows of the up experts; the epilogue applies the gated
//                           activation in place, h[b] = act(h[b], up . x)
//                 3. down:  b = token, nk = n_used, m = ids[t][k], x = h[t][k], scale =
//                           the routing weight: the weighted sum in selection order, as the
//                           CPU adds it (y = w_0 o_0, then y + w_k o_k).
// Decode reads each selected expert's rows once; prefill reads them once per (token,
// expert). Packed stacks (Q4_K, Q6_K, Q8_0) take k_mmvq.cu's kernels instead, the pairs
// sorted by expert on tensor cores for many tokens; a stack of another type beside packed
// ones goes through launch_experts_stack / launch_experts_down here.
#include <cuda_bf16.h>

#include "dequant.cuh"
#include "glu.cuh"
#include "quant/quant.h"

namespace glia::cuda {
namespace {

constexpr int kWarps = 4;  // output rows per block

enum class Epilogue : int { STORE, SWIGLU, SITU };

struct Gemv {
    const uint8_t* w;
    int64_t w_row, w_mat;  // bytes between rows and between matrices
    int64_t K, N;
    int nk;                // terms per output
    const int32_t* ids;    // m(b, k) = ids[b * nk + k]; null: m = b % mat_mod
    int64_t mat_mod;
    const char* x;         // x(b, k) = x + (b % x_mod) x_lo + (b / x_mod) x_hi + k x_k (bytes)
    int64_t x_mod, x_lo, x_hi, x_k;
    const float* scale;    // scale(b, k) = scale[b * nk + k]; null: 1
    float* y;              // y(b)[r] = y[b * N + r]
    Epilogue epi;
    float beta, linear_beta;  // SITU
};

template <DType D>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(Gemv a) {
    const int lane = threadIdx.x % 32;
    const int64_t b = blockIdx.x;
    const int64_t r = int64_t(blockIdx.y) * kWarps + threadIdx.x / 32;
    if (r >= a.N) return;
    const char* xb = a.x + (b % a.x_mod) * a.x_lo + (b / a.x_mod) * a.x_hi;
    float total = 0.0f;
    for (int k = 0; k < a.nk; ++k) {
        const int64_t m = a.ids ? int64_t(a.ids[b * a.nk + k]) : b % a.mat_mod;
        const uint8_t* row = a.w + m * a.w_mat + r * a.w_row;
        const float* xk = reinterpret_cast<const float*>(xb + k * a.x_k);
        float acc = 0.0f;
        for (int64_t c = lane; c < a.K / 32; c += 32) {
            float v[32];
            Dq<D>::chunk(row, c, v);
#pragma unroll
            for (int i = 0; i < 32; ++i) acc = fmaf(v[i], xk[c * 32 + i], acc);
        }
        const float d = warp_sum(acc);
        const float sc = a.scale ? a.scale[b * a.nk + k] : 1.0f;
        total = k == 0 ? d * sc : total + d * sc;
    }
    if (lane != 0) return;
    float* y = a.y + b * a.N + r;
    switch (a.epi) {
        case Epilogue::STORE: *y = total; break;
        case Epilogue::SWIGLU: *y = swiglu_value(*y, total); break;
        case Epilogue::SITU: *y = situ_value(*y, total, a.beta, a.linear_beta); break;
    }
}

void gemv(const Gemv& a, DType type, int64_t B, cudaStream_t s) {
    const dim3 grid(unsigned(B), unsigned((a.N + kWarps - 1) / kWarps));
    GLIA_CUDA_TYPE_SWITCH(type, (gemv_kernel<D><<<grid, kWarps * 32, 0, s>>>(a)));
}

// A plain product of W's matrices: no ids, no scale, stored.
Gemv plain(const Tensor& w) {
    Gemv a{};
    a.w = static_cast<const uint8_t*>(w.data);
    a.w_row = int64_t(w.nb[1]);
    a.w_mat = int64_t(w.nb[2]);
    a.K = w.ne[0];
    a.N = w.ne[1];
    a.nk = 1;
    a.mat_mod = 1;
    a.x_mod = 1;
    a.epi = Epilogue::STORE;
    return a;
}

// One element of a float row (F32, F16, BF16), by scalar loads (rows of any length and
// alignment).
template <DType D> __device__ inline float element(const uint8_t* row, int64_t i) {
    if constexpr (D == DType::F32) return reinterpret_cast<const float*>(row)[i];
    else if constexpr (D == DType::F16) return h2f(reinterpret_cast<const uint16_t*>(row)[i]);
    else return __uint_as_float(uint32_t(reinterpret_cast<const uint16_t*>(row)[i]) << 16);
}

// out[t][r] = W[r] . x[t], a warp per (token, row), lanes striding over the row.
template <DType D>
__global__ void __launch_bounds__(kWarps * 32) matmul_rows_kernel(const uint8_t* w, int64_t w_row, const float* x,
                                                                  int64_t x_row, float* out, int64_t K, int64_t N) {
    const int lane = threadIdx.x % 32;
    const int64_t t = blockIdx.x;
    const int64_t r = int64_t(blockIdx.y) * kWarps + threadIdx.x / 32;
    if (r >= N) return;
    const uint8_t* row = w + r * w_row;
    const float* xt = x + t * x_row;
    float acc = 0.0f;
    for (int64_t i = lane; i < K; i += 32) acc = fmaf(element<D>(row, i), xt[i], acc);
    acc = warp_sum(acc);
    if (lane == 0) out[t * N + r] = acc;
}

}  // namespace

bool matmul_any_k_supported(const Tensor& w) {
    return (w.type == DType::F32 || w.type == DType::F16 || w.type == DType::BF16) && w.ne[2] == 1 && w.ne[1] > 0 &&
           w.ne[1] <= 65535LL * kWarps;
}

void launch_matmul_any_k(const Node& n, cudaStream_t s, float* xr) {
    const Tensor& w = *n.src[MatmulArg::W];
    const Tensor& x = *n.src[MatmulArg::X];
    const int64_t K = w.ne[0], N = w.ne[1], T = x.n_rows();
    const dim3 grid(unsigned(T), unsigned((N + kWarps - 1) / kWarps));
    const auto* wp = static_cast<const uint8_t*>(w.data);
    int64_t x_row = int64_t(x.nb[1] / sizeof(float));
    const float* xp = x.ptr<float>();
    if (act_rounding(w.type)) {
        launch_act_round(w.type, static_cast<const char*>(x.data), int64_t(x.nb[1]), 0, K, T, 1, xr, s);
        xp = xr;
        x_row = K;
    }
    switch (w.type) {
        case DType::F32:
            matmul_rows_kernel<DType::F32><<<grid, kWarps * 32, 0, s>>>(wp, int64_t(w.nb[1]), xp, x_row,
                                                                        n.out->ptr<float>(), K, N);
            break;
        case DType::F16:
            matmul_rows_kernel<DType::F16><<<grid, kWarps * 32, 0, s>>>(wp, int64_t(w.nb[1]), xp, x_row,
                                                                        n.out->ptr<float>(), K, N);
            break;
        case DType::BF16:
            matmul_rows_kernel<DType::BF16><<<grid, kWarps * 32, 0, s>>>(wp, int64_t(w.nb[1]), xp, x_row,
                                                                         n.out->ptr<float>(), K, N);
            break;
        default: fail("cuda: no row-product kernel for ", dtype_name(w.type));
    }
}

namespace {

// kind: 1 f16 values, 2 bf16 values, 32 / 256: 8-bit blocks of that many values. One warp per
// block (32: a lane a value; 256: eight values a lane); f16/bf16: a thread a value.
// In place allowed (x == out): a thread reads its own values before writing them.
__global__ void act_round_kernel(int kind, const char* x, int64_t nb1, int64_t nb2, int64_t K, int64_t n1, int64_t rows,
                                 float* out) {
    const int per = kind >= 32 ? kind / 32 : 1;  // values a lane
    const int64_t gid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const int64_t lanes_per_row = kind >= 32 ? K / per : K;
    if (gid >= rows * lanes_per_row) return;  // whole warps leave together (K / per is a multiple of 32)
    const int64_t r = gid / lanes_per_row, i0 = (gid % lanes_per_row) * per;
    const float* xr = reinterpret_cast<const float*>(x + (r % n1) * nb1 + (r / n1) * nb2);
    float* o = out + r * K;
    if (kind == 1) {
        o[i0] = __half2float(__float2half_rn(xr[i0]));
        return;
    }
    if (kind == 2) {
        o[i0] = __bfloat162float(__float2bfloat16_rn(xr[i0]));
        return;
    }
    float v[8], amax = 0.0f;
    for (int j = 0; j < per; ++j) amax = fmaxf(amax, fabsf(v[j] = xr[i0 + j]));
    const int span = kind / per;  // lanes of one block: 32 either way
    for (int o2 = span / 2; o2 > 0; o2 >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o2));
    if (kind == 32) {
        // Q8_0 / Q8_1 as the CPU's activation quantizer (quantize_act_q8_0): d = amax / 127
        // stored as f16, values rounded to nearest even with 127 / amax (not 1 / d: the two
        // differ in the last bit for some amax, which flipped a long prompt's argmax).
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const float dh = __half2float(__float2half_rn(d));
        o[i0] = float(__float2int_rn(v[0] * id)) * dh;
    } else {
        // Q8_K: a float scale, values rounded with 127 / amax and clamped to 127.
        const float is = amax != 0.0f ? 127.0f / amax : 0.0f, d = is != 0.0f ? 1.0f / is : 0.0f;
        for (int j = 0; j < per; ++j) o[i0 + j] = float(min(127, __float2int_rn(v[j] * is))) * d;
    }
}

}  // namespace

// The weight type's vec_dot_type (the quant table's, as the CPU backend converts to).
bool act_rounding(DType t) { return quant::traits(t).vec_dot_type != DType::F32; }

void launch_act_round(DType t, const char* x, int64_t nb1, int64_t nb2, int64_t K, int64_t n1, int64_t n2, float* out,
                      cudaStream_t s) {
    int kind = 0;
    switch (quant::traits(t).vec_dot_type) {
        case DType::F16: kind = 1; break;
        case DType::BF16: kind = 2; break;
        case DType::Q8_0: case DType::Q8_1: kind = 32; break;
        case DType::Q8_K: kind = 256; break;
        default: fail("cuda: no activation rounding for ", dtype_name(t));
    }
    if (kind >= 32 && K % kind != 0) fail("cuda: activation rows of ", K, " values are not whole ", kind, "-value blocks");
    const int64_t rows = n1 * n2, threads = rows * (kind >= 32 ? K / (kind / 32) : K);
    act_round_kernel<<<unsigned((threads + 255) / 256), 256, 0, s>>>(kind, x, nb1, nb2, K, n1, rows, out);
}

bool experts_type_supported(DType t) { return type_supported(t); }

bool experts_shape_supported(int64_t K, int64_t N) { return K % 32 == 0 && N > 0 && N <= 65535LL * kWarps; }

void launch_matmul_heads(const Node& n, cudaStream_t s, float* xr) {
    const Tensor& w = *n.src[MatmulArg::W];
    const Tensor& x = *n.src[MatmulArg::X];
    const int64_t K = x.ne[0], H = x.ne[1], T = x.ne[2];
    Gemv a = plain(w);
    a.mat_mod = H;
    a.x = static_cast<const char*>(x.data);
    a.x_mod = H;
    a.x_lo = int64_t(x.nb[1]);
    a.x_hi = int64_t(x.nb[2]);
    if (act_rounding(w.type)) {
        launch_act_round(w.type, a.x, a.x_lo, a.x_hi, K, H, T, xr, s);
        a.x = reinterpret_cast<const char*>(xr);
        a.x_lo = K * int64_t(sizeof(float));
        a.x_hi = H * a.x_lo;
    }
    a.y = n.out->ptr<float>();
    gemv(a, w.type, H * T, s);
}

// The hidden rows, then the activations as the gate and the up products see them.
size_t moe_scratch_bytes(const Node& n) {
    const Tensor& ids = *n.src[MoeExpertsArg::IDS];
    const Tensor& x = *n.src[MoeExpertsArg::X];
    return (size_t(ids.ne[0]) * size_t(ids.ne[1]) * size_t(n.src[MoeExpertsArg::GATE]->ne[1]) +
            2 * size_t(x.ne[0]) * size_t(x.ne[1])) *
           sizeof(float);
}

void launch_moe_experts(const Node& n, cudaStream_t s, float* hidden) {
    const Tensor& x = *n.src[MoeExpertsArg::X];
    const Tensor& gate = *n.src[MoeExpertsArg::GATE];
    const Tensor& up = *n.src[MoeExpertsArg::UP];
    const Tensor& down = *n.src[MoeExpertsArg::DOWN];
    const int32_t* ids = n.src[MoeExpertsArg::IDS]->ptr<int32_t>();
    const int n_used = int(n.src[MoeExpertsArg::IDS]->ne[0]);
    const int64_t T = x.ne[1], B = T * n_used;
    Epilogue act = Epilogue::SWIGLU;
    float beta = 1.0f, linear_beta = 1.0f;
    if (n.op == Op::MOE_EXPERTS_GLU) {
        const GluParams& gp = n.p<GluParams>();
        if (gp.kind == GluKind::SITU) act = Epilogue::SITU;
        else if (gp.kind != GluKind::SWIGLU) fail("cuda: moe_experts_glu: no kernel for this activation");
        beta = gp.beta;
        linear_beta = gp.linear_beta;
    }
    // The activations as each product sees them (act_rounding), after the hidden rows.
    const int64_t F = gate.ne[1], K = x.ne[0];
    float* xr[2] = {hidden + B * F, hidden + B * F + K * T};
    for (int m = 0; m < 2; ++m) {
        const Tensor& w = m ? up : gate;
        if (!act_rounding(w.type) || (m == 1 && w.type == gate.type && act_rounding(gate.type))) continue;
        launch_act_round(w.type, static_cast<const char*>(x.data), int64_t(x.nb[1]), 0, K, T, 1, xr[m], s);
    }
    if (up.type == gate.type) xr[1] = xr[0];
    // 1-2: h[t * n_used + i] = act(gate_e . x_t, up_e . x_t), e = ids[t][i].
    for (const Tensor* w : {&gate, &up}) {
        Gemv a = plain(*w);
        a.ids = ids;
        a.x = static_cast<const char*>(x.data);
        a.x_mod = n_used;  // b / n_used = the token
        a.x_hi = int64_t(x.nb[1]);
        if (act_rounding(w->type)) {
            a.x = reinterpret_cast<const char*>(xr[w == &up ? 1 : 0]);
            a.x_hi = K * int64_t(sizeof(float));
        }
        a.y = hidden;
        if (w == &up) {
            a.epi = act;
            a.beta = beta;
            a.linear_beta = linear_beta;
        }
        gemv(a, w->type, B, s);
    }
    // 3: out[t] = sum over i in order of weight[t][i] * down_e . h[t * n_used + i].
    launch_experts_down(down, hidden, ids, n_used, n.src[MoeExpertsArg::WEIGHTS]->ptr<float>(), T, n.out->ptr<float>(),
                        s);
}

void launch_experts_stack(const Tensor& w, const Tensor& x, const int32_t* ids, int n_used, float* out, float* xr,
                          cudaStream_t s) {
    const int64_t K = x.ne[0], T = x.ne[1];
    Gemv a = plain(w);
    a.ids = ids;
    a.x = static_cast<const char*>(x.data);
    a.x_mod = n_used;  // b / n_used = the token
    a.x_hi = int64_t(x.nb[1]);
    if (act_rounding(w.type)) {
        launch_act_round(w.type, static_cast<const char*>(x.data), int64_t(x.nb[1]), 0, K, T, 1, xr, s);
        a.x = reinterpret_cast<const char*>(xr);
        a.x_hi = K * int64_t(sizeof(float));
    }
    a.y = out;
    gemv(a, w.type, T * n_used, s);
}

void launch_experts_down(const Tensor& down, float* h, const int32_t* ids, int n_used, const float* weights, int64_t T,
                         float* out, cudaStream_t s) {
    const int64_t F = down.ne[0], B = T * n_used;
    if (act_rounding(down.type))
        launch_act_round(down.type, reinterpret_cast<const char*>(h), F * int64_t(sizeof(float)), 0, F, B, 1, h, s);
    Gemv a = plain(down);
    a.nk = n_used;
    a.ids = ids;
    a.x = reinterpret_cast<const char*>(h);
    a.x_hi = int64_t(n_used) * F * int64_t(sizeof(float));
    a.x_k = F * int64_t(sizeof(float));
    a.scale = weights;
    a.y = out;
    gemv(a, down.type, T, s);
}

}  // namespace glia::cuda
