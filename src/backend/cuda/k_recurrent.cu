// Ops of the linear-attention (recurrent) blocks, as the CPU's ops_recurrent.cpp, first
// versions.
//   UNARY: silu, sigmoid, softplus over any strided view, one thread per output element.
//   DELTA_NET, the gated delta rule (qwen35, kimi-k3): per value head h and sequence, a
//     dk x dv matrix S lives in the sequence's row of the state operand and is updated in
//     place; for each of the sequence's tokens in batch order:
//       S = diag(exp(g)) S;   u = beta (v - S^T k);   S += k u^T;   o = S^T (q * q_scale)
//     Every column c of S evolves on its own given the token's k, q, g and beta, so a block
//     takes 32 columns of one (sequence, head) and keeps them in registers for the whole
//     batch: 32 lanes x 8 row groups, thread (ty, tx) holding rows ty, ty + 8, ... of
//     column tx (dk <= 256). The two sums over rows (S^T k and S^T q) go through shared
//     memory, rows added in group order. The state is read once and written once per step;
//     a prompt's tokens never leave the registers.
#include "strided.cuh"

namespace glia::cuda {
namespace {

__device__ inline float unary_value(UnaryKind k, float x) {
    switch (k) {
        case UnaryKind::SILU: return x / (1.0f + expf(-x));
        case UnaryKind::SIGMOID: return 1.0f / (1.0f + expf(-x));
        case UnaryKind::SOFTPLUS: return x > 20.0f ? x : logf(1.0f + expf(x));
    }
    return x;
}

__global__ void unary_kernel(View4 x, UnaryKind kind, float* out, int64_t n) {
    const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    int64_t i[4];
    unflatten(idx, x.ne, i);
    out[idx] = unary_value(kind, x.at(i[0], i[1], i[2], i[3]));
}

constexpr int kCols = 32, kGroups = 8, kMaxRows = 32;  // dk <= kGroups * kMaxRows
constexpr int kMaxDk = kGroups * kMaxRows;

__global__ void __launch_bounds__(kCols * kGroups)
    delta_net_kernel(View4 q, View4 k, View4 v, View4 g, View4 beta, char* state, int64_t st_row,
                     const int32_t* seq, float q_scale, float* out, int64_t dk, int64_t dv, int64_t nk, int64_t nv,
                     int64_t T) {
    const int tx = threadIdx.x % kCols, ty = threadIdx.x / kCols;
    const int64_t job = blockIdx.x, slot = job / nv, h = job % nv, hk = h % nk;
    const int64_t c = int64_t(blockIdx.y) * kCols + tx;
    const bool col = c < dv;
    const bool per_channel = g.ne[0] != 1;

    // Nothing to do (and the state untouched) unless this sequence has tokens in the batch.
    bool mine = false;
    for (int64_t t = threadIdx.x; t < T; t += blockDim.x) mine |= seq[t] == slot;
    if (!__syncthreads_or(mine)) return;

    __shared__ float k_s[kMaxDk], q_s[kMaxDk], d_s[kMaxDk];
    __shared__ float red[kGroups][kCols];
    __shared__ float u_s[kCols];
    float* S = reinterpret_cast<float*>(state + slot * st_row) + h * dk * dv;
    float s[kMaxRows];
#pragma unroll
    for (int m = 0; m < kMaxRows; ++m) {
        const int64_t i = ty + int64_t(kGroups) * m;
        s[m] = col && i < dk ? S[i * dv + c] : 0.0f;
    }
    for (int64_t t = 0; t < T; ++t) {
        if (seq[t] != slot) continue;  // the same for the whole block
        const float* kt = k.row(hk, t);
        const float* qt = q.row(hk, t);
        const float* gt = g.row(h, t);
        for (int64_t i = threadIdx.x; i < dk; i += blockDim.x) {
            k_s[i] = kt[i];
            q_s[i] = qt[i] * q_scale;
            d_s[i] = expf(gt[per_channel ? i : 0]);
        }
        __syncthreads();
        float part = 0.0f;
#pragma unroll
        for (int m = 0; m < kMaxRows; ++m) {
            const int64_t i = ty + int64_t(kGroups) * m;
            if (i < dk) {
                s[m] *= d_s[i];
                part += s[m] * k_s[i];
            }
        }
        red[ty][tx] = part;
        __syncthreads();
        if (ty == 0) {
            float pred = 0.0f;
#pragma unroll
            for (int r = 0; r < kGroups; ++r) pred += red[r][tx];
            u_s[tx] = col ? (v.row(h, t)[c] - pred) * beta.row(h, t)[0] : 0.0f;
        }
        __syncthreads();
        const float u = u_s[tx];
        part = 0.0f;
#pragma unroll
        for (int m = 0; m < kMaxRows; ++m) {
            const int64_t i = ty + int64_t(kGroups) * m;
            if (i < dk) {
                s[m] += k_s[i] * u;
                part += s[m] * q_s[i];
            }
        }
        red[ty][tx] = part;
        __syncthreads();
        if (ty == 0 && col) {
            float o = 0.0f;
#pragma unroll
            for (int r = 0; r < kGroups; ++r) o += red[r][tx];
            out[(t * nv + h) * dv + c] = o;
        }
        __syncthreads();  // k_s, q_s, d_s and red are rewritten by the next token
    }
#pragma unroll
    for (int m = 0; m < kMaxRows; ++m) {
        const int64_t i = ty + int64_t(kGroups) * m;
        if (col && i < dk) S[i * dv + c] = s[m];
    }
}

}  // namespace

void launch_unary(const Node& n, cudaStream_t s) {
    const int64_t total = n.out->n_elements();
    unary_kernel<<<blocks_for(total, 256), 256, 0, s>>>(View4::of(*n.src[0]), n.p<UnaryParams>().kind,
                                                       n.out->ptr<float>(), total);
}

bool delta_net_shape_supported(const Node& n) { return n.src[DeltaNetArg::Q]->ne[0] <= kMaxDk; }

void launch_delta_net(const Node& n, cudaStream_t s) {
    const Tensor& q = *n.src[DeltaNetArg::Q];
    const Tensor& v = *n.src[DeltaNetArg::V];
    const Tensor& st = *n.src[DeltaNetArg::STATE];
    const int64_t dk = q.ne[0], nk = q.ne[1], T = q.ne[2], dv = v.ne[0], nv = v.ne[1], n_slots = st.ne[1];
    const dim3 grid(unsigned(n_slots * nv), unsigned((dv + kCols - 1) / kCols));
    delta_net_kernel<<<grid, kCols * kGroups, 0, s>>>(
        View4::of(q), View4::of(*n.src[DeltaNetArg::K]), View4::of(v), View4::of(*n.src[DeltaNetArg::G]),
        View4::of(*n.src[DeltaNetArg::BETA]), static_cast<char*>(st.data), int64_t(st.nb[1]),
        n.src[DeltaNetArg::SEQ]->ptr<int32_t>(), n.p<DeltaNetParams>().q_scale, n.out->ptr<float>(), dk, dv, nk, nv,
        T);
}

}  // namespace glia::cuda
