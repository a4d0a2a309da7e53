// ATTENTION: store this batch's K/V rows (f16) into their cells, then attend. Each token's
// visible cells are cut into up to kMaxSplit splits of at least kSplitCells cells (the
// split depends on the token's own position only, never on the batch, so a batch changes
// no bits); a block takes one (split, KV head, token) and its warps the query heads that
// share that KV head. The block stages 32 cells' K and V rows in shared memory at a time
// (all loads in flight together); a warp scores the 32 cells at once (a lane per cell),
// keeps an online softmax, and accumulates V with lanes over the value dims.
// Splits write their (max, sum, accumulator) and a second kernel merges them. q is
// rounded to f16 for q.k and the weights to f16 for the product with V, as the CPU and
// the reference do. No length limit: cells are streamed.
// Caches of BF16, Q8_0 or Q4_0 (kv_rows.cuh): the store kernel quantizes each token's row
// once as the CPU does, and the attention block widens the 32 cells' rows to f32 as it
// stages them (the CPU's values exactly), then scores and sums them as for f16.
#include <type_traits>

#include "common.cuh"
#include "kv_rows.cuh"

namespace glia::cuda {
namespace {

__global__ void store_kv_kernel(Rows k, Rows v, const int32_t* cells, uint16_t* kc, int64_t kc_row, uint16_t* vc,
                                int64_t vc_row, int64_t hd, int64_t hd_v, int64_t n_kv) {
    pdl_next();
    pdl_wait();
    const int64_t t = blockIdx.x;
    uint16_t* kr = kc + int64_t(cells[t]) * kc_row;
    uint16_t* vr = vc + int64_t(cells[t]) * vc_row;
    for (int64_t i = threadIdx.x; i < n_kv * hd; i += blockDim.x) kr[i] = f2h(k.f(i / hd, t)[i % hd]);
    for (int64_t i = threadIdx.x; i < n_kv * hd_v; i += blockDim.x) vr[i] = f2h(v.f(i / hd_v, t)[i % hd_v]);
}

// The same with a block per (token, KV head) and a thread per 4 values (8-byte f16 stores):
// every load of the block in flight at once (rows of k and v 16-byte aligned, cache rows 8).
__global__ void store_kv4_kernel(Rows k, Rows v, const int32_t* cells, uint16_t* kc, int64_t kc_row, uint16_t* vc,
                                 int64_t vc_row, int hd, int hd_v) {
    pdl_next();
    pdl_wait();
    const int64_t t = blockIdx.x;
    const int h = blockIdx.y, i = threadIdx.x;
    const int64_t cell = cells[t];
    auto put = [](uint16_t* dst, float4 x) {
        uint2 u;
        u.x = uint32_t(f2h(x.x)) | (uint32_t(f2h(x.y)) << 16);
        u.y = uint32_t(f2h(x.z)) | (uint32_t(f2h(x.w)) << 16);
        *reinterpret_cast<uint2*>(dst) = u;
    };
    if (i < hd / 4) put(kc + cell * kc_row + int64_t(h) * hd + 4 * i, reinterpret_cast<const float4*>(k.f(h, t))[i]);
    if (i < hd_v / 4) put(vc + cell * vc_row + int64_t(h) * hd_v + 4 * i, reinterpret_cast<const float4*>(v.f(h, t))[i]);
}

// Caches of other types than f16 (either or both): a block per token, a warp per 32 values
// of a row (kv_rows.cuh), the K row then the V row.
__global__ void store_kv_typed_kernel(Rows k, Rows v, const int32_t* cells, uint8_t* kc, int64_t kc_row, int kt,
                                      uint8_t* vc, int64_t vc_row, int vt, int hd, int hd_v, int n_kv) {
    pdl_next();
    pdl_wait();
    const int64_t t = blockIdx.x, cell = cells[t];
    const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5, lane = threadIdx.x & 31;
    kv_store_row(kt, k, t, hd, n_kv, kc + cell * kc_row, warp, nwarps, lane);
    kv_store_row(vt, v, t, hd_v, n_kv, vc + cell * vc_row, warp, nwarps, lane);
}

// Head sizes: any multiple of 8 up to kMaxHead (K rows and V rows are staged in 16-byte
// chunks); a lane accumulates value dims lane, lane + 32, ... (PL of them at most).
constexpr int kMaxHead = 512;
constexpr int kSplitCells = 64;
constexpr int kMaxSplit = 16;
constexpr int kWarps = 4;

__device__ __forceinline__ float to_float(__half h) { return __half2float(h); }
__device__ __forceinline__ float to_float(float f) { return f; }

__device__ __forceinline__ int n_splits(int len) { return min(kMaxSplit, (len + kSplitCells - 1) / kSplitCells); }

struct AttnJob {
    Rows q;
    const uint16_t* kc;
    int64_t kc_row;
    const uint16_t* vc;
    int64_t vc_row;
    const int32_t* pos;
    const int32_t* seq;
    const int32_t* pages;
    int64_t pages_row;
    AttnParams ap;
    float* out;
    float* part;    // [T][n_head][kMaxSplit][hd_v + 2]
    int* counters;  // [T][n_kv], zero between launches: splits done (the last one merges); null: a merge kernel does
    int hd, hd_v, n_head, group;
    int kt, vt;  // the caches' KvCode (F16 = F16 kernel; rows of kc_row / vc_row 16-bit words)
};

__device__ __forceinline__ int visible_lo(const AttnParams& ap, int p) { return ap.window > 0 ? max(0, p - ap.window + 1) : 0; }

// Merges one (token, head)'s split results (m, l, accumulator) in split order; a warp.
__device__ void merge_head(const float* pp, int ns, int hd_v, float* out, int lane) {
    float M = -INFINITY;
    for (int s = 0; s < ns; ++s) M = fmaxf(M, __ldcg(pp + s * (hd_v + 2)));
    float L = 0.0f;
    for (int s = 0; s < ns; ++s) {
        const float ms = __ldcg(pp + s * (hd_v + 2));
        if (ms > -INFINITY) L += __ldcg(pp + s * (hd_v + 2) + 1) * expf(ms - M);
    }
    const float inv = 1.0f / L;
    for (int i = lane; i < hd_v; i += 32) {
        float a = 0.0f;
        for (int s = 0; s < ns; ++s) {
            const float ms = __ldcg(pp + s * (hd_v + 2));
            if (ms > -INFINITY) a += __ldcg(pp + s * (hd_v + 2) + 2 + i) * expf(ms - M);
        }
        out[i] = a * inv;
    }
}

// grid (kMaxSplit, n_kv, T), kWarps warps. Dynamic shared memory: q of the group's heads
// (f16-rounded floats), then 32 K rows and 32 V rows (S: __half for f16 caches, else float
// widened from the cache's type; padded by 16 bytes against bank conflicts) that the whole
// block loads together for each batch of 32 cells.
template <int PL, typename S>
__global__ void __launch_bounds__(kWarps * 32) attend_split_kernel(AttnJob J) {
    constexpr bool kHalf = std::is_same_v<S, __half>;
    extern __shared__ float qs[];
    pdl_next();
    pdl_wait();
    const int split = blockIdx.x, hk = blockIdx.y;
    const int64_t t = blockIdx.z;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int p = J.pos[t];
    const int lo = visible_lo(J.ap, p);
    const int len = p - lo + 1;
    const int ns = n_splits(len);
    if (split >= ns) return;
    const int per = ((len + ns - 1) / ns + 31) / 32 * 32;
    const int c0 = lo + split * per, c1 = min(p + 1, c0 + per);
    const int hd = J.hd, hd_v = J.hd_v, group = J.group;
    constexpr int kPad = 16 / int(sizeof(S));
    const int krow = hd + kPad, vrow = hd_v + kPad;  // values per staged row
    S* ks = reinterpret_cast<S*>(qs + group * hd);
    S* vs = ks + 32 * krow;
    for (int i = threadIdx.x; i < group * hd; i += blockDim.x) {
        const int hh = i / hd;
        qs[i] = round_h(J.q.f(hk * group + hh, t)[i % hd]);
    }
    const int32_t* table = J.pages + int64_t(J.seq[t]) * J.pages_row;
    const int bs = J.ap.block_size;
    const int kch = hd / 8, vch = hd_v / 8;  // 16-byte chunks per row
    // Each warp owns query heads warp, warp + kWarps, ... of the group (at most kHeadsPerWarp).
    constexpr int kHeadsPerWarp = 4;
    float m[kHeadsPerWarp], l[kHeadsPerWarp], acc[kHeadsPerWarp][PL];
#pragma unroll
    for (int a = 0; a < kHeadsPerWarp; ++a) {
        m[a] = -INFINITY;
        l[a] = 0.0f;
#pragma unroll
        for (int i = 0; i < PL; ++i) acc[a][i] = 0.0f;
    }
    for (int cb = c0; cb < c1; cb += 32) {
        const int n = min(32, c1 - cb);
        __syncthreads();  // the previous batch is consumed (and q is stored, the first time)
        for (int idx = threadIdx.x; idx < 32 * kch; idx += blockDim.x) {
            const int r = idx / kch, ch = idx % kch;
            if (r >= n) continue;
            const int c = cb + r;
            const int64_t cell = int64_t(table[c / bs]) * bs + c % bs;
            if constexpr (kHalf) {
                *reinterpret_cast<int4*>(ks + r * krow + ch * 8) =
                    __ldg(reinterpret_cast<const int4*>(J.kc + cell * J.kc_row + int64_t(hk) * hd) + ch);
            } else {
                float4* dst = reinterpret_cast<float4*>(ks + r * krow + ch * 8);
                kv_widen8(J.kt, reinterpret_cast<const uint8_t*>(J.kc + cell * J.kc_row), int64_t(hk) * hd + 8 * ch,
                          dst[0], dst[1]);
            }
        }
        for (int idx = threadIdx.x; idx < 32 * vch; idx += blockDim.x) {
            const int r = idx / vch, ch = idx % vch;
            if (r >= n) continue;
            const int c = cb + r;
            const int64_t cell = int64_t(table[c / bs]) * bs + c % bs;
            if constexpr (kHalf) {
                *reinterpret_cast<int4*>(vs + r * vrow + ch * 8) =
                    __ldg(reinterpret_cast<const int4*>(J.vc + cell * J.vc_row + int64_t(hk) * hd_v) + ch);
            } else {
                float4* dst = reinterpret_cast<float4*>(vs + r * vrow + ch * 8);
                kv_widen8(J.vt, reinterpret_cast<const uint8_t*>(J.vc + cell * J.vc_row), int64_t(hk) * hd_v + 8 * ch,
                          dst[0], dst[1]);
            }
        }
        __syncthreads();
#pragma unroll
        for (int a = 0; a < kHeadsPerWarp; ++a) {
            const int hh = warp + a * kWarps;
            if (hh >= group) break;
            const float* qh = qs + hh * hd;
            const bool valid = lane < n;
            float s = -INFINITY;
            if (valid) {
                const S* kr = ks + lane * krow;
                float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;  // four chains in flight
#pragma unroll 4
                for (int i = 0; i < kch; ++i) {
                    float4 qa, qb;
                    float2 k0, k1, k2f, k3;
                    if constexpr (kHalf) {
                        const int4 kv = *reinterpret_cast<const int4*>(kr + i * 8);
                        const __half2* k2 = reinterpret_cast<const __half2*>(&kv);
                        qa = *reinterpret_cast<const float4*>(qh + 8 * i);
                        qb = *reinterpret_cast<const float4*>(qh + 8 * i + 4);
                        k0 = __half22float2(k2[0]), k1 = __half22float2(k2[1]);
                        k2f = __half22float2(k2[2]), k3 = __half22float2(k2[3]);
                    } else {
                        const float4 ka = *reinterpret_cast<const float4*>(kr + i * 8);
                        const float4 kb = *reinterpret_cast<const float4*>(kr + i * 8 + 4);
                        qa = *reinterpret_cast<const float4*>(qh + 8 * i);
                        qb = *reinterpret_cast<const float4*>(qh + 8 * i + 4);
                        k0 = make_float2(ka.x, ka.y), k1 = make_float2(ka.z, ka.w);
                        k2f = make_float2(kb.x, kb.y), k3 = make_float2(kb.z, kb.w);
                    }
                    d0 = fmaf(qa.x, k0.x, d0);
                    d1 = fmaf(qa.y, k0.y, d1);
                    d2 = fmaf(qa.z, k1.x, d2);
                    d3 = fmaf(qa.w, k1.y, d3);
                    d0 = fmaf(qb.x, k2f.x, d0);
                    d1 = fmaf(qb.y, k2f.y, d1);
                    d2 = fmaf(qb.z, k3.x, d2);
                    d3 = fmaf(qb.w, k3.y, d3);
                }
                s = ((d0 + d1) + (d2 + d3)) * J.ap.scale;
                if (J.ap.softcap > 0) s = J.ap.softcap * tanhf(s / J.ap.softcap);
            }
            const float m_new = fmaxf(m[a], warp_max(s));
            const float corr = expf(m[a] - m_new);
            const float e = valid ? expf(s - m_new) : 0.0f;
            l[a] = l[a] * corr + warp_sum(e);
            const float pe = round_h(e);
#pragma unroll
            for (int i = 0; i < PL; ++i) acc[a][i] *= corr;
#pragma unroll 4
            for (int j = 0; j < n; ++j) {
                const float pj = __shfl_sync(0xffffffffu, pe, j);
                const S* vr = vs + j * vrow + lane;
#pragma unroll
                for (int i = 0; i < PL; ++i)
                    if (lane + 32 * i < hd_v) acc[a][i] += pj * to_float(vr[32 * i]);
            }
            m[a] = m_new;
        }
    }
#pragma unroll
    for (int a = 0; a < kHeadsPerWarp; ++a) {
        const int hh = warp + a * kWarps;
        if (hh >= group) break;
        const int h = hk * group + hh;
        if (ns == 1) {
            float* o = J.out + (t * J.n_head + h) * hd_v + lane;
            const float inv = 1.0f / l[a];
#pragma unroll
            for (int i = 0; i < PL; ++i)
                if (lane + 32 * i < hd_v) o[32 * i] = acc[a][i] * inv;
        } else {
            float* pp = J.part + ((t * J.n_head + h) * kMaxSplit + split) * (hd_v + 2);
            if (lane == 0) {
                pp[0] = m[a];
                pp[1] = l[a];
            }
#pragma unroll
            for (int i = 0; i < PL; ++i)
                if (lane + 32 * i < hd_v) pp[2 + lane + 32 * i] = acc[a][i];
        }
    }
    if (ns == 1 || !J.counters) return;
    // The last split of this (token, KV head) to finish merges its heads.
    __shared__ int last;
    __threadfence();
    __syncthreads();
    int* counter = J.counters + t * gridDim.y + hk;
    if (threadIdx.x == 0) last = atomicAdd(counter, 1) == ns - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int hh = warp; hh < group; hh += kWarps) {
        const int64_t h = int64_t(hk) * group + hh;
        merge_head(J.part + (t * J.n_head + h) * kMaxSplit * (hd_v + 2), ns, hd_v, J.out + (t * J.n_head + h) * hd_v,
                   lane);
    }
    if (threadIdx.x == 0) *counter = 0;
}

// One warp per (token, head) whose cells were split: merge the splits' partial results
// (when no counters were given).
__global__ void attend_merge_kernel(const int32_t* pos, AttnParams ap, const float* part, float* out, int n_head,
                                    int hd_v, int64_t T) {
    pdl_next();
    pdl_wait();
    const int64_t job = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (job >= T * n_head) return;
    const int64_t t = job / n_head;
    const int p = pos[t];
    const int ns = n_splits(p - visible_lo(ap, p) + 1);
    if (ns == 1) return;
    merge_head(part + job * kMaxSplit * (hd_v + 2), ns, hd_v, out + job * hd_v, lane);
}

template <int PL, typename S>
void launch_split(dim3 grid, size_t smem, cudaStream_t s, const AttnJob& J) {
    static_assert(PL * 32 <= kMaxHead);
    if (smem > 48 * 1024) {
        static const bool attr = [] {
            return cudaFuncSetAttribute(attend_split_kernel<PL, S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        int(attention_max_smem())) == cudaSuccess;
        }();
        if (!attr) fail("cuda: attention needs ", smem, " bytes of shared memory per block");
    }
    launch_pdl(attend_split_kernel<PL, S>, grid, dim3(kWarps * 32), smem, s, J);
}

template <typename S>
void launch_split_for(int64_t hd_v, dim3 grid, size_t smem, cudaStream_t s, const AttnJob& J) {
    if (hd_v <= 128) launch_split<4, S>(grid, smem, s, J);
    else if (hd_v <= 256) launch_split<8, S>(grid, smem, s, J);
    else launch_split<16, S>(grid, smem, s, J);
}

// Both caches F16: the only ones the tensor-core attention reads.
bool f16_caches(const Node& n) {
    return n.src[AttnArg::K_CACHE]->type == DType::F16 && n.src[AttnArg::V_CACHE]->type == DType::F16;
}

bool takes_tc(const Node& n) { return f16_caches(n) && attention_tc_usable(n); }

// Tokens per launch, so that the split results fit the scratch budget.
int64_t tokens_per_launch(int64_t n_head, int64_t hd_v) {
    const int64_t per_token = n_head * kMaxSplit * (hd_v + 2) * 4;
    return std::max<int64_t>(1, (int64_t(256) << 20) / per_token);
}

}  // namespace

size_t attention_scratch_bytes(const Node& n) {
    if (takes_tc(n)) return attention_tc_scratch_bytes(n);
    const Tensor& q = *n.src[AttnArg::Q];
    const Tensor& v = *n.src[AttnArg::V];
    const int64_t T = std::min<int64_t>(q.ne[2], tokens_per_launch(q.ne[1], v.ne[0]));
    return size_t(T * q.ne[1] * kMaxSplit * (v.ne[0] + 2) * 4);
}

size_t attention_counters(const Node& n) {
    if (takes_tc(n)) return 0;
    const Tensor& q = *n.src[AttnArg::Q];
    const Tensor& v = *n.src[AttnArg::V];
    return size_t(std::min<int64_t>(q.ne[2], tokens_per_launch(q.ne[1], v.ne[0])) * n.src[AttnArg::K]->ne[1]);
}

void launch_attention(const Node& n, cudaStream_t s, float* scratch, int* counters) {
    const Tensor& q = *n.src[AttnArg::Q];
    const Tensor& k = *n.src[AttnArg::K];
    const Tensor& v = *n.src[AttnArg::V];
    Tensor& kc = *n.src[AttnArg::K_CACHE];
    Tensor& vc = *n.src[AttnArg::V_CACHE];
    const int64_t hd = q.ne[0], n_head = q.ne[1], T = q.ne[2], n_kv = k.ne[1], hd_v = v.ne[0];
    const bool half = f16_caches(n);
    const bool vec = rows16(k) && rows16(v) && kc.nb[1] % 8 == 0 && vc.nb[1] % 8 == 0 &&
                     (reinterpret_cast<uintptr_t>(kc.data) & 7) == 0 && (reinterpret_cast<uintptr_t>(vc.data) & 7) == 0;
    if (!half)
        launch_pdl(store_kv_typed_kernel, dim3(unsigned(T)), dim3(128), 0, s, Rows::of(k), Rows::of(v),
                   n.src[AttnArg::CELLS]->ptr<int32_t>(), kc.ptr<uint8_t>(), int64_t(kc.nb[1]), kv_code(kc.type),
                   vc.ptr<uint8_t>(), int64_t(vc.nb[1]), kv_code(vc.type), int(hd), int(hd_v), int(n_kv));
    else if (vec)  // head sizes are multiples of 8 (supports())
        launch_pdl(store_kv4_kernel, dim3(unsigned(T), unsigned(n_kv)), dim3(unsigned((std::max(hd, hd_v) / 4 + 31) / 32 * 32)),
                   0, s, Rows::of(k), Rows::of(v), n.src[AttnArg::CELLS]->ptr<int32_t>(), kc.ptr<uint16_t>(),
                   int64_t(kc.nb[1] / 2), vc.ptr<uint16_t>(), int64_t(vc.nb[1] / 2), int(hd), int(hd_v));
    else
        launch_pdl(store_kv_kernel, dim3(unsigned(T)), dim3(128), 0, s, Rows::of(k), Rows::of(v),
                   n.src[AttnArg::CELLS]->ptr<int32_t>(), kc.ptr<uint16_t>(), int64_t(kc.nb[1] / 2),
                   vc.ptr<uint16_t>(), int64_t(vc.nb[1] / 2), hd, hd_v, n_kv);
    if (half && attention_tc_usable(n)) {
        launch_attention_tc(n, s, scratch);
        return;
    }
    const Tensor& pages = *n.src[AttnArg::PAGES];
    const int64_t group = n_head / n_kv;
    const int64_t chunk = tokens_per_launch(n_head, hd_v);
    const size_t smem = attention_kv_smem_bytes(kc.type, vc.type, group, hd, hd_v);
    for (int64_t t0 = 0; t0 < T; t0 += chunk) {
        const int64_t nt = std::min(chunk, T - t0);
        AttnJob J;
        Tensor qv = q;
        qv.data = static_cast<char*>(q.data) + t0 * q.nb[2];
        J.q = Rows::of(qv);
        J.kc = kc.ptr<uint16_t>();
        J.kc_row = int64_t(kc.nb[1] / 2);
        J.vc = vc.ptr<uint16_t>();
        J.vc_row = int64_t(vc.nb[1] / 2);
        J.pos = n.src[AttnArg::POS]->ptr<int32_t>() + t0;
        J.seq = n.src[AttnArg::SEQ]->ptr<int32_t>() + t0;
        J.pages = pages.ptr<int32_t>();
        J.pages_row = int64_t(pages.nb[1] / 4);
        J.ap = n.p<AttnParams>();
        J.out = n.out->ptr<float>() + t0 * n_head * hd_v;
        J.part = scratch;
        J.counters = counters;
        J.hd = int(hd), J.hd_v = int(hd_v), J.n_head = int(n_head), J.group = int(group);
        J.kt = kv_code(kc.type), J.vt = kv_code(vc.type);
        const dim3 grid(kMaxSplit, unsigned(n_kv), unsigned(nt));
        if (half) launch_split_for<__half>(hd_v, grid, smem, s, J);
        else launch_split_for<float>(hd_v, grid, smem, s, J);
        const int64_t jobs = nt * n_head;
        if (!counters)
            launch_pdl(attend_merge_kernel, dim3(unsigned((jobs * 32 + 127) / 128)), dim3(128), 0, s, J.pos, J.ap,
                       static_cast<const float*>(scratch), J.out, int(n_head), int(hd_v), nt);
    }
}

}  // namespace glia::cuda
