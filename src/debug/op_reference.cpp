#include "debug/op_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/f16.h"
#include "parallel/communicator.h"
#include "quant/quant.h"

namespace glia {
namespace {

// Element (i0, i1, i2) of a host tensor as double (F32, F16, BF16, I32 or a quantized row).
double at(const Tensor& t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0) {
    const uint8_t* row = t.row(i1, i2);
    switch (t.type) {
        case DType::F32: return reinterpret_cast<const float*>(row)[i0];
        case DType::F16: return f16_to_f32(reinterpret_cast<const uint16_t*>(row)[i0]);
        case DType::BF16: return bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[i0]);
        case DType::I32: return reinterpret_cast<const int32_t*>(row)[i0];
        default: {
            std::vector<float> r(t.ne[0]);
            quant::dequantize_row(t.type, row, r.data(), t.ne[0]);
            return r[i0];
        }
    }
}

// Row i1 (, i2) of a weight, dequantized.
std::vector<double> row_of(const Tensor& t, int64_t i1, int64_t i2 = 0) {
    std::vector<float> f(t.ne[0]);
    quant::dequantize_row(t.type, t.row(i1, i2), f.data(), t.ne[0]);
    return std::vector<double>(f.begin(), f.end());
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x))); }

void softmax(std::vector<double>& v) {
    const double mx = *std::max_element(v.begin(), v.end());
    double sum = 0;
    for (double& x : v) sum += (x = std::exp(x - mx));
    for (double& x : v) x /= sum;
}

void ref_attention(const Node& n, std::vector<double>& out) {
    const Tensor& q = *n.src[AttnArg::Q];
    const Tensor& k = *n.src[AttnArg::K];
    const Tensor& v = *n.src[AttnArg::V];
    const Tensor& kc = *n.src[AttnArg::K_CACHE];
    const Tensor& vc = *n.src[AttnArg::V_CACHE];
    const Tensor& pos = *n.src[AttnArg::POS];
    const Tensor& seq = *n.src[AttnArg::SEQ];
    const Tensor& cells = *n.src[AttnArg::CELLS];
    const Tensor& pages = *n.src[AttnArg::PAGES];
    const AttnParams& ap = n.p<AttnParams>();
    const int64_t hd = q.ne[0], n_head = q.ne[1], T = q.ne[2], n_kv = k.ne[1], hd_v = v.ne[0];
    const int64_t group = n_head / n_kv;
    // Key and value of (slot, position): the cache's rows widened (any cell type), this
    // batch's own rows as stored where it writes them (a token's heads converted to the
    // cache's type as one row, then widened).
    auto cell_of = [&](int s, int p) {
        return int64_t(at(pages, p / ap.block_size, s)) * ap.block_size + p % ap.block_size;
    };
    auto widen = [&](const Tensor& cache, const Tensor& x, int64_t d) {
        const int64_t n = cache.ne[0];
        std::vector<float> w(static_cast<size_t>(n * cache.ne[1])), row(static_cast<size_t>(n));
        for (int64_t c = 0; c < cache.ne[1]; ++c) quant::dequantize_row(cache.type, cache.row(c), w.data() + c * n, n);
        std::vector<uint8_t> stored(row_bytes(cache.type, n));
        for (int64_t t = 0; t < T; ++t) {
            for (int64_t i = 0; i < n; ++i) row[static_cast<size_t>(i)] = float(at(x, i % d, i / d, t));
            quant::quantize_act_row(cache.type, row.data(), stored.data(), n);
            quant::dequantize_row(cache.type, stored.data(), w.data() + int64_t(at(cells, t)) * n, n);
        }
        return w;
    };
    const std::vector<float> kw = widen(kc, k, hd), vw = widen(vc, v, hd_v);
    auto kv = [&](int s, int p, int64_t h, int64_t i, bool is_k) {
        const int64_t c = cell_of(s, p);
        return double(is_k ? kw[static_cast<size_t>(c * kc.ne[0] + h * hd + i)]
                           : vw[static_cast<size_t>(c * vc.ne[0] + h * hd_v + i)]);
    };
    out.assign(static_cast<size_t>(hd_v * n_head * T), 0.0);
    for (int64_t t = 0; t < T; ++t) {
        const int s = int(at(seq, t)), p = int(at(pos, t));
        const int lo = ap.window > 0 ? std::max(0, p - ap.window + 1) : 0;
        for (int64_t h = 0; h < n_head; ++h) {
            const int64_t hk = h / group;
            std::vector<double> sc;
            for (int c = lo; c <= p; ++c) {
                double d = 0;
                for (int64_t i = 0; i < hd; ++i) d += at(q, i, h, t) * kv(s, c, hk, i, true);
                d *= ap.scale;
                if (ap.softcap > 0) d = ap.softcap * std::tanh(d / ap.softcap);
                sc.push_back(d);
            }
            softmax(sc);
            for (int64_t i = 0; i < hd_v; ++i) {
                double acc = 0;
                for (int c = lo; c <= p; ++c) acc += sc[c - lo] * kv(s, c, hk, i, false);
                out[static_cast<size_t>(t * hd_v * n_head + h * hd_v + i)] = acc;
            }
        }
    }
}

// Matrix e of a stacked weight [K, N, n], dequantized: N rows of K.
std::vector<double> matrix_of(const Tensor& t, int64_t e) {
    std::vector<double> m;
    m.reserve(static_cast<size_t>(t.ne[0] * t.ne[1]));
    for (int64_t r = 0; r < t.ne[1]; ++r) {
        const auto row = row_of(t, r, e);
        m.insert(m.end(), row.begin(), row.end());
    }
    return m;
}

// The weighted sum over each token's selected experts of down_e act(gate_e x, up_e x),
// added in selection order. Each used expert's matrices are dequantized once.
template <class Act>
void ref_expert_ffn(const Node& n, int n_used, Act act, std::vector<double>& out) {
    const Tensor& x = *n.src[MoeExpertsArg::X];
    const Tensor& gate = *n.src[MoeExpertsArg::GATE];
    const Tensor& up = *n.src[MoeExpertsArg::UP];
    const Tensor& down = *n.src[MoeExpertsArg::DOWN];
    const Tensor& ids = *n.src[MoeExpertsArg::IDS];
    const int64_t E = x.ne[0], T = x.ne[1], F = gate.ne[1];
    std::vector<double> xs(static_cast<size_t>(E * T));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < E; ++j) xs[t * E + j] = at(x, j, t);
    std::vector<int> used;
    for (int64_t t = 0; t < T; ++t)
        for (int i = 0; i < n_used; ++i) used.push_back(int(at(ids, i, t)));
    std::sort(used.begin(), used.end());
    used.erase(std::unique(used.begin(), used.end()), used.end());
    std::vector<double> y(static_cast<size_t>(T * n_used * E)), h(F);  // y: each (token, i)'s expert output
    for (int e : used) {
        const auto G = matrix_of(gate, e), U = matrix_of(up, e), D = matrix_of(down, e);
        for (int64_t t = 0; t < T; ++t)
            for (int i = 0; i < n_used; ++i) {
                if (int(at(ids, i, t)) != e) continue;
                const double* xt = &xs[t * E];
                for (int64_t f = 0; f < F; ++f) {
                    double g = 0, u = 0;
                    for (int64_t j = 0; j < E; ++j) g += G[f * E + j] * xt[j], u += U[f * E + j] * xt[j];
                    h[f] = act(g, u);
                }
                for (int64_t r = 0; r < E; ++r) {
                    double d = 0;
                    for (int64_t f = 0; f < F; ++f) d += D[r * F + f] * h[f];
                    y[(t * n_used + i) * E + r] = d;
                }
            }
    }
    out.assign(static_cast<size_t>(E * T), 0.0);
    for (int64_t t = 0; t < T; ++t)
        for (int i = 0; i < n_used; ++i) {
            const double w = at(*n.src[MoeExpertsArg::WEIGHTS], i, t);
            for (int64_t r = 0; r < E; ++r) out[t * E + r] += w * y[(t * n_used + i) * E + r];
        }
}

void ref_moe(const Node& n, std::vector<double>& out) {
    const MoeParams& mp = n.p<MoeParams>();
    if (n.op == Op::MOE_TOPK || n.op == Op::MOE_WEIGHTS) {
        const Tensor& l = *n.src[0];
        const int64_t n_exp = l.ne[0], T = l.ne[1];
        out.clear();
        for (int64_t t = 0; t < T; ++t) {
            std::vector<double> p(n_exp);
            for (int64_t e = 0; e < n_exp; ++e) p[e] = at(l, e, t);
            softmax(p);
            std::vector<int32_t> sel(n_exp);
            if (n.op == Op::MOE_TOPK) {
                std::iota(sel.begin(), sel.end(), 0);
                std::stable_sort(sel.begin(), sel.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
                for (int i = 0; i < mp.n_used; ++i) out.push_back(sel[i]);
            } else {
                double sum = 0;
                for (int i = 0; i < mp.n_used; ++i) sum += p[int(at(*n.src[1], i, t))];
                for (int i = 0; i < mp.n_used; ++i)
                    out.push_back(p[int(at(*n.src[1], i, t))] / (mp.norm_weights ? sum : 1.0));
            }
        }
        return;
    }
    ref_expert_ffn(n, mp.n_used, [](double g, double u) { return silu(g) * u; }, out);
}

// The gated delta rule in double, token by token per sequence (op DELTA_NET).
void ref_delta_net(const Node& n, std::vector<double>& out) {
    const Tensor& q = *n.src[DeltaNetArg::Q];
    const Tensor& k = *n.src[DeltaNetArg::K];
    const Tensor& v = *n.src[DeltaNetArg::V];
    const Tensor& g = *n.src[DeltaNetArg::G];
    const Tensor& beta = *n.src[DeltaNetArg::BETA];
    const Tensor& st = *n.src[DeltaNetArg::STATE];
    const Tensor& seq = *n.src[DeltaNetArg::SEQ];
    const int64_t dk = q.ne[0], nk = q.ne[1], T = q.ne[2], dv = v.ne[0], nv = v.ne[1];
    const double scale = n.p<DeltaNetParams>().q_scale;
    out.assign(static_cast<size_t>(dv * nv * T), 0.0);
    std::vector<std::vector<double>> S;  // per (slot, head): the matrix so far
    std::vector<std::pair<int, int64_t>> keys;
    for (int64_t t = 0; t < T; ++t) {
        const int s = int(at(seq, t));
        for (int64_t h = 0; h < nv; ++h) {
            size_t idx = 0;
            while (idx < keys.size() && keys[idx] != std::make_pair(s, h)) ++idx;
            if (idx == keys.size()) {
                keys.emplace_back(s, h);
                S.emplace_back(static_cast<size_t>(dk * dv));
                for (int64_t e = 0; e < dk * dv; ++e) S.back()[e] = at(st, h * dk * dv + e, s);
            }
            std::vector<double>& M = S[idx];
            const int64_t hk = h % nk;
            for (int64_t i = 0; i < dk; ++i) {
                const double d = std::exp(at(g, g.ne[0] == 1 ? 0 : i, h, t));
                for (int64_t c = 0; c < dv; ++c) M[i * dv + c] *= d;
            }
            std::vector<double> u(dv);
            for (int64_t c = 0; c < dv; ++c) {
                double pred = 0;
                for (int64_t i = 0; i < dk; ++i) pred += M[i * dv + c] * at(k, i, hk, t);
                u[c] = at(beta, 0, h, t) * (at(v, c, h, t) - pred);
            }
            for (int64_t i = 0; i < dk; ++i)
                for (int64_t c = 0; c < dv; ++c) M[i * dv + c] += at(k, i, hk, t) * u[c];
            for (int64_t c = 0; c < dv; ++c) {
                double o = 0;
                for (int64_t i = 0; i < dk; ++i) o += M[i * dv + c] * at(q, i, hk, t);
                out[static_cast<size_t>((t * nv + h) * dv + c)] = o * scale;
            }
        }
    }
}

double situ(double g, double u, double b, double c) {
    return b * std::tanh(g / b) / (1.0 + std::exp(-g)) * c * std::tanh(u / c);
}

double at4(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const uint8_t* row = t.row(i1, i2, i3);
    return t.type == DType::F32 ? reinterpret_cast<const float*>(row)[i0] : at(t, i0, i1 + i2 * t.ne[1]);
}

void ref_combine(const Node& n, std::vector<double>& out) {
    const Tensor& o = *n.out;
    const Tensor& a = *n.src[0];
    const Tensor& b = *n.src[1];
    for (int64_t i3 = 0; i3 < o.ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < o.ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < o.ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < o.ne[0]; ++i0) {
                    if (n.op == Op::MUL_BCAST) {
                        auto bi = [&](int d, int64_t i) { return b.ne[d] == 1 ? 0 : i; };
                        out.push_back(at4(a, i0, i1, i2, i3) * at4(b, bi(0, i0), bi(1, i1), bi(2, i2), bi(3, i3)));
                        continue;
                    }
                    int64_t i[4] = {i0, i1, i2, i3};
                    const int d = n.p<ConcatParams>().dim;
                    const bool from_a = i[d] < a.ne[d];
                    if (!from_a) i[d] -= a.ne[d];
                    out.push_back(at4(from_a ? a : b, i[0], i[1], i[2], i[3]));
                }
}

void ref_res_mix(const Node& n, std::vector<double>& out) {
    const Tensor& st = *n.src[ResMixArg::STACK];
    const Tensor& cur = *n.src[ResMixArg::CUR];
    const Tensor& w = *n.src[ResMixArg::W];
    const int64_t E = cur.ne[0], T = cur.ne[1], ns = st.ne[1];
    const double eps = n.p<NormParams>().eps;
    for (int64_t t = 0; t < T; ++t) {
        auto val = [&](int64_t j, int64_t d) { return j < ns ? at(st, d, j, t) : at(cur, d, t); };
        std::vector<double> p(ns + 1);
        for (int64_t j = 0; j <= ns; ++j) {
            double ss = 0, s = 0;
            for (int64_t d = 0; d < E; ++d) ss += val(j, d) * val(j, d);
            const double inv = 1.0 / std::sqrt(ss / double(E) + eps);
            for (int64_t d = 0; d < E; ++d) s += val(j, d) * inv * at(w, d);
            p[j] = s;
        }
        softmax(p);
        for (int64_t d = 0; d < E; ++d) {
            double y = 0;
            for (int64_t j = 0; j <= ns; ++j) y += p[j] * val(j, d);
            out.push_back(y);
        }
    }
}

void ref_moe_glu(const Node& n, std::vector<double>& out) {
    const GluParams& gp = n.p<GluParams>();
    ref_expert_ffn(
        n, gp.n_used,
        [&](double g, double u) { return gp.kind == GluKind::SITU ? situ(g, u, gp.beta, gp.linear_beta) : silu(g) * u; },
        out);
}

}  // namespace

void reference_op(const Node& n, std::vector<double>& out) {
    const Tensor& o = *n.out;
    out.clear();
    switch (n.op) {
        case Op::MATMUL: {
            const Tensor& w = *n.src[MatmulArg::W];
            const Tensor& x = *n.src[MatmulArg::X];
            const int64_t K = w.ne[0], N = w.ne[1], T = x.ne[1];
            std::vector<double> xs(static_cast<size_t>(K * T));
            for (int64_t t = 0; t < T; ++t)
                for (int64_t i = 0; i < K; ++i) xs[t * K + i] = at(x, i, t);
            out.assign(static_cast<size_t>(N * T), 0.0);
            for (int64_t r = 0; r < N; ++r) {
                const auto wr = row_of(w, r);  // each row dequantized once
                for (int64_t t = 0; t < T; ++t) {
                    double d = 0;
                    for (int64_t i = 0; i < K; ++i) d += wr[i] * xs[t * K + i];
                    out[t * N + r] = d;
                }
            }
            return;
        }
        case Op::GET_ROWS:
            for (int64_t t = 0; t < n.src[1]->ne[0]; ++t) {
                const auto r = row_of(*n.src[0], int64_t(at(*n.src[1], t)));
                out.insert(out.end(), r.begin(), r.end());
            }
            return;
        case Op::RMS_NORM: {
            const Tensor& x = *n.src[0];
            for (int64_t i2 = 0; i2 < x.ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < x.ne[1]; ++i1) {
                    double ss = 0;
                    for (int64_t i = 0; i < x.ne[0]; ++i) ss += at(x, i, i1, i2) * at(x, i, i1, i2);
                    const double sc = 1.0 / std::sqrt(ss / double(x.ne[0]) + n.p<NormParams>().eps);
                    for (int64_t i = 0; i < x.ne[0]; ++i)
                        out.push_back(at(x, i, i1, i2) * sc * (n.src[1] ? at(*n.src[1], i) : 1.0));
                }
            return;
        }
        case Op::ADD: case Op::MUL: case Op::SCALE: case Op::SOFTCAP: case Op::SWIGLU: case Op::GEGLU: {
            const Tensor& a = *n.src[0];
            for (int64_t i2 = 0; i2 < a.ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < a.ne[1]; ++i1)
                    for (int64_t i = 0; i < a.ne[0]; ++i) {
                        const double x = at(a, i, i1, i2);
                        const Tensor* b = n.src[1];
                        const double y = b ? (b->n_rows() == 1 ? at(*b, i) : at(*b, i, i1, i2)) : 0.0;
                        switch (n.op) {
                            case Op::ADD: out.push_back(x + y); break;
                            case Op::MUL: out.push_back(x * y); break;
                            case Op::SCALE: out.push_back(x * n.p<ScaleParams>().s); break;
                            case Op::SOFTCAP: {
                                const double c = n.p<SoftcapParams>().cap;
                                out.push_back(c * std::tanh(x / c));
                                break;
                            }
                            case Op::SWIGLU: out.push_back(silu(x) * y); break;
                            default: out.push_back(gelu_tanh(x) * y); break;
                        }
                    }
            return;
        }
        case Op::ROPE: case Op::ROPE_FREQS: {
            const Tensor& x = *n.src[0];
            const RopeParams& p = n.p<RopeParams>();
            const Tensor* ff = n.op == Op::ROPE_FREQS ? n.src[RopeFreqsArg::FREQS] : nullptr;
            const int64_t hd = x.ne[0];
            for (int64_t t = 0; t < x.ne[2]; ++t)
                for (int64_t h = 0; h < x.ne[1]; ++h) {
                    std::vector<double> r(hd);
                    for (int64_t i = 0; i < hd; ++i) r[i] = at(x, i, h, t);
                    for (int i0 = 0; i0 < p.n_dims; i0 += 2) {
                        const double th = at(*n.src[1], t) * std::pow(double(p.freq_base), -double(i0) / p.n_dims) *
                                          p.freq_scale / (ff ? at(*ff, i0 / 2) : 1.0);
                        const int a = p.type == RopeType::NEOX ? i0 / 2 : i0;
                        const int b = p.type == RopeType::NEOX ? i0 / 2 + p.n_dims / 2 : i0 + 1;
                        const double x0 = at(x, a, h, t), x1 = at(x, b, h, t);
                        r[a] = x0 * std::cos(th) - x1 * std::sin(th);
                        r[b] = x0 * std::sin(th) + x1 * std::cos(th);
                    }
                    out.insert(out.end(), r.begin(), r.end());
                }
            return;
        }
        case Op::ATTENTION: ref_attention(n, out); return;
        case Op::UNARY: {
            const Tensor& x = *n.src[0];
            for (int64_t i2 = 0; i2 < x.ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < x.ne[1]; ++i1)
                    for (int64_t i = 0; i < x.ne[0]; ++i) {
                        const double a = at(x, i, i1, i2);
                        switch (n.p<UnaryParams>().kind) {
                            case UnaryKind::SILU: out.push_back(silu(a)); break;
                            case UnaryKind::SIGMOID: out.push_back(1.0 / (1.0 + std::exp(-a))); break;
                            case UnaryKind::SOFTPLUS: out.push_back(std::log1p(std::exp(a))); break;
                        }
                    }
            return;
        }
        case Op::DELTA_NET: ref_delta_net(n, out); return;
        case Op::MUL_BCAST: case Op::CONCAT: ref_combine(n, out); return;
        case Op::RES_MIX: ref_res_mix(n, out); return;
        case Op::MOE_EXPERTS_GLU: ref_moe_glu(n, out); return;
        case Op::SITU: {
            const Tensor& g = *n.src[GluArg::GATE];
            const GluParams& gp = n.p<GluParams>();
            for (int64_t r = 0; r < g.ne[1]; ++r)
                for (int64_t i = 0; i < g.ne[0]; ++i)
                    out.push_back(situ(at(g, i, r), at(*n.src[GluArg::UP], i, r), gp.beta, gp.linear_beta));
            return;
        }
        case Op::MOE_GATHER_WEIGHTS: {
            const MoeParams& mp = n.p<MoeParams>();
            for (int64_t t = 0; t < n.src[1]->ne[1]; ++t) {
                double sum = 0;
                for (int i = 0; i < mp.n_used; ++i) sum += at(*n.src[0], int64_t(at(*n.src[1], i, t)), t);
                for (int i = 0; i < mp.n_used; ++i)
                    out.push_back(at(*n.src[0], int64_t(at(*n.src[1], i, t)), t) /
                                  (mp.norm_weights ? std::max(sum, 6.103515625e-5) : 1.0));
            }
            return;
        }
        case Op::MATMUL_HEADS: {
            const Tensor& w = *n.src[MatmulArg::W];
            const Tensor& x = *n.src[MatmulArg::X];
            const int64_t K = w.ne[0], N = w.ne[1], H = x.ne[1], T = x.ne[2];
            out.assign(static_cast<size_t>(N * H * T), 0.0);
            for (int64_t h = 0; h < H; ++h)
                for (int64_t r = 0; r < N; ++r) {
                    const auto wr = row_of(w, r, h);  // each row dequantized once
                    for (int64_t t = 0; t < T; ++t) {
                        double d = 0;
                        for (int64_t i = 0; i < K; ++i) d += wr[i] * at(x, i, h, t);
                        out[static_cast<size_t>((t * H + h) * N + r)] = d;
                    }
                }
            return;
        }
        case Op::MOE_TOPK: case Op::MOE_WEIGHTS: case Op::MOE_EXPERTS: ref_moe(n, out); return;
        case Op::ARGMAX: {
            const Tensor& x = *n.src[0];
            for (int64_t r = 0; r < x.n_rows(); ++r) {
                int64_t best = 0;  // the first of the largest; NaN is never larger
                for (int64_t i = 1; i < x.ne[0]; ++i)
                    if (at(x, i, r) > at(x, best, r)) best = i;
                out.push_back(double(best));
            }
            return;
        }
        case Op::SHORTCONV: {
            const Tensor& x = *n.src[ShortconvArg::X];
            const Tensor& w = *n.src[ShortconvArg::KERNEL];
            const Tensor& st = *n.src[ShortconvArg::STATE];
            const int64_t C = x.ne[0], L = w.ne[0];
            for (int64_t t = 0; t < x.ne[1]; ++t) {
                const int s = int(at(*n.src[ShortconvArg::SEQ], t));
                // Inputs of this sequence before t in the batch, else its state.
                std::vector<int64_t> prev;
                for (int64_t u = 0; u < t; ++u)
                    if (int(at(*n.src[ShortconvArg::SEQ], u)) == s) prev.push_back(u);
                for (int64_t c = 0; c < C; ++c) {
                    double acc = 0;
                    for (int64_t k = 0; k < L; ++k) {
                        const int64_t back = L - 1 - k;  // 0: this token
                        double v;
                        if (back == 0) v = at(x, c, t);
                        else if (back <= int64_t(prev.size())) v = at(x, c, prev[prev.size() - back]);
                        else v = at(st, (L - 1 - (back - int64_t(prev.size()))) * C + c, s);
                        acc += v * at(w, k, c);
                    }
                    out.push_back(acc);
                }
            }
            return;
        }
        case Op::ALL_REDUCE: case Op::ALL_GATHER: {
            // The reference of one rank alone: a group of one returns its input. Groups of
            // several ranks are checked against sums computed in the tests (tests/parallel).
            const Communicator* c = n.p<CollectiveParams>().comm;
            if (!c || c->world() != 1) break;
            const Tensor& x = *n.src[0];
            for (int64_t i2 = 0; i2 < x.ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < x.ne[1]; ++i1)
                    for (int64_t i = 0; i < x.ne[0]; ++i) out.push_back(at(x, i, i1, i2));
            return;
        }
        default: break;
    }
    fail("no reference for op ", op_name(n.op), " ('", o.name, "')");
}

}  // namespace glia
