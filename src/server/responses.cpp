// The Responses API's objects, events and routes (responses.h): a chat completion, whole
// or streamed, reshaped into a response object or its events.
#if GLIA_HAVE_SERVER
#include "server/responses.h"

#include "server/responses_items.h"

namespace glia::server::responses {
namespace {

// The response's id without its prefix: the chat completion's.
std::string base_of(const json& chat) {
    std::string id = chat.value("id", std::string());
    const size_t dash = id.find('-');
    return dash == std::string::npos ? id : id.substr(dash + 1);
}

// Item ids: "msg_<base>" for the first message, "msg_<base>_1" for the next ...
struct ItemIds {
    std::string base;
    int msg = 0, rs = 0, fc = 0;
    std::string next(const char* prefix, int& n) {
        std::string id = prefix;
        id += base;
        if (n) id += "_" + std::to_string(n);
        ++n;
        return id;
    }
};

json usage_of(const json& u) {
    if (!u.is_object()) return nullptr;
    const int in = u.value("prompt_tokens", 0), out = u.value("completion_tokens", 0);
    int cached = 0;
    if (auto d = u.find("prompt_tokens_details"); d != u.end() && d->is_object()) cached = d->value("cached_tokens", 0);
    return json{{"input_tokens", in},
                {"input_tokens_details", {{"cached_tokens", cached}}},
                {"output_tokens", out},
                {"output_tokens_details", {{"reasoning_tokens", 0}}},
                {"total_tokens", in + out}};
}

const std::string& str(const json& o, const char* key) {
    static const std::string empty;
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get_ref<const std::string&>() : empty;
}

json text_part(const std::string& text) {
    return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}
json reasoning_part(const std::string& text) { return {{"type", "reasoning_text"}, {"text", text}}; }

json message_item(const std::string& id, const char* status, json content) {
    return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}
json reasoning_item(const std::string& id, json content) {
    return {{"id", id}, {"type", "reasoning"}, {"summary", json::array()}, {"content", std::move(content)}};
}
json call_item(const std::string& id, const char* status, const json& call) {
    const json fn = call.value("function", json::object());
    return {{"id", id},         {"type", "function_call"}, {"status", status}, {"arguments", str(fn, "arguments")},
            {"call_id", str(call, "id")}, {"name", str(fn, "name")}};
}

// The response object: the request's settings (t.echo) around the output.
json response_object(const Translated& t, const std::string& base, const json& created, const json& model, const char* status,
                     json output, json usage) {
    const json& e = t.echo;
    const bool cut = std::string(status) == "incomplete";
    return {{"id", "resp_" + base},
            {"object", "response"},
            {"created_at", created},
            {"status", status},
            {"background", false},
            {"error", nullptr},
            {"incomplete_details", cut ? json{{"reason", "max_output_tokens"}} : json(nullptr)},
            {"instructions", e.value("instructions", json())},
            {"max_output_tokens", e.value("max_output_tokens", json())},
            {"model", model},
            {"output", std::move(output)},
            {"parallel_tool_calls", e.value("parallel_tool_calls", json(true))},
            {"previous_response_id", e.value("previous_response_id", json())},
            {"reasoning", e.value("reasoning", json())},
            {"store", t.store},
            {"temperature", e.value("temperature", json())},
            {"text", e.value("text", json())},
            {"tool_choice", e.value("tool_choice", json("auto"))},
            {"tools", e.value("tools", json::array())},
            {"top_p", e.value("top_p", json())},
            {"truncation", "disabled"},
            {"usage", std::move(usage)},
            {"user", e.value("user", json())},
            {"metadata", e.value("metadata", json::object())}};
}

const char* status_of(const json& finish_reason) { return finish_reason == "length" ? "incomplete" : "completed"; }

void keep(Store* store, const Translated& t, const json& response, const json& reply) {
    if (!store || !t.store) return;
    json messages = t.history;
    messages.push_back(reply);
    const std::string id = response["id"].get<std::string>();
    store->put(id, {response, std::move(messages), with_ids(t.input_items, id.substr(id.find('_') + 1))});
}

std::string sse(json data, int& seq) {
    data["sequence_number"] = seq++;
    const std::string type = data["type"].get<std::string>();
    return "event: " + type + "\ndata: " + dump(data) + "\n\n";
}

// The events of one Responses stream, from the chat completion chunks.
class Shaper final : public StreamShaper {
public:
    Shaper(const Translated& t, std::shared_ptr<Store> store) : t_(t), store_(std::move(store)) {}

    std::string event(const json& e) override {
        if (failed_) return "";
        if (e.contains("error")) {
            failed_ = true;
            const json& err = e["error"];
            const bool obj = err.is_object();
            std::string out = start(e);
            return out + sse({{"type", "error"},
                                   {"code", obj ? err.value("code", json("server_error")) : json("server_error")},
                                   {"message", obj ? err.value("message", std::string("generation failed")) : "generation failed"},
                                   {"param", nullptr}},
                                  seq_);
        }
        std::string out = start(e);
        if (e.contains("usage") && e["usage"].is_object()) usage_ = e["usage"];
        const json choices = e.value("choices", json::array());
        if (!choices.is_array() || choices.empty() || !choices[0].is_object()) return out;
        const json& c = choices[0];
        const json d = c.value("delta", json::object());
        if (!str(d, "reasoning_content").empty()) out += text("reasoning", str(d, "reasoning_content"));
        if (!str(d, "content").empty()) out += text("message", str(d, "content"));
        if (d.contains("tool_calls") && d["tool_calls"].is_array())
            for (const json& call : d["tool_calls"]) out += function_call(call);
        if (c.contains("finish_reason") && !c["finish_reason"].is_null()) finish_ = c["finish_reason"];
        return out;
    }

    std::string end() override {
        if (failed_) return "";
        const char* status = status_of(finish_);
        std::string out = start(json::object());
        out += close(status);
        if (!has_message_ && !reply_.contains("tool_calls")) {  // an empty reply is an empty message
            out += open("message");
            out += close(status);
        }
        const json response = response_object(t_, ids_.base, created_, model_, status, items_, usage_of(usage_));
        keep(store_.get(), t_, response, reply_);
        return out + sse({{"type", status == std::string("completed") ? "response.completed" : "response.incomplete"},
                          {"response", response}},
                         seq_);
    }

private:
    // response.created and response.in_progress, before the first event.
    std::string start(const json& e) {
        if (started_) return "";
        started_ = true;
        ids_.base = base_of(e);
        created_ = e.value("created", json(0));
        model_ = e.value("model", json(""));
        const json r = response_object(t_, ids_.base, created_, model_, "in_progress", json::array(), nullptr);
        std::string out = sse({{"type", "response.created"}, {"response", r}}, seq_);
        return out + sse({{"type", "response.in_progress"}, {"response", r}}, seq_);
    }

    json added() const { return {{"item_id", id_}, {"output_index", items_.size()}, {"content_index", 0}}; }

    // Opens a reasoning or message item with its one content part.
    std::string open(const std::string& kind) {
        kind_ = kind;
        text_.clear();
        const bool msg = kind == "message";
        json item = msg ? message_item(id_ = ids_.next("msg_", ids_.msg), "in_progress", json::array())
                        : reasoning_item(id_ = ids_.next("rs_", ids_.rs), json::array());
        if (msg) has_message_ = true;
        json part = added();
        part["type"] = "response.content_part.added";
        part["part"] = msg ? text_part("") : reasoning_part("");
        std::string out = sse({{"type", "response.output_item.added"}, {"output_index", items_.size()}, {"item", item}}, seq_);
        return out + sse(part, seq_);
    }

    std::string close(const char* status) {
        if (kind_.empty()) return "";
        const bool msg = kind_ == "message";
        kind_.clear();
        json done = added();
        done["type"] = msg ? "response.output_text.done" : "response.reasoning_text.done";
        done["text"] = text_;
        if (msg) done["logprobs"] = json::array();
        json part = added();
        part["type"] = "response.content_part.done";
        part["part"] = msg ? text_part(text_) : reasoning_part(text_);
        const json item = msg ? message_item(id_, status, json::array({text_part(text_)}))
                              : reasoning_item(id_, json::array({reasoning_part(text_)}));
        std::string out = sse(done, seq_);
        out += sse(part, seq_);
        out += sse({{"type", "response.output_item.done"}, {"output_index", items_.size()}, {"item", item}}, seq_);
        items_.push_back(item);
        return out;
    }

    std::string text(const std::string& kind, const std::string& delta) {
        std::string out;
        if (kind_ != kind) {
            out += close("completed");
            out += open(kind);
        }
        text_ += delta;
        const char* key = kind == "message" ? "content" : "reasoning_content";
        reply_[key] = str(reply_, key) + delta;
        json d = added();
        d["type"] = kind == "message" ? "response.output_text.delta" : "response.reasoning_text.delta";
        d["delta"] = delta;
        if (kind == "message") d["logprobs"] = json::array();
        return out + sse(d, seq_);
    }

    std::string function_call(const json& call) {
        std::string out = close("completed");
        if (!call.is_object()) return out;
        json c = call;
        c.erase("index");
        reply_["tool_calls"].push_back(c);
        const std::string id = ids_.next("fc_", ids_.fc);
        const json item = call_item(id, "completed", c);
        json pending = item;
        pending["status"] = "in_progress";
        pending["arguments"] = "";
        const size_t at = items_.size();
        out += sse({{"type", "response.output_item.added"}, {"output_index", at}, {"item", pending}}, seq_);
        out += sse({{"type", "response.function_call_arguments.delta"}, {"item_id", id}, {"output_index", at},
                    {"delta", item["arguments"]}}, seq_);
        out += sse({{"type", "response.function_call_arguments.done"}, {"item_id", id}, {"output_index", at},
                    {"name", item["name"]}, {"arguments", item["arguments"]}}, seq_);
        out += sse({{"type", "response.output_item.done"}, {"output_index", at}, {"item", item}}, seq_);
        items_.push_back(item);
        return out;
    }

    const Translated t_;
    std::shared_ptr<Store> store_;
    bool started_ = false, failed_ = false, has_message_ = false;
    int seq_ = 0;
    ItemIds ids_;
    json created_, model_, usage_, finish_;
    json items_ = json::array();
    std::string kind_, id_, text_;  // the open item: "reasoning" / "message" ("" for none), its id and text
    json reply_ = {{"role", "assistant"}, {"content", ""}};  // the reply as a chat message
};

// The chat route's error as this route's: max_tokens is max_output_tokens here.
json request_error(int status, json body) {
    if (!body.contains("error") || !body["error"].is_object())
        return error_json({status, error_message(body, "the request failed"), status >= 500 ? "server_error" : "invalid_request_error", "", ""});
    json& e = body["error"];
    if (e.value("param", json()) == "max_tokens") {
        e["param"] = "max_output_tokens";
        std::string m = e.value("message", std::string());
        if (const size_t at = m.find("'max_tokens'"); at != std::string::npos) m.replace(at, 12, "'max_output_tokens'");
        e["message"] = m;
    }
    return body;
}

void set_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(dump(error_json(e)), "application/json");
}

}  // namespace

json assistant_message(const json& chat) {
    const json choices = chat.value("choices", json::array());
    const json c = choices.is_array() && !choices.empty() ? choices[0] : json::object();
    const json m = c.value("message", json::object());
    json out = {{"role", "assistant"}, {"content", str(m, "content")}};
    if (m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty()) out["tool_calls"] = m["tool_calls"];
    if (!str(m, "reasoning_content").empty()) out["reasoning_content"] = m["reasoning_content"];
    return out;
}

json response_from_chat(const json& chat, const Translated& t) {
    const json choices = chat.value("choices", json::array());
    const json c = choices.is_array() && !choices.empty() ? choices[0] : json::object();
    const char* status = status_of(c.value("finish_reason", json()));
    const json m = assistant_message(chat);
    ItemIds ids{base_of(chat)};
    json output = json::array();
    if (!str(m, "reasoning_content").empty())
        output.push_back(reasoning_item(ids.next("rs_", ids.rs), json::array({reasoning_part(str(m, "reasoning_content"))})));
    if (!str(m, "content").empty() || !m.contains("tool_calls"))
        output.push_back(message_item(ids.next("msg_", ids.msg), status, json::array({text_part(str(m, "content"))})));
    if (m.contains("tool_calls"))
        for (const json& call : m["tool_calls"]) output.push_back(call_item(ids.next("fc_", ids.fc), "completed", call));
    return response_object(t, ids.base, chat.value("created", json(0)), chat.value("model", json("")), status, std::move(output),
                           usage_of(chat.value("usage", json())));
}

std::shared_ptr<StreamShaper> stream_shaper(const Translated& t, std::shared_ptr<Store> store) {
    return std::make_shared<Shaper>(t, std::move(store));
}

void add_routes(httplib::Server& http, InnerApi inner, std::shared_ptr<Store> store) {
    auto api = std::make_shared<InnerApi>(std::move(inner));
    http.Post("/v1/responses", [api, store](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
        try {
            const Translated t = translate_request(api->read_body(req, res, reader), store.get());
            httplib::Response chat;
            api->generate(t.chat.dump(), Endpoint::CHAT, chat);
            relay(chat, res, "text/event-stream", stream_shaper(t, store), [&t, &store](int status, const json& body, httplib::Response& out) {
                out.status = status;
                if (status >= 400) {  // the chat route's error, already in OpenAI's shape
                    out.set_content(dump(request_error(status, body)), "application/json");
                    return;
                }
                const json response = response_from_chat(body, t);
                keep(store.get(), t, response, assistant_message(body));
                out.set_content(dump(response), "application/json");
            });
        } catch (const ApiError& e) {
            set_error(res, e);
        }
    });
    auto not_found = [](const std::string& id) {
        return ApiError{404, "no response with id \"" + id.substr(0, 80) + "\" is stored here", "invalid_request_error", "response_id",
                        "not_found"};
    };
    http.Get(R"(/v1/responses/([^/]+))", [store, not_found](const httplib::Request& req, httplib::Response& res) {
        const std::string id = req.matches[1];
        if (auto s = store->get(id)) return res.set_content(dump(s->response), "application/json");
        set_error(res, not_found(id));
    });
    http.Get(R"(/v1/responses/([^/]+)/input_items)", [store, not_found](const httplib::Request& req, httplib::Response& res) {
        const std::string id = req.matches[1];
        const std::optional<json> items = store->input_items(id);
        if (!items) return set_error(res, not_found(id));
        try {
            res.set_content(dump(list_input_items(*items, req.params)), "application/json");
        } catch (const ApiError& e) {
            set_error(res, e);
        }
    });
    http.Delete(R"(/v1/responses/([^/]+))", [store, not_found](const httplib::Request& req, httplib::Response& res) {
        const std::string id = req.matches[1];
        if (!store->erase(id)) return set_error(res, not_found(id));
        res.set_content(dump(json{{"id", id}, {"object", "response"}, {"deleted", true}}), "application/json");
    });
}

}  // namespace glia::server::responses
#endif  // GLIA_HAVE_SERVER
