// Mixture of experts, in three ops so that the routing and the expert products can run on
// different devices (--cpu-moe keeps only the expert products in host memory):
//   MOE_TOPK     router logits -> the n_used experts of highest softmax probability
//                (highest first, ties to the lower id)
//   MOE_WEIGHTS  their probabilities, optionally renormalised to sum to one
//   MOE_EXPERTS  the weighted sum of the selected SwiGLU experts over stacked expert
//                tensors [E, F, n_expert], added in selection order as the reference does.
//   MOE_EXPERTS_GLU  the same with another gated activation (SITU)
//   MOE_GATHER_WEIGHTS  the selected experts' weights from probabilities computed elsewhere
//                (sigmoid routers), renormalised
// and MATMUL_HEADS, a stack of per-head matrices applied head by head (absorbed MLA).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/simd/matmul.h"
#include "backend/cpu/simd/simd.h"
#include "core/error.h"
#include "quant/quant.h"

namespace glia::cpu {

namespace {

// Softmax of one token's router logits (max subtracted, double sum, as before the split).
void softmax_row(const float* l, int64_t n, float* p) {
    const float mx = *std::max_element(l, l + n);
    double sum = 0;
    for (int64_t e = 0; e < n; ++e) sum += (p[e] = std::exp(l[e] - mx));
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t e = 0; e < n; ++e) p[e] *= inv;
}

}  // namespace

void op_moe_topk(const Node& n, ThreadPool& pool) {
    const Tensor& logits = *n.src[MoeTopkArg::LOGITS];
    const int64_t n_exp = logits.ne[0], T = logits.ne[1];
    const int k = n.p<MoeParams>().n_used;
    for_rows(pool, T, n_exp * 8, [&](int64_t t0, int64_t t1) {
        std::vector<float> p(n_exp);
        std::vector<int32_t> sel(n_exp);
        for (int64_t t = t0; t < t1; ++t) {
            softmax_row(reinterpret_cast<const float*>(logits.row(t)), n_exp, p.data());
            std::iota(sel.begin(), sel.end(), 0);
            std::partial_sort(sel.begin(), sel.begin() + k, sel.end(),
                              [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
            std::copy(sel.begin(), sel.begin() + k, reinterpret_cast<int32_t*>(n.out->row(t)));
        }
    });
}

void op_moe_weights(const Node& n, ThreadPool& pool) {
    const Tensor& logits = *n.src[MoeWeightsArg::LOGITS];
    const Tensor& ids = *n.src[MoeWeightsArg::IDS];
    const int64_t n_exp = logits.ne[0], T = logits.ne[1];
    const MoeParams& mp = n.p<MoeParams>();
    for_rows(pool, T, n_exp * 8, [&](int64_t t0, int64_t t1) {
        std::vector<float> p(n_exp);
        for (int64_t t = t0; t < t1; ++t) {
            softmax_row(reinterpret_cast<const float*>(logits.row(t)), n_exp, p.data());
            const int32_t* sel = reinterpret_cast<const int32_t*>(ids.row(t));
            float* w = reinterpret_cast<float*>(n.out->row(t));
            float wsum = 0;
            for (int i = 0; i < mp.n_used; ++i) wsum += (w[i] = p[sel[i]]);
            if (mp.norm_weights)
                for (int i = 0; i < mp.n_used; ++i) w[i] /= wsum;
        }
    });
}

namespace {

void quantize_for_simd(const Tensor& w, const float* x, int64_t n, std::vector<uint8_t>& q) {
    const simd::TypeKernels& kk = simd::kernels(w.type);
    q.resize(row_bytes(kk.act_type, n));
    matmul_convert_row(kk, x, n, q.data(), nullptr);
}

// The selected experts of T tokens, grouped by expert: the pairs (token, slot) are ordered
// by expert, then token, so each expert's weights are read once for all its tokens, and
// the products run through the matmul driver's units (row tiles, or packed panels for an
// expert with kGemmMinTokens tokens or more), which give a token the same bits whatever
// the group's size (a batch changes no sequence's outputs). Steps, each one parallel
// section: gate and up products of every group; act(gate, up) and its quantization for
// the down matrix; the down products; the weighted sum in selection order per token.
struct ExpertPairs {
    std::vector<int64_t> start;    // [n_exp + 1]: the first pair of each expert
    std::vector<int32_t> token;    // token of pair p
    std::vector<int32_t> expert;   // expert of pair p
    std::vector<int32_t> pair_of;  // pair of (t, slot i), at t * k + i
    int64_t group_size(size_t p) const { return start[expert[p] + 1] - start[expert[p]]; }
};

// Pairs of tokens [t0, t0 + T) (numbered from 0).
void group_pairs(const Tensor& ids, int64_t t0, int64_t T, int k, int64_t n_exp, ExpertPairs& g) {
    g.start.assign(static_cast<size_t>(n_exp) + 1, 0);
    for (int64_t t = 0; t < T; ++t) {
        const int32_t* sel = reinterpret_cast<const int32_t*>(ids.row(t0 + t));
        for (int i = 0; i < k; ++i) ++g.start[static_cast<size_t>(sel[i]) + 1];
    }
    for (int64_t e = 0; e < n_exp; ++e) g.start[e + 1] += g.start[e];
    std::vector<int64_t> next(g.start.begin(), g.start.end() - 1);
    g.token.resize(static_cast<size_t>(T) * k);
    g.expert.resize(static_cast<size_t>(T) * k);
    g.pair_of.resize(static_cast<size_t>(T) * k);
    for (int64_t t = 0; t < T; ++t) {
        const int32_t* sel = reinterpret_cast<const int32_t*>(ids.row(t0 + t));
        for (int i = 0; i < k; ++i) {
            const int64_t p = next[sel[i]]++;
            g.token[p] = static_cast<int32_t>(t);
            g.expert[p] = sel[i];
            g.pair_of[t * k + i] = static_cast<int32_t>(p);
        }
    }
}

// Activation rows of every pair for one weight type: the type's act rows plus, for groups
// on the packed path, their side data.
struct PairActs {
    std::vector<uint8_t> act, side;
    size_t act_row = 0, side_row = 0;
};

void size_pair_acts(const simd::TypeKernels& kk, int64_t K, size_t n_pairs, PairActs& a) {
    a.act_row = row_bytes(kk.act_type, K);
    a.side_row = matmul_gemm_bits(kk, K) ? kk.gemm->side_bytes(K) : 0;
    if (a.act.size() < a.act_row * n_pairs) a.act.resize(a.act_row * n_pairs);
    if (a.side.size() < a.side_row * n_pairs) a.side.resize(a.side_row * n_pairs);
}

// Converts pair p's float row, with side data where its group takes the packed path
// (`layout`: the weight's decode layout is in hand, which moves that path's threshold).
void fill_pair_act(const simd::TypeKernels& kk, const float* x, int64_t K, const ExpertPairs& g, size_t p,
                   PairActs& a, bool layout) {
    const bool packed = matmul_uses_gemm(kk, K, g.group_size(p), layout);
    matmul_convert_row(kk, x, K, a.act.data() + p * a.act_row, packed ? a.side.data() + p * a.side_row : nullptr);
}

MatmulAct group_act(const PairActs& a, int64_t p0) {
    MatmulAct m;
    m.act = a.act.data() + p0 * a.act_row;
    m.act_row = a.act_row;
    m.side = a.side_row ? a.side.data() + p0 * a.side_row : nullptr;
    m.side_row = a.side_row;
    return m;
}

// One stacked weight's products for every expert group: out rows of N floats per pair.
// `groups`: the whole stack's decode layout (expert_layout), or nullptr.
struct StackedProduct {
    const Tensor* w;
    const PairActs* acts;
    float* out;
    const uint8_t* groups = nullptr;
};

// The decode layout of a stacked expert tensor [K, N, n_exp], built for all its experts at
// once (one matrix of N x n_exp rows: each expert's rows start a group when N is a multiple
// of the layout's group), so that the first step that meets an expert does not pay for its
// copy; nullptr where the type or shape has none. Once it is built nothing on the CPU reads
// the stack's own bytes again (every group size reads the layout: few tokens directly, the
// GEMM's panels are packed from it), so DecodeCache::get hands their pages back to the
// kernel: the layout takes the file's place in memory instead of doubling it (bench/LOG.md,
// 2026-12-07, session 22).
const uint8_t* expert_layout(const Tensor& w, DecodeCache* decode, ThreadPool& pool) {
    if (!decode) return nullptr;
    const simd::TypeKernels& kk = simd::kernels(w.type);
    if (!expert_decode_layout(kk, w.ne[0], w.ne[1]) || w.ne[3] != 1 || w.nb[2] != w.nb[1] * size_t(w.ne[1]))
        return nullptr;
    return decode->get(kk, w.row(0), w.nb[1], w.ne[0], w.ne[1] * w.ne[2], pool);  // pages handed back there
}

// Expert e's part of a stack's decode layout.
const uint8_t* expert_groups(const simd::TypeKernels& kk, const Tensor& w, const uint8_t* groups, int64_t e) {
    if (!groups) return nullptr;
    const simd::Gemm& g = *kk.gemm;
    return groups + size_t(e * (w.ne[1] / g.il_rows)) * g.il_bytes(w.ne[0]);
}

// The units of run_stacked's products (kept between calls: no allocation per step).
struct StackedJobs {
    struct Job { int prod; int64_t expert, units; };
    std::vector<Job> jobs;
    std::vector<double> cum;  // work before each unit (weight bytes x tokens)
};

// Runs the products of several stacked weights over the expert groups in one parallel
// section; threads take contiguous runs of units weighted by their work.
void run_stacked(const StackedProduct* prods, int n_prods, const ExpertPairs& g, StackedJobs& sj,
                 ThreadPool& pool) {
    auto& jobs = sj.jobs;
    auto& cum = sj.cum;
    jobs.clear();
    cum.assign(1, 0.0);
    const int64_t n_exp = static_cast<int64_t>(g.start.size()) - 1;
    for (int j = 0; j < n_prods; ++j) {
        const Tensor& w = *prods[j].w;
        const simd::TypeKernels& kk = simd::kernels(w.type);
        for (int64_t e = 0; e < n_exp; ++e) {
            const int64_t c = g.start[e + 1] - g.start[e];
            if (c == 0) continue;
            const int64_t units = matmul_units(kk, w.ne[0], w.ne[1], c, prods[j].groups != nullptr);
            jobs.push_back({j, e, units});
            const double per_unit = double(w.nb[1]) * double(w.ne[1]) / double(units) * double(c);
            for (int64_t u = 0; u < units; ++u) cum.push_back(cum.back() + per_unit);
        }
    }
    const int64_t total_units = static_cast<int64_t>(cum.size()) - 1;
    auto run_units = [&](int64_t u0, int64_t u1) {
        int64_t first = 0;  // the first unit of job ji
        size_t ji = 0;
        while (ji < jobs.size() && first + jobs[ji].units <= u0) first += jobs[ji++].units;
        for (int64_t u = u0; u < u1; ++u) {
            while (u >= first + jobs[ji].units) first += jobs[ji++].units;
            const StackedJobs::Job& jb = jobs[ji];
            const StackedProduct& pr = prods[jb.prod];
            const Tensor& w = *pr.w;
            const int64_t p0 = g.start[jb.expert], c = g.start[jb.expert + 1] - p0;
            const simd::TypeKernels& kk = simd::kernels(w.type);
            matmul_unit(kk, w.row(0, jb.expert), w.nb[1], w.ne[0], w.ne[1], group_act(*pr.acts, p0), c,
                        pr.out + p0 * w.ne[1], u - first, nullptr, expert_groups(kk, w, pr.groups, jb.expert));
        }
    };
    if (total_units == 0) return;
    if (cum.back() < kMatmulParallelMinWork || pool.size() == 1) {
        run_units(0, total_units);
        return;
    }
    // Contiguous runs of about equal work, a few per thread, claimed by whichever thread is
    // free (a unit's result does not depend on the thread that runs it).
    const int64_t parts = std::min<int64_t>(total_units, int64_t(pool.size()) * 4);
    auto bound = [&](int64_t i) {
        if (i == parts) return total_units;
        const double target = cum.back() * double(i) / double(parts);
        return static_cast<int64_t>(std::lower_bound(cum.begin(), cum.end() - 1, target) - cum.begin());
    };
    pool.parallel_for(parts, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
            const int64_t u0 = bound(i), u1 = bound(i + 1);
            if (u0 < u1) run_units(u0, u1);
        }
    });
}

// Per-thread (per calling thread) buffers that only grow.
struct MoeScratch {
    ExpertPairs pairs;
    PairActs gate_acts, up_acts, down_acts;
    std::vector<float> gate_out, up_out, down_out;
    StackedJobs jobs;
};

// Tokens [tok0, tok0 + T) of the node.
template <class Act>
void moe_experts_chunk(const Node& n, ThreadPool& pool, DecodeCache* decode, int k, const Act& act, int64_t tok0,
                       int64_t T) {
    const Tensor& x = *n.src[MoeExpertsArg::X];
    const Tensor& gate = *n.src[MoeExpertsArg::GATE];
    const Tensor& up = *n.src[MoeExpertsArg::UP];
    const Tensor& down = *n.src[MoeExpertsArg::DOWN];
    const Tensor& ids = *n.src[MoeExpertsArg::IDS];
    const Tensor& weights = *n.src[MoeExpertsArg::WEIGHTS];
    const int64_t E = x.ne[0], F = gate.ne[1], n_exp = gate.ne[2];
    const size_t n_pairs = static_cast<size_t>(T) * k;
    thread_local MoeScratch tls;
    MoeScratch& s = tls;  // the workers use the calling thread's buffers
    group_pairs(ids, tok0, T, k, n_exp, s.pairs);
    const ExpertPairs& g = s.pairs;

    const simd::TypeKernels& kg = simd::kernels(gate.type);
    const simd::TypeKernels& ku = simd::kernels(up.type);
    const simd::TypeKernels& kd = simd::kernels(down.type);
    const uint8_t* gate_groups = expert_layout(gate, decode, pool);
    const uint8_t* up_groups = expert_layout(up, decode, pool);
    const uint8_t* down_groups = expert_layout(down, decode, pool);
    // Up reuses gate's activation rows where they are the same bytes, side data included.
    const bool up_own = ku.act_type != kg.act_type || ku.quantize_act != kg.quantize_act || ku.gemm != kg.gemm ||
                        (up_groups != nullptr) != (gate_groups != nullptr);
    size_pair_acts(kg, E, n_pairs, s.gate_acts);
    if (up_own) size_pair_acts(ku, E, n_pairs, s.up_acts);
    size_pair_acts(kd, F, n_pairs, s.down_acts);
    if (s.gate_out.size() < n_pairs * F) s.gate_out.resize(n_pairs * F);
    if (s.up_out.size() < n_pairs * F) s.up_out.resize(n_pairs * F);
    if (s.down_out.size() < n_pairs * E) s.down_out.resize(n_pairs * E);
    // 1. The pairs' activations for gate and up.
    for_rows(pool, static_cast<int64_t>(n_pairs), E * 4, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
            const float* xt = reinterpret_cast<const float*>(x.row(tok0 + g.token[p]));
            fill_pair_act(kg, xt, E, g, static_cast<size_t>(p), s.gate_acts, gate_groups != nullptr);
            if (up_own) fill_pair_act(ku, xt, E, g, static_cast<size_t>(p), s.up_acts, up_groups != nullptr);
        }
    });
    // 2. Gate and up products.
    const StackedProduct gu[2] = {{&gate, &s.gate_acts, s.gate_out.data(), gate_groups},
                                  {&up, up_own ? &s.up_acts : &s.gate_acts, s.up_out.data(), up_groups}};
    run_stacked(gu, 2, g, s.jobs, pool);
    // 3. act(gate, up), converted for the down matrix.
    for_rows(pool, static_cast<int64_t>(n_pairs), F * 8, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
            float* h = s.gate_out.data() + p * F;
            const float* u = s.up_out.data() + p * F;
            for (int64_t j = 0; j < F; ++j) h[j] = act(h[j], u[j]);
            fill_pair_act(kd, h, F, g, static_cast<size_t>(p), s.down_acts, down_groups != nullptr);
        }
    });
    // 4. Down products.
    const StackedProduct dn[1] = {{&down, &s.down_acts, s.down_out.data(), down_groups}};
    run_stacked(dn, 1, g, s.jobs, pool);
    // 5. The weighted sum, in selection order.
    for_rows(pool, T, E * k, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const float* wsel = reinterpret_cast<const float*>(weights.row(tok0 + t));
            float* y = reinterpret_cast<float*>(n.out->row(tok0 + t));
            for (int i = 0; i < k; ++i) {
                const float* o = s.down_out.data() + static_cast<size_t>(g.pair_of[t * k + i]) * E;
                for (int64_t j = 0; j < E; ++j) y[j] = i == 0 ? o[j] * wsel[i] : y[j] + o[j] * wsel[i];
            }
        }
    });
}

// Prompts run in chunks of at most this many tokens, which bounds the scratch (pairs x
// (2 F + E) floats: 59 MB for qwen3-30b-a3b); a chunk changes no token's bits.
constexpr int64_t kMoeChunkTokens = 512;

template <class Act>
void moe_experts_impl(const Node& n, ThreadPool& pool, DecodeCache* decode, int k, Act act) {
    const int64_t T = n.src[MoeExpertsArg::X]->ne[1];
    for (int64_t t0 = 0; t0 < T; t0 += kMoeChunkTokens)
        moe_experts_chunk(n, pool, decode, k, act, t0, std::min(kMoeChunkTokens, T - t0));
}

}  // namespace

void op_moe_experts(const Node& n, ThreadPool& pool, DecodeCache* decode) {
    moe_experts_impl(n, pool, decode, n.p<MoeParams>().n_used,
                     [](float g, float u) { return g / (1.0f + std::exp(-g)) * u; });
}

void op_moe_experts_glu(const Node& n, ThreadPool& pool, DecodeCache* decode) {
    const GluParams& gp = n.p<GluParams>();
    if (gp.kind == GluKind::SITU)
        moe_experts_impl(
            n, pool, decode, gp.n_used, [&](float g, float u) { return situ_value(g, u, gp.beta, gp.linear_beta); });
    else if (gp.kind == GluKind::SWIGLU)
        moe_experts_impl(
            n, pool, decode, gp.n_used, [](float g, float u) { return g / (1.0f + std::exp(-g)) * u; });
    else
        fail("moe_experts_glu: activation not implemented on the CPU");
}

void op_moe_gather_weights(const Node& n, ThreadPool& pool) {
    const Tensor& probs = *n.src[MoeGatherArg::PROBS];
    const Tensor& ids = *n.src[MoeGatherArg::IDS];
    const MoeParams& mp = n.p<MoeParams>();
    for_rows(pool, ids.ne[1], mp.n_used * 8, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const float* p = reinterpret_cast<const float*>(probs.row(t));
            const int32_t* sel = reinterpret_cast<const int32_t*>(ids.row(t));
            float* w = reinterpret_cast<float*>(n.out->row(t));
            float sum = 0;
            for (int i = 0; i < mp.n_used; ++i) sum += (w[i] = p[sel[i]]);
            // The reference clamps the sum (to the smallest normal f16) before dividing.
            if (mp.norm_weights)
                for (int i = 0; i < mp.n_used; ++i) w[i] /= std::max(sum, 6.103515625e-5f);
        }
    });
}

// One matrix per head: quantize each (head, token) row of x once, then its head's rows.
void op_matmul_heads(const Node& n, ThreadPool& pool) {
    const Tensor& w = *n.src[MatmulArg::W];
    const Tensor& x = *n.src[MatmulArg::X];
    const int64_t K = w.ne[0], N = w.ne[1], H = x.ne[1], T = x.ne[2];
    const simd::TypeKernels& kk = simd::kernels(w.type);
    for_rows(pool, H * T, K * N, [&](int64_t j0, int64_t j1) {
        std::vector<uint8_t> act;
        for (int64_t j = j0; j < j1; ++j) {
            const int64_t h = j % H, t = j / H;
            quantize_for_simd(w, reinterpret_cast<const float*>(x.row(h, t)), K, act);
            float* y = reinterpret_cast<float*>(n.out->row(h, t));
            for (int64_t r = 0; r < N; ++r) kk.vec_dot(K, &y[r], w.row(r, h), act.data());
        }
    });
}

}  // namespace glia::cpu
