// The HTTP server's state and the parts of its work (server.h is the public face). One
// struct, its member functions in files by concern:
//   server.cpp             construction, admission (slots), statistics, /metrics, errors
//   server_routes.cpp      the route table and the small routes (/health, /props, /tokenize ...)
//   server_request.cpp     a generation request: body, prompt tokens, limits, submission
//   server_run.cpp         an accepted request's events turned into a reply, whole or streamed
//   server_embeddings.cpp  POST /v1/embeddings
#pragma once
#if GLIA_HAVE_SERVER

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/engine.h"
#include "server/browser_policy.h"
#include "server/connection.h"
#include "server/lora_api.h"
#include "server/ollama.h"
#include "server/openai.h"
#include "server/reasoning.h"
#include "server/relay.h"
#include "server/request_text.h"
#include "server/server.h"
#include "server/text_stream.h"
#include "server/tool_calls.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/vocab.h"

namespace glia::server {

namespace http_detail {

using Clock = std::chrono::steady_clock;

// A request's events (the engine's bounded queue; an HTTP thread drains it).
using Channel = EventStream;

// The error's JSON body and status on res.
void set_error(httplib::Response& res, const ApiError& e);
// The header value holds the token (case-insensitive).
bool has_token(std::string value, const char* token);
// The request comes with a body (a length, or chunks).
bool has_body(const httplib::Request& req);
// The connection closes after this response (what follows on it cannot be trusted).
void close_connection(httplib::Response& res);

}  // namespace http_detail

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

    std::atomic<bool> stopping{false};  // stop() was called: running streams end now
    std::mutex stats_mutex;
    std::map<int, uint64_t> http_status_counts;
    uint64_t rejected_by_server = 0;  // validation / limit errors on generation routes
    uint64_t timeouts = 0, disconnects = 0;
    LoraState lora_state{engine.options().lora};  // LoRA adapters: global scales (lora_api.h)

    Impl(Engine& e, const Model& m, ServerOptions o);

    // --- server.cpp
    // Cancels the requests whose client has gone (closed or reset its connection) and
    // stops counting them; their handlers notice and end on their own. Returns how many.
    int reclaim_gone();
    void count_status(int status);
    // A request body as a JSON object (its depth checked first), or a 400.
    json json_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader);
    static json json_body(const std::string& text);
    json model_json() const;
    bool known_model(const std::string& m) const;
    ApiError unknown_model(const std::string& m) const;
    // A refused request: its error, counted among the server's rejections.
    void reject(httplib::Response& res, const ApiError& e);
    std::string metrics();

    // --- server_routes.cpp
    void setup();
    int count_chat_tokens(const std::string& body);
    InnerApi inner_api();
    OllamaModel ollama_model() const;
    void serve_web_page();

    // --- server_embeddings.cpp
    // POST /v1/embeddings: {"input": string | [strings] | [ids] | [[ids]], "model",
    // "encoding_format": "float"}: at most kMaxEmbeddingInputs inputs (400 beyond). They go
    // to the engine in parts its queue takes, at most n_parallel + max_queue / 2 of them
    // queued or running at once (room is left for other clients), the next ones as the
    // earlier finish; the vectors come back in input order.
    static constexpr size_t kMaxEmbeddingInputs = 2048;
    Pooling pooling() const;
    void embeddings(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader);
    void embeddings(const std::string& text, httplib::Response& res);
    static std::string base64_floats(const std::vector<float>& v);
    [[noreturn]] static void wrong_input(const std::string& where);

    // --- server_request.cpp
    struct Run;
    std::vector<int32_t> prompt_tokens(Job& job);
    std::string read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader);
    void generate(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader, Endpoint ep);
    void generate(const std::string& body, httplib::Response& res, Endpoint ep);
    bool start_more(Run& first, const Job& job, const GenerationRequest& gr, int n_prompt, const std::shared_ptr<Slot>& slot,
                    std::vector<std::shared_ptr<Run>>& runs);

    // --- server_run.cpp
    // One accepted request: takes its events from the engine, builds the text.
    struct Run {
        Impl& s;
        Job job;
        std::shared_ptr<http_detail::Channel> ch;
        uint64_t id;
        int n_prompt;
        std::shared_ptr<void> slot;
        ResponseId rid;
        TextStream text;
        http_detail::Clock::time_point deadline;
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
        // Streams: each choice's text as it grows, in chunks that name the choice
        // (choices[].index; n > 1 interleaves them), each choice ended by its own
        // finish_reason. Per choice: where the next token's text starts (completion
        // logprobs), and whether its last chunk went out.
        size_t text_offset = 0;
        bool ended = false;

        Run(Impl& srv, Job j, std::shared_ptr<http_detail::Channel> c, uint64_t i, int np, std::shared_ptr<void> sl);
        ~Run() { cancel(); }

        std::string piece(int32_t tok) const;
        static json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index);
        void cancel();
        void stop_early();
        bool over() const { return finish_reason || error; }
        TokenLogprob logprob_of(const TokenEvent& ev) const;
        std::vector<TokenLogprob> step(std::chrono::milliseconds wait = std::chrono::milliseconds(100));
        void count_disconnect();
        bool collect(const Connection* conn);
        json whole() const;
        std::string content_so_far() const;
        std::string tool_content_delta();
        bool write(httplib::DataSink& sink, const std::string& data) { return sink.write(data.data(), data.size()); }
        bool write_event(httplib::DataSink& sink, const json& j) { return write(sink, "data: " + dump(j) + "\n\n"); }
        bool stream_step(httplib::DataSink& sink, int index, std::chrono::milliseconds wait);
        bool stream_end(httplib::DataSink& sink, int index);
        static bool stream(std::vector<std::shared_ptr<Run>>& runs, httplib::DataSink& sink);
    };
};

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
