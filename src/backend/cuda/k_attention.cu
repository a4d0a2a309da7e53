// ATTENTION, first version: store this batch's K/V rows (f16) into their cells, then one
// warp per (token, query head) walks the cells it may see in order with an online softmax;
// each lane holds head_dim / 32 of q and of the accumulator. q is rounded to f16 for q.k
// and the weights to f16 for the product with V, as the CPU and the reference do. No
// length limit (cells are streamed); the tiled tensor-core version is issue 12's.
#include "common.cuh"

namespace glia::cuda {
namespace {

__global__ void store_kv_kernel(Rows k, Rows v, const int32_t* cells, uint16_t* kc, int64_t kc_row, uint16_t* vc,
                                int64_t vc_row, int64_t hd, int64_t hd_v, int64_t n_kv) {
    const int64_t t = blockIdx.x;
    uint16_t* kr = kc + int64_t(cells[t]) * kc_row;
    uint16_t* vr = vc + int64_t(cells[t]) * vc_row;
    for (int64_t i = threadIdx.x; i < n_kv * hd; i += blockDim.x) kr[i] = f2h(k.f(i / hd, t)[i % hd]);
    for (int64_t i = threadIdx.x; i < n_kv * hd_v; i += blockDim.x) vr[i] = f2h(v.f(i / hd_v, t)[i % hd_v]);
}

constexpr int kMaxPerLane = 8;  // head sizes up to 256

__global__ void attend_kernel(Rows q, const uint16_t* kc, int64_t kc_row, const uint16_t* vc, int64_t vc_row,
                              const int32_t* pos, const int32_t* seq, const int32_t* pages, int64_t pages_row,
                              AttnParams ap, float* out, int64_t hd, int64_t hd_v, int64_t n_head, int64_t group,
                              int64_t T) {
    const int lane = threadIdx.x % 32;
    const int64_t job = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
    if (job >= T * n_head) return;
    const int64_t t = job / n_head, h = job % n_head, hk = h / group;
    const int p = pos[t];
    const int lo = ap.window > 0 ? max(0, p - ap.window + 1) : 0;
    const int32_t* table = pages + int64_t(seq[t]) * pages_row;
    const float* qr = q.f(h, t);
    float qv[kMaxPerLane], acc[kMaxPerLane];
    const int per = int(hd / 32), per_v = int(hd_v / 32);
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
        qv[i] = i < per ? round_h(qr[lane * per + i]) : 0.0f;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int c = lo; c <= p; ++c) {
        const int64_t cell = int64_t(table[c / ap.block_size]) * ap.block_size + c % ap.block_size;
        const uint16_t* kr = kc + cell * kc_row + hk * hd + lane * per;
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < kMaxPerLane; ++i)
            if (i < per) d += qv[i] * h2f(kr[i]);
        float s = warp_sum(d) * ap.scale;
        if (ap.softcap > 0) s = ap.softcap * tanhf(s / ap.softcap);
        const float m_new = fmaxf(m, s);
        const float corr = expf(m - m_new);
        const float e = expf(s - m_new);
        l = l * corr + e;
        const float pe = round_h(e);
        const uint16_t* vr = vc + cell * vc_row + hk * hd_v + lane * per_v;
#pragma unroll
        for (int i = 0; i < kMaxPerLane; ++i)
            if (i < per_v) acc[i] = acc[i] * corr + pe * h2f(vr[i]);
        m = m_new;
    }
    float* o = out + t * (n_head * hd_v) + h * hd_v + lane * per_v;
    const float inv = 1.0f / l;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i)
        if (i < per_v) o[i] = acc[i] * inv;
}

}  // namespace

void launch_attention(const Node& n, cudaStream_t s) {
    const Tensor& q = *n.src[AttnArg::Q];
    const Tensor& k = *n.src[AttnArg::K];
    const Tensor& v = *n.src[AttnArg::V];
    Tensor& kc = *n.src[AttnArg::K_CACHE];
    Tensor& vc = *n.src[AttnArg::V_CACHE];
    const int64_t hd = q.ne[0], n_head = q.ne[1], T = q.ne[2], n_kv = k.ne[1], hd_v = v.ne[0];
    store_kv_kernel<<<unsigned(T), 128, 0, s>>>(Rows::of(k), Rows::of(v), n.src[AttnArg::CELLS]->ptr<int32_t>(),
                                                kc.ptr<uint16_t>(), int64_t(kc.nb[1] / 2), vc.ptr<uint16_t>(),
                                                int64_t(vc.nb[1] / 2), hd, hd_v, n_kv);
    const Tensor& pages = *n.src[AttnArg::PAGES];
    const int64_t jobs = T * n_head;
    attend_kernel<<<unsigned((jobs + 3) / 4), 128, 0, s>>>(
        Rows::of(q), kc.ptr<uint16_t>(), int64_t(kc.nb[1] / 2), vc.ptr<uint16_t>(), int64_t(vc.nb[1] / 2),
        n.src[AttnArg::POS]->ptr<int32_t>(), n.src[AttnArg::SEQ]->ptr<int32_t>(), pages.ptr<int32_t>(),
        int64_t(pages.nb[1] / 4), n.p<AttnParams>(), n.out->ptr<float>(), hd, hd_v, n_head, n_head / n_kv, T);
}

}  // namespace glia::cuda
