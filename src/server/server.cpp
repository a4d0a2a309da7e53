#if GLIA_HAVE_SERVER
#include "server/server.h"

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
namespace {

using Clock = std::chrono::steady_clock;

// A request's events (the engine's bounded queue; an HTTP thread drains it).
using Channel = EventStream;

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

void set_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(dump(error_json(e)), "application/json");
}

std::string base_name(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool has_token(std::string value, const char* token) {
    std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
    return value.find(token) != std::string::npos;
}

// The request comes with a body (a length, or chunks).
bool has_body(const httplib::Request& req) {
    return has_token(req.get_header_value("Transfer-Encoding"), "chunked") ||
           (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
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

void close_connection(httplib::Response& res) {
    if (Connection* c = Connection::current()) c->close_after_response();
    res.set_header("Connection", "close");
}

// Fills in the options left to the server (0 = derived from the engine's).
ServerOptions resolve(ServerOptions o, const Engine& engine) {
    if (o.max_concurrent <= 0) o.max_concurrent = engine.options().n_parallel + engine.options().max_queue;
    if (o.max_connections <= 0) o.max_connections = std::max(256, o.max_concurrent + 64);
    return o;
}

ConnectionLimits limits_of(const ServerOptions& o) {
    ConnectionLimits l;
    l.max_connections = o.max_connections;
    l.request_timeout_s = o.request_timeout_s;
    l.idle_timeout_s = o.idle_timeout_s;
    l.max_body = o.max_body;
    l.busy_body = dump(error_json({503,
                                   "the server has " + std::to_string(o.max_connections) +
                                       " connections open, its limit (--max-connections); retry later",
                                   "server_overloaded", "", "too_many_connections"}));
    return l;
}

}  // namespace

struct HttpServer::Impl {
    Engine& engine;
    const Model& model;
    const tok::Vocab& vocab;
    ServerOptions opt;
    ConnectionServer http;
    int port = -1;
    BrowserPolicy browser{make_browser_policy(opt.host, opt.allowed_hosts, opt.cors_origin)};
    std::optional<tok::ChatTemplate> tmpl;
    std::mutex tmpl_mutex;
    tok::PromptTokenizer prompt_tokenizer;
    std::string bos_text, eos_text;
    ToolFormat tool_format = ToolFormat::NONE;  // of the chat template
    std::set<int32_t> tool_marker_ids;          // its markers' tokens (shown in replies)
    ThinkMarkers think;                         // the template's thought markers (reasoning.h)
    std::set<int32_t> think_marker_ids;         // their tokens (shown in chat replies)

    std::atomic<int> active{0};  // generation requests in flight

    // A generation request's place among those in flight (--max-concurrent), taken once
    // the request is valid and held until its response is written. Admission over the
    // limit first reclaims the places of requests whose client went away before their
    // handler noticed (reclaim_gone), so that a client's next request never finds its
    // last one still counted.
    struct Slot {
        Impl& s;
        const Connection* conn;
        std::vector<uint64_t> ids;  // its engine requests (guarded by slots_mutex)
        bool counted = true;        // still counted in `active` (idem)
        Slot(Impl& srv, const Connection* c) : s(srv), conn(c) {
            std::lock_guard<std::mutex> lk(s.slots_mutex);
            ++s.active;
            s.slots.insert(this);
        }
        ~Slot() {
            std::lock_guard<std::mutex> lk(s.slots_mutex);
            s.slots.erase(this);
            if (counted) --s.active;
        }
        void add(uint64_t id) {
            std::lock_guard<std::mutex> lk(s.slots_mutex);
            ids.push_back(id);
        }
    };
    std::mutex slots_mutex;
    std::set<Slot*> slots;

    // Cancels the requests whose client has gone (closed or reset its connection) and
    // stops counting them; their handlers notice and end on their own. Returns how many.
    int reclaim_gone() {
        std::vector<uint64_t> cancel;
        int n = 0;
        {
            std::lock_guard<std::mutex> lk(slots_mutex);
            for (Slot* sl : slots) {
                if (!sl->counted || !sl->conn || !sl->conn->peer_gone()) continue;
                sl->counted = false;
                --active;
                ++n;
                cancel.insert(cancel.end(), sl->ids.begin(), sl->ids.end());
            }
        }
        for (uint64_t id : cancel) engine.cancel(id);
        return n;
    }
    std::atomic<bool> stopping{false};  // stop() was called: running streams end now
    std::mutex stats_mutex;
    std::map<int, uint64_t> http_status_counts;
    uint64_t rejected_by_server = 0;  // validation / limit errors on generation routes
    uint64_t timeouts = 0, disconnects = 0;
    LoraState lora_state{engine.options().lora};  // LoRA adapters: global scales (lora_api.h)

    Impl(Engine& e, const Model& m, ServerOptions o)
        : engine(e), model(m), vocab(m.vocab()), opt(resolve(std::move(o), e)), http(limits_of(opt)),
          prompt_tokenizer(vocab) {
        if (!opt.chat_template.empty()) tmpl.emplace(opt.chat_template);
        bos_text = vocab.bos() >= 0 ? vocab.token_to_piece(vocab.bos(), true) : "";
        eos_text = vocab.eos() >= 0 ? vocab.token_to_piece(vocab.eos(), true) : "";
        if (tmpl) tool_format = detect_tool_format(opt.chat_template);
        for (const std::string& m : tool_markers(tool_format))
            if (const int32_t id = vocab.find_token(m); id >= 0) tool_marker_ids.insert(id);
        if (tmpl) think = detect_think_markers(opt.chat_template);
        for (const std::string& m : {think.open, think.close})
            if (const int32_t id = m.empty() ? -1 : vocab.find_token(m); id >= 0) think_marker_ids.insert(id);
        setup();
    }

    void count_status(int status) {
        std::lock_guard<std::mutex> lk(stats_mutex);
        ++http_status_counts[status];
    }

    void setup() {
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
    int count_chat_tokens(const std::string& body) {
        Job job = parse_request(body, Endpoint::CHAT, opt.defaults);
        if (!known_model(job.model)) throw unknown_model(job.model);
        return static_cast<int>(prompt_tokens(job).size());
    }

    InnerApi inner_api() {
        InnerApi a;
        a.generate = [this](const std::string& body, Endpoint ep, httplib::Response& res) { generate(body, res, ep); };
        a.embeddings = [this](const std::string& body, httplib::Response& res) { embeddings(body, res); };
        a.read_body = [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& r) {
            return read_body(req, res, r);
        };
        return a;
    }

    OllamaModel ollama_model() const {
        OllamaModel m;
        m.model = &model;
        m.id = opt.model_id;
        m.chat_template = opt.chat_template;
        m.tools = tool_format != ToolFormat::NONE;
        m.fim = has_fim(vocab);
        return m;
    }

    json json_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
        return json_body(read_body(req, res, reader));
    }
    static json json_body(const std::string& text) {
        check_json_depth(text);  // before anything walks it recursively
        json b = json::parse(text, nullptr, false);
        if (b.is_discarded() || !b.is_object()) throw_api(400, "the request body must be a JSON object", "", "invalid_json");
        return b;
    }

    // The file's pooling key (<arch>.pooling_type: 1 mean, 3 last); decoder models without
    // one pool their last token (what causal attention has seen the whole input for).
    Pooling pooling() const {
        const int64_t t = model.file().get_or<int64_t>(model.profile().arch + ".pooling_type", 3);
        return t == 1 ? Pooling::MEAN : Pooling::LAST;
    }

    // POST /v1/embeddings: {"input": string | [strings] | [ids] | [[ids]], "model",
    // "encoding_format": "float"}: at most kMaxEmbeddingInputs inputs (400 beyond). They go
    // to the engine in parts its queue takes, at most n_parallel + max_queue / 2 of them
    // queued or running at once (room is left for other clients), the next ones as the
    // earlier finish; the vectors come back in input order.
    static constexpr size_t kMaxEmbeddingInputs = 2048;
    void embeddings(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
        std::string text;
        try {
            text = read_body(req, res, reader);
        } catch (const ApiError& e) {
            return reject(res, e);
        }
        embeddings(text, res);
    }
    void embeddings(const std::string& text, httplib::Response& res) {
        try {
            const json body = json_body(text);
            if (body.contains("model") && (!body["model"].is_string() || !known_model(body["model"])))
                throw unknown_model(body["model"].is_string() ? body["model"].get<std::string>() : body["model"].dump());
            const std::string encoding = body.contains("encoding_format") && body["encoding_format"].is_string()
                                             ? body["encoding_format"].get<std::string>() : "float";
            if (body.contains("encoding_format") && encoding != "float" && encoding != "base64")
                throw_api(400, "'encoding_format' must be \"float\" or \"base64\"", "encoding_format", "invalid_value");
            if (!body.contains("input")) throw_api(400, "'input' is required", "input", "missing_field");
            const json& in = body["input"];
            std::vector<std::vector<int32_t>> inputs;
            auto ids_of = [&](const json& a, const std::string& where) {
                std::vector<int32_t> ids;
                for (const json& x : a) {
                    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= vocab.n_tokens())
                        throw_api(400, "'" + where + "' holds " + x.dump() + ", not a token id of this vocabulary", "input", "invalid_value");
                    ids.push_back(x.get<int32_t>());
                }
                return ids;
            };
            auto text_of = [&](const json& x, const std::string& where) {
                if (x.get<std::string>().empty()) throw_api(400, "'" + where + "' is an empty string", "input", "invalid_value");
                return vocab.tokenize(x.get<std::string>(), true, false);
            };
            if (in.is_string()) inputs.push_back(text_of(in, "input"));
            else if (in.is_array() && !in.empty() && in[0].is_number_integer()) inputs.push_back(ids_of(in, "input"));
            else if (in.is_array() && !in.empty()) {
                if (in.size() > kMaxEmbeddingInputs)
                    throw_api(400, "'input' holds " + std::to_string(in.size()) + " inputs; at most " +
                                       std::to_string(kMaxEmbeddingInputs) + " per request",
                              "input", "invalid_value");
                for (size_t i = 0; i < in.size(); ++i) {
                    const std::string w = "input[" + std::to_string(i) + "]";
                    if (in[i].is_string()) inputs.push_back(text_of(in[i], w));
                    else if (in[i].is_array()) inputs.push_back(ids_of(in[i], w));
                    else wrong_input(w);
                }
            } else {
                wrong_input("input");
            }
            const size_t n = inputs.size();
            const int n_ctx = engine.options().n_ctx;
            int n_tokens = 0;
            for (size_t i = 0; i < n; ++i) {
                if (inputs[i].empty()) throw_api(400, "input " + std::to_string(i) + " is empty", "input", "invalid_value");
                if (static_cast<int>(inputs[i].size()) > n_ctx)
                    throw_api(400, "input " + std::to_string(i) + " has " + std::to_string(inputs[i].size()) +
                                       " tokens, more than the context of " + std::to_string(n_ctx) + " (-c)",
                              "input", "context_length_exceeded");
                n_tokens += static_cast<int>(inputs[i].size());
            }
            std::vector<std::vector<float>> vecs(n);
            std::vector<std::string> errors(n);
            std::vector<std::shared_ptr<EventStream>> outs(n);
            std::vector<uint64_t> ids(n, 0);
            const size_t window = static_cast<size_t>(engine.options().n_parallel) +
                                  static_cast<size_t>(std::max(1, engine.options().max_queue / 2));
            size_t next = 0, done = 0;  // inputs [done, next) are in the engine
            // Whatever ends the request early, the inputs still in the engine are cancelled.
            struct CancelPending {
                Engine& engine;
                const std::vector<uint64_t>& ids;
                const size_t &done, &next;
                ~CancelPending() {
                    for (size_t i = done; i < next; ++i) engine.cancel(ids[i]);
                }
            } cancel_pending{engine, ids, done, next};
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long long>(opt.timeout_s * 1000));
            while (done < n) {
                // As many more as the window and the engine's queue take (the queue may hold
                // other clients' requests: a part it refuses is halved, down to one).
                for (size_t k = std::min(n - next, window - (next - done)); k > 0 && next < n;) {
                    std::vector<std::pair<GenerationRequest, std::shared_ptr<EventStream>>> part;
                    for (size_t i = next; i < next + k; ++i) {
                        GenerationRequest g;
                        g.prompt = inputs[i];
                        g.embed = pooling();
                        g.lora_scales = lora_state.global();
                        outs[i] = std::make_shared<EventStream>();
                        part.emplace_back(std::move(g), outs[i]);
                    }
                    try {
                        const std::vector<uint64_t> got = engine.submit_batch(std::move(part));
                        std::copy(got.begin(), got.end(), ids.begin() + static_cast<std::ptrdiff_t>(next));
                        next += k;
                        k = std::min(n - next, window - (next - done));
                    } catch (const QueueFull& e) {
                        if (k > 1) {
                            k /= 2;
                            continue;
                        }
                        // Full of other requests: wait for ours to make room, or with none of
                        // ours in it, the server is busy.
                        if (next > done) break;
                        throw_api(503, std::string("the server is busy: ") + e.what(), "", "queue_full");
                    } catch (const glia::Error& e) {
                        throw_api(400, e.what(), "input", "invalid_request");
                    }
                }
                // The oldest input still in the engine: its final event.
                for (bool fin = false; !fin;) {
                    const std::deque<TokenEvent> evs = outs[done]->wait(until);
                    if (evs.empty()) throw_api(504, "the embeddings took longer than --timeout", "", "timeout", "server_error");
                    for (const TokenEvent& ev : evs) {
                        if (!ev.done) continue;
                        fin = true;
                        if (ev.finish == FinishReason::STOP) vecs[done] = ev.embedding;
                        else errors[done] = ev.error.empty() ? finish_reason_name(ev.finish) : ev.error;
                    }
                }
                outs[done].reset();
                ++done;
            }
            json data = json::array();
            for (size_t i = 0; i < vecs.size(); ++i) {
                if (!errors[i].empty()) throw_api(500, "embedding failed: " + errors[i], "", "generation_error", "server_error");
                json e = encoding == "base64" ? json(base64_floats(vecs[i])) : json(vecs[i]);
                data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", e}});
            }
            res.set_content(dump(json{{"object", "list"}, {"data", data}, {"model", opt.model_id},
                                      {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}}),
                            "application/json");
        } catch (const ApiError& e) {
            reject(res, e);
        }
    }

    // The vector's little-endian float32 bytes in base64 (what the openai clients ask for).
    static std::string base64_floats(const std::vector<float>& v) {
        static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        std::string bytes(v.size() * 4, '\0');
        for (size_t i = 0; i < v.size(); ++i) {
            uint32_t u;
            std::memcpy(&u, &v[i], 4);
            for (int k = 0; k < 4; ++k) bytes[i * 4 + k] = static_cast<char>(u >> (8 * k) & 0xFF);
        }
        std::string out;
        for (size_t i = 0; i < bytes.size(); i += 3) {
            const uint32_t n = (uint8_t(bytes[i]) << 16) | (i + 1 < bytes.size() ? uint8_t(bytes[i + 1]) << 8 : 0) |
                               (i + 2 < bytes.size() ? uint8_t(bytes[i + 2]) : 0);
            out += a[n >> 18 & 63];
            out += a[n >> 12 & 63];
            out += i + 1 < bytes.size() ? a[n >> 6 & 63] : '=';
            out += i + 2 < bytes.size() ? a[n & 63] : '=';
        }
        return out;
    }

    [[noreturn]] static void wrong_input(const std::string& where) {
        throw_api(400, "'" + where + "' must be a string, an array of strings, an array of token ids or an array of those",
                  "input", "invalid_type");
    }

    json model_json() const {
        return json{{"id", opt.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "glia"}};
    }

    // The chat page: GET / is index.html, GET /web/NAME the other files of
    // src/server/web/ (web_assets.h). Not behind --api-key: the page holds no secret and
    // asks for the key when the API answers 401. The policy below lets it load only its
    // own scripts and styles and talk only to this server; no inline script runs.
    void serve_web_page() {
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

    bool known_model(const std::string& m) const {
        return m.empty() || m == opt.model_id || m == opt.model_path || m == base_name(opt.model_path);
    }

    ApiError unknown_model(const std::string& m) const {
        return {404, "the model '" + m + "' does not exist; this server serves '" + opt.model_id + "'", "invalid_request_error",
                "model", "model_not_found"};
    }

    std::string metrics() {
        const EngineStats s = engine.stats();
        std::ostringstream o;
        auto metric = [&](const char* name, const char* type, const char* help, auto value) {
            o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n' << name << ' ' << value << '\n';
        };
        uint64_t rejected, timeouts_, disconnects_;
        std::map<int, uint64_t> statuses;
        {
            std::lock_guard<std::mutex> lk(stats_mutex);
            rejected = rejected_by_server;
            timeouts_ = timeouts;
            disconnects_ = disconnects;
            statuses = http_status_counts;
        }
        metric("glia_requests_total", "counter", "Generation requests accepted by the engine.", s.requests_total);
        metric("glia_requests_finished_total", "counter", "Generation requests that finished (stop or length).", s.requests_finished);
        metric("glia_requests_cancelled_total", "counter", "Generation requests cancelled (client gone, timeout).",
               s.requests_cancelled);
        metric("glia_requests_overrun_total", "counter",
               "Generation requests cancelled because their client read too slowly (max pending events).",
               s.requests_overrun);
        metric("glia_requests_rejected_total", "counter",
               "Generation requests refused (invalid, too long, queue full, over the concurrency limit).",
               s.requests_rejected + rejected);
        metric("glia_requests_timed_out_total", "counter", "Generation requests cancelled by the --timeout limit.", timeouts_);
        metric("glia_client_disconnects_total", "counter", "Generation requests whose client went away.", disconnects_);
        metric("glia_prompt_tokens_total", "counter", "Prompt tokens processed.", s.prompt_tokens_total);
        metric("glia_generated_tokens_total", "counter", "Tokens generated.", s.generated_tokens_total);
        metric("glia_requests_preempted_total", "counter",
               "Running requests paused to free KV-cache pages (recomputed when they resume).", s.preemptions);
        metric("glia_speculative_drafted_tokens_total", "counter",
               "Tokens drafted (prompt lookup, --spec-ngram, or a draft model, --model-draft) and verified.",
               s.spec_drafted);
        metric("glia_speculative_accepted_tokens_total", "counter",
               "Drafted tokens the model confirmed (each saved a decode step).", s.spec_accepted);
        metric("glia_queue_depth", "gauge", "Requests waiting for a slot.", s.waiting);
        metric("glia_requests_running", "gauge", "Requests being decoded.", s.running);
        metric("glia_http_requests_in_flight", "gauge", "Generation requests held by HTTP threads.", active.load());
        metric("glia_decode_tokens_per_second", "gauge", "Recent generation throughput over all sequences.",
               s.decode_tokens_per_second);
        metric("glia_kv_cache_blocks_used", "gauge", "KV-cache blocks in use.", s.kv_blocks_used);
        metric("glia_draft_kv_cache_blocks_used", "gauge", "The draft model's KV-cache blocks in use (--model-draft).",
               s.draft_kv_blocks_used);
        metric("glia_kv_cache_blocks_total", "gauge", "KV-cache blocks in all.", s.kv_blocks_total);
        metric("glia_kv_cache_blocks_cached", "gauge", "KV-cache blocks held by no request, kept for prefix reuse.",
               s.kv_blocks_cached);
        metric("glia_prefix_cache_requests_total", "counter", "Requests that looked up the prefix cache.",
               s.prefix_lookups);
        metric("glia_prefix_cache_hits_total", "counter", "Requests that reused a cached prefix.", s.prefix_hits);
        metric("glia_prefix_cache_prompt_tokens_total", "counter", "Prompt tokens of the requests that looked up the cache.",
               s.prefix_tokens_total);
        metric("glia_prefix_cache_reused_tokens_total", "counter", "Prompt tokens taken from the cache, not computed.",
               s.prefix_tokens_reused);
        metric("glia_prefix_cache_hit_rate", "gauge", "Reused prompt tokens over all looked-up prompt tokens.",
               s.prefix_tokens_total ? double(s.prefix_tokens_reused) / double(s.prefix_tokens_total) : 0.0);
        metric("glia_grammar_masks_total", "counter", "Token masks computed for structured output.", s.grammar_masks);
        metric("glia_grammar_mask_seconds_total", "counter", "Time spent computing those masks.", s.grammar_mask_seconds);
        metric("glia_prefix_cache_evictions_total", "counter", "Cached blocks evicted to make room.", s.prefix_evictions);
        metric("glia_http_connections_open", "gauge", "HTTP connections being served.", http.open_connections());
        metric("glia_http_connections_refused_total", "counter",
               "HTTP connections answered 503 at once (over --max-connections).", http.refused_connections());
        o << "# HELP glia_http_responses_total HTTP responses by status code.\n# TYPE glia_http_responses_total counter\n";
        for (const auto& [code, n] : statuses) o << "glia_http_responses_total{code=\"" << code << "\"} " << n << '\n';
        return o.str();
    }

    // The prompt's token ids. A completion's prompt is parsed for special tokens (a
    // client may send control tokens, as with the reference's servers); in a chat, only
    // the template's own text is: message contents stay text (tok::PromptTokenizer).
    // A chat's job gets thought_open: whether the rendered prompt opened a thought.
    std::vector<int32_t> prompt_tokens(Job& job) {
        if (job.endpoint == Endpoint::COMPLETION) {
            if (job.suffix) {  // fill in the middle (infill.h): the prompt is the text before the gap
                if (job.prompt_is_ids)
                    throw_api(400, "'suffix' needs a text 'prompt' (the text before the gap), not token ids", "suffix", "invalid_value");
                return infill_prompt(vocab, InfillInput{job.prompt, *job.suffix, "", {}},
                                     infill_budget(engine.options().n_ctx, job.max_tokens), "suffix").tokens;
            }
            if (job.prompt_is_ids) {
                for (size_t i = 0; i < job.prompt_ids.size(); ++i)
                    if (job.prompt_ids[i] >= vocab.n_tokens())
                        throw_api(400, "'prompt[" + std::to_string(i) + "]' = " + std::to_string(job.prompt_ids[i]) +
                                           " is not a token id (the vocabulary has " + std::to_string(vocab.n_tokens()) + ")",
                                  "prompt", "invalid_value");
                return job.prompt_ids;
            }
            return vocab.tokenize(job.prompt, true, true);
        }
        // Every string of the request is text (request_text.h): contents, names, tool
        // calls and results, tool definitions.
        const json messages = protect_messages(job.messages, prompt_tokenizer);
        std::string text;
        if (tmpl) {
            jinja::Value conv;
            try {
                // chat_template_kwargs are variables of the template, and text like the rest.
                json vars = job.template_kwargs.is_object()
                                ? protect_request_text(job.template_kwargs, prompt_tokenizer, "chat_template_kwargs")
                                : json::object();
                vars["messages"] = messages;
                if (!job.tools.is_null() && job.tool_choice != "none")
                    vars["tools"] = protect_request_text(job.tools, prompt_tokenizer, "tools");
                conv = jinja::Value::parse_json(vars.dump());
            } catch (const std::exception& e) {
                throw_api(400, std::string("'messages' could not be read: ") + e.what(), "messages", "invalid_value");
            }
            try {
                std::lock_guard<std::mutex> lk(tmpl_mutex);
                text = tmpl->render(conv, bos_text, eos_text, true);
            } catch (const std::exception& e) {
                throw_api(400, std::string("the model's chat template failed on these messages: ") + e.what(), "messages",
                          "template_error");
            }
            job.thought_open = prompt_opens_thought(text, think);
        } else {
            text = plain_chat_prompt(messages);
        }
        std::vector<int32_t> ids = prompt_tokenizer.tokenize(text);
        if (vocab.add_bos() && vocab.bos() >= 0 && (ids.empty() || ids[0] != vocab.bos())) ids.insert(ids.begin(), vocab.bos());
        return ids;
    }

    void reject(httplib::Response& res, const ApiError& e) {
        {
            std::lock_guard<std::mutex> lk(stats_mutex);
            ++rejected_by_server;
        }
        set_error(res, e);
    }

    // The request body, at most --max-body bytes, read here rather than by httplib: its
    // own reading limits only bodies with a Content-Length (a chunked one was read whole,
    // whatever its size), waits for the connection to close when a POST has neither
    // header, and applies an 8 KiB limit of its own to form-encoded bodies (what `curl -d`
    // sends, JSON included). A body refused before it is read whole leaves the connection
    // unusable: it is closed after the response.
    std::string read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
        const std::string limit = std::to_string(opt.max_body) + " bytes (--max-body)";
        const bool chunked = has_token(req.get_header_value("Transfer-Encoding"), "chunked");
        if (!chunked && !req.has_header("Content-Length")) return "";  // no body (RFC 9112, 6.3)
        if (req.is_multipart_form_data()) {
            close_connection(res);
            throw_api(415, "multipart bodies are not accepted; send the request as JSON", "", "unsupported_media_type");
        }
        if (!chunked) {
            const std::string v = req.get_header_value("Content-Length");
            char* end = nullptr;
            errno = 0;
            const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
            if (v.empty() || *end || errno == ERANGE || v[0] == '-') {
                close_connection(res);
                throw_api(400, "the Content-Length '" + v + "' is not a byte count", "", "invalid_request");
            }
            if (n > opt.max_body) {
                close_connection(res);
                throw_api(413, "the request body has " + v + " bytes; this server accepts at most " + limit, "",
                          "body_too_large");
            }
        }
        std::string body;
        bool too_large = false;
        const bool ok = reader([&](const char* data, size_t n) {
            if (body.size() + n > opt.max_body) {
                too_large = true;
                return false;
            }
            body.append(data, n);
            return true;
        });
        if (too_large) {
            close_connection(res);
            throw_api(413, "the request body is larger than " + limit, "", "body_too_large");
        }
        if (!ok) {
            close_connection(res);
            const Connection* c = Connection::current();
            if (c && c->deadline_passed())
                throw_api(408, "the request did not arrive within " + json(opt.request_timeout_s).dump() +
                                   " s (--read-timeout)", "", "request_timeout");
            throw_api(400, "the request body could not be read (malformed chunks or the connection broke)", "",
                      "invalid_request");
        }
        return body;
    }

    struct Run;

    void generate(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader, Endpoint ep) {
        std::string body;
        try {
            body = read_body(req, res, reader);
        } catch (const ApiError& e) {
            return reject(res, e);
        }
        generate(body, res, ep);
    }

    // A generation request's body (the other APIs' routes run theirs here too: relay.h).
    void generate(const std::string& body, httplib::Response& res, Endpoint ep) {
        std::shared_ptr<Slot> slot;  // taken once the request is valid: a bad one gets its 4xx when busy too
        try {
            if (const std::string why = model.file().changed(); !why.empty())
                throw_api(503, why, "", "model_file_changed", "server_error");
            Job job = parse_request(body, ep, opt.defaults);
            if (!known_model(job.model)) throw unknown_model(job.model);
            const char* prompt_field = ep == Endpoint::CHAT ? "messages" : "prompt";
            std::vector<int32_t> ids = prompt_tokens(job);
            const int n_ctx = engine.options().n_ctx;
            const int n_prompt = static_cast<int>(ids.size());
            if (ids.empty()) throw_api(400, "the prompt is empty", prompt_field, "invalid_value");
            if (n_prompt >= n_ctx)
                throw_api(400, "the prompt has " + std::to_string(n_prompt) + " tokens but the context holds " +
                                   std::to_string(n_ctx) + " (-c); shorten the prompt",
                          prompt_field, "context_length_exceeded");
            int max_tokens;
            if (job.max_tokens) {
                max_tokens = *job.max_tokens;
                const char* f = "max_tokens";
                if (max_tokens > opt.max_tokens_limit)
                    throw_api(400, "'max_tokens' is " + std::to_string(max_tokens) + " but this server allows at most " +
                                       std::to_string(opt.max_tokens_limit) + " per request (--max-tokens-limit)",
                              f, "invalid_value");
                if (n_prompt + max_tokens > n_ctx)
                    throw_api(400, "the prompt (" + std::to_string(n_prompt) + " tokens) plus 'max_tokens' (" +
                                       std::to_string(max_tokens) + ") is more than the context of " + std::to_string(n_ctx) +
                                       " tokens; lower max_tokens to at most " + std::to_string(n_ctx - n_prompt),
                              f, "context_length_exceeded");
            } else {
                max_tokens = std::min(opt.max_tokens_limit, n_ctx - n_prompt);
            }

            GenerationRequest gr;
            gr.prompt = std::move(ids);
            gr.max_tokens = max_tokens;
            gr.sampling = job.sampling;
            gr.top_logprobs = job.logprobs ? job.top_logprobs : 0;
            gr.logprobs = job.logprobs;
            gr.ignore_eos = job.ignore_eos;
            const bool force_call = job.tool_choice == "required" || job.tool_choice == "function";
            if (force_call && job.format != ResponseFormat::TEXT)
                throw_api(400, "'tool_choice' that forces a call cannot be combined with 'response_format'", "tool_choice",
                          "invalid_value");
            if (force_call) gr.grammar = tool_call_grammar(tool_format, job.tools, job.tool_choice_name);
            if (job.format == ResponseFormat::JSON_OBJECT) gr.grammar = any_object_grammar();
            else if (job.format == ResponseFormat::JSON_SCHEMA)
                gr.grammar = compile_schema(job.schema, "response_format.json_schema.schema");
            for (const auto& [tid, b] : job.logit_bias)
                if (tid >= vocab.n_tokens())
                    throw_api(400, "'logit_bias' names token " + std::to_string(tid) + ", outside the vocabulary (" +
                                       std::to_string(vocab.n_tokens()) + " tokens)", "logit_bias", "invalid_value");
            gr.logit_bias = job.logit_bias;
            gr.lora_scales = job.lora.is_null() ? lora_state.global() : lora_state.resolve(parse_lora_field(job.lora), "lora");
            const GenerationRequest more_gr = job.n > 1 ? gr : GenerationRequest{};
            slot = std::make_shared<Slot>(*this, Connection::current());
            // Over the limit: the requests of clients that went away are dropped (here, or by
            // another request's admission). A client's close may still be on its way (the
            // kernel delivers it a moment after the client's next connection): a short wait
            // for it, then the request is refused.
            for (int tries = 0; active.load() > opt.max_concurrent && tries < 50; ++tries) {
                if (tries > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
                reclaim_gone();
            }
            if (active.load() > opt.max_concurrent)
                throw_api(503, "the server is busy: " + std::to_string(opt.max_concurrent) +
                                   " requests are in flight (--max-concurrent); retry later",
                          "", "server_busy");
            auto ch = std::make_shared<Channel>();
            uint64_t id;
            try {
                try {
                    id = engine.submit(gr, ch);
                } catch (const QueueFull&) {
                    reclaim_gone();
                    id = engine.submit(std::move(gr), ch);  // room made by clients that went away, if any
                }
            } catch (const QueueFull& e) {
                throw_api(503, std::string("the server is busy: ") + e.what() + "; retry later", "", "queue_full");
            } catch (const glia::Error& e) {
                throw_api(400, e.what(), prompt_field, "invalid_request");
            }
            slot->add(id);
            const Job more_job = job.n > 1 ? job : Job{};
            auto run = std::make_shared<Run>(*this, std::move(job), ch, id, n_prompt, slot);
            std::vector<std::shared_ptr<Run>> runs{run};
            if (more_job.n > 1 && !start_more(*run, more_job, more_gr, n_prompt, slot, runs)) return reject(res, *run->error);
            if (run->job.stream) {
                // The status (200) goes out now; a failure later ends the stream with an
                // error event.
                res.set_header("Cache-Control", "no-cache");
                res.set_header("X-Accel-Buffering", "no");
                res.set_chunked_content_provider("text/event-stream", [runs](size_t, httplib::DataSink& sink) mutable {
                    return Run::stream(runs, sink);  // one call serves the whole stream
                });
            } else {
                // The whole result is awaited here, so its status is the outcome's: 200,
                // or 504 for --timeout, 500 for a failure, 503 for shutdown.
                Connection* conn = Connection::current();
                for (auto& r : runs)
                    if (!r->collect(conn)) {  // the client went away: nobody to answer
                        for (auto& o : runs) o->cancel();
                        close_connection(res);
                        set_error(res, {499, "the client closed the connection", "invalid_request_error", "", "client_gone"});
                        return;
                    }
                for (auto& r : runs)
                    if (r->error) return set_error(res, *r->error);
                json whole = run->whole();
                for (size_t i = 1; i < runs.size(); ++i) {
                    json c = runs[i]->whole();
                    c["choices"][0]["index"] = i;
                    whole["choices"].push_back(c["choices"][0]);
                    whole["usage"]["completion_tokens"] = whole["usage"]["completion_tokens"].get<int>() +
                                                          c["usage"]["completion_tokens"].get<int>();
                }
                whole["usage"]["total_tokens"] =
                    whole["usage"]["prompt_tokens"].get<int>() + whole["usage"]["completion_tokens"].get<int>();
                res.set_content(dump(whole), "application/json");
            }
        } catch (const ApiError& e) {
            reject(res, e);
        }
    }

    // One accepted request: takes its events from the engine, builds the text.
    struct Run {
        Impl& s;
        Job job;
        std::shared_ptr<Channel> ch;
        uint64_t id;
        int n_prompt;
        std::shared_ptr<void> slot;
        ResponseId rid;
        TextStream text;
        Clock::time_point deadline;
        bool finished = false;  // the engine's last event was seen, or we cancelled
        int n_generated = 0;
        int n_cached = 0;                     // prompt tokens the prefix cache gave
        const char* finish_reason = nullptr;  // set when the request ended well
        std::optional<ApiError> error;        // ... or this, when it did not
        std::vector<TokenLogprob> all_lp;     // whole responses: every token's
        std::string echo;                     // completions with "echo": the prompt
        bool tools = false;        // the reply may hold tool calls (parsed at the end)
        bool constrained = false;  // sampled under a grammar: special tokens are text there
        size_t shown = 0;          // tools, streamed: content bytes sent so far
        // A chat whose template thinks in markers: the thought apart from the answer
        // (reasoning.h). RAW keeps the whole reply in content too, with the open marker the
        // prompt wrote in front.
        std::optional<ReasoningStream> split;
        bool raw = false;
        std::string raw_prefix;

        Run(Impl& srv, Job j, std::shared_ptr<Channel> c, uint64_t i, int np, std::shared_ptr<void> sl)
            : s(srv), job(std::move(j)), ch(std::move(c)), id(i), n_prompt(np), slot(std::move(sl)),
              rid(new_response_id(job.endpoint, srv.opt.model_id)), text(job.stop),
              deadline(Clock::now() + std::chrono::milliseconds(static_cast<long long>(srv.opt.timeout_s * 1000))) {
            if (job.endpoint == Endpoint::COMPLETION && job.echo && !job.prompt_is_ids) echo = job.prompt;
            tools = !job.tools.is_null() && job.tool_choice != "none" && srv.tool_format != ToolFormat::NONE;
            constrained = job.format != ResponseFormat::TEXT || job.tool_choice == "required" || job.tool_choice == "function";
            if (job.endpoint == Endpoint::CHAT && !srv.think.empty() && job.reasoning_format != ReasoningFormat::NONE) {
                split.emplace(srv.think, job.thought_open);
                raw = job.reasoning_format == ReasoningFormat::RAW;
                if (raw && job.thought_open) raw_prefix = srv.think.open;
            }
        }

        // A token's text in the reply: control tokens are dropped, except a tool call's
        // markers and what a grammar chose for its text.
        std::string piece(int32_t tok) const {
            const bool special = constrained || (tools && s.tool_marker_ids.count(tok)) ||
                                 (job.endpoint == Endpoint::CHAT && s.think_marker_ids.count(tok));
            return s.vocab.token_to_piece(tok, special);
        }

        static json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index) {
            json a = json::array();
            for (size_t i = 0; i < calls.size(); ++i) {
                json c = json::object();
                if (with_index) c["index"] = i;  // stream deltas say which call they extend
                c["id"] = calls[i].id;
                c["type"] = "function";
                c["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
                a.push_back(std::move(c));
            }
            return a;
        }
        ~Run() { cancel(); }

        void cancel() {
            if (finished) return;
            finished = true;
            ch->close();
            s.engine.cancel(id);
        }

        // A stop string ended the text: the engine need not go on, and the request counts
        // as finished (not cancelled) in its statistics.
        void stop_early() {
            if (finished) return;
            finished = true;
            s.engine.finish_early(id);  // first: a token declined after close() is then still a stop
            ch->close();
        }

        bool over() const { return finish_reason || error; }

        TokenLogprob logprob_of(const TokenEvent& ev) const {
            TokenLogprob t;
            t.text = s.vocab.token_to_piece(ev.token, false);
            t.logprob = ev.logprob;
            for (const auto& [tid, lp] : ev.top) t.top.emplace_back(s.vocab.token_to_piece(tid, false), lp);
            return t;
        }

        // Waits up to `wait` (100 ms) for the engine's events and applies them to the text; the
        // request may end (finish_reason), or fail (error: shutdown, --timeout, an engine
        // error, the model file changed underneath). Returns the logprobs of new tokens.
        std::vector<TokenLogprob> step(std::chrono::milliseconds wait = std::chrono::milliseconds(100)) {
            std::vector<TokenLogprob> lps;
            const auto now = Clock::now();
            if (s.stopping) {
                cancel();
                error = ApiError{503, "the server is shutting down; the request was cancelled", "server_error", "",
                                 "shutting_down"};
                return lps;
            }
            if (now >= deadline) {
                cancel();
                std::lock_guard<std::mutex> lk(s.stats_mutex);
                ++s.timeouts;
                error = ApiError{504, "the request took longer than the server's limit of " + json(s.opt.timeout_s).dump() +
                                          " s (--timeout) and was cancelled",
                                 "server_error", "", "timeout"};
                return lps;
            }
            std::deque<TokenEvent> events = ch->wait(std::min(deadline, now + wait));
            // Tokens computed from a file that changed underneath are not the model's.
            if (const std::string why = s.model.file().changed(); !why.empty()) {
                cancel();
                error = ApiError{500, why, "server_error", "", "model_file_changed"};
                return lps;
            }
            for (const TokenEvent& ev : events) {
                if (finish_reason) break;
                if (ev.token >= 0) {
                    ++n_generated;
                    if (job.logprobs) lps.push_back(logprob_of(ev));
                    if (!s.vocab.is_eog(ev.token) && text.append(piece(ev.token))) {
                        finish_reason = "stop";
                        stop_early();
                        break;
                    }
                }
                n_generated = std::max(n_generated, ev.n_generated);
                n_cached = ev.n_cached;
                if (ev.done) {
                    finished = true;
                    if (ev.finish == FinishReason::STOP) finish_reason = "stop";
                    else if (ev.finish == FinishReason::LENGTH) finish_reason = "length";
                    else if (ev.finish == FinishReason::ERROR)
                        error = ApiError{500, "generation failed: " + ev.error, "server_error", "", "generation_error"};
                    else if (!ev.error.empty())  // the client read too slowly
                        error = ApiError{503, "the request was cancelled: " + ev.error, "server_error", "", "slow_consumer"};
                    else
                        error = ApiError{503, "the request was cancelled by the server (shutting down)", "server_error", "",
                                         "cancelled"};
                }
            }
            return lps;
        }

        void count_disconnect() {
            cancel();
            std::lock_guard<std::mutex> lk(s.stats_mutex);
            ++s.disconnects;
        }

        // Whole responses: runs the request to its end. False when the client went away
        // meanwhile (the request is then cancelled).
        bool collect(const Connection* conn) {
            while (!over()) {
                for (TokenLogprob& t : step()) all_lp.push_back(std::move(t));
                if (conn && conn->peer_gone()) {
                    count_disconnect();
                    return false;
                }
            }
            return true;
        }

        json whole() const {
            const Usage usage{n_prompt, n_generated, n_cached};
            const std::vector<TokenLogprob>* lp = job.logprobs ? &all_lp : nullptr;
            SplitReply reply{"", text.text()};
            if (split) {
                reply = split_reasoning(text.text(), s.think, job.thought_open);
                if (raw) reply.content = raw_prefix + text.text();
            }
            json j;
            const ParsedReply r = tools ? parse_tool_calls(s.tool_format, reply.content) : ParsedReply{};
            if (!r.calls.empty())
                j = chat_response(rid, r.content, "tool_calls", lp, usage, tool_calls_json(r.calls, false), &reply.reasoning);
            else if (job.endpoint == Endpoint::CHAT)
                j = chat_response(rid, reply.content, finish_reason, lp, usage, json(), &reply.reasoning);
            else
                j = completion_response(rid, echo + text.text(), finish_reason, lp, echo.size(), usage);
            // The stop string that ended the reply (as vLLM's stop_reason).
            if (!text.matched().empty()) j["choices"][0]["stop_reason"] = text.matched();
            return j;
        }

        // The reply's content so far: the text, less the thought when it is split off.
        std::string content_so_far() const {
            if (!split) return text.text();
            return raw ? raw_prefix + text.text() : split->content();
        }

        // Tools, streamed: the content that can be sent now (never the start of a call;
        // whole UTF-8 characters).
        std::string tool_content_delta() {
            const std::string all = content_so_far();
            const size_t upto = utf8_complete_prefix(all, content_prefix(s.tool_format, all));
            if (upto <= shown) return "";
            std::string d = all.substr(shown, upto - shown);
            shown = upto;
            return d;
        }

        bool write(httplib::DataSink& sink, const std::string& data) { return sink.write(data.data(), data.size()); }
        bool write_event(httplib::DataSink& sink, const json& j) { return write(sink, "data: " + dump(j) + "\n\n"); }

        // Streams: each choice's text as it grows, in chunks that name the choice
        // (choices[].index; n > 1 interleaves them), each choice ended by its own
        // finish_reason. Per choice: where the next token's text starts (completion
        // logprobs), and whether its last chunk went out.
        size_t text_offset = 0;
        bool ended = false;

        // New text and logprobs of this choice as one chunk. False when the client went away.
        bool stream_step(httplib::DataSink& sink, int index, std::chrono::milliseconds wait) {
            const bool chat = job.endpoint == Endpoint::CHAT;
            // A choice may be over before its first chunk: start_more reads the first
            // choice's events until its first token, and a short reply ends in that read.
            std::vector<TokenLogprob> lps = over() ? std::vector<TokenLogprob>{} : step(wait);
            if (!all_lp.empty()) {  // tokens read before the stream began (start_more)
                lps.insert(lps.begin(), std::make_move_iterator(all_lp.begin()), std::make_move_iterator(all_lp.end()));
                all_lp.clear();
            }
            if (error) return true;
            if (!sink.is_writable()) return false;
            std::string delta = text.take(finish_reason != nullptr);
            std::string thought;  // reasoning_content, when the thought is split off
            if (split) {
                split->append(delta, finish_reason != nullptr);
                thought = split->take_reasoning();
                if (!raw) delta = split->take_content();
                else if (!raw_prefix.empty() && text_offset == 0) delta = raw_prefix + delta;
            }
            if (tools) delta = tool_content_delta();
            if (delta.empty() && thought.empty() && lps.empty()) return true;
            const std::vector<TokenLogprob>* lp = job.logprobs ? &lps : nullptr;
            json d = json::object();
            if (!thought.empty()) d["reasoning_content"] = thought;
            if (!delta.empty() || thought.empty()) d["content"] = delta;
            const bool ok = chat ? write_event(sink, chat_chunk(rid, d, nullptr, lp, job.include_usage, index))
                                 : write_event(sink, completion_chunk(rid, delta, nullptr, lp, text_offset, job.include_usage, index));
            text_offset += delta.size();
            return ok;
        }

        // The end of a choice that finished well: the rest of a reply with tool calls, its
        // calls, and the chunk with its finish_reason.
        bool stream_end(httplib::DataSink& sink, int index) {
            ended = true;
            const json empty = json::object();
            const char* reason = finish_reason;
            bool ok = true;
            if (tools) {
                // The reply is whole: the rest of the content, then its calls.
                const std::string all = content_so_far();
                const ParsedReply r = parse_tool_calls(s.tool_format, all);
                std::string rest;
                if (r.calls.empty()) rest = all.substr(std::min(shown, all.size()));
                else if (r.content.size() > shown && r.content.compare(0, shown, all, 0, shown) == 0)
                    rest = r.content.substr(shown);
                if (!rest.empty())
                    ok = write_event(sink, chat_chunk(rid, json{{"content", rest}}, nullptr, nullptr, job.include_usage, index));
                if (ok && !r.calls.empty()) {
                    ok = write_event(sink, chat_chunk(rid, json{{"tool_calls", tool_calls_json(r.calls, true)}}, nullptr, nullptr,
                                                      job.include_usage, index));
                    reason = "tool_calls";
                }
            }
            json last = job.endpoint == Endpoint::CHAT
                            ? chat_chunk(rid, empty, reason, nullptr, job.include_usage, index)
                            : completion_chunk(rid, "", finish_reason, nullptr, text_offset, job.include_usage, index);
            if (!text.matched().empty()) last["choices"][0]["stop_reason"] = text.matched();  // as in whole()
            return ok && write_event(sink, last);
        }

        // Streams the choices of one request to their end; true when the stream was
        // complete (sink.done() called), false when the client went away (all cancelled).
        static bool stream(std::vector<std::shared_ptr<Run>>& runs, httplib::DataSink& sink) {
            Run& first = *runs[0];
            const Job& job = first.job;
            const std::vector<TokenLogprob> none;
            bool ok = true;
            for (size_t i = 0; i < runs.size() && ok; ++i) {
                Run& r = *runs[i];
                r.rid = first.rid;  // one response: one id
                r.text_offset = r.echo.size();
                if (job.endpoint == Endpoint::CHAT)
                    ok = r.write_event(sink, chat_chunk(r.rid, json{{"role", "assistant"}, {"content", ""}}, nullptr,
                                                        job.logprobs ? &none : nullptr, job.include_usage, int(i)));
                else if (!r.echo.empty())
                    ok = r.write_event(sink, completion_chunk(r.rid, r.echo, nullptr, nullptr, 0, job.include_usage, int(i)));
            }
            const ApiError* error = nullptr;
            while (ok && !error) {
                size_t running = 0;
                for (const auto& r : runs) running += !r->ended;
                if (running == 0) break;
                // One wait of about 100 ms a round, shared among the running choices.
                const auto wait = std::chrono::milliseconds(std::max<long>(1, 100 / long(running)));
                for (size_t i = 0; i < runs.size() && ok && !error; ++i) {
                    Run& r = *runs[i];
                    if (r.ended) continue;
                    ok = r.stream_step(sink, int(i), wait);  // (a choice already over sends what is left)
                    if (r.error) error = &*r.error;
                    else if (ok && r.over()) ok = r.stream_end(sink, int(i));
                }
            }
            if (error && !sink.is_writable()) ok = false;  // cancelled because its client went away
            if (!ok || error)
                for (auto& r : runs) r->cancel();
            // The request ends here: it stops counting as in flight before its last bytes
            // go out, so that a client that read them finds its next request admitted.
            for (auto& r : runs) r->slot.reset();
            if (!ok) {  // the client went away
                first.count_disconnect();
                return false;
            }
            if (error) {
                first.write_event(sink, error_json(*error));
                first.write(sink, "data: [DONE]\n\n");
                sink.done();
                return true;
            }
            if (job.include_usage) {
                Usage u{first.n_prompt, 0, first.n_cached};
                for (const auto& r : runs) u.completion_tokens += r->n_generated;
                ok = first.write_event(sink, usage_chunk(first.rid, job.endpoint, u));
            }
            if (ok) ok = first.write(sink, "data: [DONE]\n\n");
            if (ok) sink.done();
            return ok;
        }
    };

    // n > 1: the other choices start once the first has read the prompt, so that they find
    // its pages in the prefix cache and compute only the prompt's last partial page. Each
    // has its own sampler (seed + i when a seed was given). False (first->error set) when
    // they cannot be queued.
    bool start_more(Run& first, const Job& job, const GenerationRequest& gr, int n_prompt, const std::shared_ptr<Slot>& slot,
                    std::vector<std::shared_ptr<Run>>& runs) {
        const Connection* conn = Connection::current();
        while (!first.over() && first.n_generated == 0) {
            for (TokenLogprob& t : first.step()) first.all_lp.push_back(std::move(t));
            if (conn && conn->peer_gone()) {
                first.count_disconnect();
                first.error = ApiError{499, "the client closed the connection", "invalid_request_error", "", "client_gone"};
            }
        }
        if (first.error) return false;
        std::vector<std::pair<GenerationRequest, std::shared_ptr<EventStream>>> more;
        std::vector<std::shared_ptr<Channel>> chs;
        for (int i = 1; i < job.n; ++i) {
            GenerationRequest g = gr;
            if (g.sampling.seed != 0xFFFFFFFFFFFFFFFFull) g.sampling.seed += i;
            auto c = std::make_shared<Channel>();
            chs.push_back(c);
            more.emplace_back(std::move(g), c);
        }
        std::vector<uint64_t> ids;
        try {
            ids = engine.submit_batch(std::move(more));
        } catch (const std::exception& e) {
            first.cancel();
            first.error = ApiError{503, std::string("the server is busy: ") + e.what(), "server_error", "", "queue_full"};
            return false;
        }
        for (size_t i = 0; i < ids.size(); ++i) {
            slot->add(ids[i]);
            runs.push_back(std::make_shared<Run>(*this, job, chs[i], ids[i], n_prompt, slot));
        }
        return true;
    }

};

HttpServer::HttpServer(Engine& engine, const Model& model, ServerOptions opt)
    : impl_(std::make_unique<Impl>(engine, model, std::move(opt))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::bind() {
    Impl& s = *impl_;
    if (s.opt.port == 0) {
        s.port = s.http.bind_to_any_port(s.opt.host);
        if (s.port < 0) fail("cannot listen on ", s.opt.host, " (any port); check --host");
    } else {
        if (!s.http.bind_to_port(s.opt.host, s.opt.port))
            fail("cannot listen on ", s.opt.host, ":", s.opt.port, " (is the port in use? pick another with --port)");
        s.port = s.opt.port;
    }
    s.http.after_bind();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::run() { impl_->http.listen_after_bind(); }

void HttpServer::serve_connection(int fd) { impl_->http.serve_socket(fd); }

void HttpServer::stop() {
    if (!impl_) return;
    impl_->stopping = true;
    if (impl_->http.is_running()) impl_->http.stop();
}

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
