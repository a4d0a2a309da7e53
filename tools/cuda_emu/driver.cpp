// The CUDA kernels of k_gemv.cu, k_mix.cu, k_recurrent.cu, k_moe_conv.cu and k_rows.cu run
// on the host by emu.h, as a backend for the op harness (src/debug/op_check.h): their index
// arithmetic, strides and launch code checked against the scalar references on a machine
// without a GPU; the packed products of k_mmvq.cu (dp4a and emulated int8 mma.sync) are
// checked for bit equality across token counts (check_products), and so are the F16/BF16
// tensor-core products of k_mma16.cu (check_mma16_products). What it cannot show:
// alignment faults, register or shared-memory limits, races between warps (threads here are
// scheduled by the OS), speed. run.sh builds it.
#include "kernels_emu.h"
#include "attention_check.h"
#include "attention_core_check.h"
#include <cstdio>
#include <map>
#include <random>
#include <memory>
#include "backend/cpu/cpu_backend.h"
#include "backend/registry.h"
#include "debug/op_check.h"
using namespace glia;

// The CUDA kernels of this branch, run by the host emulator, as a backend for the op harness.
class EmuBackend : public Backend {
public:
    const char* name() const override { return "emu-cuda"; }
    Device device() const override { return Device::STANDIN; }
    bool supports(const Node& n) const override {
        switch (n.op) {
            case Op::MATMUL: return n.src[0]->ne[0] % 32 != 0;
            case Op::MATMUL_HEADS: case Op::MOE_EXPERTS: case Op::MOE_EXPERTS_GLU: case Op::MUL_BCAST: case Op::CONCAT:
            case Op::SITU: case Op::RES_MIX: case Op::UNARY: case Op::DELTA_NET: case Op::MOE_GATHER_WEIGHTS:
            case Op::SCALE: case Op::ROPE: case Op::ROPE_FREQS: case Op::GET_ROWS: case Op::COPY:
            case Op::RMS_NORM: return true;
            default: return false;
        }
    }
    void* alloc(size_t bytes, MemoryKind, const std::string&) override {
        bufs_.emplace_back(new uint8_t[bytes + 64]);
        return bufs_.back().get();
    }
    void free(void*) override {}
    void zero(void* p, size_t b) override { std::memset(p, 0, b); }
    void prepare_weight(const Tensor&) override {}
    void release_weight(const Tensor&) override {}
    void copy(const Tensor& src, Tensor& dst) override { cpu::copy_strided(src, dst); }
    std::unique_ptr<Segment> compile(const std::vector<const Node*>& nodes) override {
        struct Seg : Segment {
            EmuBackend& b; std::vector<const Node*> ns;
            Seg(EmuBackend& bb, std::vector<const Node*> n) : b(bb), ns(std::move(n)) {}
            void run(NodeTimer* t) override { for (const Node* n : ns) { b.launch(*n); if (t) t->record(*n, 1e-6); } }
        };
        return std::make_unique<Seg>(*this, nodes);
    }
    void launch(const Node& n) {
        using namespace glia::emucuda;
        switch (n.op) {
            case Op::MATMUL: launch_matmul_any_k(n, nullptr, act_scratch(n)); break;
            case Op::MATMUL_HEADS: launch_matmul_heads(n, nullptr, act_scratch(n)); break;
            case Op::MOE_EXPERTS: case Op::MOE_EXPERTS_GLU:
                scratch_.resize(moe_scratch_bytes(n) / 4 + 16);
                launch_moe_experts(n, nullptr, scratch_.data());
                break;
            case Op::MUL_BCAST: case Op::CONCAT: case Op::SITU: case Op::RES_MIX: launch_mix(n, nullptr); break;
            case Op::UNARY: launch_unary(n, nullptr); break;
            case Op::DELTA_NET: launch_delta_net(n, nullptr); break;
            case Op::MOE_GATHER_WEIGHTS: launch_moe_gather_weights(n, nullptr); break;
            case Op::SCALE: launch_binary(n, nullptr); break;
            case Op::RMS_NORM: launch_rms_norm(n, nullptr); break;
            case Op::ROPE: case Op::ROPE_FREQS: launch_rope(n, nullptr); break;
            case Op::GET_ROWS: launch_get_rows(n, nullptr); break;
            case Op::COPY: copy(*n.src[0], *n.out); break;
            default: fail("emu: ", op_name(n.op));
        }
    }
private:
    // Room for a product's rounded activations (the CUDA backend's act_scratch).
    float* act_scratch(const Node& n) {
        xr_.resize(size_t(n.src[1]->n_elements()) + 16);
        return xr_.data();
    }
    std::vector<float> xr_;
    std::vector<std::unique_ptr<uint8_t[]>> bufs_;
    std::vector<float> scratch_;
};

// A MATMUL node out = w . x.
Node matmul_node(Tensor& w, Tensor& x, Tensor& out) {
    Node n;
    n.op = Op::MATMUL;
    n.src[MatmulArg::W] = &w;
    n.src[MatmulArg::X] = &x;
    n.out = &out;
    return n;
}

// The packed products (k_mmvq.cu: dp4a for few tokens, int8 tensor cores from a threshold of
// the type's, in 8-, 16- or 64-token tiles): every token's outputs must be the same bits
// whatever the number of tokens in the product (1, 3, 8, 16, 40 and 130: one partial token
// tile, three tiles), three products of one input in one
// launch (rows 70, 33, 128) the bits of each alone, and all near the float product of the
// dequantized weights. Returns the number of failed checks.
int check_products() {
    using namespace glia::emucuda;
    int bad = 0;
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0}) {
        const int64_t K = 1024, T = 130;  // 4 superblocks (2 segments)
        const int64_t Ns[3] = {70, 33, 128};  // partial row groups and tiles
        const quant::TypeTraits& tr = quant::traits(t);
        const size_t row_bytes = size_t(K / tr.block_size) * tr.type_size;
        std::vector<float> x(size_t(T * K));
        for (float& v : x) v = nd(rng);
        struct Mat {
            std::vector<float> wd;
            std::vector<uint8_t> packed;
            Tensor w;
        };
        std::vector<Mat> mats(3);
        for (int m = 0; m < 3; ++m) {
            const int64_t N = Ns[m];
            std::vector<float> wf(size_t(N * K));
            mats[m].wd.resize(size_t(N * K));
            for (float& v : wf) v = nd(rng) * 0.05f;
            std::vector<uint8_t> raw(row_bytes * size_t(N));
            for (int64_t r = 0; r < N; ++r) {
                tr.quantize_row(wf.data() + r * K, raw.data() + size_t(r) * row_bytes, K);
                tr.dequantize_row(raw.data() + size_t(r) * row_bytes, mats[m].wd.data() + r * K, K);
            }
            mats[m].w = Tensor::make(t, K, N);
            const PackedShape ps = packed_shape(mats[m].w);
            mats[m].packed.resize(ps.main_bytes() + ps.side_bytes(t) + 64);
            launch_pack(t, raw.data(), row_bytes, ps, mats[m].packed.data(), nullptr);
            mats[m].w.data = mats[m].packed.data();
            mats[m].w.role = TensorRole::WEIGHT;
        }
        // The products of matrices ms (one launch) with tokens x[first .. first + nt).
        auto products = [&](std::vector<int> ms, int64_t first, int64_t nt) {
            Tensor xt = Tensor::make(DType::F32, K, nt);
            std::vector<float> xb(x.begin() + first * K, x.begin() + (first + nt) * K);
            xt.data = xb.data();
            std::vector<Tensor> ots;
            std::vector<std::vector<float>> outs(ms.size());
            std::vector<Node> nodes;
            ots.reserve(ms.size());
            nodes.reserve(ms.size());
            for (size_t i = 0; i < ms.size(); ++i) {
                ots.push_back(Tensor::make(DType::F32, Ns[ms[i]], nt));
                outs[i].resize(size_t(Ns[ms[i]] * nt));
                ots.back().data = outs[i].data();
                nodes.push_back(matmul_node(mats[ms[i]].w, xt, ots.back()));
            }
            std::vector<const Node*> ptrs;
            for (const Node& n : nodes) ptrs.push_back(&n);
            std::vector<uint8_t> scratch(matmul_packed_scratch_bytes(ptrs.data(), int(ptrs.size())) + 256);
            launch_matmul_packed(ptrs.data(), int(ptrs.size()), nullptr, scratch.data());
            return outs;
        };
        const int64_t N = Ns[0];
        const std::vector<float> all = products({0}, 0, T)[0];
        int differ = 0;
        for (int64_t tk : {int64_t(0), int64_t(17), int64_t(100), T - 1}) {
            const std::vector<float> one = products({0}, tk, 1)[0];
            differ += std::memcmp(one.data(), all.data() + tk * N, size_t(N) * 4) != 0;
        }
        const std::vector<float> three = products({0}, 5, 3)[0];
        differ += std::memcmp(three.data(), all.data() + 5 * N, size_t(3 * N) * 4) != 0;
        const std::vector<float> forty = products({0}, 60, 40)[0];
        differ += std::memcmp(forty.data(), all.data() + 60 * N, size_t(40 * N) * 4) != 0;
        // 8 and 16 tokens: the few-token tensor-core tiles where the type's threshold allows
        for (int64_t nt : {int64_t(8), int64_t(16)}) {
            const std::vector<float> few = products({0}, 21, nt)[0];
            differ += std::memcmp(few.data(), all.data() + 21 * N, size_t(nt * N) * 4) != 0;
        }
        // Grouped: the three matrices in one launch, each against itself alone.
        const auto grouped = products({0, 1, 2}, 0, T);
        differ += std::memcmp(grouped[0].data(), all.data(), all.size() * 4) != 0;
        for (int m = 1; m < 3; ++m) {
            const std::vector<float> alone = products({m}, 0, T)[0];
            differ += std::memcmp(grouped[size_t(m)].data(), alone.data(), alone.size() * 4) != 0;
        }
        double err = 0, ref_max = 0;
        for (int m = 0; m < 3; ++m)
            for (int64_t tk = 0; tk < T; ++tk)
                for (int64_t r = 0; r < Ns[m]; ++r) {
                    double ref = 0;
                    for (int64_t k = 0; k < K; ++k) ref += double(mats[m].wd[size_t(r * K + k)]) * x[size_t(tk * K + k)];
                    err = std::max(err, std::fabs(ref - grouped[size_t(m)][size_t(tk * Ns[m] + r)]));
                    ref_max = std::max(ref_max, std::fabs(ref));
                }
        const double rel = err / ref_max;
        const bool ok = differ == 0 && rel < 0.02;
        bad += !ok;
        std::printf("%-60s %s err %.2g (bound 0.02), %d of 11 sets not bit-equal\n",
                    (std::string("MATMUL packed ") + dtype_name(t) + " 1024x{70,33,128} T=1,3,8,16,40,130").c_str(),
                    ok ? "ok " : "BAD", rel, differ);
    }
    return bad;
}

// The one-token products' prologues (prologue.h): a SWIGLU, an RMS_NORM, or an ADD and the
// RMS_NORM of its sum run inside the products' launch must give the bits of the separate
// kernels and the product after them, in their outputs and the products'; and the segment's
// test (prologue_fusable) must refuse an output over an input. Returns the failed checks.
int check_prologues() {
    using namespace glia::emucuda;
    int bad = 0;
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0})
        for (int64_t K : {int64_t(768), int64_t(2048), int64_t(4096)}) {
            const int64_t Ns[2] = {70, 33};
            const quant::TypeTraits& tr = quant::traits(t);
            const size_t row_bytes = size_t(K / tr.block_size) * tr.type_size;
            std::vector<std::vector<uint8_t>> packed(2);
            std::vector<Tensor> ws;
            for (int m = 0; m < 2; ++m) {
                std::vector<float> wf(size_t(Ns[m] * K));
                for (float& v : wf) v = nd(rng) * 0.05f;
                std::vector<uint8_t> raw(row_bytes * size_t(Ns[m]));
                for (int64_t r = 0; r < Ns[m]; ++r) tr.quantize_row(wf.data() + r * K, raw.data() + size_t(r) * row_bytes, K);
                ws.push_back(Tensor::make(t, K, Ns[m]));
                const PackedShape ps = packed_shape(ws.back());
                packed[m].resize(ps.main_bytes() + ps.side_bytes(t) + 64);
                launch_pack(t, raw.data(), row_bytes, ps, packed[m].data(), nullptr);
                ws.back().data = packed[m].data();
                ws.back().role = TensorRole::WEIGHT;
            }
            // Operands: a, b (x and y of the prologue), the norm's weight g.
            std::vector<float> a(static_cast<size_t>(K)), b(static_cast<size_t>(K)), g(static_cast<size_t>(K));
            // Magnitudes over a wide range, so that another summation order changes the norm's bits.
            for (float& v : a) v = nd(rng) * std::exp(2.0f * nd(rng));
            for (float& v : b) v = nd(rng) * std::exp(2.0f * nd(rng));
            for (float& v : g) v = 1.0f + 0.1f * nd(rng);
            auto row = [&](std::vector<float>& v) {
                Tensor x = Tensor::make(DType::F32, K);
                x.data = v.data();
                return x;
            };
            for (ProKind kind : {PRO_SWIGLU, PRO_NORM, PRO_ADD_NORM}) {
                // run 0: the separate kernels; run 1: the prologue. Outputs: act, sum, products.
                std::vector<float> act[2], sum[2], out[2][2];
                for (int run = 0; run < 2; ++run) {
                    act[run].assign(size_t(K), -1.0f), sum[run].assign(size_t(K), -1.0f);
                    Tensor ta = row(a), tb = row(b), tg = row(g), tact = row(act[run]), tsum = row(sum[run]);
                    Node add, pre;
                    add.op = Op::ADD, add.src[BinaryArg::A] = &ta, add.src[BinaryArg::B] = &tb, add.out = &tsum;
                    if (kind == PRO_SWIGLU) {
                        pre.op = Op::SWIGLU, pre.src[BinaryArg::A] = &ta, pre.src[BinaryArg::B] = &tb;
                    } else {
                        pre.op = Op::RMS_NORM, pre.params = NormParams{1e-5f};
                        pre.src[NormArg::X] = kind == PRO_NORM ? &ta : &tsum, pre.src[NormArg::W] = &tg;
                    }
                    pre.out = &tact;
                    std::vector<Tensor> outs;
                    std::vector<Node> prods;
                    outs.reserve(2), prods.reserve(2);
                    for (int m = 0; m < 2; ++m) {
                        out[run][m].assign(size_t(Ns[m]), -1.0f);
                        outs.push_back(Tensor::make(DType::F32, Ns[m]));
                        outs.back().data = out[run][m].data();
                        prods.push_back(matmul_node(ws[size_t(m)], tact, outs.back()));
                    }
                    const Node* pp[2] = {&prods[0], &prods[1]};
                    const Node* pres[2] = {&add, &pre};
                    const Node* const* pr = kind == PRO_ADD_NORM ? pres : pres + 1;
                    const int npre = kind == PRO_ADD_NORM ? 2 : 1;
                    std::vector<uint8_t> scratch(matmul_packed_scratch_bytes(pp, 2) + 256);
                    if (run == 0) {
                        if (kind == PRO_SWIGLU) launch_binary(pre, nullptr);
                        else if (kind == PRO_NORM) launch_rms_norm(pre, nullptr);
                        else launch_add_rms_norm(add, pre, nullptr);
                        launch_matmul_packed(pp, 2, nullptr, scratch.data());
                        continue;
                    }
                    if (prologue_fusable(pr, npre, pp, 2, true) != kind) {
                        std::printf("prologue %d K=%lld: not taken\n", int(kind), (long long)K);
                        ++bad;
                        continue;
                    }
                    // An output over an input is refused.
                    Tensor over = tact;
                    over.data = kind == PRO_SWIGLU ? tb.data : tg.data;
                    Node clash = pre;
                    clash.out = &over;
                    const Node* cpres[2] = {&add, &clash};
                    if (prologue_fusable(kind == PRO_ADD_NORM ? cpres : cpres + 1, npre, pp, 2, true) != PRO_NONE) {
                        std::printf("prologue %d K=%lld: an output over an input was taken\n", int(kind), (long long)K);
                        ++bad;
                    }
                    const ActPrologue pro = prologue_of(kind, pr);
                    launch_matmul_packed(pp, 2, nullptr, scratch.data(), &pro);
                }
                int differ = std::memcmp(act[0].data(), act[1].data(), size_t(K) * 4) != 0;
                if (kind == PRO_ADD_NORM) differ += std::memcmp(sum[0].data(), sum[1].data(), size_t(K) * 4) != 0;
                for (int m = 0; m < 2; ++m)
                    differ += std::memcmp(out[0][m].data(), out[1][m].data(), size_t(Ns[m]) * 4) != 0;
                bad += differ != 0;
                const char* names[] = {"", "SWIGLU", "RMS_NORM", "ADD+RMS_NORM"};
                char what[96];
                std::snprintf(what, sizeof what, "prologue %s -> MATMUL packed %s K=%lld x2", names[kind], dtype_name(t),
                              (long long)K);
                std::printf("%-60s %s %d of %d outputs not bit-equal\n", what, differ ? "BAD" : "ok ", differ,
                            kind == PRO_ADD_NORM ? 4 : 3);
            }
        }
    return bad;
}

// MoE expert products on packed stacks (k_mmvq.cu): the pairs' products by the dp4a kernel
// (fewer than 8 pairs an expert: 1 and 2 tokens) and by tensor cores over the pairs sorted
// by expert (13 and 40 tokens) must give every token the same bits, and all be near the double
// product of the dequantized experts with act(gate, up) in float; also with the gate / up
// or the down stacks of a type that is not packed (the float kernels of k_gemv.cu).
int check_moe_packed() {
    using namespace glia::emucuda;
    int bad = 0;
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    // gate / up and down types: packed all, then gate / up or down on the float kernels
    const DType sets[5][2] = {{DType::Q4_K, DType::Q6_K}, {DType::Q8_0, DType::Q4_K}, {DType::Q6_K, DType::Q8_0},
                              {DType::Q5_K, DType::Q4_K}, {DType::Q4_K, DType::Q5_K}};
    for (const auto& types : sets) {
        const DType tg = types[0], td = types[1];
        const int64_t K = 1024, F = 256, E = 3, U = 2, T = 40;  // 2 segments of gate / up; one of down
        struct Stack {
            std::vector<float> wd;  // dequantized [E][N][Kin]
            std::vector<uint8_t> packed;
            Tensor w;
        };
        auto make = [&](DType t, int64_t kin, int64_t n, const char* name) {
            Stack st;
            const quant::TypeTraits& tr = quant::traits(t);
            const size_t rb = size_t(kin / tr.block_size) * tr.type_size;
            std::vector<uint8_t> raw(rb * size_t(n * E));
            std::vector<float> wf(static_cast<size_t>(kin));
            st.wd.resize(size_t(n * E * kin));
            for (int64_t r = 0; r < n * E; ++r) {
                for (float& v : wf) v = nd(rng) * 0.05f;
                tr.quantize_row(wf.data(), raw.data() + size_t(r) * rb, kin);
                tr.dequantize_row(raw.data() + size_t(r) * rb, st.wd.data() + r * kin, kin);
            }
            st.w = Tensor::make(t, kin, n, E);
            st.w.name = name;
            st.w.role = TensorRole::WEIGHT;
            if (packable(st.w)) {
                const PackedShape ps = packed_shape(st.w);
                st.packed.resize(ps.main_bytes() + ps.side_bytes(t) + 64);
                launch_pack(t, raw.data(), rb, ps, st.packed.data(), nullptr);
            } else {  // a type the float kernels take as it is
                st.packed = raw;
            }
            st.w.data = st.packed.data();
            return st;
        };
        Stack gate = make(tg, K, F, "blk.0.ffn_gate_exps.weight"), up = make(tg, K, F, "blk.0.ffn_up_exps.weight");
        Stack down = make(td, F, K, "blk.0.ffn_down_exps.weight");
        std::vector<float> x(size_t(T * K)), wts(size_t(T * U));
        std::vector<int32_t> ids(size_t(T * U));
        for (float& v : x) v = nd(rng);
        for (int64_t t = 0; t < T; ++t) {
            ids[size_t(t * U)] = int32_t(rng() % E);
            ids[size_t(t * U + 1)] = int32_t((ids[size_t(t * U)] + 1 + rng() % (E - 1)) % E);
            wts[size_t(t * U)] = 0.3f + 0.4f * float(rng() % 100) / 100.0f;
            wts[size_t(t * U + 1)] = 1.0f - wts[size_t(t * U)];
        }
        // The expert products of tokens [first, first + nt).
        auto experts = [&](int64_t first, int64_t nt) {
            Tensor xt = Tensor::make(DType::F32, K, nt), it = Tensor::make(DType::I32, U, nt),
                   wt = Tensor::make(DType::F32, U, nt), ot = Tensor::make(DType::F32, K, nt);
            std::vector<float> xb(x.begin() + first * K, x.begin() + (first + nt) * K);
            std::vector<int32_t> ib(ids.begin() + first * U, ids.begin() + (first + nt) * U);
            std::vector<float> wb(wts.begin() + first * U, wts.begin() + (first + nt) * U), out(size_t(K * nt));
            xt.data = xb.data();
            it.data = ib.data();
            wt.data = wb.data();
            ot.data = out.data();
            Node n;
            n.op = Op::MOE_EXPERTS;
            n.src[MoeExpertsArg::X] = &xt;
            n.src[MoeExpertsArg::GATE] = &gate.w;
            n.src[MoeExpertsArg::UP] = &up.w;
            n.src[MoeExpertsArg::DOWN] = &down.w;
            n.src[MoeExpertsArg::IDS] = &it;
            n.src[MoeExpertsArg::WEIGHTS] = &wt;
            n.out = &ot;
            if (!moe_packed_ok(n)) fail("emu: the packed expert path does not take this node");
            std::vector<uint8_t> scratch(moe_packed_scratch_bytes(n) + 256);
            launch_moe_experts_packed(n, nullptr, scratch.data());
            return out;
        };
        if (moe_packed_min_pairs(E) != 24) fail("emu: GLIA_MOE_MMQ_MIN is set; the check needs the default");
        const std::vector<float> all = experts(0, T);  // 80 pairs: tensor cores
        int differ = 0;
        for (int64_t tk : {int64_t(0), int64_t(17), T - 1}) {  // 2 pairs: dp4a
            const std::vector<float> one = experts(tk, 1);
            differ += std::memcmp(one.data(), all.data() + tk * K, size_t(K) * 4) != 0;
        }
        const std::vector<float> two = experts(5, 2);  // 4 pairs: dp4a
        differ += std::memcmp(two.data(), all.data() + 5 * K, size_t(2 * K) * 4) != 0;
        const std::vector<float> some = experts(20, 13);  // 26 pairs: tensor cores, small tiles
        differ += std::memcmp(some.data(), all.data() + 20 * K, size_t(13 * K) * 4) != 0;
        double err = 0, ref_max = 0;
        std::vector<double> h(static_cast<size_t>(U * F));
        for (int64_t t = 0; t < T; ++t) {
            for (int64_t u = 0; u < U; ++u) {
                const int64_t e = ids[size_t(t * U + u)];
                for (int64_t f = 0; f < F; ++f) {
                    double g = 0, v = 0;
                    const float* gw = gate.wd.data() + (e * F + f) * K;
                    const float* uw = up.wd.data() + (e * F + f) * K;
                    for (int64_t k = 0; k < K; ++k) {
                        g += double(gw[k]) * x[size_t(t * K + k)];
                        v += double(uw[k]) * x[size_t(t * K + k)];
                    }
                    h[size_t(u * F + f)] = g / (1.0 + std::exp(-g)) * v;
                }
            }
            for (int64_t r = 0; r < K; ++r) {
                double ref = 0;
                for (int64_t u = 0; u < U; ++u) {
                    const int64_t e = ids[size_t(t * U + u)];
                    const float* dw = down.wd.data() + (e * K + r) * F;
                    double o = 0;
                    for (int64_t f = 0; f < F; ++f) o += double(dw[f]) * h[size_t(u * F + f)];
                    ref += double(wts[size_t(t * U + u)]) * o;
                }
                err = std::max(err, std::fabs(ref - all[size_t(t * K + r)]));
                ref_max = std::max(ref_max, std::fabs(ref));
            }
        }
        const double rel = err / ref_max;
        const bool ok = differ == 0 && rel < 0.03;
        bad += !ok;
        std::printf("%-60s %s err %.2g (bound 0.03), %d of 5 token sets not bit-equal to the 40-token product\n",
                    (std::string("MOE_EXPERTS packed ") + dtype_name(tg) + "/" + dtype_name(td) + " T=1,2,13,40").c_str(),
                    ok ? "ok " : "BAD", rel, differ);
    }
    return bad;
}

// F16/BF16 products on tensor cores (k_mma16.cu): the one-to-32-token kernel at 1, 3 and 20
// tokens (and 3 from rows it cannot read 16 bytes at a time) must give the bits of the
// 130-token tile kernel, three products of one input in one launch (3 and 40 tokens) the
// bits of each alone, and all be near the double-precision product of the rounded values.
int check_mma16_products() {
    using namespace glia::emucuda;
    int bad = 0;
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (DType t : {DType::F16, DType::BF16}) {
        const int64_t K = 32 * 44, N = 70, T = 130;  // 6 segments (the last of 4 steps), partial tiles
        const quant::TypeTraits& tr = quant::traits(t);
        std::vector<float> wf(size_t(N * K)), x(size_t(T * K));
        for (float& v : wf) v = nd(rng);
        for (float& v : x) v = nd(rng);
        std::vector<uint16_t> raw(size_t(N * K) + 8);
        for (int64_t r = 0; r < N; ++r) tr.quantize_row(wf.data() + r * K, raw.data() + r * K, K);
        Tensor w = Tensor::make(t, K, N);
        w.data = raw.data();
        auto product = [&](const float* xs, int64_t nt, int64_t stride) {
            std::vector<float> xb(size_t(nt * stride) + 4);
            for (int64_t i = 0; i < nt; ++i) std::memcpy(xb.data() + 1 * (stride != K) + i * stride, xs + i * K, size_t(K) * 4);
            Tensor xt = Tensor::make(DType::F32, K, nt);
            xt.data = xb.data() + 1 * (stride != K);
            xt.nb[1] = size_t(stride) * 4;
            std::vector<float> out(size_t(N * nt)), xr(size_t(K * nt));
            Tensor ot = Tensor::make(DType::F32, N, nt);
            ot.data = out.data();
            Node n = matmul_node(w, xt, ot);
            if (!mma16_usable(n)) fail("emu: the F16/BF16 tensor-core product does not take ", dtype_name(t));
            launch_matmul(n, nullptr, xr.data());
            return out;
        };
        const std::vector<float> all = product(x.data(), T, K);
        int differ = 0;
        for (int64_t tk : {int64_t(0), int64_t(17), T - 1}) {
            const std::vector<float> one = product(x.data() + tk * K, 1, K);
            differ += std::memcmp(one.data(), all.data() + tk * N, size_t(N) * 4) != 0;
        }
        const std::vector<float> three = product(x.data() + 5 * K, 3, K);
        differ += std::memcmp(three.data(), all.data() + 5 * N, size_t(3 * N) * 4) != 0;
        const std::vector<float> odd = product(x.data() + 5 * K, 3, K + 1);  // rows 4 bytes off 16
        differ += std::memcmp(odd.data(), all.data() + 5 * N, size_t(3 * N) * 4) != 0;
        const std::vector<float> twenty = product(x.data() + 100 * K, 20, K);
        differ += std::memcmp(twenty.data(), all.data() + 100 * N, size_t(20 * N) * 4) != 0;
        // Three products of one input in one launch (q/k/v): each output as alone.
        Tensor w2 = Tensor::make(t, K, 24);
        w2.data = raw.data() + 7 * K;
        for (int64_t nt : {int64_t(3), int64_t(40)}) {
            Tensor xt = Tensor::make(DType::F32, K, nt);
            std::vector<float> xb(x.begin(), x.begin() + nt * K), xr(size_t(K * nt));
            xt.data = xb.data();
            std::vector<float> o[3] = {std::vector<float>(size_t(N * nt)), std::vector<float>(size_t(24 * nt)),
                                       std::vector<float>(size_t(N * nt))};
            Tensor ot[3] = {Tensor::make(DType::F32, N, nt), Tensor::make(DType::F32, 24, nt), Tensor::make(DType::F32, N, nt)};
            Node ns[3];
            const Node* group[3];
            for (int m = 0; m < 3; ++m) {
                ot[m].data = o[m].data();
                ns[m] = matmul_node(m == 1 ? w2 : w, xt, ot[m]);
                group[m] = &ns[m];
            }
            if (!mma16_fusable(ns[0], ns[1]) || !mma16_fusable(ns[0], ns[2])) fail("emu: q/k/v-like products not fusable");
            launch_matmul_mma16(group, 3, nullptr, xr.data());
            differ += std::memcmp(o[0].data(), all.data(), o[0].size() * 4) != 0;
            differ += std::memcmp(o[2].data(), all.data(), o[2].size() * 4) != 0;
            std::vector<float> alone(size_t(24 * nt));
            ot[1].data = alone.data();
            launch_matmul(ns[1], nullptr, xr.data());
            differ += std::memcmp(o[1].data(), alone.data(), alone.size() * 4) != 0;
        }
        double err = 0, ref_max = 0;
        std::vector<float> wd(static_cast<size_t>(K));
        for (int64_t r = 0; r < N; ++r) {
            tr.dequantize_row(raw.data() + r * K, wd.data(), K);
            for (int64_t tk = 0; tk < T; ++tk) {
                double ref = 0;
                for (int64_t k = 0; k < K; ++k) {
                    const float xv = x[size_t(tk * K + k)];
                    const float xr = t == DType::F16 ? f16_to_f32(f32_to_f16(xv)) : bf16_to_f32(f32_to_bf16(xv));
                    ref += double(wd[size_t(k)]) * xr;
                }
                err = std::max(err, std::fabs(ref - all[size_t(tk * N + r)]));
                ref_max = std::max(ref_max, std::fabs(ref));
            }
        }
        const double rel = err / ref_max;
        const bool ok = differ == 0 && rel < 1e-5;
        bad += !ok;
        std::printf("%-60s %s err %.2g (bound 1e-05), %d of 12 token sets not bit-equal to the 130-token product (or alone)\n",
                    (std::string("MATMUL tensor cores ") + dtype_name(t) + " 1408x70 T=1,3,20,130").c_str(),
                    ok ? "ok " : "BAD", rel, differ);
    }
    return bad;
}

int main() {
    if (const char* e = std::getenv("GLIA_EMU_ONLY"); e && std::string(e) == "products")
        return check_products() + check_mma16_products() + check_moe_packed();
    if (const char* e = std::getenv("GLIA_EMU_ONLY"); e && std::string(e) == "packed") return check_products();
    if (const char* e = std::getenv("GLIA_EMU_ONLY"); e && std::string(e) == "prologues") return check_prologues();
    if (const char* e = std::getenv("GLIA_EMU_ONLY"); e && std::string(e) == "moe") return check_moe_packed();
    if (const char* e = std::getenv("GLIA_EMU_ONLY"); e && std::string(e) == "mma16") return check_mma16_products();
    if (const char* e = std::getenv("GLIA_EMU_ONLY"); e && std::string(e) == "attention")
        return check_attention_core() + check_attention_tc();
    if (const char* e = std::getenv("GLIA_EMU_ONLY"); e && std::string(e) == "attention_tc") return check_attention_tc();
    // With GLIA_CUDA_ATTN_TC=0 (run.sh): the CUDA-core kernel for the f16 caches as well.
    if (const char* e = std::getenv("GLIA_EMU_ONLY"); e && std::string(e) == "attention_core")
        return check_attention_core();
    EmuBackend emu;
    int bad = 0, n = 0;
    auto run = [&](OpSpec s) {
        const OpCheck c = check_op(emu, s, 1);
        ++n;
        const bool ok = c.supported && c.ok;
        bad += !ok;
        std::printf("%-60s %s err %.2g (bound %.2g)\n", c.label.c_str(), ok ? "ok " : "BAD", c.max_err, c.tolerance);
    };
    auto spec = [](Op op, int64_t K, int64_t N, int64_t T, DType t = DType::F32) {
        OpSpec s; s.op = op; s.K = K; s.N = N; s.T = T; s.type = t; return s;
    };
    setvbuf(stdout, nullptr, _IONBF, 0);
    for (int64_t T : {1, 3}) {
        for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                        DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
            run(spec(Op::GET_ROWS, 256, 40, T, t));
            OpSpec h = spec(Op::MATMUL_HEADS, 256, 8, T, t);
            h.n_head = 3;
            run(h);
        }
        for (DType t : {DType::F32, DType::F16}) run(spec(Op::MATMUL, 172, 24, T, t));
        OpSpec mx = spec(Op::MOE_EXPERTS, 256, 256, T, DType::Q4_K);
        mx.down_type = DType::Q6_K;
        mx.n_expert = 2;
        mx.n_used = 1;
        run(mx);
        mx.op = Op::MOE_EXPERTS_GLU;
        run(mx);
        mx.kind = 1;
        run(mx);
        for (int k : {0, 1, 2}) {
            OpSpec u = spec(Op::UNARY, 96, 0, T);
            u.kind = k;
            run(u);
            u.strided = true;
            run(u);
        }
        for (int kind : {0, 1}) {
            OpSpec d = spec(Op::DELTA_NET, 0, 0, T);
            d.kind = kind;
            d.head_dim = 32;
            d.n_head = 4;
            d.n_kv_head = kind ? 4 : 2;
            run(d);
        }
        OpSpec mb = spec(Op::MUL_BCAST, 64, 0, T);
        mb.n_head = 3;
        run(mb);
        mb.strided = true;
        run(mb);
        for (int dim : {0, 1}) {
            OpSpec c = spec(Op::CONCAT, 64, 0, T);
            c.kind = dim;
            run(c);
            c.strided = true;
            run(c);
        }
        OpSpec si = spec(Op::SITU, 96, 0, T);
        run(si);
        si.strided = true;
        run(si);
        for (int saved : {1, 3}) {
            OpSpec r = spec(Op::RES_MIX, 256, 0, T);
            r.kind = saved;
            run(r);
        }
        for (int64_t ne0 : {4096, 2048, 200, 66}) run(spec(Op::RMS_NORM, ne0, 0, T));  // float4 rows, and not
        OpSpec g = spec(Op::MOE_GATHER_WEIGHTS, 0, 0, T);
        g.n_expert = 6;
        run(g);
        for (bool neox : {false, true}) {
            OpSpec r = spec(Op::ROPE_FREQS, 0, 0, T);
            r.neox = neox;
            r.n_past = 30;
            r.head_dim = 64;
            r.n_head = 2;
            run(r);
            r.strided = true;
            run(r);
        }
    }
    const int pb = check_products() + check_prologues() + check_mma16_products() + check_moe_packed() + check_attention_core() +
                   check_attention_tc();
    std::printf("%d of %d checks failed\n", bad + pb, n + 24);
    return bad + pb;
}
