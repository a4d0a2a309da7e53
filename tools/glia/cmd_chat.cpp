// glia chat: an interactive conversation in the terminal, using the model's own chat
// template (tokenizer.chat_template), streaming each reply as it is generated.
//
// The KV cache is kept across turns: every turn the whole conversation is rendered and
// tokenized again, and when the tokens already evaluated are a prefix of the new ones,
// only the rest is fed; otherwise (a template that rewrites earlier turns, or a reply
// that tokenizes differently from how it was sampled) the session is reset and the
// conversation fed again. A model without a template gets plain completion: each input
// continues the text so far.
//
// What the user types is text: special-token text in a message stays text (only the
// template's own is parsed, see tok::PromptTokenizer). Ctrl-C during a reply ends the
// reply and the chat goes on; Ctrl-C at the prompt ends the chat.
#include <unistd.h>

#include <climits>
#include <csignal>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <optional>

#include "command.h"
#include "common.h"
#include "core/error.h"
#include "lora_options.h"
#include "gguf/gguf.h"
#include "jinja/jinja.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/vocab.h"

namespace glia::cli {
namespace {

using Clock = std::chrono::steady_clock;

// SIGINT while a reply is computed asks it to stop (checked after every token); at any
// other time, or a second time before the reply noticed, it does what it always does.
volatile std::sig_atomic_t g_in_reply = 0;
volatile std::sig_atomic_t g_interrupted = 0;

void on_sigint(int) {
    if (g_in_reply && !g_interrupted) {
        g_interrupted = 1;
        return;
    }
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
}

// Marks the span of a reply (prompt feeding and sampling) for on_sigint.
struct ReplyScope {
    ReplyScope() {
        g_interrupted = 0;
        g_in_reply = 1;
    }
    ~ReplyScope() { g_in_reply = 0; }
};

// Reads one message: a line ending in '\' continues on the next line; the message ends
// at a line without one (an empty line sends what was typed so far). nullopt at end of
// input with nothing typed.
std::optional<std::string> read_message(bool interactive) {
    std::string msg, line;
    bool continuing = false;
    for (;;) {
        if (interactive) {
            std::fputs(continuing ? ". " : "> ", stdout);
            std::fflush(stdout);
        }
        if (!std::getline(std::cin, line)) {
            if (continuing) return msg;
            return std::nullopt;
        }
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (continuing && line.empty()) return msg;
        if (!line.empty() && line.back() == '\\') {
            line.pop_back();
            msg += line + "\n";
            continuing = true;
            continue;
        }
        msg += line;
        return msg;
    }
}

struct Chat {
    const Model& model;
    const tok::Vocab& vocab;
    const tok::PromptTokenizer& prompt_tokenizer;
    Session& session;
    Sampler& sampler;
    long long n_predict;
    bool verbose;
    std::vector<int32_t> fed;  // the tokens in the KV cache, in order

    // Makes the KV cache hold exactly `tokens`, feeding only what is new when possible.
    // Returns the logits after the last token.
    std::vector<float> sync(const std::vector<int32_t>& tokens) {
        if (static_cast<int>(tokens.size()) >= session.n_ctx())
            fail("the conversation has ", tokens.size(), " tokens but the context holds ", session.n_ctx(),
                 "; type /reset to start over, or raise -c");
        size_t common = 0;
        while (common < fed.size() && common < tokens.size() && fed[common] == tokens[common]) ++common;
        if (common < fed.size() || common == tokens.size()) {
            if (verbose) std::fprintf(stderr, "[kv: reset, feeding %zu tokens]\n", tokens.size());
            session.reset();
            fed.clear();
            common = 0;
        } else if (verbose) {
            std::fprintf(stderr, "[kv: reusing %zu tokens, feeding %zu]\n", common, tokens.size() - common);
        }
        const std::vector<int32_t> rest(tokens.begin() + static_cast<long>(common), tokens.end());
        std::vector<float> logits = session.decode(rest, false);
        fed.insert(fed.end(), rest.begin(), rest.end());
        check_file();
        return logits;
    }

    // A model file truncated or modified while in use reads as zeros (see gguf.h).
    void check_file() const {
        if (const std::string why = model.file().changed(); !why.empty()) fail(why);
    }

    // Samples and streams a reply after `logits`; returns its text. The sampled tokens
    // (except the final end-of-generation one) are in the KV cache and in `fed`.
    std::string generate(std::vector<float> logits) {
        std::string reply;
        long long n = 0;
        const auto t0 = Clock::now();
        const char* stop = "length";
        while (n_predict < 0 || n < n_predict) {
            if (g_interrupted) { stop = "interrupted"; break; }
            const int32_t next = sampler.sample(logits.data(), session.n_vocab(), fed);
            ++n;
            if (vocab.is_eog(next)) { stop = "end of generation"; break; }
            const std::string piece = vocab.token_to_piece(next, false);
            write_out(piece);
            reply += piece;
            if (session.n_past() >= session.n_ctx()) {
                stop = "context full";
                break;
            }
            logits = session.decode({next}, false);
            fed.push_back(next);
            check_file();
        }
        write_out("\n");
        if (verbose) {
            const double s = std::chrono::duration<double>(Clock::now() - t0).count();
            std::fprintf(stderr, "[%lld tokens, %.1f tokens/s, stopped: %s]\n", n, n / std::max(s, 1e-9), stop);
        }
        if (std::string(stop) == "context full")
            std::fprintf(stderr, "glia chat: the context is full; type /reset to start over, or raise -c\n");
        if (std::string(stop) == "interrupted") std::fprintf(stderr, "glia chat: reply interrupted\n");
        return reply;
    }

    // A prompt rendered from protected messages (see PromptTokenizer).
    std::vector<int32_t> tokenize(const std::string& text, bool at_start) const {
        std::vector<int32_t> t = prompt_tokenizer.tokenize(text);
        if (at_start && vocab.add_bos() && vocab.bos() >= 0 && (t.empty() || t[0] != vocab.bos()))
            t.insert(t.begin(), vocab.bos());
        return t;
    }
};

int cmd_chat(const std::vector<std::string>& argv) {
    Args a("chat", "MODEL [-s SYSTEM] [options]\n\n"
                   "Chat with a model in the terminal using its chat template (tokenizer.chat_template).\n"
                   "Type a message and press Enter to send it. End a line with '\\' to continue the\n"
                   "message on the next line; the message is sent at the first line without a trailing\n"
                   "'\\' (an empty line sends what was typed so far). Commands: /reset starts a new\n"
                   "conversation (keeping the system prompt), /exit quits; so does Ctrl-D (end of input).\n"
                   "Ctrl-C stops a reply being written; at the prompt it quits.\n"
                   "Input may be piped: each message as above, replies go to standard output.\n"
                   "A model without a chat template falls back to plain completion: each input\n"
                   "continues the text so far");
    add_runtime_options(a);
    a.opt("-s,--system", "TEXT", "system prompt")
        .opt("-n,--n-predict", "N", "most tokens per reply (-1 = until end of generation or context)", "1024")
        .opt("--template", "FILE", "use this .jinja chat template instead of the model's");
    add_sampling_options(a);
    a.flag("--no-template", "plain completion even if the model has a chat template")
        .flag("-v,--verbose", "show the rendered prompt, cache reuse and speed on stderr");
    add_lora_options(a);
    if (!a.parse(argv)) return 0;

    SessionOptions so;
    so.n_threads = threads_option(a);
    so.n_ctx = context_option(a);
    so.cpu_ops = cpu_ops_option(a);
    const long long n_predict = a.integer("-n", -1, INT32_MAX);
    const SamplerParams sp = sampling_params(a);  // every option is checked before the model loads
    auto model = load_model(model_path(a));
    const tok::Vocab& vocab = model->vocab();
    const LoraAdapters loras = load_lora_options(a, *model);
    so.lora = loras.list();
    Session session(*model, so);
    Sampler sampler(sp);
    const bool verbose = a.has("-v");
    const bool interactive = isatty(0) != 0;
    const tok::PromptTokenizer prompt_tokenizer(vocab);
    Chat chat{*model, vocab, prompt_tokenizer, session, sampler, n_predict, verbose, {}};

    std::string source;
    if (a.has("--template")) source = read_file(a.str("--template"));
    else if (!a.has("--no-template")) source = tok::chat_template(model->file());
    std::optional<tok::ChatTemplate> tmpl;
    if (!source.empty()) {
        tmpl.emplace(source);  // a syntax error is reported here, before the first turn
    } else if (!a.has("--no-template")) {
        std::fprintf(stderr,
                     "glia chat: '%s' has no chat template (no tokenizer.chat_template); falling back to plain "
                     "completion: each input continues the text so far (pass --template FILE.jinja to use one)\n",
                     model_path(a).c_str());
    }
    const std::string bos = vocab.bos() >= 0 ? vocab.token_to_piece(vocab.bos(), true) : "";
    const std::string eos = vocab.eos() >= 0 ? vocab.token_to_piece(vocab.eos(), true) : "";
    jinja::RenderOptions ropt;
    {
        // One time for the whole chat, so strftime_now() does not change earlier turns.
        const std::time_t t = std::time(nullptr);
        std::tm tm{};
        localtime_r(&t, &tm);
        ropt.now = tm;
    }

    const std::string system = a.str("-s");
    std::vector<jinja::Value> messages;  // contents protected (PromptTokenizer::protect)
    auto message = [&](const char* role, const std::string& content) {
        return jinja::Value::object({{"role", jinja::Value(role)}, {"content", jinja::Value(prompt_tokenizer.protect(content))}});
    };
    auto reset_messages = [&] {
        messages.clear();
        if (!system.empty()) messages.push_back(message("system", system));
    };
    reset_messages();
    std::string plain_text = tmpl ? "" : system;  // plain mode: the whole transcript

    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    if (interactive)
        std::fprintf(stderr, "glia chat: %s. Type a message; '\\' at the end of a line continues it; /reset, /exit or Ctrl-D.\n",
                     tmpl ? "using the model's chat template" : "plain completion");

    while (auto input = read_message(interactive)) {
        const std::string& msg = *input;
        if (msg.empty()) continue;
        if (msg == "/exit" || msg == "/quit") break;
        if (msg == "/reset") {
            reset_messages();
            plain_text = tmpl ? "" : system;
            session.reset();
            chat.fed.clear();
            std::fprintf(stderr, "glia chat: conversation reset\n");
            continue;
        }
        try {
            if (tmpl) {
                messages.push_back(message("user", msg));
                std::string prompt;
                try {
                    prompt = tmpl->render(jinja::Value::array(messages), bos, eos, true, ropt);
                } catch (const jinja::Error& e) {
                    messages.pop_back();
                    std::fprintf(stderr, "glia chat: the chat template failed: %s (the message was not sent)\n", e.what());
                    continue;
                }
                if (verbose) std::fprintf(stderr, "[prompt]\n%s\n[/prompt]\n", prompt.c_str());
                ReplyScope in_reply;
                const std::string reply = chat.generate(chat.sync(chat.tokenize(prompt, true)));
                messages.push_back(message("assistant", reply));
            } else {
                plain_text += msg;
                ReplyScope in_reply;
                const std::string reply = chat.generate(chat.sync(chat.tokenize(prompt_tokenizer.protect(plain_text), true)));
                plain_text += reply;
            }
        } catch (const glia::Error& e) {
            if (tmpl && !messages.empty() && messages.back().object_data().find("role")->as_string() == "user") messages.pop_back();
            // Standard output failing, or the model file changing underneath, ends the chat.
            if (std::ferror(stdout) || !model->file().changed().empty()) throw;
            std::fprintf(stderr, "glia chat: error: %s\n", e.what());
            session.reset();
            chat.fed.clear();
        }
    }
    if (interactive) std::fputc('\n', stdout);
    return 0;
}

const Command reg{"chat", "chat with a model in the terminal using its chat template", cmd_chat};

}  // namespace
}  // namespace glia::cli
