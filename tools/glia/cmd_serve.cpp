// glia serve: an OpenAI-compatible HTTP server over the continuous-batching engine.
// The HTTP layer lives in src/server/ and is built when cpp-httplib and nlohmann-json
// are installed (GLIA_HAVE_SERVER); without them the command says what to install.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "command.h"
#include "common.h"
#include "lora_options.h"
#include "speculative_options.h"
#include "core/error.h"
#include "model/model.h"
#include "runtime/engine.h"
#if GLIA_HAVE_SERVER
#include "server/browser_policy.h"
#include "server/server.h"
#endif
#include "tokenizer/chat_template.h"

namespace glia::cli {
namespace {

int g_stop_pipe[2] = {-1, -1};

void on_stop_signal(int) {
    const char c = 's';
    if (write(g_stop_pipe[1], &c, 1) < 0) {
    }
}

int cmd_serve(const std::vector<std::string>& argv) {
    Args a("serve", "MODEL [--host H] [--port P] [--api-key K] [-c CTX] [--parallel N] [options]\n\n"
                    "Serves the model over an OpenAI-compatible HTTP API:\n"
                    "  POST /v1/chat/completions   messages rendered with the model's chat template\n"
                    "  POST /v1/completions        a prompt string (or token ids)\n"
                    "  GET  /v1/models, GET /health, GET /metrics (Prometheus text)\n"
                    "  GET  /                      a chat page for the browser (in the binary)\n"
                    "Streaming (\"stream\": true) uses Server-Sent Events ending in 'data: [DONE]'.\n"
                    "A model without a chat template renders chat messages as 'role: content' lines\n"
                    "followed by 'assistant:'. Listens on 127.0.0.1 unless --host says otherwise;\n"
                    "with --api-key every /v1 route needs 'Authorization: Bearer KEY'.\n"
                    "Browser safety: a request whose Origin header is not the server's own origin is\n"
                    "refused (403) unless --cors-origin allows it; bound to a loopback address, the\n"
                    "server answers only Host headers naming loopback (localhost, 127.x.x.x, [::1];\n"
                    "against DNS rebinding) unless --allowed-hosts adds names. Clients that send no\n"
                    "Origin (SDKs, curl) are not affected.\n"
                    "Sampling options set the defaults of fields a request leaves out");
    a.opt("-m,--model", "FILE", "model file (or give it as the first argument)")
        .opt("--host", "ADDR", "address to listen on (0.0.0.0 for every interface)", "127.0.0.1")
        .opt("--port", "N", "TCP port (0 = any free port, printed at start)", "8080")
        .opt("--api-key", "KEY", "require 'Authorization: Bearer KEY' on /v1 routes (also $GLIA_API_KEY)")
        .opt("--cors-origin", "ORIGINS", "browser origins allowed to call the API cross-origin, comma-separated "
                                         "(e.g. http://localhost:3000), or '*' for any; answers their CORS preflights")
        .opt("--allowed-hosts", "HOSTS", "Host names accepted besides localhost/127.x.x.x/[::1], comma-separated, or "
                                         "'*' for any (checked by default when bound to loopback; given, also on other "
                                         "addresses)")
        .opt("--alias", "NAME", "model id reported and accepted (default: the file's stem)")
        .opt("-t,--threads", "N", "CPU threads, 0..1024 (0 = all cores)", "0")
        .opt("--cpu-ops", "LIST", "ops to run on the CPU whatever the placement, e.g. attention,rope");
    add_device_options(a);  // -ngl, --cpu-moe, -tp, --devices, -sm, --rank/--world/--coordinator
    a.opt("-c,--ctx-size", "N", "KV-cache capacity in tokens, shared by all sequences; also the most one request "
                                   "(prompt + max_tokens) may use", "4096")
        .opt("-np,--parallel", "N", "sequences decoded together at most", "4")
        .opt("--max-queue", "N", "requests waiting beyond the running ones (503 beyond)", "64")
        .opt("--max-concurrent", "N", "generation requests in flight at most, waiting or running (503 beyond; "
                                      "0 = parallel + max-queue)", "0")
        .opt("--block-size", "N", "KV-cache block size in tokens", "16")
        .opt("--prefill-chunk", "N", "prompt tokens per sequence per step", "256")
        .opt("--max-body", "BYTES", "request body limit (413 beyond)", "1048576")
        .opt("--max-tokens-limit", "N", "generated tokens per request at most (400 beyond); also the default max_tokens",
             "4096")
        .opt("--timeout", "S", "total seconds one request may take before it is cancelled", "600")
        .opt("--idle-timeout", "S", "seconds a connection may stay idle between requests (keep-alive), and a write "
                                    "may take", "30")
        .opt("--read-timeout", "S", "seconds a client has to send a whole request (line, headers, body), from its "
                                    "first byte or the connection's opening; slower ones are disconnected", "10")
        .opt("--max-connections", "N", "connections served at once (503 beyond; 0 = max(256, max-concurrent + 64))", "0")
        .opt("--template", "FILE", "use this .jinja chat template instead of the model's")
        .flag("--no-template", "ignore the model's chat template (plain role-prefixed prompts)")
        .flag("--no-prefix-cache", "compute every prompt whole (no reuse of cached KV pages across requests)");
    add_sampling_options(a);
    a.flag("-v,--verbose", "log every request on stderr");
    add_speculative_options(a);
    add_lora_options(a);
    if (!a.parse(argv)) return 0;

#if !GLIA_HAVE_SERVER
    fail("this glia was built without the HTTP server; install libcpp-httplib-dev and nlohmann-json3-dev "
         "(scripts/setup.sh does) and rebuild");
#else
    // Every option is checked (ranges in the messages) before the model loads.
    constexpr long long kMaxInt = INT32_MAX;
    server::ServerOptions so;
    so.host = a.str("--host");
    so.port = static_cast<int>(a.integer("--port", 0, 65535));
    so.api_key = a.str("--api-key");
    if (so.api_key.empty())
        if (const char* k = std::getenv("GLIA_API_KEY")) so.api_key = k;
    so.cors_origin = a.str("--cors-origin");
    so.allowed_hosts = a.str("--allowed-hosts");
    try {
        (void)server::make_browser_policy(so.host, so.allowed_hosts, so.cors_origin);
    } catch (const std::invalid_argument& e) {
        fail(e.what());
    }
    so.max_body = static_cast<size_t>(a.integer("--max-body", 1, 1LL << 40));
    so.max_tokens_limit = static_cast<int>(a.integer("--max-tokens-limit", 1, kMaxInt));
    so.max_concurrent = static_cast<int>(a.integer("--max-concurrent", 0, 1 << 20));
    so.max_connections = static_cast<int>(a.integer("--max-connections", 0, 1 << 16));
    so.timeout_s = a.number("--timeout", 0, 1e9, true);
    so.idle_timeout_s = a.number("--idle-timeout", 0, 1e6, true);
    so.request_timeout_s = a.number("--read-timeout", 0, 1e6, true);
    so.defaults = sampling_params(a);
    EngineOptions eo;
    eo.n_ctx = context_option(a, 16);
    eo.n_parallel = static_cast<int>(a.integer("--parallel", 1, 4096));
    eo.n_threads = threads_option(a);
    eo.cpu_ops = cpu_ops_option(a);
    eo.block_size = static_cast<int>(a.integer("--block-size", 1, 1 << 16));
    eo.max_queue = static_cast<int>(a.integer("--max-queue", 0, 1 << 20));
    eo.prefill_chunk = static_cast<int>(a.integer("--prefill-chunk", 1, 1 << 20));
    eo.prefix_cache = !a.has("--no-prefix-cache");
    const SpecOptions spec = speculative_options(a);
    if (spec.ngram || a.has("--model-draft")) {
        eo.spec_draft_max = spec.draft_max;
        eo.spec_draft_min = spec.draft_min;
        eo.spec_ngram_min = spec.ngram_min;
        eo.spec_ngram_max = spec.ngram_max;
        eo.spec_draft_p_min = spec.draft_p_min;
    }

    const std::string path = model_path(a);
    auto model = load_model(path);
    use_devices(a, *model, eo.n_ctx, eo.n_parallel, eo);
    const LoraAdapters loras = load_lora_options(a, *model);
    eo.lora = loras.list();
    // The draft model runs on the CPU with the server's threads (the engine checks that
    // its vocabulary is the target's).
    std::unique_ptr<Model> draft_model;
    if (a.has("--model-draft")) {
        draft_model = load_model(a.str("--model-draft"));
        eo.spec_draft = draft_model.get();
    }
    so.model_path = path;
    so.model_id = a.has("--alias") ? a.str("--alias") : std::filesystem::path(path).stem().string();
    so.verbose = a.has("-v");
    if (a.has("--template")) {
        so.chat_template = read_file(a.str("--template"));
        so.chat_template_file = a.str("--template");
    } else if (!a.has("--no-template")) so.chat_template = tok::chat_template(model->file());
    if (so.chat_template.empty())
        std::fprintf(stderr, "glia serve: '%s' has no chat template; chat messages are rendered as 'role: content' lines "
                             "followed by 'assistant:' (pass --template FILE.jinja to use one)\n", path.c_str());


    // SIGINT/SIGTERM stop the server: the handler only writes to a pipe (whichever thread
    // it runs on); a thread of ours reads it and stops the server. A client that goes
    // away must not kill the process with SIGPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    if (pipe(g_stop_pipe) != 0) fail("cannot create a pipe for signal handling");
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);

    Engine engine(*model, eo);
    server::HttpServer http(engine, *model, so);
    http.bind();
    std::thread waiter([&] {
        char c = 0;
        while (read(g_stop_pipe[0], &c, 1) < 0 && errno == EINTR) {
        }
        if (c == 's') http.stop();
    });
    const std::string speculation =
        eo.spec_draft ? cat(", draft model '", a.str("--model-draft"), "' (draft-max ", eo.spec_draft_max, ")")
        : eo.spec_draft_max > 0 ? cat(", prompt lookup (draft-max ", eo.spec_draft_max, ")")
                                : std::string();
    std::fprintf(stderr, "glia serve: listening on http://%s:%d (model '%s', context %d, parallel %d%s%s)\n",
                 so.host.c_str(), http.port(), so.model_id.c_str(), eo.n_ctx, eo.n_parallel, speculation.c_str(),
                 so.api_key.empty() ? "" : ", API key required");
    std::fflush(stderr);
    http.run();
    const char quit = 'q';  // the server stopped by other means: release the waiter
    if (write(g_stop_pipe[1], &quit, 1) < 0) {
    }
    waiter.join();
    std::fprintf(stderr, "glia serve: stopped\n");
    return 0;
#endif
}

const Command reg{"serve", "serve the model over an OpenAI-compatible HTTP API", cmd_serve};

}  // namespace
}  // namespace glia::cli
