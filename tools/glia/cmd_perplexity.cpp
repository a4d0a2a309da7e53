// glia perplexity: perplexity of a model over a text file, computed like the reference's
// perplexity tool: the text is tokenized once (with BOS), cut into non-overlapping chunks
// of CTX tokens, each chunk is evaluated from an empty context (its first token replaced
// by BOS when the vocabulary adds one), and only the second half of each chunk is scored
// (every scored token then has at least CTX/2 tokens of context).
// Prints the running perplexity after each chunk and the final value with the standard
// error of the estimate. With --kl-base BASE.gguf the same chunks also run through BASE
// (e.g. the unquantized model) and the mean KL divergence KL(base || model) and the top-1
// agreement are reported: a sharper measure of quantization error than the perplexity,
// and the only meaningful one for random-weight models.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "args.h"
#include "command.h"
#include "common.h"
#include "lora_options.h"
#include "core/error.h"
#include "core/json.h"
#include "model/model.h"
#include "runtime/session.h"
#include "tokenizer/vocab.h"

namespace glia::cli {
namespace {

// -log p(target) from raw logits, in double precision.
double nll_of(const float* logits, int n_vocab, int32_t target) {
    float mx = logits[0];
    for (int i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
    double sum = 0;
    for (int i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - double(mx));
    return -(double(logits[target]) - double(mx) - std::log(sum));
}

// log-softmax of raw logits (double precision).
void log_softmax(const float* logits, int n, std::vector<double>& out) {
    out.resize(size_t(n));
    float mx = logits[0];
    for (int i = 1; i < n; ++i) mx = std::max(mx, logits[i]);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - double(mx));
    const double lse = double(mx) + std::log(sum);
    for (int i = 0; i < n; ++i) out[size_t(i)] = double(logits[i]) - lse;
}

int cmd_perplexity(const std::vector<std::string>& argv) {
    Args a("perplexity", "MODEL -f TEXT [options]");
    a.opt("-m,--model", "FILE", "model file (or give it as the first argument)")
        .opt("-f,--file", "FILE", "text to evaluate")
        .opt("-c,--ctx-size", "N", "tokens per chunk", "512")
        .opt("-b,--batch-size", "N", "tokens per forward pass (0 = the chunk size)", "0")
        .opt("-t,--threads", "N", "CPU threads (0 = all cores)", "0")
        .opt("--cpu-ops", "LIST", "ops to run on the CPU whatever the placement, e.g. attention,rope")
        .opt("--chunks", "N", "evaluate at most N chunks (0 = all)", "0")
        .opt("--kl-base", "FILE", "also run this model (e.g. the unquantized one; with f16 KV caches) and report "
                                  "KL(base || model) and top-1 agreement")
        .flag("--json", "print the result as JSON");
    add_cache_type_options(a);
    add_lora_options(a);
    if (!a.parse(argv)) return 0;
    if (!a.has("-f")) fail("no text given: pass -f TEXT");
    const long long n_ctx_ll = a.integer("-c");
    if (n_ctx_ll < 4 || n_ctx_ll > (1 << 20)) fail("--ctx-size must be between 4 and 1048576, got ", n_ctx_ll);
    const int n_ctx = static_cast<int>(n_ctx_ll);
    long long nb = a.integer("-b");
    if (nb < 0) fail("--batch-size must be >= 0");
    const int n_batch = nb == 0 ? n_ctx : static_cast<int>(std::min<long long>(nb, n_ctx));
    const int n_threads = static_cast<int>(a.integer("-t"));
    const long long max_chunks = a.integer("--chunks");
    const bool json = a.has("--json");
    const CacheTypes cache = cache_types_option(a);

    const std::string text = read_file(a.str("-f"));
    auto model = load_model(model_path(a));
    const tok::Vocab& vocab = model->vocab();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<int32_t> tokens = vocab.tokenize(text, true, false);
    if (int64_t(tokens.size()) < 2 * int64_t(n_ctx))
        fail(a.str("-f"), ": ", tokens.size(), " tokens; at least ", 2 * n_ctx, " (2 x --ctx-size) are needed; "
             "use a longer text or a smaller -c");
    int n_chunk = static_cast<int>(tokens.size() / size_t(n_ctx));
    if (max_chunks > 0) n_chunk = static_cast<int>(std::min<long long>(n_chunk, max_chunks));
    const int first = n_ctx / 2;
    const bool add_bos = vocab.add_bos() && vocab.bos() >= 0;

    SessionOptions so;
    so.n_ctx = n_ctx;
    so.n_threads = n_threads;
    so.n_batch = n_batch;
    so.cpu_ops = cpu_ops_option(a);
    SessionOptions so_base = so;  // --kl-base: f16 caches
    so.placement.cache = cache;
    const LoraAdapters loras = load_lora_options(a, *model);  // the model's; --kl-base runs without
    so.lora = loras.list();
    Session s(*model, so);
    const int V = s.n_vocab();
    std::unique_ptr<Model> base;
    std::unique_ptr<Session> sb;
    if (a.has("--kl-base")) {
        base = load_model(a.str("--kl-base"));
        if (base->profile().n_vocab != V)
            fail("--kl-base model has ", base->profile().n_vocab, " tokens in its vocabulary, the model ", V);
        sb = std::make_unique<Session>(*base, so_base);
    }
    double kl_sum = 0, kl_sum2 = 0;
    int64_t top1_same = 0;
    std::vector<double> lp, lq;

    if (!json)
        std::fprintf(stderr, "perplexity: %zu tokens, %d chunks of %d (scoring the last %d of each), batch %d\n",
                     tokens.size(), n_chunk, n_ctx, n_ctx - 1 - first, n_batch);
    double nll = 0, nll2 = 0;
    int64_t count = 0;
    std::vector<double> running;
    for (int c = 0; c < n_chunk; ++c) {
        const size_t start = size_t(c) * size_t(n_ctx);
        std::vector<int32_t> chunk(tokens.begin() + long(start), tokens.begin() + long(start + size_t(n_ctx)));
        if (add_bos) chunk[0] = vocab.bos();
        s.reset();
        if (sb) sb->reset();
        for (int b0 = 0; b0 < n_ctx; b0 += n_batch) {
            const int n = std::min(n_batch, n_ctx - b0);
            std::vector<int32_t> batch(chunk.begin() + b0, chunk.begin() + b0 + n);
            const std::vector<float>& logits = s.decode(batch, true);
            const std::vector<float>* base_logits = sb ? &sb->decode(batch, true) : nullptr;
            // position p (in the chunk) predicts the token at p + 1; score p in [first, n_ctx - 1)
            for (int i = 0; i < n; ++i) {
                const int p = b0 + i;
                if (p < first || p >= n_ctx - 1) continue;
                const int32_t target = tokens[start + size_t(p) + 1];
                const double v = nll_of(&logits[size_t(i) * size_t(V)], V, target);
                nll += v;
                nll2 += v * v;
                ++count;
                if (base_logits) {
                    const float* q = &logits[size_t(i) * size_t(V)];
                    const float* pb = &(*base_logits)[size_t(i) * size_t(V)];
                    log_softmax(pb, V, lp);
                    log_softmax(q, V, lq);
                    double kl = 0;
                    for (int k = 0; k < V; ++k) kl += std::exp(lp[size_t(k)]) * (lp[size_t(k)] - lq[size_t(k)]);
                    kl_sum += kl;
                    kl_sum2 += kl * kl;
                    top1_same += std::max_element(pb, pb + V) - pb == std::max_element(q, q + V) - q;
                }
            }
        }
        running.push_back(std::exp(nll / double(count)));
        if (!json) {
            std::printf("[%d]%.4f,", c + 1, running.back());
            std::fflush(stdout);
        }
    }
    const double mean = nll / double(count);
    const double ppl = std::exp(mean);
    double var = nll2 / double(count) - mean * mean;
    const double err = (var > 0 && count > 1) ? ppl * std::sqrt(var / double(count - 1)) : 0.0;
    const double kl_mean = count ? kl_sum / double(count) : 0.0;
    const double kl_var = count > 1 ? (kl_sum2 / double(count) - kl_mean * kl_mean) : 0.0;
    const double kl_err = kl_var > 0 ? std::sqrt(kl_var / double(count - 1)) : 0.0;
    const double top1 = count ? double(top1_same) / double(count) : 0.0;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (json) {
        json::Writer w;
        w.begin_object()
            .key("model").value(model_path(a))
            .key("text").value(a.str("-f"))
            .key("n_tokens").value(static_cast<int64_t>(tokens.size()))
            .key("n_ctx").value(static_cast<int64_t>(n_ctx))
            .key("n_batch").value(static_cast<int64_t>(n_batch))
            .key("cache_type_k").value(cache_type_name(so.placement.cache.k))
            .key("cache_type_v").value(cache_type_name(so.placement.cache.v))
            .key("n_chunks").value(static_cast<int64_t>(n_chunk))
            .key("n_scored").value(static_cast<int64_t>(count))
            .key("ppl").value(ppl, 9)
            .key("ppl_stderr").value(err, 9)
            .key("chunk_ppl").begin_array();
        for (double r : running) w.value(r, 9);
        w.end_array();
        if (sb) {
            w.key("kl_base").value(a.str("--kl-base"))
                .key("kl_mean").value(kl_mean, 9)
                .key("kl_stderr").value(kl_err, 9)
                .key("top1_agreement").value(top1, 9);
        }
        w.key("seconds").value(secs, 6).end_object();
        std::printf("%s\n", w.str().c_str());
    } else {
        std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err);
        if (sb)
            std::printf("KL divergence from %s: mean %.6f +/- %.6f, top-1 agreement %.2f%%\n",
                        a.str("--kl-base").c_str(), kl_mean, kl_err, 100.0 * top1);
        std::fprintf(stderr, "perplexity: %lld tokens scored in %.2f s\n", static_cast<long long>(count), secs);
    }
    return 0;
}

const Command reg{"perplexity", "perplexity of a model over a text file (chunks of -c tokens)", cmd_perplexity};

}  // namespace
}  // namespace glia::cli
