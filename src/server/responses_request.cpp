// A Responses request, validated and translated into a chat completions body (responses.h).
#if GLIA_HAVE_SERVER
#include <cctype>
#include <cmath>
#include <set>

#include "server/json_body.h"
#include "server/responses.h"
#include "server/responses_items.h"

namespace glia::server::responses {
namespace {

[[noreturn]] void missing(const std::string& field) { throw_api(400, "'" + field + "' is required", field, "missing_field"); }

const json* field(const json& o, const char* name) {
    auto it = o.find(name);
    return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string at(const std::string& where, const char* name) { return where.empty() ? name : where + "." + name; }
std::string at(const std::string& where, size_t i) { return where + "[" + std::to_string(i) + "]"; }

const std::string& need_string(const json& o, const char* name, const std::string& where) {
    const json* v = field(o, name);
    if (!v) missing(at(where, name));
    if (!v->is_string()) wrong_type(at(where, name), "a string", *v);
    return v->get_ref<const std::string&>();
}

// An optional string field; `fallback` when absent.
std::string opt_string(const json& o, const char* name, const std::string& where, const std::string& fallback = "") {
    const json* v = field(o, name);
    if (!v) return fallback;
    if (!v->is_string()) wrong_type(at(where, name), "a string", *v);
    return v->get<std::string>();
}

std::string quoted(const std::string& s) {
    std::string q = "\"";
    q.append(s, 0, 64);
    q += '"';
    return q;
}

// A message's content: a string, or text parts (input_text, output_text; refusal for the
// assistant) joined by `sep`.
std::string text_parts(const json& v, const std::string& where, bool assistant, const char* sep) {
    if (v.is_string()) return v.get<std::string>();
    if (!v.is_array()) wrong_type(where, "a string or an array of content parts", v);
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string w = at(where, i);
        if (!v[i].is_object()) wrong_type(w, "an object (a content part)", v[i]);
        const std::string& t = need_string(v[i], "type", w);
        if (i) s += sep;
        if (t == "input_text" || t == "output_text") s += need_string(v[i], "text", w);
        else if (t == "refusal" && assistant) s += need_string(v[i], "refusal", w);
        else invalid_value(w + ".type", "is " + quoted(t) + "; this server takes input_text and output_text parts" +
                                  (assistant ? " (and refusal)" : "") + " here");
    }
    return s;
}

// The conversation's messages from the input items, in order. Consecutive assistant
// items (reasoning, a message, function calls) make one assistant message.
class Conversation {
public:
    Conversation(json& out, const Store* store) : out_(out), store_(store) {}

    // Adds one input item; returns it as the response keeps it (responses_items.h).
    json item(const json& x, const std::string& w) {
        if (!x.is_object()) wrong_type(w, "an object (an input item)", x);
        const std::string type = opt_string(x, "type", w, "message");
        if (type == "message") message(x, w);
        else if (type == "function_call") call(x, w);
        else if (type == "function_call_output") output(x, w);
        else if (type == "reasoning") reasoning(x, w);
        else if (type == "item_reference") return item(referenced(x, w), w);
        else invalid_value(w + ".type", "is " + quoted(type) +
                                  "; this server takes message, function_call, function_call_output, reasoning and item_reference items");
        return input_item(x);
    }

    void flush() {
        if (!cur_.is_null()) out_.push_back(std::move(cur_));
        cur_ = nullptr;
    }

private:
    json& assistant() {
        if (cur_.is_null()) cur_ = {{"role", "assistant"}, {"content", ""}};
        return cur_;
    }
    bool has(const char* key) const { return !cur_.is_null() && cur_.contains(key); }

    void message(const json& x, const std::string& w) {
        const std::string& role = need_string(x, "role", w);
        const json* c = field(x, "content");
        if (!c) missing(w + ".content");
        if (role == "assistant") {
            if (has("tool_calls")) flush();  // text after calls starts the next turn
            json& a = assistant();
            a["content"] = a["content"].get<std::string>() + text_parts(*c, w + ".content", true, "");
            return;
        }
        if (role != "user" && role != "system" && role != "developer")
            invalid_value(w + ".role", "is " + quoted(role) + "; expected user, assistant, system or developer");
        flush();
        out_.push_back({{"role", role == "user" ? "user" : "system"}, {"content", text_parts(*c, w + ".content", false, "\n")}});
    }

    void call(const json& x, const std::string& w) {
        const std::string& id = need_string(x, "call_id", w);
        const std::string& name = need_string(x, "name", w);
        const std::string& args = need_string(x, "arguments", w);
        json& a = assistant();
        if (!a.contains("tool_calls")) a["tool_calls"] = json::array();
        a["tool_calls"].push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}});
    }

    void output(const json& x, const std::string& w) {
        const std::string& id = need_string(x, "call_id", w);
        const json* o = field(x, "output");
        if (!o) missing(w + ".output");
        flush();
        out_.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", text_parts(*o, w + ".output", false, "\n")}});
    }

    // A thought: its reasoning_text content, else its summary, as the assistant's
    // reasoning_content.
    void reasoning(const json& x, const std::string& w) {
        std::string thought;
        for (const char* key : {"content", "summary"}) {
            const json* parts = field(x, key);
            if (!parts) continue;
            const std::string wk = at(w, key);
            if (!parts->is_array()) wrong_type(wk, "an array", *parts);
            std::string s;
            for (size_t i = 0; i < parts->size(); ++i) {
                const json& p = (*parts)[i];
                if (!p.is_object()) wrong_type(at(wk, i), "an object", p);
                const std::string& t = need_string(p, "type", at(wk, i));
                if (t != "reasoning_text" && t != "summary_text")
                    invalid_value(at(wk, i) + ".type", "is " + quoted(t) + "; expected reasoning_text or summary_text");
                s += need_string(p, "text", at(wk, i));
            }
            if (thought.empty()) thought = s;
        }
        if (has("tool_calls") || (!cur_.is_null() && !cur_["content"].get_ref<const std::string&>().empty())) flush();
        if (!thought.empty()) {
            json& a = assistant();
            a["reasoning_content"] = a.value("reasoning_content", std::string()) + thought;
        }
    }

    // An output item of a stored response, by its id: "msg_<base>", "fc_<base>_1" ... are
    // items of the response "resp_<base>" (responses.cpp names them so).
    json referenced(const json& x, const std::string& w) const {
        const std::string& id = need_string(x, "id", w);
        const size_t a = id.find('_'), b = a == std::string::npos ? a : id.find('_', a + 1);
        if (store_ && a != std::string::npos) {
            const std::string response = "resp_" + id.substr(a + 1, b == std::string::npos ? b : b - a - 1);
            if (std::optional<json> item = store_->output_item(response, id); item && item->value("type", std::string()) != "item_reference")
                return *item;
        }
        throw_api(404, "'" + w + ".id' is " + quoted(id) + ": no item of a stored response has that id", w + ".id", "item_not_found");
    }

    json& out_;
    const Store* store_;
    json cur_;
};

// A function name as OpenAI accepts it: 1 to 64 of [A-Za-z0-9_.-].
bool valid_name(const std::string& n) {
    if (n.empty() || n.size() > 64) return false;
    for (unsigned char c : n)
        if (!std::isalnum(c) && c != '_' && c != '.' && c != '-') return false;
    return true;
}

void tools_of(const json& body, json& chat, json& echo) {
    std::set<std::string> names;
    echo["tools"] = json::array();
    if (const json* t = field(body, "tools")) {
        if (!t->is_array()) wrong_type("tools", "an array", *t);
        json fns = json::array();
        for (size_t i = 0; i < t->size(); ++i) {
            const std::string w = at("tools", i);
            const json& x = (*t)[i];
            if (!x.is_object()) wrong_type(w, "an object", x);
            const std::string& type = need_string(x, "type", w);
            if (type != "function")
                invalid_value(w + ".type", "is " + quoted(type) + "; this server runs only function tools (name, description, parameters)");
            const std::string& name = need_string(x, "name", w);
            if (!valid_name(name)) invalid_value(w + ".name", "is " + quoted(name) + "; a function name is 1 to 64 of A-Z a-z 0-9 _ . -");
            if (!names.insert(name).second) invalid_value(w + ".name", "is " + quoted(name) + ", the name of an earlier tool; names must be unique");
            json fn = {{"name", name}};
            const std::string desc = opt_string(x, "description", w);
            if (!desc.empty()) fn["description"] = desc;
            json params = {{"type", "object"}, {"properties", json::object()}};
            if (const json* p = field(x, "parameters")) {
                if (!p->is_object()) wrong_type(w + ".parameters", "an object (a JSON schema)", *p);
                params = *p;
            }
            fn["parameters"] = params;
            if (const json* s = field(x, "strict"); s && !s->is_boolean()) wrong_type(w + ".strict", "a boolean", *s);
            fns.push_back({{"type", "function"}, {"function", fn}});
            echo["tools"].push_back({{"type", "function"}, {"name", name}, {"description", desc.empty() ? json(nullptr) : json(desc)},
                                     {"parameters", params}, {"strict", x.value("strict", json(nullptr))}});
        }
        if (!fns.empty()) chat["tools"] = fns;
    }
    echo["tool_choice"] = "auto";
    if (const json* c = field(body, "tool_choice")) {
        if (c->is_string()) {
            const std::string v = c->get<std::string>();
            if (v != "none" && v != "auto" && v != "required") invalid_value("tool_choice", "is " + quoted(v) + "; expected none, auto, required or a function");
            if (v == "required" && names.empty()) invalid_value("tool_choice", "asks for a tool call but 'tools' is empty");
            chat["tool_choice"] = v;
        } else if (c->is_object()) {
            const std::string& type = need_string(*c, "type", "tool_choice");
            if (type != "function") invalid_value("tool_choice.type", "is " + quoted(type) + "; this server takes function");
            const std::string& name = need_string(*c, "name", "tool_choice");
            if (!names.count(name)) invalid_value("tool_choice.name", "is " + quoted(name) + ", not one of the tools");
            chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", name}}}};
        } else {
            wrong_type("tool_choice", "a string or an object", *c);
        }
        echo["tool_choice"] = *c;
    }
}

// text.format as response_format.
void format_of(const json& body, json& chat, json& echo) {
    echo["text"] = {{"format", {{"type", "text"}}}};
    const json* text = field(body, "text");
    if (!text) return;
    if (!text->is_object()) wrong_type("text", "an object", *text);
    if (const json* v = field(*text, "verbosity"); v && !v->is_string()) wrong_type("text.verbosity", "a string", *v);
    const json* f = field(*text, "format");
    if (!f) return;
    if (!f->is_object()) wrong_type("text.format", "an object", *f);
    const std::string& type = need_string(*f, "type", "text.format");
    if (type == "json_object") {
        chat["response_format"] = {{"type", "json_object"}};
    } else if (type == "json_schema") {
        const json* schema = field(*f, "schema");
        if (!schema) missing("text.format.schema");
        if (!schema->is_object()) wrong_type("text.format.schema", "an object (a JSON schema)", *schema);
        json js = {{"name", opt_string(*f, "name", "text.format", "response")}, {"schema", *schema}};
        if (const json* s = field(*f, "strict")) {
            if (!s->is_boolean()) wrong_type("text.format.strict", "a boolean", *s);
            js["strict"] = *s;
        }
        if (field(*f, "description")) js["description"] = opt_string(*f, "description", "text.format");
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", js}};
    } else if (type != "text") {
        invalid_value("text.format.type", "is " + quoted(type) + "; expected text, json_object or json_schema");
    }
    echo["text"] = {{"format", *f}};
}


}  // namespace

Translated translate_request(const std::string& text, const Store* store) {
    json body = parse_body_object(text);  // depth first, then errors that say where (json_body.h)

    Translated t;
    json& chat = t.chat;
    json& echo = t.echo;
    chat = json::object();
    echo = json::object();
    const json* model = field(body, "model");
    if (!model) missing("model");
    if (!model->is_string()) wrong_type("model", "a string", *model);
    chat["model"] = *model;

    // The conversation: the previous response's, then the input.
    t.history = json::array();
    echo["previous_response_id"] = nullptr;
    if (const json* prev = field(body, "previous_response_id")) {
        if (!prev->is_string()) wrong_type("previous_response_id", "a string", *prev);
        const std::string& id = prev->get_ref<const std::string&>();
        std::optional<Stored> s = store ? store->get(id) : std::nullopt;
        if (!s)
            throw_api(404, "'previous_response_id' is " + quoted(id) + ": no response of that id is stored here (responses are kept in memory, "
                           "a bounded number of them, and not at all with store: false)",
                      "previous_response_id", "previous_response_not_found");
        t.history = s->messages;
        echo["previous_response_id"] = id;
    }
    if (const json* in = field(body, "input")) {
        if (in->is_string()) {
            t.history.push_back({{"role", "user"}, {"content", *in}});
            t.input_items.push_back(input_item({{"type", "message"}, {"role", "user"}, {"content", *in}}));
        } else if (in->is_array()) {
            Conversation conv(t.history, store);
            for (size_t i = 0; i < in->size(); ++i) t.input_items.push_back(conv.item((*in)[i], at("input", i)));
            conv.flush();
        } else {
            wrong_type("input", "a string or an array of input items", *in);
        }
    }
    if (t.history.empty()) missing("input");
    json messages = json::array();
    echo["instructions"] = nullptr;
    if (const json* ins = field(body, "instructions")) {
        if (!ins->is_string()) wrong_type("instructions", "a string", *ins);
        if (!ins->get_ref<const std::string&>().empty()) messages.push_back({{"role", "system"}, {"content", *ins}});
        echo["instructions"] = *ins;
    }
    for (const json& m : t.history) messages.push_back(m);
    chat["messages"] = std::move(messages);

    tools_of(body, chat, echo);
    format_of(body, chat, echo);
    echo["max_output_tokens"] = nullptr;
    if (const json* m = field(body, "max_output_tokens")) {
        if (!m->is_number_integer()) wrong_type("max_output_tokens", "an integer", *m);
        if ((m->is_number_unsigned() && m->get<uint64_t>() > uint64_t(INT32_MAX)) || m->get<int64_t>() < 1 || m->get<int64_t>() > INT32_MAX)
            invalid_value("max_output_tokens", "must be between 1 and " + std::to_string(INT32_MAX) + ", got " + m->dump());
        chat["max_tokens"] = *m;
        echo["max_output_tokens"] = *m;
    }
    echo["temperature"] = nullptr;
    echo["top_p"] = nullptr;
    if (field(body, "temperature")) echo["temperature"] = chat["temperature"] = number_between(body, "temperature", 0, 2);
    if (field(body, "top_p")) echo["top_p"] = chat["top_p"] = number_between(body, "top_p", 0, 1);
    // The chat route's own sampling fields (not in the Responses API), validated there.
    for (const char* k : {"stop", "seed", "top_k", "min_p", "presence_penalty", "frequency_penalty", "lora"})
        if (const json* v = field(body, k)) chat[k] = *v;
    if (const json* s = field(body, "stream")) {
        if (!s->is_boolean()) wrong_type("stream", "a boolean", *s);
        t.stream = s->get<bool>();
    }
    if (t.stream) {
        chat["stream"] = true;
        chat["stream_options"] = {{"include_usage", true}};
    }
    if (const json* s = field(body, "store")) {
        if (!s->is_boolean()) wrong_type("store", "a boolean", *s);
        t.store = s->get<bool>();
    }
    if (const json* b = field(body, "background")) {
        if (!b->is_boolean()) wrong_type("background", "a boolean", *b);
        if (b->get<bool>()) invalid_value("background", "is true; this server answers requests while they are open only");
    }
    if (field(body, "conversation"))
        invalid_value("conversation", "is not supported here; continue a conversation with previous_response_id or the whole input");
    echo["metadata"] = json::object();
    if (const json* m = field(body, "metadata")) {
        if (!m->is_object()) wrong_type("metadata", "an object", *m);
        echo["metadata"] = *m;
    }
    echo["parallel_tool_calls"] = true;
    if (const json* p = field(body, "parallel_tool_calls")) {
        if (!p->is_boolean()) wrong_type("parallel_tool_calls", "a boolean", *p);
        echo["parallel_tool_calls"] = *p;
    }
    echo["user"] = nullptr;
    if (const json* u = field(body, "user")) {
        if (!u->is_string()) wrong_type("user", "a string", *u);
        echo["user"] = *u;
    }

    // The template's variables: chat_template_kwargs (as on the chat route), then reasoning.
    json kwargs = json::object();
    if (const json* k = field(body, "chat_template_kwargs")) {
        if (!k->is_object()) wrong_type("chat_template_kwargs", "an object", *k);
        kwargs = *k;
    }
    echo["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
    if (const json* r = field(body, "reasoning")) {
        if (!r->is_object()) wrong_type("reasoning", "an object", *r);
        if (const json* e = field(*r, "effort")) {
            if (!e->is_string()) wrong_type("reasoning.effort", "a string", *e);
            kwargs["enable_thinking"] = *e != "none";
            echo["reasoning"]["effort"] = *e;
        }
        if (field(*r, "summary")) echo["reasoning"]["summary"] = opt_string(*r, "summary", "reasoning");
    }
    if (!kwargs.empty()) chat["chat_template_kwargs"] = kwargs;
    chat["reasoning_format"] = "auto";
    echo["store"] = t.store;
    return t;
}

}  // namespace glia::server::responses
#endif  // GLIA_HAVE_SERVER
