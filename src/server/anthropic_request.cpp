// A Messages request, validated and translated into a chat completions body (anthropic.h).
#if GLIA_HAVE_SERVER
#include <cctype>
#include <cmath>
#include <set>

#include "server/anthropic.h"
#include "server/json_body.h"

namespace glia::server::anthropic {
namespace {

const json* field(const json& o, const char* name) {
    auto it = o.find(name);
    return it == o.end() || it->is_null() ? nullptr : &*it;
}

const std::string& need_string(const json& o, const char* name, const std::string& where) {
    const json* v = field(o, name);
    if (!v) throw_api(400, "'" + where + "." + name + "' is required", where + "." + name, "missing_field");
    if (!v->is_string()) wrong_type(where + "." + name, "a string", *v);
    return v->get_ref<const std::string&>();
}

std::string block_type(const json& b, const std::string& where) {
    if (!b.is_object()) wrong_type(where, "an object (a content block)", b);
    return need_string(b, "type", where);
}

[[noreturn]] void unsupported_block(const std::string& where, const std::string& type, const char* allowed) {
    throw_api(400, "'" + where + ".type' is \"" + type.substr(0, 64) + "\"; this server takes " + allowed + " blocks here",
              where + ".type", "invalid_value");
}

// Text blocks only (system, tool_result content): their texts joined by newlines.
std::string text_blocks(const json& v, const std::string& where) {
    if (v.is_string()) return v.get<std::string>();
    if (!v.is_array()) wrong_type(where, "a string or an array of text blocks", v);
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string w = where + "[" + std::to_string(i) + "]";
        const std::string t = block_type(v[i], w);
        if (t != "text") unsupported_block(w, t, "text");
        if (i) s += "\n";
        s += need_string(v[i], "text", w);
    }
    return s;
}

// A user turn: its text, and one tool message per tool_result, in their order.
void user_turn(const json& content, const std::string& where, json& out) {
    if (content.is_string()) {
        out.push_back({{"role", "user"}, {"content", content}});
        return;
    }
    std::string text;
    bool has_text = false;
    auto flush = [&] {
        if (has_text) out.push_back({{"role", "user"}, {"content", text}});
        text.clear();
        has_text = false;
    };
    for (size_t i = 0; i < content.size(); ++i) {
        const std::string w = where + "[" + std::to_string(i) + "]";
        const json& b = content[i];
        const std::string t = block_type(b, w);
        if (t == "text") {
            if (has_text) text += "\n";
            text += need_string(b, "text", w);
            has_text = true;
        } else if (t == "tool_result") {
            flush();
            const std::string& id = need_string(b, "tool_use_id", w);
            std::string result;
            if (const json* c = field(b, "content")) result = text_blocks(*c, w + ".content");
            if (const json* e = field(b, "is_error"); e && !e->is_boolean()) wrong_type(w + ".is_error", "a boolean", *e);
            out.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
        } else {
            unsupported_block(w, t, "text and tool_result");
        }
    }
    flush();
}

// An assistant turn: text, tool_use as tool_calls, thinking as reasoning_content.
json assistant_turn(const json& content, const std::string& where) {
    json m = {{"role", "assistant"}, {"content", ""}};
    if (content.is_string()) {
        m["content"] = content;
        return m;
    }
    std::string text, thought;
    json calls = json::array();
    for (size_t i = 0; i < content.size(); ++i) {
        const std::string w = where + "[" + std::to_string(i) + "]";
        const json& b = content[i];
        const std::string t = block_type(b, w);
        if (t == "text") {
            text += need_string(b, "text", w);
        } else if (t == "tool_use") {
            const std::string& id = need_string(b, "id", w);
            const std::string& name = need_string(b, "name", w);
            const json* input = field(b, "input");
            if (!input) throw_api(400, "'" + w + ".input' is required", w + ".input", "missing_field");
            if (!input->is_object()) wrong_type(w + ".input", "an object", *input);
            calls.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", input->dump()}}}});
        } else if (t == "thinking") {
            thought += need_string(b, "thinking", w);
        } else if (t != "redacted_thinking") {
            unsupported_block(w, t, "text, tool_use and thinking");
        }
    }
    m["content"] = text;
    if (!calls.empty()) m["tool_calls"] = calls;
    if (!thought.empty()) m["reasoning_content"] = thought;
    return m;
}

json messages_of(const json& body) {
    json out = json::array();
    if (const json* s = field(body, "system")) {
        const std::string sys = text_blocks(*s, "system");
        if (!sys.empty()) out.push_back({{"role", "system"}, {"content", sys}});
    }
    const json* ms = field(body, "messages");
    if (!ms) throw_api(400, "'messages' is required", "messages", "missing_field");
    if (!ms->is_array()) wrong_type("messages", "an array", *ms);
    if (ms->empty()) invalid_value("messages", "must hold at least one message");
    for (size_t i = 0; i < ms->size(); ++i) {
        const std::string w = "messages[" + std::to_string(i) + "]";
        const json& m = (*ms)[i];
        if (!m.is_object()) wrong_type(w, "an object", m);
        const std::string& role = need_string(m, "role", w);
        const json* c = field(m, "content");
        if (!c) throw_api(400, "'" + w + ".content' is required", w + ".content", "missing_field");
        if (!c->is_string() && !c->is_array()) wrong_type(w + ".content", "a string or an array of content blocks", *c);
        if (role == "user") user_turn(*c, w + ".content", out);
        else if (role == "assistant") out.push_back(assistant_turn(*c, w + ".content"));
        else invalid_value(w + ".role", "is \"" + role.substr(0, 64) + "\"; expected \"user\" or \"assistant\"");
    }
    return out;
}

// A tool name as the Messages API accepts it: 1 to 64 of [A-Za-z0-9_-].
bool valid_name(const std::string& n) {
    if (n.empty() || n.size() > 64) return false;
    for (unsigned char c : n)
        if (!std::isalnum(c) && c != '_' && c != '-') return false;
    return true;
}

void tools_of(const json& body, json& chat) {
    std::set<std::string> names;
    if (const json* t = field(body, "tools")) {
        if (!t->is_array()) wrong_type("tools", "an array", *t);
        json fns = json::array();
        for (size_t i = 0; i < t->size(); ++i) {
            const std::string w = "tools[" + std::to_string(i) + "]";
            const json& x = (*t)[i];
            if (!x.is_object()) wrong_type(w, "an object", x);
            if (const json* ty = field(x, "type"); ty && (!ty->is_string() || *ty != "custom"))
                invalid_value(w + ".type", "is " + ty->dump() + "; this server runs only custom tools (name, description, input_schema)");
            const std::string& name = need_string(x, "name", w);
            if (!valid_name(name)) invalid_value(w + ".name", "is \"" + name.substr(0, 80) + "\"; a tool name is 1 to 64 of A-Z a-z 0-9 _ -");
            if (!names.insert(name).second) invalid_value(w + ".name", "is \"" + name + "\", the name of an earlier tool; names must be unique");
            json fn = {{"name", name}};
            if (const json* d = field(x, "description")) {
                if (!d->is_string()) wrong_type(w + ".description", "a string", *d);
                fn["description"] = *d;
            }
            const json* schema = field(x, "input_schema");
            if (!schema) throw_api(400, "'" + w + ".input_schema' is required", w + ".input_schema", "missing_field");
            if (!schema->is_object()) wrong_type(w + ".input_schema", "an object (a JSON schema)", *schema);
            fn["parameters"] = *schema;
            fns.push_back({{"type", "function"}, {"function", fn}});
        }
        if (!fns.empty()) chat["tools"] = fns;
    }
    if (const json* c = field(body, "tool_choice")) {
        if (!c->is_object()) wrong_type("tool_choice", "an object", *c);
        const std::string& type = need_string(*c, "type", "tool_choice");
        if (const json* p = field(*c, "disable_parallel_tool_use"); p && !p->is_boolean())
            wrong_type("tool_choice.disable_parallel_tool_use", "a boolean", *p);
        if (type == "auto" || type == "none") {
            chat["tool_choice"] = type;
            return;
        }
        if (type != "any" && type != "tool") invalid_value("tool_choice.type", "is \"" + type.substr(0, 64) + "\"; expected auto, any, tool or none");
        if (!chat.contains("tools")) invalid_value("tool_choice", "asks for a tool call but 'tools' is empty");
        if (type == "any") {
            chat["tool_choice"] = "required";
            return;
        }
        const std::string& name = need_string(*c, "name", "tool_choice");
        if (!names.count(name)) invalid_value("tool_choice.name", "is \"" + name.substr(0, 80) + "\", not one of the tools");
        chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", name}}}};
    }
}


int64_t integer(const json& body, const char* name, int64_t lo, int64_t hi) {
    const json& v = body[name];
    if (!v.is_number_integer()) wrong_type(name, "an integer", v);
    // (a value above INT64_MAX is unsigned; anything else reads as int64_t)
    if ((v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(hi)) || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
        invalid_value(name, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + v.dump());
    return v.get<int64_t>();
}

}  // namespace

Translated translate_request(const std::string& text, bool count_only) {
    json body = parse_body_object(text);  // depth first, then errors that say where (json_body.h)

    Translated t;
    json& chat = t.chat;
    chat = json::object();
    const json* model = field(body, "model");
    if (!model) throw_api(400, "'model' is required", "model", "missing_field");
    if (!model->is_string()) wrong_type("model", "a string", *model);
    chat["model"] = *model;
    chat["messages"] = messages_of(body);
    tools_of(body, chat);
    if (!count_only) {
        if (!field(body, "max_tokens")) throw_api(400, "'max_tokens' is required", "max_tokens", "missing_field");
        chat["max_tokens"] = integer(body, "max_tokens", 1, INT32_MAX);
    }
    if (field(body, "temperature")) chat["temperature"] = number_between(body, "temperature", 0, 1);
    if (field(body, "top_p")) {
        chat["top_p"] = number_between(body, "top_p", 0, 1);
        if (chat["top_p"].get<double>() <= 0) invalid_value("top_p", "must be greater than 0");
    }
    if (field(body, "top_k")) chat["top_k"] = integer(body, "top_k", 0, INT32_MAX);
    if (const json* st = field(body, "stop_sequences")) {
        if (!st->is_array()) wrong_type("stop_sequences", "an array of strings", *st);
        if (st->size() > 16) invalid_value("stop_sequences", "holds " + std::to_string(st->size()) + " sequences; at most 16");
        for (size_t i = 0; i < st->size(); ++i)
            if (!(*st)[i].is_string()) wrong_type("stop_sequences[" + std::to_string(i) + "]", "a string", (*st)[i]);
        if (!st->empty()) chat["stop"] = *st;
    }
    if (const json* s = field(body, "stream")) {
        if (!s->is_boolean()) wrong_type("stream", "a boolean", *s);
        t.stream = s->get<bool>();
    }
    if (t.stream) {
        chat["stream"] = true;
        chat["stream_options"] = {{"include_usage", true}};
    }
    if (const json* m = field(body, "metadata"); m && !m->is_object()) wrong_type("metadata", "an object", *m);

    // The template's variables: chat_template_kwargs (as on the chat route), then thinking.
    json kwargs = json::object();
    if (const json* k = field(body, "chat_template_kwargs")) {
        if (!k->is_object()) wrong_type("chat_template_kwargs", "an object", *k);
        kwargs = *k;
    }
    if (const json* th = field(body, "thinking")) {
        if (!th->is_object()) wrong_type("thinking", "an object", *th);
        const std::string& type = need_string(*th, "type", "thinking");
        if (type != "enabled" && type != "disabled") invalid_value("thinking.type", "is \"" + type.substr(0, 64) + "\"; expected enabled or disabled");
        if (const json* b = field(*th, "budget_tokens"); b && !b->is_number_integer())
            wrong_type("thinking.budget_tokens", "an integer", *b);
        kwargs["enable_thinking"] = type == "enabled";
    }
    if (!kwargs.empty()) chat["chat_template_kwargs"] = kwargs;
    chat["reasoning_format"] = "auto";
    return t;
}

}  // namespace glia::server::anthropic
#endif  // GLIA_HAVE_SERVER
