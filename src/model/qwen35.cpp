// qwen35: a hybrid of gated delta net (linear attention) blocks and gated full-attention
// blocks; which is which the file says (attention.recurrent_layers). Every block is
// x + mixer(attn_norm(x)), then + a SwiGLU FFN of its post-attention norm.
//
// The delta net block: a causal conv (state: the last taps) over the q, k, v channels of
// attn_qkv, SiLU, q and k L2-normalised per head, then the gated delta rule with a decay
// softplus(alpha + dt_bias) * ssm_a and a rate sigmoid(beta) per value head; its output is
// RMS-normalised per head, gated by silu(z) and projected by ssm_out.
#include <cmath>

#include "model/blocks.h"

namespace glia {
namespace {

Tensor* delta_net_block(Graph& g, const ModelProfile& p, const LayerWeights& L, Tensor* h, const ForwardInputs& in,
                        int il) {
    const int64_t T = h->ne[1], dk = p.ssm_d_state, nk = p.ssm_n_group, nv = p.ssm_dt_rank;
    const int64_t inner = p.ssm_d_inner, dv = inner / nv, conv_ch = 2 * nk * dk + inner;
    const size_t fs = sizeof(float);
    // This layer's state row per slot: the conv taps, then the value heads' matrices.
    Tensor* st = (*in.state)[il].conv;
    const int64_t conv_floats = (p.ssm_conv_kernel - 1) * conv_ch, n_slots = st->ne[1];
    Tensor* conv_state = g.view(st, conv_floats, n_slots, 1, st->nb[1], st->nb[1] * n_slots, 0);
    Tensor* mat_state = g.view(st, nv * dk * dv, n_slots, 1, st->nb[1], st->nb[1] * n_slots, conv_floats * fs);

    Tensor* qkv = g.name(g.matmul(L.wqkv, h), "linear_attn_qkv_mixed", il);
    Tensor* conv = g.name(g.shortconv(qkv, L.conv_kernel, conv_state, in.seq), "conv_output_raw", il);
    auto part = [&](int64_t first, int64_t hd, int64_t n) {
        return g.view(conv, hd, n, T, hd * fs, conv->nb[1], first * fs);
    };
    Tensor* q = g.name(g.unary(part(0, dk, nk), UnaryKind::SILU), "q_conv", il);
    Tensor* k = g.name(g.unary(part(nk * dk, dk, nk), UnaryKind::SILU), "k_conv", il);
    Tensor* v = g.name(g.unary(part(2 * nk * dk, dv, nv), UnaryKind::SILU), "v_conv_predelta", il);
    // L2 norm per head, x / sqrt(sum x^2 + eps), as an RMS norm with eps / dk, / sqrt(dk).
    const float inv_sqrt_dk = 1.0f / std::sqrt(float(dk)), l2_eps = p.norm_eps / float(dk);
    q = g.name(g.scale(g.rms_norm(q, nullptr, l2_eps), inv_sqrt_dk), "q_conv_predelta", il);
    k = g.name(g.scale(g.rms_norm(k, nullptr, l2_eps), inv_sqrt_dk), "k_conv_predelta", il);

    Tensor* beta = g.name(g.unary(g.matmul(L.ssm_beta, h), UnaryKind::SIGMOID), "beta_sigmoid", il);
    Tensor* alpha = g.name(g.add(g.matmul(L.ssm_alpha, h), L.ssm_dt_bias), "alpha_biased", il);
    Tensor* decay = g.name(g.mul(g.unary(alpha, UnaryKind::SOFTPLUS), L.ssm_a), "gate", il);
    Tensor* o = g.name(g.delta_net(q, k, v, g.reshape(decay, 1, nv, T), g.reshape(beta, 1, nv, T), mat_state, in.seq,
                                   inv_sqrt_dk),
                       "attn_output", il);
    o = g.reshape(g.rms_norm(o, L.ssm_norm, p.norm_eps), inner, T);
    Tensor* z = g.name(g.matmul(L.ssm_gate, h), "z", il);
    Tensor* y = g.name(g.swiglu(z, o), "final_output", il);
    return g.name(g.matmul(L.ssm_out, y), "linear_attn_out", il);
}

class Qwen35 : public Architecture {
public:
    Qwen35(WeightSet& w, const ModelProfile& p)
        : p_(p), w_(bind_decoder(w, p)) {}

    Tensor* forward(Graph& g, const ForwardInputs& in) const override {
        Tensor* x = g.name(g.get_rows(w_.tok_embd, in.tokens), "model.input_embed");
        for (int il = 0; il < p_.n_layer; ++il) {
            g.set_layer(il);
            const LayerWeights& L = w_.layers[il];
            Tensor* h = g.name(g.rms_norm(x, L.attn_norm, p_.norm_eps), "attn_norm", il);
            Tensor* a = p_.layer_kind[il] == LayerKind::RECURRENT ? delta_net_block(g, p_, L, h, in, il)
                                                                  : attention_block(g, p_, L, h, in, il);
            x = g.name(g.add(a, x), "attn_residual", il);
            h = g.name(g.rms_norm(x, L.ffn_norm, p_.norm_eps), "attn_post_norm", il);
            x = g.name(g.add(ffn_block(g, p_, L, h, in, il), x), "l_out", il);
        }
        // Every token runs through the last block (as the reference); rows picked here.
        x = keep_output_rows(g, p_, x, in, p_.n_layer - 1);
        return output_head(g, p_, x, w_.output_norm, w_.output, in);
    }

private:
    const ModelProfile& p_;
    DecoderWeights w_;
};

}  // namespace

std::unique_ptr<Architecture> make_qwen35(WeightSet& w, const ModelProfile& p) {
    return std::make_unique<Qwen35>(w, p);
}

}  // namespace glia
