// A generation request: its body read under the limits, its prompt's tokens, its
// limits checked, its admission, its submission to the engine, and its reply, whole or streamed.
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

// The prompt's token ids. A completion's prompt is parsed for special tokens (a
// client may send control tokens, as with the reference's servers); in a chat, only
// the template's own text is: message contents stay text (tok::PromptTokenizer).
// A chat's job gets thought_open: whether the rendered prompt opened a thought.
std::vector<int32_t> HttpServer::Impl::prompt_tokens(Job& job) {
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

// The request body, at most --max-body bytes, read here rather than by httplib: its
// own reading limits only bodies with a Content-Length (a chunked one was read whole,
// whatever its size), waits for the connection to close when a POST has neither
// header, and applies an 8 KiB limit of its own to form-encoded bodies (what `curl -d`
// sends, JSON included). A body refused before it is read whole leaves the connection
// unusable: it is closed after the response.
std::string HttpServer::Impl::read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
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

void HttpServer::Impl::generate(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader, Endpoint ep) {
    std::string body;
    try {
        body = read_body(req, res, reader);
    } catch (const ApiError& e) {
        return reject(res, e);
    }
    generate(body, res, ep);
}

// A generation request's body (the other APIs' routes run theirs here too: relay.h).
void HttpServer::Impl::generate(const std::string& body, httplib::Response& res, Endpoint ep) {
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

// n > 1: the other choices start once the first has read the prompt, so that they find
// its pages in the prefix cache and compute only the prompt's last partial page. Each
// has its own sampler (seed + i when a seed was given). False (first->error set) when
// they cannot be queued.
bool HttpServer::Impl::start_more(Run& first, const Job& job, const GenerationRequest& gr, int n_prompt, const std::shared_ptr<Slot>& slot,
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
}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
