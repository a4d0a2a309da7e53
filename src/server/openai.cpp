#if GLIA_HAVE_SERVER
#include "server/openai.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>
#include <set>

#include "server/json_depth.h"

namespace glia::server {

void throw_api(int status, std::string message, std::string param, std::string code, std::string type) {
    ApiError e;
    e.status = status;
    e.message = std::move(message);
    e.param = std::move(param);
    e.code = std::move(code);
    if (!type.empty()) e.type = std::move(type);
    else if (status == 401) e.type = "authentication_error";
    else if (status == 404) e.type = "not_found_error";
    else if (status == 413) e.type = "invalid_request_error";
    else if (status == 503) e.type = "server_overloaded";
    else if (status >= 500) e.type = "server_error";
    throw e;
}

json error_json(const ApiError& e) {
    json err = json::object();
    err["message"] = e.message;
    err["type"] = e.type;
    err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
    err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
    return json{{"error", err}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

const char* json_kind(const json& v) {
    switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::binary: return "binary";
    case json::value_t::discarded: return "nothing";
    default: return "a number";
    }
}

[[noreturn]] void wrong_type(const std::string& field, const char* want, const json& got) {
    throw_api(400, "'" + field + "' must be " + want + ", got " + json_kind(got), field, "invalid_type");
}

[[noreturn]] void invalid_value(const std::string& field, const std::string& what) {
    throw_api(400, "'" + field + "' " + what, field, "invalid_value");
}

double number_between(const json& body, const char* name, double lo, double hi) {
    const json& v = body[name];
    if (!v.is_number()) wrong_type(name, "a number", v);
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < lo || x > hi)
        invalid_value(name, "must be between " + json(lo).dump() + " and " + json(hi).dump() + ", got " + v.dump());
    return x;
}

namespace {

// The field if present and not null.
const json* field(const json& body, const char* name) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

std::optional<double> number(const json& body, const char* name, double lo, double hi) {
    const json* v = field(body, name);
    if (!v) return std::nullopt;
    if (!v->is_number()) wrong_type(name, "a number", *v);
    const double x = v->get<double>();
    if (!std::isfinite(x) || x < lo || x > hi)
        throw_api(400, "'" + std::string(name) + "' must be between " + json(lo).dump() + " and " + json(hi).dump() +
                           ", got " + v->dump(), name, "invalid_value");
    return x;
}

std::optional<int64_t> integer(const json& body, const char* name, int64_t lo, int64_t hi) {
    const json* v = field(body, name);
    if (!v) return std::nullopt;
    bool ok = v->is_number_integer();
    if (!ok && v->is_number_float()) {
        const double d = v->get<double>();
        ok = std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15;
    }
    if (!ok) wrong_type(name, "an integer", *v);
    int64_t x;
    if (v->is_number_unsigned()) {
        const uint64_t u = v->get<uint64_t>();
        x = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
    } else if (v->is_number_integer()) {
        x = v->get<int64_t>();
    } else {
        x = static_cast<int64_t>(v->get<double>());
    }
    if (x < lo || x > hi)
        throw_api(400, "'" + std::string(name) + "' must be between " + std::to_string(lo) + " and " +
                           std::to_string(hi) + ", got " + v->dump(), name, "invalid_value");
    return x;
}

std::optional<bool> boolean(const json& body, const char* name) {
    const json* v = field(body, name);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) wrong_type(name, "a boolean", *v);
    return v->get<bool>();
}

// A message's content as text: a string, null, or an array of content parts of which
// the "text" parts are joined.
std::string content_text(const json& content, const std::string& where) {
    if (content.is_null()) return "";
    if (content.is_string()) return content.get<std::string>();
    if (content.is_array()) {
        std::string s;
        for (size_t i = 0; i < content.size(); ++i) {
            const json& part = content[i];
            const std::string p = where + "[" + std::to_string(i) + "]";
            if (!part.is_object()) wrong_type(p, "an object", part);
            auto type = part.find("type");
            if (type == part.end() || !type->is_string()) throw_api(400, "'" + p + ".type' must be a string", p + ".type", "invalid_type");
            if (*type != "text")
                throw_api(400, "'" + p + ".type' is '" + type->get<std::string>() + "'; only text content parts are supported",
                          p + ".type", "invalid_value");
            auto text = part.find("text");
            if (text == part.end() || !text->is_string()) throw_api(400, "'" + p + ".text' must be a string", p + ".text", "invalid_type");
            s += text->get<std::string>();
        }
        return s;
    }
    wrong_type(where, "a string or an array of content parts", content);
}

// An assistant message's tool_calls as chat templates read them: arguments as an object
// (OpenAI sends them as a JSON string; templates write them with tojson).
json check_tool_calls(const json& calls, const std::string& where) {
    if (!calls.is_array()) wrong_type(where, "an array", calls);
    json out = json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        const std::string p = where + "[" + std::to_string(i) + "]";
        const json& c = calls[i];
        if (!c.is_object()) wrong_type(p, "an object", c);
        auto fn = c.find("function");
        if (fn == c.end() || !fn->is_object()) throw_api(400, "'" + p + ".function' is required", p + ".function", "missing_field");
        auto name = fn->find("name");
        if (name == fn->end() || !name->is_string()) throw_api(400, "'" + p + ".function.name' must be a string", p + ".function.name", "invalid_type");
        json call = c;
        if (!call.contains("type")) call["type"] = "function";
        auto args = fn->find("arguments");
        if (args != fn->end() && args->is_string()) {
            check_json_depth(args->get<std::string>(), p + ".function.arguments");
            json parsed = json::parse(args->get<std::string>(), nullptr, false);
            if (parsed.is_discarded())
                throw_api(400, "'" + p + ".function.arguments' is not valid JSON", p + ".function.arguments", "invalid_value");
            call["function"]["arguments"] = parsed;
        }
        out.push_back(std::move(call));
    }
    return out;
}

// A function name as OpenAI accepts it: 1 to 64 characters of [A-Za-z0-9_.-].
bool valid_tool_name(const std::string& n) {
    if (n.empty() || n.size() > 64) return false;
    for (unsigned char c : n)
        if (!(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') && c != '_' && c != '.' && c != '-')
            return false;
    return true;
}

// tools: [{"type": "function", "function": {"name", "description", "parameters"}}];
// tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}}.
void parse_tools(const json& body, Job& job) {
    if (const json* t = field(body, "tools")) {
        if (!t->is_array()) wrong_type("tools", "an array", *t);
        std::set<std::string> names;
        for (size_t i = 0; i < t->size(); ++i) {
            const std::string p = "tools[" + std::to_string(i) + "]";
            const json& x = (*t)[i];
            if (!x.is_object()) wrong_type(p, "an object", x);
            if (x.value("type", std::string("function")) != "function")
                throw_api(400, "'" + p + ".type' must be \"function\"", p + ".type", "invalid_value");
            auto fn = x.find("function");
            if (fn == x.end() || !fn->is_object()) throw_api(400, "'" + p + ".function' is required", p + ".function", "missing_field");
            auto name = fn->find("name");
            if (name == fn->end() || !name->is_string() || name->get<std::string>().empty())
                throw_api(400, "'" + p + ".function.name' must be a non-empty string", p + ".function.name", "invalid_value");
            const std::string n = name->get<std::string>();
            if (!valid_tool_name(n))
                throw_api(400, "'" + p + ".function.name' is \"" + n.substr(0, 80) + "\"; a function name is 1 to 64 of A-Z a-z 0-9 _ . -",
                          p + ".function.name", "invalid_value");
            if (!names.insert(n).second)
                throw_api(400, "'" + p + ".function.name' is \"" + n + "\", the name of an earlier tool; tool names must be unique",
                          p + ".function.name", "invalid_value");
            if (auto d = fn->find("description"); d != fn->end() && !d->is_null() && !d->is_string())
                wrong_type(p + ".function.description", "a string", *d);
            if (auto pa = fn->find("parameters"); pa != fn->end() && !pa->is_object())
                wrong_type(p + ".function.parameters", "an object (a JSON schema)", *pa);
        }
        if (!t->empty()) job.tools = *t;
    }
    if (const json* c = field(body, "tool_choice")) {
        if (c->is_string()) {
            const std::string v = c->get<std::string>();
            if (v != "none" && v != "auto" && v != "required")
                throw_api(400, "'tool_choice' is \"" + v + "\"; expected \"none\", \"auto\", \"required\" or a function",
                          "tool_choice", "invalid_value");
            job.tool_choice = v;
        } else if (c->is_object()) {
            auto fn = c->find("function");
            if (fn == c->end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
                throw_api(400, "'tool_choice.function.name' is required", "tool_choice.function.name", "missing_field");
            job.tool_choice = "function";
            job.tool_choice_name = (*fn)["name"].get<std::string>();
        } else {
            wrong_type("tool_choice", "a string or an object", *c);
        }
        if (job.tool_choice != "none" && job.tool_choice != "auto" && job.tools.is_null())
            throw_api(400, "'tool_choice' asks for a tool call but 'tools' is empty", "tool_choice", "invalid_value");
    }
}

constexpr const char* kRoles = "\"system\", \"developer\", \"user\", \"assistant\", \"tool\", \"function\"";

json check_messages(const json& body) {
    auto it = body.find("messages");
    if (it == body.end()) throw_api(400, "'messages' is required", "messages", "missing_field");
    if (!it->is_array()) wrong_type("messages", "an array", *it);
    if (it->empty()) throw_api(400, "'messages' must hold at least one message", "messages", "invalid_value");
    json out = json::array();
    for (size_t i = 0; i < it->size(); ++i) {
        const json& m = (*it)[i];
        const std::string p = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) wrong_type(p, "an object", m);
        auto role = m.find("role");
        if (role == m.end()) throw_api(400, "'" + p + ".role' is required", p + ".role", "missing_field");
        if (!role->is_string()) wrong_type(p + ".role", "a string", *role);
        const std::string r = role->get<std::string>();
        if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool" && r != "function")
            throw_api(400, "'" + p + ".role' is \"" + r.substr(0, 64) + "\"; expected one of " + kRoles, p + ".role", "invalid_value");
        json msg = m;  // other fields (name, tool_call_id ...) pass through to the template
        auto content = m.find("content");
        msg["content"] = content == m.end() ? std::string() : content_text(*content, p + ".content");
        if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) msg["tool_calls"] = check_tool_calls(*tc, p + ".tool_calls");
        out.push_back(std::move(msg));
    }
    return out;
}

void parse_prompt(const json& body, Job& job) {
    auto it = body.find("prompt");
    if (it == body.end()) throw_api(400, "'prompt' is required", "prompt", "missing_field");
    const json& p = *it;
    if (p.is_string()) {
        job.prompt = p.get<std::string>();
        return;
    }
    if (p.is_array()) {
        if (p.empty()) throw_api(400, "'prompt' must not be empty", "prompt", "invalid_value");
        if (p.size() == 1 && p[0].is_string()) {
            job.prompt = p[0].get<std::string>();
            return;
        }
        if (p[0].is_string())
            throw_api(400, "'prompt' holds " + std::to_string(p.size()) + " prompts; this server answers one prompt per request",
                      "prompt", "invalid_value");
        for (size_t i = 0; i < p.size(); ++i) {
            if (!p[i].is_number_integer()) wrong_type("prompt[" + std::to_string(i) + "]", "a token id (integer)", p[i]);
            const int64_t id = p[i].get<int64_t>();
            if (id < 0 || id > INT32_MAX)
                throw_api(400, "'prompt[" + std::to_string(i) + "]' is not a token id", "prompt", "invalid_value");
            job.prompt_ids.push_back(static_cast<int32_t>(id));
        }
        job.prompt_is_ids = true;
        return;
    }
    wrong_type("prompt", "a string, an array of one string, or an array of token ids", p);
}

// response_format: {"type": "text"} | {"type": "json_object"} |
// {"type": "json_schema", "json_schema": {"name", "schema", "strict", "description"}}.
// The schema itself is compiled by the server (json_schema.h).
void parse_response_format(const json& body, Job& job) {
    const json* rf = field(body, "response_format");
    if (!rf) return;
    if (!rf->is_object()) wrong_type("response_format", "an object", *rf);
    auto t = rf->find("type");
    if (t == rf->end() || !t->is_string())
        throw_api(400, "'response_format.type' is required: \"text\", \"json_object\" or \"json_schema\"",
                  "response_format.type", "missing_field");
    const std::string type = t->get<std::string>();
    if (type == "text") return;
    if (type == "json_object") {
        job.format = ResponseFormat::JSON_OBJECT;
        return;
    }
    if (type != "json_schema")
        throw_api(400, "'response_format.type' is \"" + type + "\"; expected \"text\", \"json_object\" or \"json_schema\"",
                  "response_format.type", "invalid_value");
    auto js = rf->find("json_schema");
    if (js == rf->end() || !js->is_object())
        throw_api(400, "'response_format.json_schema' (an object with a 'schema') is required with type \"json_schema\"",
                  "response_format.json_schema", "missing_field");
    auto sc = js->find("schema");
    if (sc == js->end()) throw_api(400, "'response_format.json_schema.schema' is required", "response_format.json_schema.schema", "missing_field");
    if (!sc->is_object() && !sc->is_boolean()) wrong_type("response_format.json_schema.schema", "an object", *sc);
    job.format = ResponseFormat::JSON_SCHEMA;
    job.schema = *sc;
}

// reasoning_format: "auto" | "deepseek" | "none" | "raw" | "deepseek-legacy" (server/reasoning.h);
// chat_template_kwargs: an object of variables for the chat template ("enable_thinking" ...).
void parse_reasoning_options(const json& body, Job& job) {
    if (const json* f = field(body, "reasoning_format")) {
        if (!f->is_string()) wrong_type("reasoning_format", "a string", *f);
        const std::string v = f->get<std::string>();
        if (v == "auto" || v == "deepseek") job.reasoning_format = ReasoningFormat::AUTO;
        else if (v == "none") job.reasoning_format = ReasoningFormat::NONE;
        else if (v == "raw" || v == "deepseek-legacy") job.reasoning_format = ReasoningFormat::RAW;
        else
            throw_api(400, "'reasoning_format' is \"" + v.substr(0, 64) + "\"; expected \"auto\", \"none\" or \"raw\"",
                      "reasoning_format", "invalid_value");
    }
    if (const json* k = field(body, "chat_template_kwargs")) {
        if (!k->is_object()) wrong_type("chat_template_kwargs", "an object", *k);
        for (const char* reserved : {"messages", "tools", "bos_token", "eos_token", "add_generation_prompt"})
            if (k->contains(reserved))
                throw_api(400, std::string("'chat_template_kwargs.") + reserved + "' is set by the server, not the request",
                          std::string("chat_template_kwargs.") + reserved, "invalid_value");
        if (!k->empty()) job.template_kwargs = *k;
    }
}

std::string random_hex(int n) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < n; ++i) s += digits[rng() & 15];
    return s;
}

}  // namespace

Job parse_request(const std::string& text, Endpoint endpoint, const SamplerParams& defaults) {
    json body;
    check_json_depth(text);  // before anything walks it recursively (schemas, tools, the template)
    try {
        body = json::parse(text);
    } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
        throw_api(400, std::string("the request body is not valid JSON: ") + e.what(), "", "invalid_json");
    }
    if (!body.is_object()) throw_api(400, std::string("the request body must be a JSON object, got ") + json_kind(body), "", "invalid_json");

    Job job;
    job.endpoint = endpoint;
    if (const json* m = field(body, "model")) {
        if (!m->is_string()) wrong_type("model", "a string", *m);
        job.model = m->get<std::string>();
    }
    if (endpoint == Endpoint::CHAT) job.messages = check_messages(body);
    else parse_prompt(body, job);

    if (auto n = integer(body, "n", 1, 16)) job.n = static_cast<int>(*n);
    if (const json* lb = field(body, "logit_bias")) {
        if (!lb->is_object()) wrong_type("logit_bias", "an object of token ids to biases", *lb);
        for (const auto& [k, v] : lb->items()) {
            char* end = nullptr;
            const long id = std::strtol(k.c_str(), &end, 10);
            if (k.empty() || *end || id < 0 || id > INT32_MAX)
                throw_api(400, "'logit_bias' key \"" + k + "\" is not a token id", "logit_bias", "invalid_value");
            if (!v.is_number() || v.get<double>() < -100 || v.get<double>() > 100)
                throw_api(400, "'logit_bias[\"" + k + "\"]' must be a number from -100 to 100", "logit_bias", "invalid_value");
            job.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(v.get<double>()));
        }
    }
    constexpr int64_t kMaxInt = INT32_MAX;
    if (auto v = integer(body, "max_completion_tokens", 1, kMaxInt)) job.max_tokens = static_cast<int>(*v);
    if (auto v = integer(body, "max_tokens", 1, kMaxInt)) job.max_tokens = static_cast<int>(*v);

    SamplerParams& s = job.sampling;
    s = defaults;
    if (auto v = number(body, "temperature", 0, 2)) s.temperature = static_cast<float>(*v);
    if (auto v = number(body, "top_p", 0, 1)) {
        if (*v <= 0) throw_api(400, "'top_p' must be greater than 0", "top_p", "invalid_value");
        s.top_p = static_cast<float>(*v);
    }
    if (auto v = integer(body, "top_k", 0, kMaxInt)) s.top_k = static_cast<int>(*v);
    if (auto v = number(body, "min_p", 0, 1)) s.min_p = static_cast<float>(*v);
    if (auto v = number(body, "presence_penalty", -2, 2)) s.presence_penalty = static_cast<float>(*v);
    if (auto v = number(body, "frequency_penalty", -2, 2)) s.frequency_penalty = static_cast<float>(*v);
    if (auto v = number(body, "repeat_penalty", 0.01, 100)) s.repeat_penalty = static_cast<float>(*v);
    if (auto v = integer(body, "seed", INT64_MIN, INT64_MAX)) s.seed = *v < 0 ? 0xFFFFFFFFFFFFFFFFull : static_cast<uint64_t>(*v);

    if (const json* st = field(body, "stop")) {
        if (st->is_string()) {
            job.stop.push_back(st->get<std::string>());
        } else if (st->is_array()) {
            if (st->size() > 16) throw_api(400, "'stop' holds " + std::to_string(st->size()) + " sequences; at most 16", "stop", "invalid_value");
            for (size_t i = 0; i < st->size(); ++i) {
                if (!(*st)[i].is_string()) wrong_type("stop[" + std::to_string(i) + "]", "a string", (*st)[i]);
                job.stop.push_back((*st)[i].get<std::string>());
            }
        } else {
            wrong_type("stop", "a string or an array of strings", *st);
        }
        std::erase_if(job.stop, [](const std::string& x) { return x.empty(); });
    }

    job.stream = boolean(body, "stream").value_or(false);
    job.ignore_eos = boolean(body, "ignore_eos").value_or(false);
    if (const json* l = field(body, "lora")) job.lora = *l;
    if (const json* so = field(body, "stream_options")) {
        if (!so->is_object()) wrong_type("stream_options", "an object", *so);
        auto iu = so->find("include_usage");
        if (iu != so->end() && !iu->is_null()) {
            if (!iu->is_boolean()) wrong_type("stream_options.include_usage", "a boolean", *iu);
            job.include_usage = iu->get<bool>();
        }
    }

    if (endpoint == Endpoint::CHAT) {
        job.logprobs = boolean(body, "logprobs").value_or(false);
        if (auto v = integer(body, "top_logprobs", 0, 20)) {
            if (!job.logprobs && *v > 0)
                throw_api(400, "'top_logprobs' needs 'logprobs': true", "top_logprobs", "invalid_value");
            job.top_logprobs = static_cast<int>(*v);
        }
    } else {
        if (const json* lp = field(body, "logprobs")) {
            if (lp->is_boolean()) {
                job.logprobs = lp->get<bool>();
            } else {
                auto v = integer(body, "logprobs", 0, 20);
                job.logprobs = true;
                job.top_logprobs = static_cast<int>(*v);
            }
        }
        job.echo = boolean(body, "echo").value_or(false);
        if (const json* sf = field(body, "suffix")) {
            if (!sf->is_string()) wrong_type("suffix", "a string", *sf);
            job.suffix = sf->get<std::string>();
        }
    }
    parse_response_format(body, job);
    if (endpoint == Endpoint::CHAT) {
        parse_tools(body, job);
        parse_reasoning_options(body, job);
    }
    return job;
}

std::string plain_chat_prompt(const json& messages) {
    std::string s;
    for (const json& m : messages) s += m["role"].get<std::string>() + ": " + m["content"].get<std::string>() + "\n";
    return s + "assistant:";
}

json usage_json(const Usage& u) {
    return json{{"prompt_tokens", u.prompt_tokens},
                {"completion_tokens", u.completion_tokens},
                {"total_tokens", u.prompt_tokens + u.completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

static json bytes_of(const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(static_cast<int>(c));
    return b;
}

json chat_logprobs_json(const std::vector<TokenLogprob>& lp) {
    json content = json::array();
    for (const TokenLogprob& t : lp) {
        json top = json::array();
        for (const auto& [text, l] : t.top) top.push_back(json{{"token", text}, {"logprob", l}, {"bytes", bytes_of(text)}});
        content.push_back(json{{"token", t.text}, {"logprob", t.logprob}, {"bytes", bytes_of(t.text)}, {"top_logprobs", top}});
    }
    return json{{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs_json(const std::vector<TokenLogprob>& lp, size_t text_offset0) {
    json tokens = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
    size_t off = text_offset0;
    for (const TokenLogprob& t : lp) {
        tokens.push_back(t.text);
        lps.push_back(t.logprob);
        json top = json::object();
        for (const auto& [text, l] : t.top) top[text] = l;
        tops.push_back(top);
        offs.push_back(off);
        off += t.text.size();
    }
    return json{{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

ResponseId new_response_id(Endpoint e, const std::string& model) {
    ResponseId r;
    r.id = (e == Endpoint::CHAT ? "chatcmpl-" : "cmpl-") + random_hex(24);
    r.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    r.model = model;
    return r;
}

static json reason(const char* finish_reason) { return finish_reason ? json(finish_reason) : json(nullptr); }

json chat_response(const ResponseId& r, const std::string& text, const char* finish_reason,
                   const std::vector<TokenLogprob>* logprobs, const Usage& u, const json& tool_calls,
                   const std::string* reasoning) {
    json message = {{"role", "assistant"}, {"content", text}};
    if (reasoning && !reasoning->empty()) message["reasoning_content"] = *reasoning;
    if (tool_calls.is_array() && !tool_calls.empty()) {
        if (text.empty()) message["content"] = nullptr;
        message["tool_calls"] = tool_calls;
    }
    json choice = {{"index", 0},
                   {"message", message},
                   {"logprobs", logprobs ? chat_logprobs_json(*logprobs) : json(nullptr)},
                   {"finish_reason", reason(finish_reason)}};
    return json{{"id", r.id}, {"object", "chat.completion"}, {"created", r.created}, {"model", r.model},
                {"choices", json::array({choice})}, {"usage", usage_json(u)}, {"system_fingerprint", "glia"}};
}

json completion_response(const ResponseId& r, const std::string& text, const char* finish_reason,
                         const std::vector<TokenLogprob>* logprobs, size_t text_offset0, const Usage& u) {
    json choice = {{"text", text},
                   {"index", 0},
                   {"logprobs", logprobs ? completion_logprobs_json(*logprobs, text_offset0) : json(nullptr)},
                   {"finish_reason", reason(finish_reason)}};
    return json{{"id", r.id}, {"object", "text_completion"}, {"created", r.created}, {"model", r.model},
                {"choices", json::array({choice})}, {"usage", usage_json(u)}, {"system_fingerprint", "glia"}};
}

json chat_chunk(const ResponseId& r, const json& delta, const char* finish_reason,
                const std::vector<TokenLogprob>* logprobs, bool include_usage_field, int index) {
    json choice = {{"index", index},
                   {"delta", delta},
                   {"logprobs", logprobs ? chat_logprobs_json(*logprobs) : json(nullptr)},
                   {"finish_reason", reason(finish_reason)}};
    json j = {{"id", r.id}, {"object", "chat.completion.chunk"}, {"created", r.created}, {"model", r.model},
              {"system_fingerprint", "glia"}, {"choices", json::array({choice})}};
    if (include_usage_field) j["usage"] = nullptr;
    return j;
}

json completion_chunk(const ResponseId& r, const std::string& text, const char* finish_reason,
                      const std::vector<TokenLogprob>* logprobs, size_t text_offset0, bool include_usage_field,
                      int index) {
    json choice = {{"text", text},
                   {"index", index},
                   {"logprobs", logprobs ? completion_logprobs_json(*logprobs, text_offset0) : json(nullptr)},
                   {"finish_reason", reason(finish_reason)}};
    json j = {{"id", r.id}, {"object", "text_completion"}, {"created", r.created}, {"model", r.model},
              {"system_fingerprint", "glia"}, {"choices", json::array({choice})}};
    if (include_usage_field) j["usage"] = nullptr;
    return j;
}

json usage_chunk(const ResponseId& r, Endpoint e, const Usage& u) {
    return json{{"id", r.id},
                {"object", e == Endpoint::CHAT ? "chat.completion.chunk" : "text_completion"},
                {"created", r.created},
                {"model", r.model},
                {"system_fingerprint", "glia"},
                {"choices", json::array()},
                {"usage", usage_json(u)}};
}

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
