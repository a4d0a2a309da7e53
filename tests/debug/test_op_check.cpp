// The op harness on the CPU backend: every op at decode and prefill shapes, every weight
// type, within its tolerance of the scalar reference; and a backend with a wrong kernel is
// caught.
#include <gtest/gtest.h>

#include "backend/registry.h"
#include "core/error.h"
#include "debug/op_check.h"

namespace glia {
namespace {

OpSpec spec(Op op, int64_t K = 256, int64_t N = 128, int64_t T = 1, DType t = DType::F32) {
    OpSpec s;
    s.op = op;
    s.K = K;
    s.N = N;
    s.T = T;
    s.type = t;
    return s;
}

void expect_ok(const OpSpec& s) {
    const OpCheck c = check_op(cpu_backend(2), s, 1);
    EXPECT_TRUE(c.supported) << c.label;
    EXPECT_TRUE(c.ok) << c.label << ": error " << c.max_err << " > " << c.tolerance;
    EXPECT_GT(c.seconds, 0.0) << c.label << ": not timed";
}

TEST(OpCheck, MatmulEveryTypeDecodeAndPrefill) {
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                    DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL,
                    DType::IQ4_XS})
        for (int64_t T : {1, 3, 16})
            expect_ok(spec(Op::MATMUL, 256, 96, T, t));
}

// A product of several tokens also runs its first and last token alone, and counts the
// bit-equal ones (a batch may change no token's bits).
TEST(OpCheck, MatmulTokensAloneAreCheckedForTheSameBits) {
    for (DType t : {DType::F16, DType::Q4_K}) {
        const OpCheck one = check_op(cpu_backend(2), spec(Op::MATMUL, 256, 96, 1, t), 1);
        EXPECT_EQ(one.alone_checked, 0);
        const OpCheck many = check_op(cpu_backend(2), spec(Op::MATMUL, 256, 96, 40, t), 1);
        EXPECT_EQ(many.alone_checked, 2) << many.label;
        EXPECT_EQ(many.alone_equal, 2) << many.label;
        EXPECT_TRUE(many.ok) << many.label;
    }
}

// The expert products of many tokens (groups of 10-25 tokens an expert take the packed
// GEMM, a token alone the row products; 100 tokens split every step across the threads;
// 600 run as two chunks) give each token the bits it gets alone.
TEST(OpCheck, ExpertTokensAloneAreCheckedForTheSameBits) {
    auto check = [](Op op, DType t, int64_t T) {
        OpSpec s = spec(op, 256, 256, T, t);
        s.n_expert = 4;
        if (t == DType::Q4_K) s.down_type = DType::Q6_K;
        const OpCheck c = check_op(cpu_backend(2), s, 1);
        EXPECT_EQ(c.alone_checked, 2) << c.label;
        EXPECT_EQ(c.alone_equal, 2) << c.label;
        EXPECT_TRUE(c.ok) << c.label << ": error " << c.max_err << " > " << c.tolerance;
    };
    for (Op op : {Op::MOE_EXPERTS, Op::MOE_EXPERTS_GLU})
        for (DType t : {DType::Q4_K, DType::Q8_0, DType::F16})
            for (int64_t T : {20, 100}) check(op, t, T);
    check(Op::MOE_EXPERTS, DType::Q4_K, 600);
}

// Attention over several tokens also runs its first and last token alone against the
// caches as the batch left them (f16 and a quantized cache, a window, a soft-cap), and
// counts the bit-equal ones.
TEST(OpCheck, AttentionTokensAloneAreCheckedForTheSameBits) {
    for (DType kt : {DType::F16, DType::Q8_0})
        for (int window : {0, 20}) {
            OpSpec s = spec(Op::ATTENTION, 0, 0, 33);
            s.n_past = 70;
            s.k_cache = s.v_cache = kt;
            s.window = window;
            s.softcap = window > 0 ? 30.0f : 0.0f;
            const OpCheck c = check_op(cpu_backend(2), s, 1);
            EXPECT_EQ(c.alone_checked, 2) << c.label;
            EXPECT_EQ(c.alone_equal, 2) << c.label;
            EXPECT_TRUE(c.ok) << c.label << ": error " << c.max_err << " > " << c.tolerance;
        }
    EXPECT_EQ(check_op(cpu_backend(2), spec(Op::ATTENTION, 0, 0, 1), 1).alone_checked, 0);
}

TEST(OpCheck, RowOpsAndEmbeddings) {
    for (int64_t T : {1, 7}) {
        for (Op op : {Op::RMS_NORM, Op::ADD, Op::MUL, Op::SCALE, Op::SOFTCAP, Op::SWIGLU, Op::GEGLU, Op::SHORTCONV})
            expect_ok(spec(op, 320, 0, T));
        for (DType t : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_K, DType::Q6_K})
            expect_ok(spec(Op::GET_ROWS, 256, 300, T, t));
    }
}

TEST(OpCheck, RopeAndAttention) {
    for (bool neox : {false, true}) {
        OpSpec s = spec(Op::ROPE, 0, 0, 5);
        s.neox = neox;
        s.n_past = 40;
        expect_ok(s);
    }
    for (int64_t T : {1, 4, 20}) {
        OpSpec s = spec(Op::ATTENTION, 0, 0, T);
        s.n_past = 37;
        expect_ok(s);
        s.window = 16;
        expect_ok(s);
        s.window = 0;
        s.softcap = 30.0f;
        s.head_dim = 128;
        s.n_head = 8;
        s.n_kv_head = 8;
        expect_ok(s);
    }
}

// The harness over KV caches of every cell type (the reference widens the cache and stores
// the batch's rows as the type stores them), heads of 8 sharing a block among them.
TEST(OpCheck, AttentionOverQuantizedCaches) {
    for (DType kt : {DType::Q8_0, DType::Q4_0, DType::BF16})
        for (int64_t T : {1, 7}) {
            OpSpec s = spec(Op::ATTENTION, 0, 0, T);
            s.n_past = 45;
            s.k_cache = kt;
            s.v_cache = kt == DType::BF16 ? DType::Q8_0 : kt;
            expect_ok(s);
            s.head_dim = 8;
            s.n_head = 8;
            s.n_kv_head = 4;
            expect_ok(s);
        }
    EXPECT_NE(check_op(cpu_backend(2), [] {
                  OpSpec s = spec(Op::ATTENTION, 0, 0, 1);
                  s.k_cache = DType::Q4_0;
                  return s;
              }(), 1).label.find("cache q4_0/f16"), std::string::npos);
}

TEST(OpCheck, RopeWithFrequencyFactors) {
    for (bool neox : {false, true}) {
        OpSpec s = spec(Op::ROPE_FREQS, 0, 0, 5);
        s.neox = neox;
        s.head_dim = 128;
        s.n_past = 300;
        expect_ok(s);
    }
}

TEST(OpCheck, UnaryFunctions) {
    for (UnaryKind k : {UnaryKind::SILU, UnaryKind::SIGMOID, UnaryKind::SOFTPLUS})
        for (int64_t T : {1, 7}) {
            OpSpec s = spec(Op::UNARY, 300, 0, T);
            s.kind = int(k);
            expect_ok(s);
        }
}

// Per-head and per-channel decays; one token, a prompt, and two interleaved sequences.
TEST(OpCheck, DeltaRule) {
    for (int kind : {0, 1})
        for (int64_t T : {1, 2, 9}) {
            OpSpec s = spec(Op::DELTA_NET, 0, 0, T);
            s.kind = kind;
            s.head_dim = 32;
            s.n_head = 4;
            s.n_kv_head = kind == 1 ? 4 : 2;
            expect_ok(s);
        }
}

// The ops of the KDA / MLA / latent-MoE family.
TEST(OpCheck, BroadcastConcatHeadsAndMixing) {
    for (int64_t T : {1, 5}) {
        expect_ok(spec(Op::MUL_BCAST, 64, 0, T));
        for (int dim : {0, 1}) {
            OpSpec s = spec(Op::CONCAT, 256, 0, T);
            s.kind = dim;
            expect_ok(s);
        }
        for (DType t : {DType::F16, DType::Q8_0, DType::Q5_0, DType::Q4_K}) {
            const bool k_quant = t == DType::Q4_K;
            expect_ok(spec(Op::MATMUL_HEADS, k_quant ? 256 : 64, 128, T, t));
        }
        for (int saved : {1, 3}) {
            OpSpec s = spec(Op::RES_MIX, 256, 0, T);
            s.kind = saved;
            expect_ok(s);
        }
        expect_ok(spec(Op::SITU, 300, 0, T));
        OpSpec g = spec(Op::MOE_GATHER_WEIGHTS, 0, 0, T);
        g.n_expert = 4;
        expect_ok(g);
        for (DType t : {DType::F16, DType::Q8_0, DType::Q5_0}) {
            OpSpec e = spec(Op::MOE_EXPERTS_GLU, 128, 256, T, t);
            e.n_expert = 4;
            expect_ok(e);
        }
    }
}

// Row lookups are exact (the reference dequantizer's values), for every type.
TEST(OpCheck, EmbeddingsEveryTypeExact) {
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                    DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL,
                    DType::IQ4_XS}) {
        const OpCheck c = check_op(cpu_backend(2), spec(Op::GET_ROWS, 256, 300, 3, t), 1);
        EXPECT_TRUE(c.ok && c.max_err == 0.0) << c.label << ": error " << c.max_err;
    }
}

// Inputs as strided views of a tensor made by an earlier node, as the models pass them.
TEST(OpCheck, StridedInputs) {
    for (int64_t T : {1, 4}) {
        for (Op op : {Op::UNARY, Op::MUL_BCAST, Op::SITU}) {
            OpSpec s = spec(op, 64, 0, T);
            s.strided = true;
            expect_ok(s);
        }
        OpSpec c = spec(Op::CONCAT, 256, 0, T);
        c.strided = true;
        expect_ok(c);
        OpSpec m = spec(Op::MATMUL_HEADS, 64, 96, T, DType::Q8_0);
        m.strided = true;
        expect_ok(m);
        for (Op op : {Op::ROPE, Op::ROPE_FREQS}) {
            OpSpec r = spec(op, 0, 0, T);
            r.strided = true;
            r.n_past = 20;
            expect_ok(r);
        }
    }
}

// Experts whose down matrices have another type (qwen3moe Q4_K_M: Q6_K), and the SwiGLU
// variant of MOE_EXPERTS_GLU.
TEST(OpCheck, ExpertsOfMixedTypes) {
    for (int64_t T : {1, 5}) {
        OpSpec s = spec(Op::MOE_EXPERTS, 256, 256, T, DType::Q4_K);
        s.down_type = DType::Q6_K;
        expect_ok(s);
        s.op = Op::MOE_EXPERTS_GLU;
        expect_ok(s);
        s.kind = 1;
        expect_ok(s);
    }
}

// Every op of every named shape's layer list has a harness case (at small sizes it would
// take too long to run them all here: bench-ops --ops all does). The collectives of
// tensor parallelism need a group of ranks: tests/parallel checks them.
TEST(OpCheck, LayerListsCoverEveryOp) {
    for (const LayerShape& d : layer_shapes()) {
        std::vector<bool> seen(size_t(Op::COUNT), false);
        for (const OpSpec& s : layer_op_specs(d, {DType::Q4_K}, 1, 16)) seen[size_t(s.op)] = true;
        for (size_t op = 1; op < size_t(Op::COUNT); ++op)
            if (Op(op) != Op::COPY && Op(op) != Op::ALL_REDUCE && Op(op) != Op::ALL_GATHER) {
                EXPECT_TRUE(seen[op]) << d.name << " has no case for " << op_name(Op(op));
            }
    }
}

TEST(OpCheck, MixtureOfExperts) {
    for (int64_t T : {1, 6}) {
        OpSpec s = spec(Op::MOE_TOPK, 0, 0, T);
        expect_ok(s);
        s.op = Op::MOE_WEIGHTS;
        expect_ok(s);
        for (DType t : {DType::F16, DType::Q8_0, DType::Q4_K}) expect_ok(spec(Op::MOE_EXPERTS, 256, 256, T, t));
    }
}

// A backend whose ADD multiplies: the harness must report it, not pass it.
class WrongAdd : public cpu::CpuBackend {
public:
    WrongAdd() : cpu::CpuBackend(1) {}
    const char* name() const override { return "wrong-add"; }
    Device device() const override { return Device::STANDIN; }
    std::unique_ptr<Segment> compile(const std::vector<const Node*>& nodes) override {
        struct Seg : Segment {
            WrongAdd& b;
            std::vector<Node> nodes;
            Seg(WrongAdd& bb, const std::vector<const Node*>& ns) : b(bb) {
                for (const Node* n : ns) nodes.push_back(*n);
            }
            void run(NodeTimer* t) override {
                for (Node& n : nodes) {
                    if (n.op == Op::ADD) n.op = Op::MUL;
                    b.run(n);
                    if (t) t->record(n, 1e-6);
                }
            }
        };
        return std::make_unique<Seg>(*this, nodes);
    }
};

TEST(OpCheck, CatchesAWrongKernel) {
    WrongAdd wrong;
    const OpCheck c = check_op(wrong, spec(Op::ADD, 256, 0, 3), 1);
    EXPECT_TRUE(c.supported);
    EXPECT_FALSE(c.ok) << "a MUL posing as ADD passed with error " << c.max_err;
    const OpCheck m = check_op(wrong, spec(Op::MUL, 256, 0, 3), 1);
    EXPECT_TRUE(m.ok) << "the unchanged op: error " << m.max_err;
}

}  // namespace
}  // namespace glia
