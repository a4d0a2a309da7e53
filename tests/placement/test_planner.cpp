// The placement planner: every shared model plans; byte accounting agrees with the file
// tensor by tensor; fits stay within the memory given; -ngl partial, all and 0; --cpu-moe
// moves only expert tensors; the uniform-offload guard; context shrink down to the floor
// only; proportional multi-GPU splits; refusals whose remedies really fit.
#include <gtest/gtest.h>

#include <regex>

#include "core/error.h"
#include "placement/estimates.h"
#include "placement/report.h"
#include "plan_test_util.h"

namespace glia::test {
namespace {

bool is_expert_name(const std::string& n) {
    return std::regex_search(n, std::regex(R"(\.ffn_(gate|up|down|gate_up)_exps\.)"));
}

// Bytes per device as the tensors' own devices add them up, plus the tied LM head's copy.
std::vector<uint64_t> weights_by_tensor(const Placement& pl, const gguf::File& f) {
    std::vector<uint64_t> w(pl.devices.size(), 0);
    for (const auto& t : f.tensors()) {
        const int d = pl.device_of_tensor(t.name);
        EXPECT_GE(d, 0) << t.name;
        EXPECT_LT(d, int(pl.devices.size())) << t.name;
        w[d] += t.nbytes;
    }
    if (pl.output_copies_embeddings) w[pl.output] += f.tensor("token_embd.weight").nbytes;
    return w;
}

// KV bytes of the whole model at n_ctx, from the profile (F16 K and V per attention layer).
uint64_t expected_kv(const ModelProfile& p, int n_ctx) {
    uint64_t n = 0;
    for (int il = 0; il < p.n_layer; ++il)
        if (p.layer_kind[il] != LayerKind::RECURRENT)
            n += uint64_t(p.n_head_kv[il]) * (p.head_dim_k + p.head_dim_v) * 2 * uint64_t(n_ctx);
    return n;
}

uint64_t expected_state(const ModelProfile& p, int n_seq) {
    uint64_t n = 0;
    for (int il = 0; il < p.n_layer; ++il)
        if (p.layer_kind[il] == LayerKind::RECURRENT && p.shortconv_l_cache > 1)
            n += uint64_t(p.shortconv_l_cache - 1) * p.n_embd * 4 * uint64_t(n_seq);
    return n;
}

int first_number_after(const std::string& s, const std::string& marker) {
    const size_t at = s.find(marker);
    if (at == std::string::npos) return -1;
    return std::stoi(s.substr(at + marker.size()));
}

TEST(Planner, EveryModelPlansOnTheCpuAndAllOnTheGpu) {
    int planned = 0;
    for (const std::string& path : shared_model_paths()) {
        SCOPED_TRACE(path);
        Model m;
        try {
            m = load_model_file(path);
        } catch (const Error&) {
            continue;  // no profile (an architecture glia does not derive yet): the CLI test checks the error
        }
        const uint64_t total = tensor_bytes(*m.f);

        PlanRequest cpu;
        const Placement a = plan_placement(m.p, *m.f, cpu);
        ASSERT_EQ(a.devices.size(), 1u);
        EXPECT_EQ(a.n_gpu_layers(), 0);
        EXPECT_EQ(int(a.layer.size()), m.p.n_layer);
        EXPECT_EQ(a.usage[0].weights, total);
        EXPECT_EQ(weights_by_tensor(a, *m.f)[0], total);
        EXPECT_EQ(a.n_ctx, m.p.n_ctx_train > 0 ? m.p.n_ctx_train : 4096);
        EXPECT_EQ(a.usage[0].kv, expected_kv(m.p, a.n_ctx));
        EXPECT_EQ(a.usage[0].state, expected_state(m.p, 1));
        EXPECT_GT(a.usage[0].scratch, 0u);
        ASSERT_FALSE(a.notes.empty());
        EXPECT_NE(a.notes[0].find("no accelerator"), std::string::npos);

        PlanRequest gpu = gpu_request({64 * kGiB});
        gpu.n_ctx = 1024;
        gpu.n_seq = 3;
        const Placement b = plan_placement(m.p, *m.f, gpu);
        ASSERT_EQ(b.devices.size(), 2u);
        EXPECT_EQ(b.n_gpu_layers(), m.p.n_layer);
        EXPECT_EQ(b.embeddings, 0);
        EXPECT_EQ(b.output, 1);
        EXPECT_EQ(b.output_copies_embeddings, m.p.tied_output);
        const std::vector<uint64_t> w = weights_by_tensor(b, *m.f);
        EXPECT_EQ(w[0], b.usage[0].weights);
        EXPECT_EQ(w[1], b.usage[1].weights);
        EXPECT_EQ(w[0], m.f->tensor("token_embd.weight").nbytes);  // only the embeddings stay
        EXPECT_EQ(b.usage[1].kv, expected_kv(m.p, 1024));
        EXPECT_EQ(b.usage[0].kv, 0u);
        EXPECT_EQ(b.usage[1].state, expected_state(m.p, 3));
        EXPECT_LE(b.usage[1].total(), 64 * kGiB);
        EXPECT_TRUE(b.notes.empty()) << b.notes[0];
        ++planned;
    }
    EXPECT_GE(planned, 40) << "most shared models should plan";
}

TEST(Planner, FitKeepsEveryGpuWithinItsMemoryWithAsManyLayersAsFit) {
    Model m = shared_model("stories260K.gguf");
    ASSERT_EQ(m.p.n_layer, 5);
    PlanRequest big = gpu_request({kGiB});
    big.n_ctx = 512;
    const size_t all = plan_placement(m.p, *m.f, big).usage[1].total();
    int last_k = -1;
    for (size_t mem = all / 8; mem <= all + 1024; mem += all / 16) {
        SCOPED_TRACE(mem);
        PlanRequest r = gpu_request({mem});
        r.n_ctx = 512;
        const Placement pl = plan_placement(m.p, *m.f, r);
        const int k = pl.n_gpu_layers();
        EXPECT_LE(pl.usage[1].total(), mem);
        EXPECT_EQ(pl.n_ctx, 512);  // no floor given: never shrunk
        EXPECT_GE(k, last_k);      // more memory never means fewer layers
        last_k = k;
        for (int il = 0; il < 5; ++il) EXPECT_EQ(pl.layer[il], il >= 5 - k ? 1 : 0) << il;  // the last k
        if (k < 5) {
            // One more layer would not have fitted: -ngl k+1 is refused.
            PlanRequest more = r;
            more.n_gpu_layers = k + 1;
            EXPECT_THROW(plan_placement(m.p, *m.f, more), PlanError);
            ASSERT_FALSE(pl.notes.empty());
            EXPECT_NE(pl.notes.back().find(cat("fit: ", k, " of 5 layers")), std::string::npos) << pl.notes.back();
        }
    }
    EXPECT_EQ(last_k, 5);
}

TEST(Planner, NglPartialAllAndZero) {
    Model m = shared_model("stories260K.gguf");
    PlanRequest r = gpu_request({kGiB}, 2);
    Placement pl = plan_placement(m.p, *m.f, r);
    EXPECT_EQ(pl.layer, (std::vector<int>{0, 0, 0, 1, 1}));
    EXPECT_EQ(pl.output, 0);  // output head on the GPU only when every layer is
    EXPECT_EQ(pl.embeddings, 0);
    EXPECT_EQ(pl.device_of_tensor("blk.3.attn_q.weight"), 1);
    EXPECT_EQ(pl.device_of_tensor("blk.2.attn_q.weight"), 0);
    EXPECT_EQ(pl.device_of_tensor("output.weight"), 0);

    for (int ngl : {5, 6, 99}) {
        r.n_gpu_layers = ngl;
        pl = plan_placement(m.p, *m.f, r);
        EXPECT_EQ(pl.n_gpu_layers(), 5) << ngl;
        EXPECT_EQ(pl.output, 1) << ngl;
        EXPECT_EQ(pl.device_of_tensor("output.weight"), 1);
        EXPECT_EQ(pl.device_of_tensor("token_embd.weight"), 0);  // a row lookup stays on the CPU
    }
    r.n_gpu_layers = 0;
    pl = plan_placement(m.p, *m.f, r);
    EXPECT_EQ(pl.n_gpu_layers(), 0);
    EXPECT_EQ(pl.usage[1].total(), 0u);
    EXPECT_EQ(pl.usage[0].weights, tensor_bytes(*m.f));

    // Without an accelerator -ngl is ignored, and the plan says so.
    PlanRequest none;
    none.n_gpu_layers = 3;
    pl = plan_placement(m.p, *m.f, none);
    EXPECT_EQ(pl.n_gpu_layers(), 0);
    ASSERT_FALSE(pl.notes.empty());
    EXPECT_NE(pl.notes[0].find("-ngl 3 ignored"), std::string::npos) << pl.notes[0];
}

void expect_cpu_moe_moves_only_experts(const Model& m) {
    PlanRequest r = gpu_request({256 * kGiB}, 999);
    r.n_ctx = 2048;
    const Placement on = plan_placement(m.p, *m.f, r);
    r.cpu_moe = true;
    const Placement off = plan_placement(m.p, *m.f, r);
    EXPECT_FALSE(on.experts_on_host);
    EXPECT_TRUE(off.experts_on_host);
    EXPECT_EQ(off.layer, on.layer);
    uint64_t expert_bytes = 0;
    int n_expert_tensors = 0;
    for (const auto& t : m.f->tensors()) {
        if (is_expert_name(t.name)) {
            EXPECT_EQ(off.device_of_tensor(t.name), 0) << t.name;
            EXPECT_EQ(on.device_of_tensor(t.name), 1) << t.name;
            expert_bytes += t.nbytes;
            ++n_expert_tensors;
        } else {
            EXPECT_EQ(off.device_of_tensor(t.name), on.device_of_tensor(t.name)) << t.name;
        }
    }
    EXPECT_EQ(n_expert_tensors, 3 * m.p.n_layer);
    EXPECT_EQ(off.usage[0].weights, on.usage[0].weights + expert_bytes);
    EXPECT_EQ(off.usage[1].weights + expert_bytes, on.usage[1].weights);
    EXPECT_EQ(off.usage[1].kv, on.usage[1].kv);
    EXPECT_GT(off.usage[0].scratch, on.usage[0].scratch);  // the CPU now computes the experts
}

TEST(Planner, CpuMoeMovesOnlyExpertTensors) {
    {
        SCOPED_TRACE("tiny-qwen3moe-q4_k_m");
        expect_cpu_moe_moves_only_experts(shared_model("tiny-qwen3moe-q4_k_m.gguf"));
    }
    {
        SCOPED_TRACE("synth qwen3-30b-a3b Q4_K_M");
        expect_cpu_moe_moves_only_experts(synth_model("qwen3-30b-a3b", quant::FileType::Q4_K_M));
    }
    // A dense model: --cpu-moe changes nothing and says so.
    Model d = shared_model("tiny-llama-q8_0.gguf");
    PlanRequest r = gpu_request({kGiB}, 99);
    r.cpu_moe = true;
    const Placement pl = plan_placement(d.p, *d.f, r);
    EXPECT_FALSE(pl.experts_on_host);
    ASSERT_FALSE(pl.notes.empty());
    EXPECT_NE(pl.notes[0].find("no expert tensors"), std::string::npos);
}

TEST(Planner, UniformOffloadRefusesPartialNglWithTheLegalShapes) {
    Model m = shared_model("tiny-lfm2-q8_0.gguf");
    ASSERT_TRUE(m.p.uniform_offload_required);
    ASSERT_EQ(m.p.n_layer, 3);
    for (int ngl : {1, 2}) {
        for (bool with_gpu : {true, false}) {
            PlanRequest r = gpu_request(with_gpu ? std::vector<size_t>{kGiB} : std::vector<size_t>{}, ngl);
            try {
                plan_placement(m.p, *m.f, r);
                ADD_FAILURE() << "-ngl " << ngl << " was accepted";
            } catch (const PlanError& e) {
                const std::string msg = e.what();
                EXPECT_NE(msg.find(cat("-ngl ", ngl, " would split")), std::string::npos) << msg;
                EXPECT_NE(msg.find("uniform offload"), std::string::npos) << msg;
                EXPECT_NE(msg.find("recurrent layers 0, 2"), std::string::npos) << msg;
                EXPECT_NE(msg.find("all layers on the GPU (-ngl 3 or more)"), std::string::npos) << msg;
                EXPECT_NE(msg.find("all on the CPU (-ngl 0)"), std::string::npos) << msg;
                EXPECT_NE(msg.find("across machines"), std::string::npos) << msg;
            }
        }
    }
    // The legal shapes are accepted.
    Placement all = plan_placement(m.p, *m.f, gpu_request({kGiB}, 3));
    EXPECT_EQ(all.n_gpu_layers(), 3);
    EXPECT_EQ(all.output, 1);
    EXPECT_GT(all.usage[1].state, 0u);
    EXPECT_EQ(plan_placement(m.p, *m.f, gpu_request({kGiB}, 0)).n_gpu_layers(), 0);
    EXPECT_EQ(plan_placement(m.p, *m.f, gpu_request({kGiB})).n_gpu_layers(), 3);  // the fit takes all
    // GPU/GPU splits are allowed.
    const Placement two = plan_placement(m.p, *m.f, gpu_request({kGiB, kGiB}, 3));
    EXPECT_EQ(two.layer[0], 1);
    EXPECT_EQ(two.layer[2], 2);
    EXPECT_EQ(two.n_gpu_layers(), 3);

    // A fit that could only split is refused, naming the CPU-only shape.
    PlanRequest tight = gpu_request({all.usage[1].total() - 1});
    tight.n_ctx = all.n_ctx;
    try {
        plan_placement(m.p, *m.f, tight);
        ADD_FAILURE() << "a split fit was accepted";
    } catch (const PlanError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("all 3 layers need"), std::string::npos) << msg;
        EXPECT_NE(msg.find("-ngl 0 (all on the CPU)"), std::string::npos) << msg;
        EXPECT_NE(msg.find("-c "), std::string::npos) << msg;  // a smaller context would fit
    }
}

TEST(Planner, TheGuardFollowsTheProfileFlagNotTheArchitecture) {
    Model llama = shared_model("tiny-llama-q8_0.gguf");
    EXPECT_NO_THROW(plan_placement(llama.p, *llama.f, gpu_request({kGiB}, 1)));
    llama.p.uniform_offload_required = true;
    EXPECT_THROW(plan_placement(llama.p, *llama.f, gpu_request({kGiB}, 1)), PlanError);

    Model lfm = shared_model("tiny-lfm2-q8_0.gguf");
    lfm.p.uniform_offload_required = false;
    const Placement pl = plan_placement(lfm.p, *lfm.f, gpu_request({kGiB}, 1));
    EXPECT_EQ(pl.layer, (std::vector<int>{0, 0, 1}));
}

TEST(Planner, ContextShrinksOnlyDownToTheFloorAndSaysSo) {
    Model m = shared_model("tiny-llama-q8_0.gguf");
    const int n_ctx = m.p.n_ctx_train;
    ASSERT_GE(n_ctx, 8192);
    // Memory for every layer at a quarter of the context.
    PlanRequest probe = gpu_request({64 * kGiB}, 99);
    probe.n_ctx = n_ctx / 4;
    const size_t mem = plan_placement(m.p, *m.f, probe).usage[1].total();

    PlanRequest r = gpu_request({mem});
    Placement pl = plan_placement(m.p, *m.f, r);  // no floor: the context stays, layers move
    EXPECT_EQ(pl.n_ctx, n_ctx);
    EXPECT_FALSE(pl.ctx_shrunk());
    EXPECT_LT(pl.n_gpu_layers(), m.p.n_layer);

    r.min_ctx = 1024;
    pl = plan_placement(m.p, *m.f, r);
    EXPECT_EQ(pl.n_gpu_layers(), m.p.n_layer);
    EXPECT_TRUE(pl.ctx_shrunk());
    EXPECT_GE(pl.n_ctx, n_ctx / 4);
    EXPECT_LT(pl.n_ctx, n_ctx / 4 + 256);
    EXPECT_LE(pl.usage[1].total(), mem);
    ASSERT_FALSE(pl.notes.empty());
    EXPECT_NE(pl.notes[0].find(cat("context shrunk from ", n_ctx, " to ", pl.n_ctx)), std::string::npos) << pl.notes[0];

    // A floor above what fits: never below it; layers move instead.
    r.min_ctx = n_ctx / 2;
    pl = plan_placement(m.p, *m.f, r);
    EXPECT_GE(pl.n_ctx, n_ctx / 2);
    EXPECT_LT(pl.n_gpu_layers(), m.p.n_layer);
    EXPECT_LE(pl.usage[1].total(), mem);

    // Explicit -ngl: shrunk with a floor, refused without, the -c remedy fitting.
    r.n_gpu_layers = m.p.n_layer;
    r.min_ctx = 512;
    pl = plan_placement(m.p, *m.f, r);
    EXPECT_TRUE(pl.ctx_shrunk());
    EXPECT_EQ(pl.n_gpu_layers(), m.p.n_layer);
    r.min_ctx = 0;
    try {
        plan_placement(m.p, *m.f, r);
        ADD_FAILURE() << "did not refuse";
    } catch (const PlanError& e) {
        const int c = first_number_after(e.what(), "-c ");
        ASSERT_GT(c, 0) << e.what();
        PlanRequest fixed = r;
        fixed.n_ctx = c;
        EXPECT_EQ(plan_placement(m.p, *m.f, fixed).n_gpu_layers(), m.p.n_layer) << e.what();
    }
    r.min_ctx = n_ctx + 1;
    EXPECT_THROW(plan_placement(m.p, *m.f, r), Error);  // a floor above the context is bad input
}

TEST(Planner, SeveralGpusShareLayersInProportionToMemory) {
    Model m = synth_model("llama3-8b", quant::FileType::Q4_K_M);
    ASSERT_EQ(m.p.n_layer, 32);
    auto count = [](const Placement& pl, int d) { return int(std::count(pl.layer.begin(), pl.layer.end(), d)); };
    PlanRequest r = gpu_request({48 * kGiB, 16 * kGiB}, 32);
    r.n_ctx = 8192;
    Placement pl = plan_placement(m.p, *m.f, r);
    EXPECT_EQ(count(pl, 1), 24);
    EXPECT_EQ(count(pl, 2), 8);
    for (int il = 0; il < 32; ++il) EXPECT_EQ(pl.layer[il], il < 24 ? 1 : 2) << il;  // contiguous, in device order
    EXPECT_EQ(pl.output, 2);

    r.gpu_mem = {24 * kGiB, 24 * kGiB, 24 * kGiB, 24 * kGiB};
    pl = plan_placement(m.p, *m.f, r);
    for (int d = 1; d <= 4; ++d) EXPECT_EQ(count(pl, d), 8) << d;
    EXPECT_EQ(pl.devices[3].name, "cuda:2");
    EXPECT_EQ(pl.devices[3].ordinal, 2);

    // A partial -ngl splits only the offloaded layers.
    r.gpu_mem = {24 * kGiB, 24 * kGiB};
    r.n_gpu_layers = 16;
    pl = plan_placement(m.p, *m.f, r);
    EXPECT_EQ(count(pl, 0), 16);
    EXPECT_EQ(count(pl, 1), 8);
    EXPECT_EQ(count(pl, 2), 8);
    EXPECT_EQ(pl.output, 0);

    // The fit on two small GPUs: each within its memory.
    PlanRequest fit = gpu_request({3 * kGiB, 2 * kGiB});
    fit.n_ctx = 8192;
    pl = plan_placement(m.p, *m.f, fit);
    EXPECT_GT(pl.n_gpu_layers(), 10);
    EXPECT_LT(pl.n_gpu_layers(), 32);
    EXPECT_LE(pl.usage[1].total(), 3 * kGiB);
    EXPECT_LE(pl.usage[2].total(), 2 * kGiB);

    // Another device kind names its devices after it.
    PlanRequest standin = gpu_request({kGiB}, 32);
    standin.gpu_kind = Device::STANDIN;
    standin.gpu_kind_name = "standin";
    standin.n_ctx = 512;
    Model tiny = shared_model("tiny-llama-q8_0.gguf");
    pl = plan_placement(tiny.p, *tiny.f, standin);
    EXPECT_EQ(pl.devices[1].name, "standin:0");
    EXPECT_EQ(pl.devices[1].kind, Device::STANDIN);
}

TEST(Planner, RefusalNamesTheShortfallAndRemediesThatFit) {
    Model m = synth_model("qwen3-30b-a3b", quant::FileType::Q4_K_M);
    PlanRequest r = gpu_request({12 * kGiB}, 48);
    r.n_ctx = 32768;
    std::string msg;
    try {
        plan_placement(m.p, *m.f, r);
    } catch (const PlanError& e) {
        msg = e.what();
    }
    ASSERT_FALSE(msg.empty()) << "not refused";
    EXPECT_EQ(msg.find("-ngl 48 needs "), 0u) << msg;
    EXPECT_NE(msg.find(" GiB on cuda:0 (weights "), std::string::npos) << msg;
    EXPECT_NE(msg.find(", KV "), std::string::npos) << msg;
    EXPECT_NE(msg.find("but --gpu-mem gives 12.0 GiB: use -ngl "), std::string::npos) << msg;
    EXPECT_NE(msg.find("--cpu-moe"), std::string::npos) << msg;
    const int k = first_number_after(msg, "use -ngl ");
    ASSERT_GT(k, 0) << msg;
    ASSERT_LT(k, 48) << msg;
    PlanRequest fixed = r;
    fixed.n_gpu_layers = k;
    EXPECT_NO_THROW(plan_placement(m.p, *m.f, fixed)) << msg;
    fixed.n_gpu_layers = k + 1;
    EXPECT_THROW(plan_placement(m.p, *m.f, fixed), PlanError) << "the -ngl remedy is the largest that fits";
    fixed = r;
    fixed.cpu_moe = true;
    EXPECT_NO_THROW(plan_placement(m.p, *m.f, fixed)) << msg;
}

TEST(Planner, BadRequestsAreErrors) {
    Model m = shared_model("stories260K.gguf");
    PlanRequest r;
    r.n_gpu_layers = -2;
    EXPECT_THROW(plan_placement(m.p, *m.f, r), Error);
    r = PlanRequest{};
    r.gpu_mem = {0};
    EXPECT_THROW(plan_placement(m.p, *m.f, r), Error);
    r = PlanRequest{};
    r.n_seq = 0;
    EXPECT_THROW(plan_placement(m.p, *m.f, r), Error);
    r = PlanRequest{};
    r.n_batch = 0;
    EXPECT_THROW(plan_placement(m.p, *m.f, r), Error);
}

TEST(Placement, AllCpuAndTensorSites) {
    const Placement p = Placement::all_cpu(4);
    EXPECT_EQ(p.devices.size(), 1u);
    EXPECT_EQ(p.devices[0].kind, Device::CPU);
    EXPECT_EQ(p.layer, (std::vector<int>(4, 0)));
    EXPECT_EQ(p.n_gpu_layers(), 0);
    EXPECT_EQ(p.device_of_tensor("blk.3.attn_q.weight"), 0);
    EXPECT_THROW(p.device_of_tensor("blk.4.attn_q.weight"), Error);

    EXPECT_EQ(tensor_site("token_embd.weight").role, SiteRole::EMBEDDINGS);
    EXPECT_EQ(tensor_site("token_embd_norm.weight").role, SiteRole::OUTPUT);  // lfm2's final norm
    EXPECT_EQ(tensor_site("output_norm.weight").role, SiteRole::OUTPUT);
    EXPECT_EQ(tensor_site("rope_freqs.weight").role, SiteRole::OUTPUT);
    EXPECT_EQ(tensor_site("blk.12.ffn_up.weight").role, SiteRole::LAYER);
    EXPECT_EQ(tensor_site("blk.12.ffn_up.weight").layer, 12);
    EXPECT_EQ(tensor_site("blk.7.ffn_down_exps.weight").role, SiteRole::EXPERT);
    EXPECT_EQ(tensor_site("blk.7.ffn_gate_exps.bias").role, SiteRole::EXPERT);
    EXPECT_EQ(tensor_site("blk.7.ffn_gate_inp.weight").role, SiteRole::LAYER);        // the router stays
    EXPECT_EQ(tensor_site("blk.7.ffn_down_shexp.weight").role, SiteRole::LAYER);      // the shared expert too
    EXPECT_EQ(tensor_site("blk.7.ffn_up_exps_extra.weight").role, SiteRole::LAYER);
    EXPECT_EQ(tensor_site("blk.x.attn_q.weight").role, SiteRole::OUTPUT);
    EXPECT_EQ(tensor_site("blk.").role, SiteRole::OUTPUT);
}

TEST(Placement, MemoryLists) {
    EXPECT_EQ(parse_memory_list("24G,24G"), (std::vector<size_t>{24 * kGiB, 24 * kGiB}));
    EXPECT_EQ(parse_memory_list("1.5GiB"), (std::vector<size_t>{kGiB + kGiB / 2}));
    EXPECT_EQ(parse_memory_list("8000M, 512k,100"), (std::vector<size_t>{8000 * kMiB, 512 * 1024, 100}));
    EXPECT_EQ(parse_memory_list("2TB"), (std::vector<size_t>{2 * 1024 * kGiB}));
    for (const char* bad : {"", "24X", "-1G", "G", "24G,", "0", "nan"}) {
        try {
            parse_memory_list(bad);
            ADD_FAILURE() << "accepted '" << bad << "'";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("--gpu-mem"), std::string::npos) << e.what();
        }
    }
}

TEST(Placement, ReportRanges) {
    Model m = shared_model("stories260K.gguf");
    const Placement pl = plan_placement(m.p, *m.f, gpu_request({kGiB}, 2));
    EXPECT_EQ(describe_layers(pl), "0-2 on cpu, 3-4 on cuda:0");
    EXPECT_EQ(format_bytes(100), "100 B");
    EXPECT_EQ(format_bytes(3 * kGiB / 2), "1.5 GiB");
    DeviceUsage u;
    u.weights = 7 * kGiB;
    u.kv = kGiB;
    u.scratch = kGiB / 5;
    EXPECT_EQ(format_parts(u), "(weights 7.0, KV 1.0, scratch 0.2)");
}

}  // namespace
}  // namespace glia::test
