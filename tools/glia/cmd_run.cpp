// glia run: generate text from a prompt, streaming it to stdout; speeds to stderr.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "command.h"
#include "common.h"
#include "lora_options.h"
#include "speculative_options.h"
#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "runtime/speculative.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/vocab.h"

namespace glia::cli {
namespace {

using Clock = std::chrono::steady_clock;

int cmd_run(const std::vector<std::string>& argv) {
    Args a("run", "MODEL (-p PROMPT | -f FILE) [options]");
    add_runtime_options(a);
    add_device_options(a);
    a.opt("-p,--prompt", "TEXT", "prompt text")
        .opt("-f,--file", "FILE", "read the prompt from a file (byte for byte)")
        .opt("-n,--n-predict", "N", "tokens to generate (-1 = until end of generation or context)", "256");
    add_sampling_options(a);
    a.flag("--ignore-eos", "keep generating past end-of-generation tokens")
        .flag("--show-ids", "print each prompt and generated token id with its piece (stderr)")
        .flag("--no-bos", "do not add BOS/EOS even if the vocabulary asks for them")
        .flag("--chat", "treat the prompt as one user message and apply the model's chat template")
        .opt("-s,--system", "TEXT", "system message for --chat")
        .flag("-v,--verbose", "print where each op runs and every copy between devices (stderr)");
    add_speculative_options(a);
    add_lora_options(a);
    if (!a.parse(argv)) return 0;

    std::string prompt;
    if (a.has("-f") && a.has("-p")) fail("give the prompt with -p TEXT or -f FILE, not both");
    if (a.has("-f")) prompt = read_file(a.str("-f"));
    else if (a.has("-p")) prompt = a.str("-p");
    else fail("no prompt: give -p TEXT or -f FILE (see 'glia run --help')");
    const long long n_predict = a.integer("-n", -1, INT32_MAX);
    SessionOptions so;
    so.n_threads = threads_option(a);
    so.n_ctx = context_option(a);
    so.cpu_ops = cpu_ops_option(a);
    so.verbose = a.has("-v");
    const SamplerParams sp = sampling_params(a);  // every option is checked before the model loads
    SpecOptions spec_opt = speculative_options(a);
    const bool show_ids = a.has("--show-ids") || (std::getenv("GLIA_DEBUG_TOKENS") && *std::getenv("GLIA_DEBUG_TOKENS") != '0');

    const auto t_load = Clock::now();
    auto model = load_model(model_path(a));
    const tok::Vocab& vocab = model->vocab();
    use_devices(a, *model, so.n_ctx, 1, so);
    const LoraAdapters loras = load_lora_options(a, *model);
    so.lora = loras.list();
    Session s(*model, so);
    Sampler sampler(sp);
    std::unique_ptr<Model> draft_model;
    std::unique_ptr<Speculator> spec;
    if (a.has("--model-draft")) {
        draft_model = load_model(a.str("--model-draft"));
        spec_opt.draft = draft_model.get();
    }
    if (spec_opt.ngram || spec_opt.draft) {
        spec_opt.draft_session.n_threads = so.n_threads;
        spec_opt.draft_session.cpu_ops = so.cpu_ops;
        spec = std::make_unique<Speculator>(s, sampler, spec_opt);
    }
    const double load_s = std::chrono::duration<double>(Clock::now() - t_load).count();

    std::vector<int32_t> tokens;
    std::string shown = prompt;
    if (a.has("--chat")) {
        const std::string source = tok::chat_template(model->file());
        if (source.empty()) {
            std::fprintf(stderr, "glia run: '%s' has no chat template; using the prompt as plain text\n",
                         model->file().path().c_str());
            tokens = vocab.tokenize(prompt, !a.has("--no-bos"), false);
        } else {
            // The prompt and the system message are text: special-token text in them stays
            // text; the template's own is parsed (see tok::PromptTokenizer).
            const tok::PromptTokenizer pt(vocab);
            auto conversation = [&](bool protect) {
                auto text = [&](const std::string& t) { return jinja::Value(protect ? pt.protect(t) : t); };
                std::vector<jinja::Value> messages;
                if (a.has("-s"))
                    messages.push_back(jinja::Value::object({{"role", jinja::Value("system")}, {"content", text(a.str("-s"))}}));
                messages.push_back(jinja::Value::object({{"role", jinja::Value("user")}, {"content", text(prompt)}}));
                return jinja::Value::array(messages);
            };
            const std::string bos = vocab.bos() >= 0 ? vocab.token_to_piece(vocab.bos(), true) : "";
            const std::string eos = vocab.eos() >= 0 ? vocab.token_to_piece(vocab.eos(), true) : "";
            const tok::ChatTemplate tmpl(source);
            shown = tmpl.render(conversation(false), bos, eos, true);
            // The rendered text carries its own special tokens; add BOS only if it lacks it.
            tokens = pt.tokenize(tmpl.render(conversation(true), bos, eos, true));
            if (!a.has("--no-bos") && vocab.add_bos() && vocab.bos() >= 0 && (tokens.empty() || tokens[0] != vocab.bos()))
                tokens.insert(tokens.begin(), vocab.bos());
        }
    } else {
        tokens = vocab.tokenize(prompt, !a.has("--no-bos"), false);
    }
    if (tokens.empty()) fail("the prompt produced no tokens");
    if (static_cast<int>(tokens.size()) >= s.n_ctx())
        fail("the prompt has ", tokens.size(), " tokens but the context holds ", s.n_ctx(),
             "; raise it with -c (e.g. -c ", tokens.size() + std::max<long long>(n_predict, 0) + 1, ")");
    if (show_ids)
        for (int32_t t : tokens) std::fprintf(stderr, "[prompt] %6d '%s'\n", t, vocab.token_to_piece(t, true).c_str());

    write_out(shown);
    // A model file truncated or modified while in use reads as zeros (see gguf.h): what
    // was computed from it is not the model's.
    auto check_file = [&] {
        if (const std::string why = model->file().changed(); !why.empty()) fail(why);
    };
    const auto t0 = Clock::now();
    std::vector<float> logits = s.decode(tokens, false);
    check_file();
    const double prompt_s = std::chrono::duration<double>(Clock::now() - t0).count();

    std::vector<int32_t> history = tokens;
    long long generated = 0;
    const char* stop_reason = "length";
    // Emits one sampled token; false when generation stops there.
    auto emit = [&](int32_t next) {
        ++generated;
        history.push_back(next);
        if (show_ids) std::fprintf(stderr, "[gen] %6d '%s'\n", next, vocab.token_to_piece(next, true).c_str());
        if (vocab.is_eog(next) && !a.has("--ignore-eos")) {
            stop_reason = "end of generation";
            return false;
        }
        write_out(vocab.token_to_piece(next, false));
        // The context is full when every cell holds a token, the one just emitted excepted.
        if (static_cast<long long>(history.size()) - 1 >= s.n_ctx()) {
            stop_reason = "context full";
            return false;
        }
        return !(n_predict >= 0 && generated >= n_predict);
    };
    const auto t1 = Clock::now();
    if (n_predict != 0 && !spec) {
        for (;;) {
            if (!emit(sampler.sample(logits.data(), s.n_vocab(), history))) break;
            logits = s.decode({history.back()}, false);
            check_file();
        }
    } else if (n_predict != 0) {
        // Speculative: each target step gives one or more tokens, the same ones (greedy) or
        // equally distributed ones (sampling) as the loop above.
        std::vector<int32_t> next{sampler.sample(logits.data(), s.n_vocab(), history)};
        for (bool go = true; go;) {
            for (int32_t t : next)
                if (!(go = emit(t))) break;
            if (!go) break;
            next = spec->step(history, n_predict < 0 ? INT_MAX : static_cast<int>(n_predict - generated));
            check_file();
        }
    }
    const double gen_s = std::chrono::duration<double>(Clock::now() - t1).count();
    write_out("\n");
    std::fprintf(stderr,
                 "\nglia: load %.2f s | prompt %zu tokens, %.1f tokens/s | generated %lld tokens, %.1f tokens/s | "
                 "stopped: %s%s\n",
                 load_s, tokens.size(), tokens.size() / std::max(prompt_s, 1e-9), generated,
                 generated / std::max(gen_s, 1e-9), stop_reason, spec ? speculative_summary(*spec).c_str() : "");
    return 0;
}

const Command reg{"run", "generate text from a prompt", cmd_run};

}  // namespace
}  // namespace glia::cli
