// POST /v1/embeddings (and ollama's /api/embed through it): inputs to vectors.
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

// The file's pooling key (<arch>.pooling_type: 1 mean, 3 last); decoder models without
// one pool their last token (what causal attention has seen the whole input for).
Pooling HttpServer::Impl::pooling() const {
    const int64_t t = model.file().get_or<int64_t>(model.profile().arch + ".pooling_type", 3);
    return t == 1 ? Pooling::MEAN : Pooling::LAST;
}

void HttpServer::Impl::embeddings(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    std::string text;
    try {
        text = read_body(req, res, reader);
    } catch (const ApiError& e) {
        return reject(res, e);
    }
    embeddings(text, res);
}

void HttpServer::Impl::embeddings(const std::string& text, httplib::Response& res) {
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
std::string HttpServer::Impl::base64_floats(const std::vector<float>& v) {
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

void HttpServer::Impl::wrong_input(const std::string& where) {
    throw_api(400, "'" + where + "' must be a string, an array of strings, an array of token ids or an array of those",
              "input", "invalid_type");
}
}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
