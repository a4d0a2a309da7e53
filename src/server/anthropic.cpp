// The Messages API's replies and routes (anthropic.h): a chat completion, whole or
// streamed, reshaped into a Message or its events.
#if GLIA_HAVE_SERVER
#include "server/anthropic.h"

namespace glia::server::anthropic {

const char* error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

json error_body(int status, const std::string& message) {
    return json{{"type", "error"}, {"error", {{"type", error_type(status)}, {"message", message}}}};
}

namespace {

// The message id: the chat completion's, with the Messages API's prefix.
std::string message_id(const json& chat) {
    std::string id = chat.value("id", std::string());
    const size_t dash = id.find('-');
    return "msg_" + (dash == std::string::npos ? id : id.substr(dash + 1));
}

// finish_reason (and the stop string, when one ended the reply) as stop_reason.
json stop_reason(const json& choice) {
    const json fr = choice.value("finish_reason", json());
    if (choice.contains("stop_reason") && choice["stop_reason"].is_string()) return "stop_sequence";
    if (fr == "length") return "max_tokens";
    if (fr == "tool_calls") return "tool_use";
    return fr.is_null() ? json(nullptr) : json("end_turn");
}
json stop_sequence(const json& choice) {
    auto it = choice.find("stop_reason");
    return it != choice.end() && it->is_string() ? *it : json(nullptr);
}

json tool_input(const json& call) {
    const json fn = call.value("function", json::object());
    json input = json::parse(fn.value("arguments", std::string("{}")), nullptr, false);
    return input.is_object() ? input : json::object();
}

json usage_of(const json& u, int input_tokens) {
    return json{{"input_tokens", u.is_object() ? u.value("prompt_tokens", input_tokens) : input_tokens},
                {"output_tokens", u.is_object() ? u.value("completion_tokens", 0) : 0}};
}

std::string sse(const char* event, const json& data) { return std::string("event: ") + event + "\ndata: " + dump(data) + "\n\n"; }

// The events of one Messages stream, from the chat completion chunks.
class Shaper final : public StreamShaper {
public:
    explicit Shaper(int input_tokens) : input_tokens_(input_tokens) {}

    std::string event(const json& e) override {
        if (failed_) return "";
        if (e.contains("error")) {
            failed_ = true;
            const json& err = e["error"];
            const std::string msg = err.is_object() ? err.value("message", std::string("generation failed")) : "generation failed";
            const std::string code = err.is_object() ? err.value("code", std::string()) : "";
            const int status = code == "timeout" ? 504 : code == "shutting_down" || code == "slow_consumer" ? 503 : 500;
            return start(e) + sse("error", error_body(status, msg));
        }
        std::string out = start(e);
        if (e.contains("usage") && e["usage"].is_object()) usage_ = e["usage"];
        const json choices = e.value("choices", json::array());
        if (!choices.is_array() || choices.empty()) return out;
        const json& c = choices[0];
        const json d = c.value("delta", json::object());
        if (d.contains("reasoning_content") && d["reasoning_content"].is_string() && !d["reasoning_content"].get_ref<const std::string&>().empty())
            out += delta("thinking", {{"type", "thinking_delta"}, {"thinking", d["reasoning_content"]}});
        if (d.contains("content") && d["content"].is_string() && !d["content"].get_ref<const std::string&>().empty())
            out += delta("text", {{"type", "text_delta"}, {"text", d["content"]}});
        if (d.contains("tool_calls") && d["tool_calls"].is_array())
            for (const json& call : d["tool_calls"]) {
                out += close();
                const json fn = call.value("function", json::object());
                out += sse("content_block_start", {{"type", "content_block_start"}, {"index", index_},
                                                   {"content_block", {{"type", "tool_use"}, {"id", call.value("id", std::string())},
                                                                      {"name", fn.value("name", std::string())},
                                                                      {"input", json::object()}}}});
                out += sse("content_block_delta", {{"type", "content_block_delta"}, {"index", index_},
                                                   {"delta", {{"type", "input_json_delta"}, {"partial_json", tool_input(call).dump()}}}});
                open_ = "tool_use";
            }
        if (c.contains("finish_reason") && !c["finish_reason"].is_null()) {
            stop_reason_ = stop_reason(c);
            stop_sequence_ = stop_sequence(c);
        }
        return out;
    }

    std::string end() override {
        if (failed_) return "";
        std::string out = start(json::object()) + close();
        out += sse("message_delta", {{"type", "message_delta"},
                                     {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", stop_sequence_}}},
                                     {"usage", usage_of(usage_, input_tokens_)}});
        return out + sse("message_stop", {{"type", "message_stop"}});
    }

private:
    // message_start, before the first event.
    std::string start(const json& e) {
        if (started_) return "";
        started_ = true;
        const json message = {{"id", message_id(e)}, {"type", "message"}, {"role", "assistant"},
                              {"model", e.value("model", std::string())}, {"content", json::array()},
                              {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                              {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", 0}}}};
        return sse("message_start", {{"type", "message_start"}, {"message", message}});
    }
    std::string close() {
        if (open_.empty()) return "";
        open_.clear();
        return sse("content_block_stop", {{"type", "content_block_stop"}, {"index", index_++}});
    }
    // A delta of a thinking or text block, opening the block first when needed.
    std::string delta(const std::string& type, const json& d) {
        std::string out;
        if (open_ != type) {
            out += close();
            json block = type == "thinking" ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                            : json{{"type", "text"}, {"text", ""}};
            out += sse("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
            open_ = type;
        }
        return out + sse("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", d}});
    }

    int input_tokens_;
    bool started_ = false, failed_ = false;
    std::string open_;  // the type of the open block, "" for none
    int index_ = 0;     // the open (or next) block's index
    json usage_;
    json stop_reason_ = "end_turn", stop_sequence_ = nullptr;
};

void set_error(httplib::Response& res, int status, const std::string& message) {
    res.status = status;
    res.set_content(dump(error_body(status, message)), "application/json");
}

}  // namespace

json message_from_chat(const json& chat) {
    const json choices = chat.value("choices", json::array());
    const json c = choices.is_array() && !choices.empty() ? choices[0] : json::object();
    const json m = c.value("message", json::object());
    json content = json::array();
    if (m.contains("reasoning_content") && m["reasoning_content"].is_string() && !m["reasoning_content"].get_ref<const std::string&>().empty())
        content.push_back({{"type", "thinking"}, {"thinking", m["reasoning_content"]}, {"signature", ""}});
    if (m.contains("content") && m["content"].is_string() && !m["content"].get_ref<const std::string&>().empty())
        content.push_back({{"type", "text"}, {"text", m["content"]}});
    if (m.contains("tool_calls") && m["tool_calls"].is_array())
        for (const json& call : m["tool_calls"]) {
            const json fn = call.value("function", json::object());
            content.push_back({{"type", "tool_use"}, {"id", call.value("id", std::string())},
                               {"name", fn.value("name", std::string())}, {"input", tool_input(call)}});
        }
    return json{{"id", message_id(chat)},
                {"type", "message"},
                {"role", "assistant"},
                {"model", chat.value("model", std::string())},
                {"content", content},
                {"stop_reason", stop_reason(c)},
                {"stop_sequence", stop_sequence(c)},
                {"usage", usage_of(chat.value("usage", json()), 0)}};
}

std::shared_ptr<StreamShaper> stream_shaper(int input_tokens) { return std::make_shared<Shaper>(input_tokens); }

void add_routes(httplib::Server& http, Hooks hooks) {
    auto h = std::make_shared<Hooks>(std::move(hooks));
    http.Post("/v1/messages", [h](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
        try {
            const Translated t = translate_request(h->inner.read_body(req, res, reader), false);
            const std::string chat = t.chat.dump();
            const int input_tokens = t.stream ? h->count_tokens(chat) : 0;  // told first, in message_start
            httplib::Response inner;
            h->inner.generate(chat, Endpoint::CHAT, inner);
            relay(inner, res, "text/event-stream", stream_shaper(input_tokens),
                  [](int status, const json& body, httplib::Response& out) {
                      if (status >= 400) return set_error(out, status, error_message(body, "the request failed"));
                      out.status = status;
                      out.set_content(dump(message_from_chat(body)), "application/json");
                  });
        } catch (const ApiError& e) {
            set_error(res, e.status, e.message);
        }
    });
    http.Post("/v1/messages/count_tokens",
              [h](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
                  try {
                      const Translated t = translate_request(h->inner.read_body(req, res, reader), true);
                      res.set_content(dump(json{{"input_tokens", h->count_tokens(t.chat.dump())}}), "application/json");
                  } catch (const ApiError& e) {
                      set_error(res, e.status, e.message);
                  }
              });
}

}  // namespace glia::server::anthropic
#endif  // GLIA_HAVE_SERVER
