// The route table: every route, the key and browser checks in front of them, the error
// bodies of httplib's own errors, and the small routes answered here.
#if GLIA_HAVE_SERVER
#include "server/server_impl.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "server/json_depth.h"
#include "server/infill.h"
#include "server/ollama.h"
#include "server/relay.h"
#include "server/json_schema.h"
#include "server/lora_api.h"
#include "server/tool_calls.h"
#include "server/browser_gate.h"
#include "server/connection.h"
#include "server/json_body.h"
#include "server/anthropic.h"
#include "server/responses.h"
#include "server/openai.h"
#include "server/reasoning.h"
#include "server/request_text.h"
#include "server/text_stream.h"
#include "server/web_assets.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/vocab.h"

namespace glia::server {

using namespace http_detail;

namespace {

bool secure_equal(const std::string& a, const std::string& b) {
    unsigned char d = a.size() == b.size() ? 0 : 1;
    const size_t n = std::max(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
        const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
        d |= static_cast<unsigned char>(x ^ y);
    }
    return d == 0;
}

// The routes behind --api-key: the OpenAI ones, ollama's and /infill.
bool keyed_route(const std::string& path) {
    return path.rfind("/v1/", 0) == 0 || path.rfind("/api/", 0) == 0 || path == "/infill" || path == "/lora-adapters";
}

// A refused key in the shape of the route's API (Anthropic's on /v1/messages).
void set_key_error(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
    if (req.path.rfind("/v1/messages", 0) != 0) return set_error(res, e);
    res.status = e.status;
    res.set_content(dump(anthropic::error_body(e.status, e.message)), "application/json");
}

}  // namespace

void HttpServer::Impl::setup() {
    // Connections, threads and the time to receive a request: see connection.h.
    http.set_payload_max_length(opt.max_body);
    const auto idle = std::chrono::milliseconds(static_cast<long long>(opt.idle_timeout_s * 1000));
    http.set_read_timeout(idle);
    http.set_write_timeout(idle);
    http.set_keep_alive_timeout(std::max<time_t>(1, static_cast<time_t>(opt.idle_timeout_s)));
    http.set_keep_alive_max_count(1000);
    http.set_tcp_nodelay(true);
    // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which lets a second
    // server bind the same port silently instead of failing.
    http.set_socket_options([](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof yes);
    });

    // Malformed heads are refused before httplib parses them (connection.h): their
    // JSON body comes from here, and they count in the responses by status.
    http.set_refusal_body([this](int status, const std::string& message, const std::string& code) {
        count_status(status);
        if (opt.verbose) std::fprintf(stderr, "glia serve: malformed request -> %d (%s)\n", status, message.c_str());
        return dump(error_json({status, message, "invalid_request_error", "", code}));
    });
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        // Host and Origin first (browser_policy.h); preflights are answered there.
        if (browser_gate(browser, req, res)) return httplib::Server::HandlerResponse::Handled;
        if (opt.api_key.empty() || !keyed_route(req.path)) return httplib::Server::HandlerResponse::Unhandled;
        // The key as "Authorization: Bearer KEY", or as "x-api-key: KEY" (Anthropic's clients).
        const std::string auth = req.get_header_value("Authorization");
        const std::string x_key = req.get_header_value("x-api-key");
        const std::string prefix = "Bearer ";
        if (auth.empty() && x_key.empty()) {
            if (has_body(req)) close_connection(res);  // the body stays unread
            set_key_error(req, res, {401, "missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY' (the server was started with --api-key)",
                                     "authentication_error", "", "missing_api_key"});
            return httplib::Server::HandlerResponse::Handled;
        }
        if (auth.empty() ? !secure_equal(x_key, opt.api_key)
                         : auth.rfind(prefix, 0) != 0 || !secure_equal(auth.substr(prefix.size()), opt.api_key)) {
            if (has_body(req)) close_connection(res);
            set_key_error(req, res, {401, "invalid API key", "authentication_error", "", "invalid_api_key"});
            return httplib::Server::HandlerResponse::Handled;
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        ApiError e;
        e.status = res.status;
        // httplib's own errors are about the request's framing: what follows on the
        // connection cannot be trusted to start a request.
        if (res.status == 400 || res.status == 408 || res.status == 413 || res.status == 414 || res.status == 431)
            close_connection(res);
        if (res.status == 404) {
            e.message = "no route " + req.method + " " + req.path +
                        " (routes: GET / (the chat page), POST /v1/chat/completions, POST /v1/completions, POST /v1/embeddings, GET /v1/models, "
                        "POST /v1/messages, POST /v1/messages/count_tokens, POST /v1/responses, GET and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items, "
                        "GET /health, GET /metrics, GET /props, POST /tokenize, POST /detokenize, POST /infill, GET and POST /lora-adapters, "
                        "ollama's POST /api/chat, /api/generate, /api/embed, /api/show, GET /api/tags, /api/ps, /api/version)";
            e.type = "not_found_error";
            e.code = "unknown_route";
        } else if (res.status == 413) {
            e.message = "the request body is too large for " + req.method + " " + req.path;
            e.code = "body_too_large";
        } else if (res.status == 414) {
            e.message = "the request line is too long";
        } else if (res.status == 400) {
            e.message = "malformed HTTP request";
        } else {
            e.message = "HTTP error " + std::to_string(res.status);
        }
        set_error(res, e);
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        set_error(res, {500, "internal server error: " + what, "server_error", "", ""});
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
        count_status(res.status);
        if (opt.verbose) std::fprintf(stderr, "glia serve: %s %s -> %d\n", req.method.c_str(), req.path.c_str(), res.status);
    });

    serve_web_page();
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
        const EngineStats s = engine.stats();
        json j = {{"status", "ok"}, {"model", opt.model_id}, {"running", s.running}, {"waiting", s.waiting}};
        if (const std::string why = model.file().changed(); !why.empty()) {
            res.status = 503;
            j["status"] = "error";
            j["error"] = why;
        }
        res.set_content(dump(j), "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(metrics(), "text/plain; version=0.0.4");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(dump(json{{"object", "list"}, {"data", json::array({model_json()})}}), "application/json");
    });
    http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
        if (!known_model(req.matches[1])) {
            set_error(res, unknown_model(req.matches[1]));
            return;
        }
        res.set_content(dump(model_json()), "application/json");
    });
    // With a content reader the handler reads the body itself: see read_body.
    http.Post("/v1/chat/completions",
              [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& body) {
                  generate(req, res, body, Endpoint::CHAT);
              });
    http.Post("/v1/completions",
              [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& body) {
                  generate(req, res, body, Endpoint::COMPLETION);
              });
    http.Get("/props", [this](const httplib::Request&, httplib::Response& res) {
        const ModelProfile& p = model.profile();
        const EngineOptions& eo = engine.options();
        json j = {{"model", opt.model_id},
                  {"model_path", opt.model_path},
                  {"architecture", p.arch},
                  {"n_vocab", p.n_vocab},
                  {"n_embd", p.n_embd},
                  {"n_layer", p.n_layer},
                  {"n_ctx_train", p.n_ctx_train},
                  {"n_ctx", eo.n_ctx},
                  {"n_parallel", eo.n_parallel},
                  {"cache_type_k", cache_type_name(eo.placement.cache.k)},
                  {"cache_type_v", cache_type_name(eo.placement.cache.v)},
                  {"prefix_cache", eo.prefix_cache},
                  // Speculative decoding: "none", "prompt lookup" (--spec-ngram) or "draft model"
                  // (--model-draft, the file in draft_model).
                  {"speculative", eo.spec_draft ? "draft model" : eo.spec_draft_max > 0 ? "prompt lookup" : "none"},
                  {"draft_model", eo.spec_draft ? json(eo.spec_draft->file().path()) : json(nullptr)},
                  {"draft_max", eo.spec_draft_max},
                  {"draft_min", eo.spec_draft_min},
                  {"chat_template", opt.chat_template},
                  // Where it came from: "model" (the file's tokenizer.chat_template), "file"
                  // (glia serve --template, chat_template_file), "none" (plain role lines).
                  {"chat_template_source", opt.chat_template.empty()          ? "none"
                                           : opt.chat_template_file.empty() ? "model"
                                                                            : "file"},
                  {"chat_template_file", opt.chat_template_file},
                  {"tool_call_format", tool_format_name(tool_format)},
                  {"max_tokens_limit", opt.max_tokens_limit},
                  {"bos_token", bos_text},
                  {"eos_token", eos_text}};
        res.set_content(dump(j), "application/json");
    });
    // /tokenize {"content", "add_special", "parse_special", "with_pieces"} -> {"tokens"};
    // /detokenize {"tokens"} -> {"content"} (as the reference server names them).
    http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
        try {
            const json b = parse_body_object(read_body(req, res, reader));  // errors say where
            if (!b.contains("content") || !b["content"].is_string())
                throw_api(400, "'content' (a string) is required", "content", "missing_field");
            auto flag = [&](const char* k, bool d) {
                if (!b.contains(k)) return d;
                if (!b[k].is_boolean()) throw_api(400, std::string("'") + k + "' must be a boolean", k, "invalid_type");
                return b[k].get<bool>();
            };
            const bool pieces = flag("with_pieces", false);
            const std::vector<int32_t> ids = vocab.tokenize(b["content"].get<std::string>(), flag("add_special", false),
                                                            flag("parse_special", true));
            json t = json::array();
            for (int32_t id : ids) {
                if (pieces) t.push_back({{"id", id}, {"piece", vocab.token_to_piece(id, true)}});
                else t.push_back(id);
            }
            res.set_content(dump(json{{"tokens", t}}), "application/json");
        } catch (const ApiError& e) {
            reject(res, e);
        }
    });
    http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
        try {
            const json b = parse_body_object(read_body(req, res, reader));  // errors say where
            if (!b.contains("tokens") || !b["tokens"].is_array())
                throw_api(400, "'tokens' (an array of token ids) is required", "tokens", "missing_field");
            std::vector<int32_t> ids;
            for (size_t i = 0; i < b["tokens"].size(); ++i) {
                const json& x = b["tokens"][i];
                if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= vocab.n_tokens())
                    throw_api(400, "'tokens[" + std::to_string(i) + "]' is not a token id of this vocabulary (" +
                                       std::to_string(vocab.n_tokens()) + " tokens)", "tokens", "invalid_value");
                ids.push_back(x.get<int32_t>());
            }
            res.set_content(dump(json{{"content", vocab.detokenize(ids, false)}}), "application/json");
        } catch (const ApiError& e) {
            reject(res, e);
        }
    });
    http.Post("/v1/embeddings",
              [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& body) {
                  embeddings(req, res, body);
              });
    // ollama's API and the reference server's /infill, run by the handlers above (relay.h).
    add_ollama_routes(http, ollama_model(), inner_api());
    add_infill_route(http, vocab, engine.options().n_ctx, inner_api());
    // Anthropic's Messages API, run by the chat route as well (anthropic.h).
    anthropic::add_routes(http, {inner_api(), [this](const std::string& b) { return count_chat_tokens(b); }});
    // OpenAI's Responses API, run by the chat route too (responses.h).
    responses::add_routes(http, inner_api());
    // LoRA adapters: list them, set their global scales (lora_api.h).
    http.Get("/lora-adapters", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(dump(lora_state.list()), "application/json");
    });
    http.Post("/lora-adapters", [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
        try {
            lora_state.set_global(parse_lora_post(lora_state, read_body(req, res, reader)));
            res.set_content(dump(json{{"success", true}}), "application/json");
        } catch (const ApiError& e) {
            reject(res, e);
        }
    });
}

// The prompt tokens of a chat completions body, as generate() would count them.
int HttpServer::Impl::count_chat_tokens(const std::string& body) {
    Job job = parse_request(body, Endpoint::CHAT, opt.defaults);
    if (!known_model(job.model)) throw unknown_model(job.model);
    return static_cast<int>(prompt_tokens(job).size());
}

InnerApi HttpServer::Impl::inner_api() {
    InnerApi a;
    a.generate = [this](const std::string& body, Endpoint ep, httplib::Response& res) { generate(body, res, ep); };
    a.embeddings = [this](const std::string& body, httplib::Response& res) { embeddings(body, res); };
    a.read_body = [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& r) {
        return read_body(req, res, r);
    };
    return a;
}

OllamaModel HttpServer::Impl::ollama_model() const {
    OllamaModel m;
    m.model = &model;
    m.id = opt.model_id;
    m.chat_template = opt.chat_template;
    m.tools = tool_format != ToolFormat::NONE;
    m.fim = has_fim(vocab);
    return m;
}

// The chat page: GET / is index.html, GET /web/NAME the other files of
// src/server/web/ (web_assets.h). Not behind --api-key: the page holds no secret and
// asks for the key when the API answers 401. The policy below lets it load only its
// own scripts and styles and talk only to this server; no inline script runs.
void HttpServer::Impl::serve_web_page() {
    for (const WebAsset& a : web_assets()) {
        const std::string path = a.name == "index.html" ? "/" : "/web/" + std::string(a.name);
        std::string pattern;  // the route is a regex: the name's dots are literal
        for (char c : path) {
            if (c == '.') pattern += '\\';
            pattern += c;
        }
        http.Get(pattern, [a](const httplib::Request&, httplib::Response& res) {
            res.set_header("Content-Security-Policy",
                           "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
            res.set_header("X-Content-Type-Options", "nosniff");
            res.set_header("Referrer-Policy", "no-referrer");
            res.set_header("Cache-Control", "no-cache");
            res.set_content(a.body.data(), a.body.size(), std::string(a.content_type));
        });
    }
}
}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
