// The speculative bench: tg<N> of greedy tokens after a real prompt (speculation needs
// text that means something), one token a step and then speculating, each timed after one
// warm-up for -r repetitions. The speed-up is the ratio of the medians; the tokens of
// both ways must be the same (the promise of runtime/speculative.h), else the bench fails.
#include "bench_speculative.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "common.h"
#include "core/error.h"
#include "core/json.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/speculative.h"
#include "speculative_options.h"
#include "tokenizer/vocab.h"

namespace glia::cli {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> x) {
    std::sort(x.begin(), x.end());
    const size_t n = x.size();
    return n == 0 ? 0.0 : n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

struct Run {
    std::vector<int32_t> tokens;
    double seconds = 0;  // generation only (after the prompt)
    SpecStats stats;
};

// n greedy tokens (end of generation ignored) on a warm session (its step shapes already
// compiled by the warm-up, as in a long generation); with `spec`, through it.
Run generate(Session& s, Speculator* spec, const std::vector<int32_t>& prompt, int n) {
    s.reset();
    if (spec) spec->reset();
    std::vector<int32_t> text = prompt;
    std::vector<float> l = s.decode(prompt, false);
    const auto t0 = Clock::now();
    text.push_back(argmax(l.data(), s.n_vocab()));
    while (static_cast<int>(text.size() - prompt.size()) < n) {
        const int left = n - static_cast<int>(text.size() - prompt.size());
        if (spec) {
            const std::vector<int32_t> next = spec->step(text, left);
            text.insert(text.end(), next.begin(), next.end());
        } else {
            l = s.decode({text.back()}, false);
            text.push_back(argmax(l.data(), s.n_vocab()));
        }
    }
    Run r;
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.tokens.assign(text.begin() + static_cast<long>(prompt.size()), text.end());
    if (spec) r.stats = spec->stats();
    return r;
}

}  // namespace

void add_bench_speculative_options(Args& a) {
    add_speculative_options(a);
    a.opt("--text", "TEXT", "with --spec-ngram or --model-draft: the prompt (text) to generate from")
        .opt("--text-file", "FILE", "with --spec-ngram or --model-draft: read the prompt from a file");
}

bool bench_speculative_wanted(const Args& a) { return a.has("--spec-ngram") || a.has("--model-draft"); }

int bench_speculative(const Args& a, const Model& model, const std::string& model_desc) {
    SpecOptions opt = speculative_options(a);
    std::string text;
    if (a.has("--text") == a.has("--text-file")) fail("the speculative bench needs a prompt: --text TEXT or --text-file FILE");
    text = a.has("--text") ? a.str("--text") : read_file(a.str("--text-file"));
    if (a.has("-p") || a.has("-d") || a.has("--parallel")) fail("-p, -d and --parallel do not apply to the speculative bench");
    const long long n_gen = a.integer("-n", 2, 1 << 20);
    const long long reps = a.integer("-r", 1, 1000);
    const long long threads = a.integer("-t", 0, kMaxThreads);
    const bool json = a.has("--json");
    std::unique_ptr<Model> draft;
    if (a.has("--model-draft")) {
        draft = load_model(a.str("--model-draft"));
        opt.draft = draft.get();
    }
    const std::vector<int32_t> prompt = model.vocab().tokenize(text, true, false);
    if (prompt.empty()) fail("the prompt produced no tokens");
    SessionOptions so;
    so.n_ctx = static_cast<int>(prompt.size() + n_gen) + 1;
    so.n_threads = static_cast<int>(threads);
    opt.draft_session = so;  // the draft on the CPU, as `glia run` places it
    use_devices(a, model, so.n_ctx, 1, so);  // the target where -ngl puts it (both sessions)

    std::vector<double> plain_ts, spec_ts;
    Run plain, spec;
    Session plain_s(model, so), spec_s(model, so);
    SamplerParams greedy;
    greedy.temperature = 0;
    Sampler sampler(greedy);
    Speculator speculator(spec_s, sampler, opt);
    for (long long r = 0; r <= reps; ++r) {  // r == 0: the warm-up
        plain = generate(plain_s, nullptr, prompt, static_cast<int>(n_gen));
        spec = generate(spec_s, &speculator, prompt, static_cast<int>(n_gen));
        if (spec.tokens != plain.tokens) {
            size_t i = 0;
            while (spec.tokens[i] == plain.tokens[i]) ++i;
            fail("speculative decoding changed the greedy output at generated token ", i, ": ", spec.tokens[i],
                 " instead of ", plain.tokens[i], " (a bug: please report it with this command)");
        }
        if (r == 0) continue;
        plain_ts.push_back(double(n_gen) / plain.seconds);
        spec_ts.push_back(double(n_gen) / spec.seconds);
    }
    const double p = median(plain_ts), s = median(spec_ts);
    const SpecStats& st = spec.stats;
    const std::string kind = draft ? "draft model" : "prompt lookup";
    const int nt = threads > 0 ? static_cast<int>(threads) : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (json) {
        json::Writer w;
        w.begin_array().begin_object()
            .key("test").value("speculative")
            .key("model").value(model_desc)
            .key("draft").value(draft ? draft->file().path() : std::string())
            .key("kind").value(kind)
            .key("n_prompt").value(static_cast<int64_t>(prompt.size()))
            .key("n_gen").value(static_cast<int64_t>(n_gen))
            .key("n_threads").value(static_cast<int64_t>(nt))
            .key("draft_max").value(static_cast<int64_t>(opt.draft_max))
            .key("plain_ts").value(p, 3)
            .key("spec_ts").value(s, 3)
            .key("speedup").value(p > 0 ? s / p : 0.0, 3)
            .key("drafted").value(static_cast<int64_t>(st.drafted))
            .key("accepted").value(static_cast<int64_t>(st.accepted))
            .key("acceptance").value(st.acceptance(), 4)
            .key("tokens_per_step").value(st.tokens_per_step(), 3)
            .end_object().end_array();
        std::printf("%s\n", w.str().c_str());
        return 0;
    }
    std::printf("model: %s | %s%s | prompt %zu tokens | tg%lld | %d threads | draft-max %d | %lld repetitions\n",
                model_desc.c_str(), kind.c_str(), draft ? (" " + draft->file().path()).c_str() : "", prompt.size(),
                n_gen, nt, opt.draft_max, reps);
    std::printf("one token a step: %.2f t/s | speculative: %.2f t/s | speed-up %.2fx | drafted %lld, accepted %lld "
                "(%.1f %%), %.2f tokens a target step | same tokens: yes\n",
                p, s, p > 0 ? s / p : 0.0, st.drafted, st.accepted, 100.0 * st.acceptance(), st.tokens_per_step());
    return 0;
}

}  // namespace glia::cli
