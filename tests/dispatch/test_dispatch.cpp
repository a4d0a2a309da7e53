// The dispatcher with a second device: every shared model at every layer split between
// the CPU and the stand-in device, with each op forced back to the CPU, with the expert
// products in host memory, and with a device that supports only matrix products. The
// stand-in computes with the CPU kernels on its own memory, so every run must give the
// CPU run's logits bit for bit (and the CPU run passes the goldens, test_golden); any
// missing or stale copy shows up as a difference or as the stand-in refusing an operand
// outside its memory. The all-on-device runs are also compared with the goldens here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <condition_variable>
#include <mutex>

#include "../golden/golden_compare.h"
#if GLIA_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "dispatch/dispatcher.h"
#include "dispatch/memory_plan.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/session.h"
#include "standin_backend.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace glia {
namespace {

using test::StandinBackend;

struct GoldenPrompt {
    std::string id;
    nlohmann::json j;
};

struct ModelCase {
    std::string stem;
    std::vector<GoldenPrompt> prompts;  // sorted by id
};

bool arch_supported(const std::string& arch) {
    for (const auto& a : architectures())
        if (arch == a.name) return true;
    return false;
}

// The golden models of the shared data whose architecture we build, sorted (their files'
// metadata only: the parameterized tests list them at start-up).
std::vector<std::string> golden_stems() {
    std::vector<std::string> out;
    const fs::path golden = fs::path(test::shared_dir()) / "golden";
    const fs::path models = fs::path(test::shared_dir()) / "models";
    if (!fs::exists(golden)) return out;
    for (const auto& e : fs::directory_iterator(golden)) {
        const std::string stem = e.path().filename().string();
        if (!e.is_directory() || !fs::exists(models / (stem + ".gguf"))) continue;
        try {
            if (!arch_supported(gguf::File::open((models / (stem + ".gguf")).string())
                                    ->get<std::string>("general.architecture")))
                continue;
        } catch (const std::exception&) {
            continue;
        }
        out.push_back(stem);
    }
    std::sort(out.begin(), out.end());
    return out;
}

// One model's golden prompts, sorted by id.
ModelCase model_case(const std::string& stem) {
    ModelCase mc{stem, {}};
    for (const auto& p : fs::directory_iterator(fs::path(test::shared_dir()) / "golden" / stem))
        if (p.path().extension() == ".json")
            mc.prompts.push_back({p.path().stem().string(), nlohmann::json::parse(test::read_text(p.path().string()))});
    std::sort(mc.prompts.begin(), mc.prompts.end(),
              [](const GoldenPrompt& a, const GoldenPrompt& b) { return a.id < b.id; });
    return mc;
}

const std::vector<ModelCase>& model_cases() {
    static const std::vector<ModelCase> cases = [] {
        std::vector<ModelCase> out;
        for (const std::string& stem : golden_stems()) {
            ModelCase mc = model_case(stem);
            if (!mc.prompts.empty()) out.push_back(std::move(mc));
        }
        return out;
    }();
    return cases;
}

std::string model_path(const std::string& stem) { return test::shared_dir() + "/models/" + stem + ".gguf"; }

// Layers il >= first on the stand-in (device 1); the head too when every layer is there.
Placement split(const ModelProfile& p, int first, bool cpu_moe = false) {
    Placement pl;
    pl.devices = {DeviceSpec{Device::CPU, 0, "cpu", 0}, DeviceSpec{Device::STANDIN, 0, "standin:0", 0}};
    pl.layer.assign(p.n_layer, 0);
    for (int il = first; il < p.n_layer; ++il) pl.layer[il] = 1;
    pl.embeddings = 0;
    pl.output = first == 0 ? 1 : 0;
    pl.experts_on_host = cpu_moe;
    return pl;
}

// The recorded routing of a MoE golden: per layer, [position][n_used] ids for the prompt
// and the greedy steps (position n_prompt - 1 + s is step s).
struct Routing {
    std::vector<std::vector<int32_t>> by_layer;  // flattened [pos][n_used]
    int n_used = 0;
};

Routing routing_of(const nlohmann::json& g, int n_layer, int n_used) {
    Routing r;
    r.n_used = n_used;
    if (!g.contains("moe_selected_experts")) return r;
    const auto& m = g["moe_selected_experts"];
    const int n_prompt = static_cast<int>(m["prompt"].size());
    r.by_layer.assign(n_layer, {});
    for (size_t l = 0; l < m["layers"].size(); ++l) {
        const int il = m["layers"][l].get<int>();
        for (int pos = 0; pos < n_prompt + static_cast<int>(m["greedy"].size()) - 1; ++pos) {
            const auto& at = pos < n_prompt ? m["prompt"][pos] : m["greedy"][pos - n_prompt + 1];
            for (const auto& id : at[l]) r.by_layer[il].push_back(id.get<int32_t>());
        }
    }
    return r;
}

struct Result {
    std::vector<float> prompt_logits;  // every prompt position
    std::vector<int32_t> greedy;
    std::vector<float> last;           // logits before each greedy token, concatenated
};

// The prompt in one pass (all logits), then n_greedy greedy tokens, as glia eval does.
Result evaluate(const Model& m, const std::vector<int32_t>& prompt, int n_greedy, SessionOptions so,
                const Routing* routing = nullptr, std::map<Op, long>* ran = nullptr, StandinBackend* dev = nullptr) {
    so.n_ctx = static_cast<int>(prompt.size()) + n_greedy + 1;
    so.n_threads = 2;
    if (dev) dev->ran.clear();
    Session s(m, so);
    if (routing && !routing->by_layer.empty()) {
        s.set_forced_experts([routing](int il, int pos0, int) -> const int32_t* {
            const auto& L = routing->by_layer[il];
            return L.empty() ? nullptr : L.data() + static_cast<size_t>(pos0) * routing->n_used;
        });
    }
    Result r;
    r.prompt_logits = s.decode(prompt, true);
    const int V = m.profile().n_vocab;
    std::vector<float> cur(r.prompt_logits.end() - V, r.prompt_logits.end());
    for (int i = 0; i < n_greedy; ++i) {
        const int32_t next = static_cast<int32_t>(std::max_element(cur.begin(), cur.end()) - cur.begin());
        r.greedy.push_back(next);
        r.last.insert(r.last.end(), cur.begin(), cur.end());
        if (i + 1 < n_greedy) cur = s.decode({next}, false);
    }
    if (ran && dev) *ran = dev->ran;
    return r;
}

std::vector<int32_t> prompt_tokens(const nlohmann::json& g) { return g["prompt_tokens"].get<std::vector<int32_t>>(); }

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_same(const Result& want, const Result& got, const std::string& what) {
    EXPECT_TRUE(bit_equal(want.prompt_logits, got.prompt_logits)) << what << ": prompt logits differ";
    EXPECT_TRUE(bit_equal(want.last, got.last)) << what << ": decode logits differ";
    EXPECT_EQ(want.greedy, got.greedy) << what << ": greedy tokens differ";
}

// ---------------------------------------------------------------------------------------

TEST(MemoryPlan, LiveTensorsNeverOverlap) {
    // 200 tensors with random sizes and lifetimes.
    std::vector<Tensor> ts(200);
    std::vector<Lifetime> lives;
    uint32_t x = 12345;
    auto rnd = [&] { return (x = x * 1664525u + 1013904223u) >> 8; };
    for (int i = 0; i < 200; ++i) {
        const int first = i, last = i + static_cast<int>(rnd() % 20);
        lives.push_back({&ts[i], (1 + rnd() % 64) * 64, first, last});
    }
    std::vector<size_t> off;
    const size_t top = plan_offsets(lives, off);
    size_t sum_max = 0;
    for (size_t i = 0; i < lives.size(); ++i) {
        EXPECT_LE(off[i] + lives[i].bytes, top);
        for (size_t j = i + 1; j < lives.size(); ++j) {
            const bool live_together = lives[j].first <= lives[i].last;  // j starts before i dies
            const bool overlap = off[i] < off[j] + lives[j].bytes && off[j] < off[i] + lives[i].bytes;
            EXPECT_FALSE(live_together && overlap) << "tensors " << i << " and " << j << " share memory while live";
        }
        sum_max += lives[i].bytes;
    }
    EXPECT_LT(top, sum_max / 2) << "memory is reused";
}

TEST(CpuOps, ParsesNamesAndRejectsUnknown) {
    const auto ops = parse_cpu_ops("attention, ROPE,matmul,attn");
    ASSERT_EQ(ops.size(), 4u);
    EXPECT_EQ(ops[0], Op::ATTENTION);
    EXPECT_EQ(ops[1], Op::ROPE);
    EXPECT_EQ(ops[2], Op::MATMUL);
    EXPECT_EQ(ops[3], Op::ATTENTION);
    try {
        parse_cpu_ops("rope,flash");
        FAIL() << "an unknown op was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'flash'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("attention"), std::string::npos) << "lists the names: " << e.what();
    }
}

TEST(Standin, RefusesOperandsOutsideItsMemory) {
    StandinBackend dev;
    float host[4] = {1, 2, 3, 4};
    Tensor x = Tensor::make(DType::F32, 4);
    x.data = host;
    Tensor out = Tensor::make(DType::F32, 4);
    out.data = dev.alloc(16, MemoryKind::ACTIVATIONS, "out");
    Node n;
    n.op = Op::SCALE;
    n.src[0] = &x;
    n.out = &out;
    n.params = ScaleParams{2.0f};
    auto seg = dev.compile({&n});
    EXPECT_THROW(seg->run(nullptr), Error);
    dev.free(out.data);
}

// Every model, the first golden prompt: the stand-in holding layers [k, n_layer) for every
// k, the head too when k == 0. Bit-identical to the CPU alone.
TEST(Standin, EverySplitOfEveryModelMatchesTheCpu) {
    ASSERT_FALSE(model_cases().empty()) << "no golden models under " << test::shared_dir();
    StandinBackend dev;
    for (const ModelCase& mc : model_cases()) {
        auto m = Model::load(model_path(mc.stem));
        const ModelProfile& p = m->profile();
        const auto prompt = prompt_tokens(mc.prompts[0].j);
        const Routing routing = routing_of(mc.prompts[0].j, p.n_layer, p.n_expert_used);
        const Result cpu = evaluate(*m, prompt, 4, SessionOptions{}, &routing);
        for (int k = 0; k <= p.n_layer; ++k) {
            SessionOptions so;
            so.placement = split(p, k);
            so.devices = {&dev};
            std::map<Op, long> ran;
            const Result r = evaluate(*m, prompt, 4, so, &routing, &ran, &dev);
            expect_same(cpu, r, mc.stem + " layers " + std::to_string(k) + ".. on the stand-in");
            if (k < p.n_layer) EXPECT_GT(ran[Op::MATMUL], 0) << mc.stem << " split " << k << ": nothing ran there";
            else EXPECT_TRUE(ran.empty()) << mc.stem << ": nodes ran on the stand-in with no layer there";
        }
        EXPECT_EQ(dev.weights_held(), 0u) << mc.stem << ": weights still held after the runs";
    }
    EXPECT_EQ(dev.bytes_allocated(), 0u) << "stand-in memory leaked";
}

// All layers on the stand-in, each op of the model's graph forced back to the CPU in turn.
TEST(Standin, EachOpForcedBackMatchesTheCpu) {
    StandinBackend dev;
    for (const ModelCase& mc : model_cases()) {
        // One file per family and weight layout keeps this quick: F16 and Q4_K_M.
        if (mc.stem != "stories260K" && mc.stem.find("-f16") == std::string::npos &&
            mc.stem.find("-q4_k_m") == std::string::npos)
            continue;
        auto m = Model::load(model_path(mc.stem));
        const ModelProfile& p = m->profile();
        const auto prompt = prompt_tokens(mc.prompts[0].j);
        const Routing routing = routing_of(mc.prompts[0].j, p.n_layer, p.n_expert_used);
        const Result cpu = evaluate(*m, prompt, 3, SessionOptions{}, &routing);
        SessionOptions all;
        all.placement = split(p, 0);
        all.devices = {&dev};
        std::map<Op, long> ran_all;
        evaluate(*m, prompt, 3, all, &routing, &ran_all, &dev);
        ASSERT_FALSE(ran_all.empty()) << mc.stem;
        for (const auto& [op, count] : ran_all) {
            SessionOptions so = all;
            so.cpu_ops = {op};
            std::map<Op, long> ran;
            const Result r = evaluate(*m, prompt, 3, so, &routing, &ran, &dev);
            expect_same(cpu, r, mc.stem + " with " + op_cli_name(op) + " forced to the CPU");
            EXPECT_EQ(ran.count(op), 0u) << mc.stem << ": " << op_name(op) << " ran on the stand-in though forced back";
        }
    }
}

// --cpu-moe: the expert products in host memory, the rest of every layer on the device.
TEST(Standin, ExpertsOnHostMatchTheCpu) {
    StandinBackend dev;
    int models = 0;
    for (const ModelCase& mc : model_cases()) {
        auto m = Model::load(model_path(mc.stem));
        const ModelProfile& p = m->profile();
        if (p.n_expert == 0) continue;
        ++models;
        for (const auto& gp : mc.prompts) {
            const auto prompt = prompt_tokens(gp.j);
            const Routing routing = routing_of(gp.j, p.n_layer, p.n_expert_used);
            const Result cpu = evaluate(*m, prompt, 2, SessionOptions{}, &routing);
            SessionOptions so;
            so.placement = split(p, 0, /*cpu_moe=*/true);
            so.devices = {&dev};
            std::map<Op, long> ran;
            const Result r = evaluate(*m, prompt, 2, so, &routing, &ran, &dev);
            expect_same(cpu, r, mc.stem + "/" + gp.id + " --cpu-moe");
            EXPECT_EQ(ran.count(Op::MOE_EXPERTS), 0u) << "expert products ran on the device";
            EXPECT_GT(ran[Op::ATTENTION], 0) << "attention left the device";
        }
    }
    EXPECT_GT(models, 0) << "no MoE model among the goldens";
}

// A device with only matrix products: everything else falls back, with copies both ways;
// the attention state then lives on the CPU.
TEST(Standin, MatmulOnlyDeviceFallsBackForTheRest) {
    StandinBackend dev({Op::MATMUL});
    for (const ModelCase& mc : model_cases()) {
        if (mc.stem != "stories260K" && mc.stem != "tiny-lfm2-q8_0" && mc.stem != "tiny-gemma3-q4_k_m") continue;
        auto m = Model::load(model_path(mc.stem));
        const ModelProfile& p = m->profile();
        const auto prompt = prompt_tokens(mc.prompts[0].j);
        const Result cpu = evaluate(*m, prompt, 4, SessionOptions{});
        SessionOptions so;
        so.placement = split(p, 0);
        so.devices = {&dev};
        std::map<Op, long> ran;
        const Result r = evaluate(*m, prompt, 4, so, nullptr, &ran, &dev);
        expect_same(cpu, r, mc.stem + " on a matmul-only device");
        ASSERT_EQ(ran.size(), 1u) << mc.stem;
        EXPECT_GT(ran[Op::MATMUL], 0);
        EXPECT_GT(dev.copies_in, 0);
        EXPECT_GT(dev.copies_out, 0);
        Session s(*m, so);
        for (int il = 0; il < p.n_layer; ++il)
            EXPECT_EQ(s.runner().state_device(il), p.n_head_kv[il] > 0 || p.shortconv_l_cache > 1 ? 0 : -1)
                << mc.stem << " layer " << il << ": state on a device that cannot run its op";
    }
}

#if GLIA_HAVE_CUDA
// The CUDA backend's supports() over every model's graph, without a GPU: a stand-in that
// takes exactly the nodes the CUDA backend would runs every model with every layer on the
// device, and no node of any family is refused (a refusal is an op whose kernel is
// missing, or a type or shape its supports() does not take, and would run on the CPU).
TEST(Standin, CudaSupportsEveryOpOfEveryModel) {
    std::map<std::string, std::set<std::string>> refused;  // model -> "OP (operand types and shapes)"
    StandinBackend dev;
    std::string current;
    dev.set_filter([&](const Node& n) {
        const bool ok = cuda::node_supported(n);
        if (!ok) {
            std::string what = op_name(n.op);
            for (int i = 0; i < n.n_src(); ++i)
                if (n.src[i]) what += std::string(" ") + dtype_name(n.src[i]->type) + n.src[i]->shape_str();
            refused[current].insert(what);
        }
        return ok;
    });
    int models = 0;
    for (const ModelCase& mc : model_cases()) {
        auto m = Model::load(model_path(mc.stem));
        const ModelProfile& p = m->profile();
        const GoldenPrompt* gp = &mc.prompts[0];
        for (const auto& g : mc.prompts)
            if (g.id == "p2_story40") gp = &g;  // a prompt of several tokens, then decode steps
        SessionOptions so;
        so.placement = split(p, 0);
        so.devices = {&dev};
        current = mc.stem;
        const Routing routing = routing_of(gp->j, p.n_layer, p.n_expert_used);
        evaluate(*m, prompt_tokens(gp->j), 2, so, &routing);
        ++models;
    }
    for (const auto& [model, ops] : refused)
        for (const auto& what : ops) ADD_FAILURE() << model << ": the CUDA backend refuses " << what;
    EXPECT_GT(models, 30);
}

// On real graphs the paired launches happen where a decode step most needs them: every
// MoE selection with its weights (qwen3moe), the q and k norms (qwen3 family), q and k RoPE.
// The memory plan must know (launches_with_next): without it the arena gives k's output the
// memory of q's input and every pair but the routing's is refused.
TEST(CudaPairs, RoutingAndQkNormsLaunchTogetherInRealGraphs) {
    for (const char* stem : {"tiny-qwen3moe-q4_k_m", "tiny-qwen3-q8_0"}) {
        auto m = Model::load(model_path(stem));
        const ModelProfile& p = m->profile();
        StandinBackend dev;
        dev.set_filter([](const Node& n) { return cuda::node_supported(n); });
        dev.set_pairing([](const Node& a, const Node& b) { return cuda::pairs_with_next(a, b); });
        std::map<std::string, int> seen, paired;  // "A+B" -> consecutive pairs, launched together
        dev.set_observer([&](const std::vector<const Node*>& nodes) {
            for (size_t i = 0; i + 1 < nodes.size(); ++i) {
                const Node& a = *nodes[i];
                const Node& b = *nodes[i + 1];
                std::string what;
                if (a.op == Op::MOE_TOPK && b.op == Op::MOE_WEIGHTS) what = "MOE_TOPK+MOE_WEIGHTS";
                else if (a.op == Op::RMS_NORM && b.op == Op::RMS_NORM && a.out->name.rfind("Qcur_normed", 0) == 0)
                    what = "q norm+k norm";
                else if (a.op == Op::ROPE && b.op == Op::ROPE) what = "ROPE q+k";
                if (what.empty()) continue;
                ++seen[what];
                paired[what] += cuda::launched_together(a, b);
            }
        });
        SessionOptions so;
        so.placement = split(p, 0);
        so.devices = {&dev};
        const auto& gp = model_cases().front().prompts.front();
        evaluate(*m, prompt_tokens(gp.j), 2, so);
        const std::vector<std::string> want = p.n_expert > 0
                                                  ? std::vector<std::string>{"MOE_TOPK+MOE_WEIGHTS", "q norm+k norm", "ROPE q+k"}
                                                  : std::vector<std::string>{"q norm+k norm", "ROPE q+k"};
        for (const std::string& w : want) {
            EXPECT_GT(seen[w], 0) << stem << ": no consecutive " << w;
            EXPECT_EQ(paired[w], seen[w]) << stem << ": " << w << " launched apart";
        }
    }
}

// A one-token step's ADD + RMS_NORM pairs, lone RMS_NORMs and SWIGLUs launch as the
// prologues of the packed products that read them (prologue.h): in real decode graphs every
// one of them is taken once the memory plan knows (launches_with_next), which it must for
// each product of the group and the nodes before it (the prologue reads the ADD's operands
// while the products write their outputs).
TEST(CudaPairs, DecodeProloguesLaunchWithTheirProducts) {
    for (const char* stem : {"tiny-llama-q4_k_m", "tiny-qwen3-q8_0"}) {
        auto m = Model::load(model_path(stem));
        const ModelProfile& p = m->profile();
        StandinBackend dev;
        dev.set_filter([](const Node& n) { return cuda::node_supported(n); });
        dev.set_pairing([](const Node& a, const Node& b) { return cuda::pairs_with_next(a, b); });
        std::map<std::string, int> seen, taken;
        dev.set_observer([&](const std::vector<const Node*>& nodes) {
            for (size_t g = 1; g < nodes.size(); ++g) {
                const Node& n = *nodes[g];
                if (n.op != Op::MATMUL || n.src[MatmulArg::X]->n_rows() != 1) continue;
                const Node& before = *nodes[g - 1];
                if (before.op == Op::MATMUL) continue;  // inside a group
                // the group: the products of this input and weight type that follow (one launch)
                std::vector<const Node*> prods;
                for (size_t k = g; k < nodes.size() && nodes[k]->op == Op::MATMUL &&
                                   nodes[k]->src[MatmulArg::X]->data == n.src[MatmulArg::X]->data &&
                                   nodes[k]->src[MatmulArg::W]->type == n.src[MatmulArg::W]->type;
                     ++k)
                    prods.push_back(nodes[k]);
                std::string what;
                std::vector<const Node*> pre;
                if (before.op == Op::SWIGLU) what = "SWIGLU", pre = {&before};
                else if (before.op == Op::RMS_NORM && g >= 2 && nodes[g - 2]->op == Op::ADD &&
                         before.src[NormArg::X] == nodes[g - 2]->out)
                    what = "ADD+RMS_NORM", pre = {nodes[g - 2], &before};
                else if (before.op == Op::RMS_NORM) what = "RMS_NORM", pre = {&before};
                if (what.empty() || before.out->data != n.src[MatmulArg::X]->data) continue;
                ++seen[what];
                taken[what] += cuda::prologue_launches_with(pre.data(), int(pre.size()), prods.data(), int(prods.size()));
            }
        });
        SessionOptions so;
        so.placement = split(p, 0);
        so.devices = {&dev};
        const auto& gp = model_cases().front().prompts.front();
        evaluate(*m, prompt_tokens(gp.j), 3, so);
        for (const char* w : {"SWIGLU", "ADD+RMS_NORM", "RMS_NORM"}) {
            EXPECT_GT(seen[w], 0) << stem << ": no one-token " << w << " before a product";
            EXPECT_EQ(taken[w], seen[w]) << stem << ": " << w << " launched apart from its products";
        }
    }
}

// The RoPE of q and of k run as one kernel only when neither output lands on the other's
// input: the activation arena may give k's output the bytes of q's input once the separate
// kernels would be done with them, and run together that is a race (it was one: sampled
// text changed from run to run until the pair checked it).
TEST(CudaPairs, RopePairOnlyWhenTheOperandsAreApart) {
    Graph g;
    Tensor* q = g.new_input(DType::F32, 64, 4, 3, 1, "q");
    Tensor* k = g.new_input(DType::F32, 64, 2, 3, 1, "k");
    Tensor* pos = g.new_input(DType::I32, 3, 1, 1, 1, "pos");
    Tensor* pos2 = g.new_input(DType::I32, 3, 1, 1, 1, "pos2");
    RopeParams rp;
    rp.n_dims = 64;
    Tensor* qr = g.rope(q, pos, rp);
    Tensor* kr = g.rope(k, pos, rp);
    Tensor* kr2 = g.rope(k, pos2, rp);
    const auto& nodes = g.nodes();
    ASSERT_EQ(nodes.size(), 3u);
    std::vector<float> bq(64 * 4 * 3), bk(64 * 2 * 3), bqr(bq.size()), bkr(bk.size());
    q->data = bq.data();
    k->data = bk.data();
    qr->data = bqr.data();
    kr->data = bkr.data();
    kr2->data = bkr.data();
    EXPECT_TRUE(cuda::launched_together(nodes[0], nodes[1]));
    EXPECT_FALSE(cuda::launched_together(nodes[0], nodes[2])) << "other positions";
    kr->data = bq.data() + 64;  // k's output over q's input
    EXPECT_FALSE(cuda::launched_together(nodes[0], nodes[1]));
    kr->data = bkr.data();
    qr->data = bk.data();  // q's output over k's input
    EXPECT_FALSE(cuda::launched_together(nodes[0], nodes[1]));
    qr->data = bqr.data();
    RopeParams other = rp;
    other.freq_base = 500000.0f;
    Tensor* kr3 = g.rope(k, pos, other);
    kr3->data = bkr.data();
    EXPECT_FALSE(cuda::launched_together(g.nodes()[0], g.nodes()[3])) << "other parameters";
}

// F16/BF16 products of one input (q/k/v, gate/up) run as one tensor-core launch only when
// every product would compute the same alone: same input rows, weight type and K, weight
// rows the kernels can read 16 bytes at a time, and no output written over the input.
TEST(CudaPairs, F16ProductsGroupOnlyOverOneInputApart) {
    alignas(16) static uint16_t wq[64 * 32 + 8], wk[64 * 16 + 8], wl[96 * 16], wb[64 * 16];
    alignas(16) static float bx[64 * 3], bx2[64 * 3], bq[32 * 3], bk[16 * 3];
    Tensor x = Tensor::make(DType::F32, 64, 3), x2 = Tensor::make(DType::F32, 64, 3);
    x.data = bx;
    x2.data = bx2;
    Tensor q = Tensor::make(DType::F16, 64, 32), k = Tensor::make(DType::F16, 64, 16);
    Tensor kl = Tensor::make(DType::F16, 96, 16), kb = Tensor::make(DType::BF16, 64, 16);
    q.data = wq;
    k.data = wk;
    kl.data = wl;
    kb.data = wb;
    Tensor oq = Tensor::make(DType::F32, 32, 3), ok = Tensor::make(DType::F32, 16, 3);
    oq.data = bq;
    ok.data = bk;
    auto mm = [](Tensor& w, Tensor& in, Tensor& out) {
        Node n;
        n.op = Op::MATMUL;
        n.src[MatmulArg::W] = &w;
        n.src[MatmulArg::X] = &in;
        n.out = &out;
        return n;
    };
    EXPECT_TRUE(cuda::products_grouped(mm(q, x, oq), mm(k, x, ok)));
    EXPECT_FALSE(cuda::products_grouped(mm(q, x, oq), mm(k, x2, ok))) << "another input";
    EXPECT_FALSE(cuda::products_grouped(mm(q, x, oq), mm(kl, x, ok))) << "another K";
    EXPECT_FALSE(cuda::products_grouped(mm(q, x, oq), mm(kb, x, ok))) << "another weight type";
    k.data = wk + 1;  // rows not on 16 bytes
    EXPECT_FALSE(cuda::products_grouped(mm(q, x, oq), mm(k, x, ok))) << "unaligned weights";
    k.data = wk;
    ok.data = bx + 64;  // k's output over the input
    EXPECT_FALSE(cuda::products_grouped(mm(q, x, oq), mm(k, x, ok))) << "output over the input";
    ok.data = bk;
    EXPECT_TRUE(cuda::products_grouped(mm(q, x, oq), mm(k, x, ok)));
}

#endif

// Every golden prompt of every model with everything on the stand-in, against the
// reference's records (the goldens' own rules): a test a model, so that CTest spreads them
// over the cores.
class StandinGoldens : public testing::TestWithParam<std::string> {};
TEST_P(StandinGoldens, AllOnTheDevicePassesTheGoldens) {
    StandinBackend dev;
    int cases = 0;
    for (const ModelCase& mc : {model_case(GetParam())}) {
        auto m = Model::load(model_path(mc.stem));
        const ModelProfile& p = m->profile();
        for (const auto& gp : mc.prompts) {
            const auto prompt = prompt_tokens(gp.j);
            const int n_predict = gp.j["greedy"]["n_predict"].get<int>();
            const Routing routing = routing_of(gp.j, p.n_layer, p.n_expert_used);
            SessionOptions so;
            so.placement = split(p, 0);
            so.devices = {&dev};
            const Result r = evaluate(*m, prompt, n_predict, so, &routing);
            const int V = p.n_vocab;
            nlohmann::json ours;
            ours["prompt_tokens"] = prompt;
            ours["prompt_top_ids"] = nlohmann::json::array();
            ours["prompt_top_logits"] = nlohmann::json::array();
            for (size_t pos = 0; pos < prompt.size(); ++pos) {
                const float* l = &r.prompt_logits[pos * V];
                std::vector<int32_t> ids(V);
                for (int i = 0; i < V; ++i) ids[i] = i;
                std::partial_sort(ids.begin(), ids.begin() + 10, ids.end(),
                                  [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
                ids.resize(10);
                std::vector<float> vals;
                for (int32_t id : ids) vals.push_back(l[id]);
                ours["prompt_top_ids"].push_back(ids);
                ours["prompt_top_logits"].push_back(vals);
            }
            ours["greedy"]["tokens"] = r.greedy;
            const auto bytes = test::read_bytes(test::shared_dir() + "/golden/" + mc.stem + "/" + gp.id + ".logits.bin");
            std::vector<float> golden_last(bytes.size() / 4);
            std::memcpy(golden_last.data(), bytes.data(), golden_last.size() * 4);
            std::vector<float> our_last(r.prompt_logits.end() - V, r.prompt_logits.end());
            const auto cmp = test::compare_golden(gp.j, ours, golden_last, our_last, test::tolerance_for(mc.stem),
                                                  !routing.by_layer.empty());
            EXPECT_TRUE(cmp.ok) << mc.stem << "/" << gp.id << " on the stand-in: " << cmp.summary() << "\n  "
                                << (cmp.failures.empty() ? "" : cmp.failures[0]);
            ++cases;
        }
    }
    EXPECT_GE(cases, 6) << GetParam() << ": fewer golden prompts than each model has";
}
std::string stem_param_name(const testing::TestParamInfo<std::string>& info) {
    std::string s = info.param;
    for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return s;
}
INSTANTIATE_TEST_SUITE_P(Shared, StandinGoldens, testing::ValuesIn(golden_stems()), stem_param_name);

TEST(Standin, TheGoldensCoverTheSharedData) {
    size_t cases = 0;
    for (const ModelCase& mc : model_cases()) cases += mc.prompts.size();
    EXPECT_GE(model_cases().size(), 40u) << "fewer golden models than the shared data holds";
    EXPECT_GE(cases, 6u * 40) << "fewer golden cases than the shared data holds";
}

// The serving engine on a split: 8 greedy requests together equal each request alone on
// the CPU.
TEST(Standin, EngineOnASplitMatchesTheCpuAlone) {
    StandinBackend dev;
    auto m = Model::load(model_path("tiny-qwen3-f16"));
    const ModelProfile& p = m->profile();
    auto run_engine = [&](EngineOptions eo, const std::vector<std::vector<int32_t>>& prompts) {
        Engine e(*m, eo);
        std::vector<std::vector<int32_t>> out(prompts.size());
        std::vector<std::pair<GenerationRequest, TokenCallback>> reqs;
        std::mutex mu;
        std::condition_variable cv;
        size_t done = 0;
        for (size_t i = 0; i < prompts.size(); ++i) {
            GenerationRequest r;
            r.prompt = prompts[i];
            r.max_tokens = 12;
            r.ignore_eos = true;
            r.sampling.temperature = 0.0f;
            reqs.emplace_back(r, [&, i](const TokenEvent& ev) {
                std::lock_guard<std::mutex> lk(mu);
                if (ev.token >= 0) out[i].push_back(ev.token);
                if (ev.done) {
                    ++done;
                    cv.notify_all();
                }
                return true;
            });
        }
        e.submit_batch(std::move(reqs));
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return done == prompts.size(); });
        return out;
    };
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 8; ++i) {
        std::vector<int32_t> pr;
        for (int t = 0; t < 5 + i; ++t) pr.push_back(1 + (i * 131 + t * 17) % (p.n_vocab - 1));
        prompts.push_back(pr);
    }
    EngineOptions solo;
    solo.n_parallel = 1;
    solo.n_ctx = 256;
    solo.n_threads = 2;
    EngineOptions split_eo = solo;
    split_eo.n_parallel = 8;
    split_eo.placement = split(p, p.n_layer / 2);
    split_eo.devices = {&dev};
    EngineOptions batched_cpu = solo;
    batched_cpu.n_parallel = 8;
    const auto cpu_together = run_engine(batched_cpu, prompts);
    EXPECT_EQ(cpu_together, run_engine(batched_cpu, prompts)) << "the batched run is not repeatable";
    const auto together = run_engine(split_eo, prompts);
    EXPECT_EQ(cpu_together, together) << "the split changed the batched run";
    for (size_t i = 0; i < prompts.size(); ++i) {
        const auto alone = run_engine(solo, {prompts[i]});
        EXPECT_EQ(together[i], alone[0]) << "request " << i;
    }
}

}  // namespace
}  // namespace glia

namespace glia {
namespace {
// Several sequences in one step through the Runner: the stand-in split gives the CPU's bits.
TEST(Standin, MultiSequenceStepMatchesTheCpu) {
    StandinBackend dev;
    for (const char* stem : {"stories260K", "tiny-qwen3-f16", "tiny-lfm2-f16"}) {
        auto m = Model::load(model_path(stem));
        const ModelProfile& p = m->profile();
        for (int k : {0, p.n_layer / 2}) {
            auto run = [&](bool split_it, bool with_out_ids) -> std::vector<float> {
                RunnerOptions ro;
                ro.n_ctx = 256;
                ro.n_slots = 3;
                ro.n_threads = 2;
                if (split_it) {
                    ro.placement = split(p, k);
                    ro.devices = {&dev};
                }
                Runner r(*m, ro);
                std::vector<int32_t> tok, pos, seq, out;
                for (int s = 0; s < 3; ++s) {
                    if (!r.pages().reserve(s, 40)) ADD_FAILURE() << "reserve";
                    for (int t = 0; t < 5 + 3 * s; ++t) {
                        tok.push_back(1 + (s * 37 + t * 11) % (p.n_vocab - 1));
                        pos.push_back(t);
                        seq.push_back(s);
                    }
                    out.push_back(static_cast<int32_t>(tok.size()) - 1);
                }
                StepInputs in;
                in.tokens = tok.data();
                in.pos = pos.data();
                in.seq = seq.data();
                in.n_tokens = static_cast<int>(tok.size());
                if (with_out_ids) {
                    in.out_ids = out.data();
                    in.n_out = 3;
                } else {
                    in.all_logits = true;
                }
                const float* l = r.forward(in);
                return std::vector<float>(l, l + size_t(r.n_outputs()) * p.n_vocab);
            };
            for (bool oid : {false, true}) {
                const auto a = run(false, oid), b = run(true, oid);
                EXPECT_TRUE(bit_equal(a, b)) << stem << " split " << k << (oid ? " out_ids" : " all logits");
            }
        }
    }
}
}  // namespace
}  // namespace glia
