// ollama requests into OpenAI bodies (ollama.h). Only types and ollama-specific rules are
// checked here; values (ranges, messages, tools, schemas) are checked by the OpenAI
// parser, whose messages name the fields back in ollama's terms (ollama_error_text).
#if GLIA_HAVE_SERVER
#include "server/ollama.h"

#include <cmath>

namespace glia::server {
namespace {


const json* present(const json& o, const char* key) {
    auto it = o.find(key);
    return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string text_field(const json& o, const char* key, const std::string& where) {
    const json* v = present(o, key);
    if (!v) return "";
    if (!v->is_string()) wrong_type(where, "a string", *v);
    return v->get<std::string>();
}

void check_model(const json& req) {
    const json* m = present(req, "model");
    if (!m) throw_api(400, "'model' is required", "model", "missing_field");
    if (!m->is_string()) wrong_type("model", "a string", *m);
}

// Sampling options: ollama's name -> the OpenAI field, for those with one.
struct OptionMap {
    const char* ollama;
    const char* openai;
    bool integer;
};
constexpr OptionMap kOptions[] = {
    {"temperature", "temperature", false}, {"top_p", "top_p", false},
    {"top_k", "top_k", true},              {"min_p", "min_p", false},
    {"seed", "seed", true},                {"repeat_penalty", "repeat_penalty", false},
    {"presence_penalty", "presence_penalty", false}, {"frequency_penalty", "frequency_penalty", false},
};

// options: {...}. The load-time and unsupported sampler options are accepted and ignored
// (their types are still checked), as ollama does with options a model does not use.
void apply_options(const json& req, json& body) {
    const json* opt = present(req, "options");
    if (!opt) return;
    if (!opt->is_object()) wrong_type("options", "an object", *opt);
    for (const OptionMap& m : kOptions) {
        const json* v = present(*opt, m.ollama);
        if (!v) continue;
        const std::string f = std::string("options.") + m.ollama;
        if (!v->is_number()) wrong_type(f, m.integer ? "an integer" : "a number", *v);
        if (m.integer && !v->is_number_integer()) wrong_type(f, "an integer", *v);
        body[m.openai] = *v;
    }
    if (const json* n = present(*opt, "num_predict")) {
        if (!n->is_number_integer()) wrong_type("options.num_predict", "an integer", *n);
        const int64_t v = n->get<int64_t>();
        // -1: until the end of generation; -2: until the context is full (both: no limit
        // here beyond the server's own).
        if (v == 0 || v < -2)
            throw_api(400, "'options.num_predict' is " + std::to_string(v) + "; use a positive count, or -1 for no limit",
                      "options.num_predict", "invalid_value");
        if (v > 0) body["max_tokens"] = v;
    }
    if (const json* s = present(*opt, "stop")) {
        if (s->is_string()) {
            body["stop"] = json::array({*s});
        } else {
            if (!s->is_array()) wrong_type("options.stop", "an array of strings", *s);
            for (size_t i = 0; i < s->size(); ++i)
                if (!(*s)[i].is_string()) wrong_type("options.stop[" + std::to_string(i) + "]", "a string", (*s)[i]);
            body["stop"] = *s;
        }
    }
    for (const char* k : {"num_ctx", "num_batch", "num_gpu", "main_gpu", "num_thread", "num_keep", "repeat_last_n",
                          "typical_p", "tfs_z", "mirostat", "mirostat_tau", "mirostat_eta"})
        if (const json* v = present(*opt, k); v && !v->is_number()) wrong_type(std::string("options.") + k, "a number", *v);
    for (const char* k : {"numa", "low_vram", "f16_kv", "vocab_only", "use_mmap", "use_mlock", "logits_all",
                          "embedding_only", "penalize_newline"})
        if (const json* v = present(*opt, k); v && !v->is_boolean()) wrong_type(std::string("options.") + k, "a boolean", *v);
}

// format: "json" (any JSON object), a JSON schema (an object), or "" / absent (text).
void apply_format(const json& req, json& body) {
    const json* f = present(req, "format");
    if (!f) return;
    if (f->is_string()) {
        const std::string s = f->get<std::string>();
        if (s.empty()) return;
        if (s != "json")
            throw_api(400, "'format' is \"" + s.substr(0, 40) + "\"; expected \"json\" or a JSON schema (an object)", "format",
                      "invalid_value");
        body["response_format"] = {{"type", "json_object"}};
        return;
    }
    if (!f->is_object()) wrong_type("format", "\"json\" or a JSON schema (an object)", *f);
    body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", *f}}}};
}

// The fields both routes share: model, stream (default true), keep_alive, think,
// logprobs, format and options.
json common_body(const json& req) {
    check_model(req);
    json body = json::object();
    body["model"] = ollama_model_name(req["model"].get<std::string>());
    bool stream = true;
    if (const json* s = present(req, "stream")) {
        if (!s->is_boolean()) wrong_type("stream", "a boolean", *s);
        stream = s->get<bool>();
    }
    body["stream"] = stream;
    if (stream) body["stream_options"] = {{"include_usage", true}};
    if (const json* k = present(req, "keep_alive"); k && !k->is_string() && !k->is_number())
        wrong_type("keep_alive", "a duration (a string such as \"5m\", or seconds)", *k);
    if (const json* t = present(req, "think")) {
        if (!t->is_boolean() && !t->is_string()) wrong_type("think", "a boolean or \"low\", \"medium\", \"high\"", *t);
        body["chat_template_kwargs"] = {{"enable_thinking", t->is_boolean() ? t->get<bool>() : true}};
    }
    if (const json* l = present(req, "logprobs")) {
        if (!l->is_boolean()) wrong_type("logprobs", "a boolean", *l);
        body["logprobs"] = *l;
    }
    if (const json* t = present(req, "top_logprobs")) {
        if (!t->is_number_integer()) wrong_type("top_logprobs", "an integer", *t);
        body["top_logprobs"] = *t;
    }
    apply_format(req, body);
    apply_options(req, body);
    return body;
}

void refuse_images(const json& o, const std::string& where) {
    if (const json* im = present(o, "images"); im && !(im->is_array() && im->empty()))
        throw_api(400, "'" + where + "': this server's model reads text only; send no images", where, "invalid_value");
}

// A message of ollama's into OpenAI's: content a string, tool_calls' arguments objects
// (the OpenAI parser keeps them so), tool_name kept for the template.
json chat_message(const json& m, size_t i) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) wrong_type(p, "an object", m);
    const json* role = present(m, "role");
    if (!role) throw_api(400, "'" + p + ".role' is required", p + ".role", "missing_field");
    if (!role->is_string()) wrong_type(p + ".role", "a string", *role);
    refuse_images(m, p + ".images");
    json out = json::object();
    out["role"] = *role;
    out["content"] = text_field(m, "content", p + ".content");
    if (const json* tc = present(m, "tool_calls")) {
        if (!tc->is_array()) wrong_type(p + ".tool_calls", "an array", *tc);
        json calls = json::array();
        for (size_t k = 0; k < tc->size(); ++k) {
            const std::string q = p + ".tool_calls[" + std::to_string(k) + "]";
            const json& c = (*tc)[k];
            if (!c.is_object()) wrong_type(q, "an object", c);
            const json* fn = present(c, "function");
            if (!fn || !fn->is_object()) throw_api(400, "'" + q + ".function' is required", q + ".function", "missing_field");
            json call = {{"id", "call_" + std::to_string(i) + "_" + std::to_string(k)}, {"type", "function"}, {"function", *fn}};
            if (const json* a = present(*fn, "arguments"); a && !a->is_object() && !a->is_string())
                wrong_type(q + ".function.arguments", "an object", *a);
            calls.push_back(std::move(call));
        }
        if (!calls.empty()) out["tool_calls"] = std::move(calls);
    }
    if (const std::string n = text_field(m, "tool_name", p + ".tool_name"); !n.empty()) {
        out["tool_name"] = n;
        out["name"] = n;
    }
    return out;
}

}  // namespace

std::string ollama_model_name(const std::string& name) {
    const std::string tag = ":latest";
    if (name.size() > tag.size() && name.compare(name.size() - tag.size(), tag.size(), tag) == 0)
        return name.substr(0, name.size() - tag.size());
    return name;
}

bool ollama_load_only(const json& req, bool chat) {
    if (chat) {
        const json* m = present(req, "messages");
        return !m || (m->is_array() && m->empty());
    }
    const json* p = present(req, "prompt");
    return (!p || (p->is_string() && p->get<std::string>().empty())) && !present(req, "suffix");
}

json ollama_chat_body(const json& req) {
    json body = common_body(req);
    json messages = json::array();  // none: the request only loads the model (ollama_load_only)
    if (const json* ms = present(req, "messages")) {
        if (!ms->is_array()) wrong_type("messages", "an array", *ms);
        for (size_t i = 0; i < ms->size(); ++i) messages.push_back(chat_message((*ms)[i], i));
    }
    body["messages"] = std::move(messages);
    if (const json* t = present(req, "tools")) {
        if (!t->is_array()) wrong_type("tools", "an array", *t);
        if (!t->empty()) body["tools"] = *t;
    }
    return body;
}

json ollama_generate_body(const json& req, Endpoint& ep) {
    json body = common_body(req);
    const std::string prompt = text_field(req, "prompt", "prompt");
    const std::string system = text_field(req, "system", "system");
    refuse_images(req, "images");
    if (!text_field(req, "template", "template").empty())
        throw_api(400, "'template' is not supported: prompts are rendered with the model's own chat template (or send \"raw\": true)",
                  "template", "invalid_value");
    if (const json* c = present(req, "context"); c && !(c->is_array() && c->empty()))
        throw_api(400, "'context' is not supported: send the conversation to /api/chat instead", "context", "invalid_value");
    bool raw = false;
    if (const json* r = present(req, "raw")) {
        if (!r->is_boolean()) wrong_type("raw", "a boolean", *r);
        raw = r->get<bool>();
    }
    if (const json* s = present(req, "suffix")) {
        // Fill in the middle: the prompt is the text before the gap (infill.h).
        if (!s->is_string()) wrong_type("suffix", "a string", *s);
        ep = Endpoint::COMPLETION;
        body["prompt"] = prompt;
        body["suffix"] = *s;
        return body;
    }
    if (raw) {
        ep = Endpoint::COMPLETION;
        body["prompt"] = prompt;
        return body;
    }
    ep = Endpoint::CHAT;
    json messages = json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    messages.push_back({{"role", "user"}, {"content", prompt}});
    body["messages"] = std::move(messages);
    return body;
}

std::string ollama_error_text(const std::string& msg) {
    static const std::pair<const char*, const char*> names[] = {
        {"'max_tokens'", "'options.num_predict'"},   {"'temperature'", "'options.temperature'"},
        {"'top_p'", "'options.top_p'"},               {"'top_k'", "'options.top_k'"},
        {"'min_p'", "'options.min_p'"},               {"'seed'", "'options.seed'"},
        {"'repeat_penalty'", "'options.repeat_penalty'"}, {"'presence_penalty'", "'options.presence_penalty'"},
        {"'frequency_penalty'", "'options.frequency_penalty'"}, {"'stop'", "'options.stop'"},
        {"'response_format.json_schema.schema'", "'format'"}, {"'response_format'", "'format'"},
    };
    std::string out = msg;
    for (const auto& [from, to] : names)
        for (size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + std::strlen(to)))
            out.replace(at, std::strlen(from), to);
    return out;
}

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
