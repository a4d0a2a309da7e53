// ollama's routes (ollama.h): the generation routes' answers reshaped from the OpenAI
// handler's, and what the model routes say about the served model.
#if GLIA_HAVE_SERVER
#include "server/ollama.h"

#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>

#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/mix.h"
#include "server/json_body.h"

namespace glia::server {
namespace {

using Clock = std::chrono::steady_clock;

int64_t nanos(Clock::duration d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); }

// RFC 3339 in UTC with nanoseconds, as ollama writes times.
std::string rfc3339(std::chrono::system_clock::time_point t) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    const std::time_t s = static_cast<std::time_t>(ns / 1000000000);
    std::tm tm{};
    gmtime_r(&s, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(ns % 1000000000));
    return buf;
}
std::string now_rfc3339() { return rfc3339(std::chrono::system_clock::now()); }

void send_error(httplib::Response& res, int status, const std::string& message) {
    res.status = status;
    res.set_content(dump(json{{"error", ollama_error_text(message)}}), "application/json");
}

}  // namespace

json ollama_tool_calls(const json& calls) {
    json out = json::array();
    if (!calls.is_array()) return out;
    for (const json& c : calls) {
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) continue;
        const json& fn = c["function"];
        json args = json::object();
        if (auto a = fn.find("arguments"); a != fn.end() && a->is_string()) {
            args = json::parse(a->get<std::string>(), nullptr, false);
            if (args.is_discarded() || !args.is_object()) args = json::object();
        } else if (a != fn.end() && a->is_object()) {
            args = *a;
        }
        auto name = fn.find("name");
        out.push_back({{"function", {{"name", name != fn.end() && name->is_string() ? name->get<std::string>() : ""},
                                     {"arguments", args}}}});
    }
    return out;
}

namespace {

// Chat logprobs ({"content": [{token, logprob, top_logprobs}]}) as ollama's list.
json ollama_logprobs(const json& lp) {
    json out = json::array();
    if (!lp.is_object() || !lp.contains("content") || !lp["content"].is_array()) return out;
    for (const json& t : lp["content"]) {
        json top = json::array();
        for (const json& x : t.value("top_logprobs", json::array()))
            top.push_back({{"token", x.value("token", std::string())}, {"logprob", x.value("logprob", 0.0)}});
        out.push_back({{"token", t.value("token", std::string())}, {"logprob", t.value("logprob", 0.0)}, {"top_logprobs", top}});
    }
    return out;
}

std::string done_reason(const std::string& finish) { return finish == "length" ? "length" : "stop"; }

// One generation request's answer in ollama's shape: the chat's "message" or generate's
// "response", the counts and the durations.
struct Answer {
    bool chat = true;
    std::string model;
    Clock::time_point start = Clock::now();
    Clock::time_point first{};  // the first generated text (the prompt was read by then)
    int prompt_tokens = 0, completion_tokens = 0;
    std::string finish = "stop";

    json head() const { return json{{"model", model}, {"created_at", now_rfc3339()}}; }

    // A piece of the reply: content, thinking, tool calls (and logprobs).
    json part(const std::string& content, const std::string& thinking, const json& calls, const json& logprobs) const {
        json j = head();
        if (chat) {
            json m = {{"role", "assistant"}, {"content", content}};
            if (!thinking.empty()) m["thinking"] = thinking;
            if (calls.is_array() && !calls.empty()) m["tool_calls"] = calls;
            j["message"] = std::move(m);
        } else {
            j["response"] = content;
            if (!thinking.empty()) j["thinking"] = thinking;
        }
        j["done"] = false;
        if (logprobs.is_array() && !logprobs.empty()) j["logprobs"] = logprobs;
        return j;
    }

    // The final object's fields.
    void finish_into(json& j) const {
        const auto end = Clock::now();
        const auto first_at = first == Clock::time_point{} ? end : first;
        j["done"] = true;
        j["done_reason"] = done_reason(finish);
        j["total_duration"] = nanos(end - start);
        j["load_duration"] = 0;
        j["prompt_eval_count"] = prompt_tokens;
        j["prompt_eval_duration"] = nanos(first_at - start);
        j["eval_count"] = completion_tokens;
        j["eval_duration"] = nanos(end - first_at);
    }

    void usage(const json& u) {
        if (!u.is_object()) return;
        prompt_tokens = u.value("prompt_tokens", prompt_tokens);
        completion_tokens = u.value("completion_tokens", completion_tokens);
    }
};

// The OpenAI stream as ollama's newline-delimited objects.
class NdjsonShaper final : public StreamShaper {
public:
    explicit NdjsonShaper(Answer a) : a_(std::move(a)) {}
    std::string event(const json& e) override {
        if (e.contains("error")) {
            failed_ = true;
            return dump(json{{"error", ollama_error_text(error_message(e, "generation failed"))}}) + "\n";
        }
        a_.usage(e.value("usage", json()));
        const json choices = e.value("choices", json::array());
        if (!choices.is_array() || choices.empty()) return "";
        const json& c = choices[0];
        if (c.contains("finish_reason") && c["finish_reason"].is_string()) a_.finish = c["finish_reason"].get<std::string>();
        // A chat chunk's delta, or a completion chunk's text (a raw /api/generate).
        std::string content, thinking;
        json calls, lp;
        if (c.contains("delta") && c["delta"].is_object()) {
            const json& d = c["delta"];
            if (d.contains("content") && d["content"].is_string()) content = d["content"].get<std::string>();
            if (d.contains("reasoning_content") && d["reasoning_content"].is_string())
                thinking = d["reasoning_content"].get<std::string>();
            if (d.contains("tool_calls")) calls = ollama_tool_calls(d["tool_calls"]);
            lp = ollama_logprobs(c.value("logprobs", json()));
        } else if (c.contains("text") && c["text"].is_string()) {
            content = c["text"].get<std::string>();
        }
        if (content.empty() && thinking.empty() && calls.empty() && lp.empty()) return "";
        if (a_.first == Clock::time_point{}) a_.first = Clock::now();
        return dump(a_.part(content, thinking, calls, lp)) + "\n";
    }
    std::string end() override {
        if (failed_) return "";
        json j = a_.part("", "", json(), json());
        a_.finish_into(j);
        return dump(j) + "\n";
    }

private:
    Answer a_;
    bool failed_ = false;
};

// A whole OpenAI answer as ollama's one object.
json whole_answer(Answer a, const json& body) {
    a.usage(body.value("usage", json()));
    a.first = a.start;  // unknown: the whole time counts as generation
    const json choices = body.value("choices", json::array());
    const json c = choices.is_array() && !choices.empty() ? choices[0] : json::object();
    if (c.contains("finish_reason") && c["finish_reason"].is_string()) a.finish = c["finish_reason"].get<std::string>();
    json j;
    if (c.contains("message") && c["message"].is_object()) {  // a chat completion (also /api/generate's templated prompt)
        const json m = c["message"];
        const std::string content = m.contains("content") && m["content"].is_string() ? m["content"].get<std::string>() : "";
        const std::string thinking =
            m.contains("reasoning_content") && m["reasoning_content"].is_string() ? m["reasoning_content"].get<std::string>() : "";
        j = a.part(content, thinking, ollama_tool_calls(m.value("tool_calls", json())), ollama_logprobs(c.value("logprobs", json())));
    } else {
        j = a.part(c.value("text", std::string()), "", json(), json());
    }
    a.finish_into(j);
    return j;
}

// The served model as ollama's lists describe it.
struct ModelFacts {
    std::string name, modified_at, digest, family, parameter_size, quantization;
    uint64_t size = 0;

    json details() const {
        return json{{"parent_model", ""}, {"format", "gguf"}, {"family", family}, {"families", json::array({family})},
                    {"parameter_size", parameter_size}, {"quantization_level", quantization}};
    }
    json entry() const {
        return json{{"name", name}, {"model", name}, {"modified_at", modified_at}, {"size", size}, {"digest", digest},
                    {"details", details()}};
    }
};

std::string human_count(double n) {
    char buf[32];
    if (n >= 1e9) std::snprintf(buf, sizeof buf, "%.1fB", n / 1e9);
    else if (n >= 1e6) std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
    else if (n >= 1e3) std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
    else std::snprintf(buf, sizeof buf, "%.0f", n);
    return buf;
}

ModelFacts facts_of(const OllamaModel& m) {
    const gguf::File& f = m.model->file();
    ModelFacts x;
    x.name = m.id + ":latest";
    x.size = f.file_size();
    x.family = m.model->profile().arch;
    double params = 0;
    for (const auto& t : f.tensors()) params += static_cast<double>(t.n_elements());
    x.parameter_size = human_count(params);
    if (const gguf::Value* ft = f.find("general.file_type"); ft && ft->is_integer())
        x.quantization = quant::file_type_name(static_cast<uint32_t>(ft->u ? ft->u : static_cast<uint64_t>(ft->i)));
    struct stat st{};
    const auto mtime = ::stat(f.path().c_str(), &st) == 0 ? std::chrono::system_clock::from_time_t(st.st_mtime)
                                                         : std::chrono::system_clock::now();
    x.modified_at = rfc3339(mtime);
    // An identity of the file (path, size, time), not a hash of its bytes: 64 hex digits
    // as clients expect.
    const std::string key = f.path() + "|" + std::to_string(x.size) + "|" + x.modified_at;
    uint64_t h[4] = {1469598103934665603ull, 1099511628211ull, 0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full};
    for (unsigned char ch : key)
        for (uint64_t& v : h) v = (v ^ ch) * 1099511628211ull + (v >> 29);
    char hex[65];
    for (int i = 0; i < 4; ++i) std::snprintf(hex + 16 * i, 17, "%016llx", static_cast<unsigned long long>(h[i]));
    x.digest = hex;
    return x;
}

// The file's scalar metadata (arrays, such as the vocabulary, are left out).
json model_info(const gguf::File& f) {
    json info = json::object();
    for (const gguf::KV& kv : f.kvs()) {
        const gguf::Value& v = kv.value;
        switch (v.type) {
        case gguf::ValueType::STRING: info[kv.key] = std::string(v.s); break;
        case gguf::ValueType::BOOL: info[kv.key] = v.u != 0; break;
        case gguf::ValueType::FLOAT32:
        case gguf::ValueType::FLOAT64: info[kv.key] = std::isfinite(v.f) ? json(v.f) : json(nullptr); break;
        case gguf::ValueType::ARRAY: break;
        case gguf::ValueType::INT8:
        case gguf::ValueType::INT16:
        case gguf::ValueType::INT32:
        case gguf::ValueType::INT64: info[kv.key] = v.i; break;
        default: info[kv.key] = v.u; break;
        }
    }
    return info;
}

json read_json(const InnerApi& api, const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    return parse_body_object(api.read_body(req, res, reader));
}

// /api/chat and /api/generate.
void generation(const InnerApi& api, const std::string& served, const httplib::Request& req, httplib::Response& res,
                const httplib::ContentReader& reader, bool chat) {
    Answer a;
    a.chat = chat;
    try {
        const json r = read_json(api, req, res, reader);
        Endpoint ep = Endpoint::CHAT;
        const json body = chat ? ollama_chat_body(r) : ollama_generate_body(r, ep);
        a.model = r["model"].get<std::string>();
        if (ollama_load_only(r, chat)) {
            if (const std::string m = body["model"].get<std::string>(); m != served && !m.empty())
                return send_error(res, 404, "model \"" + a.model + "\" not found; this server serves '" + served + "'");
            json j = a.part("", "", json(), json());
            a.finish_into(j);
            j["done_reason"] = "load";
            return res.set_content(dump(j), "application/json");
        }
        httplib::Response inner;
        api.generate(dump(body), ep, inner);
        relay(inner, res, "application/x-ndjson", std::make_shared<NdjsonShaper>(a),
              [a](int status, const json& b, httplib::Response& out) {
                  if (status != 200) return send_error(out, status, error_message(b, "HTTP error " + std::to_string(status)));
                  out.set_content(dump(whole_answer(a, b)), "application/json");
              });
    } catch (const ApiError& e) {
        send_error(res, e.status, e.message);
    }
}

// /api/embed ({"input": text | [texts]} -> {"embeddings"}, each of unit length, optionally
// cut to "dimensions") and the older /api/embeddings ({"prompt"} -> {"embedding"}).
void embed(const InnerApi& api, const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
           bool legacy) {
    const auto start = Clock::now();
    try {
        const json r = read_json(api, req, res, reader);
        if (!r.contains("model")) throw_api(400, "'model' is required", "model", "missing_field");
        if (!r["model"].is_string()) throw_api(400, "'model' must be a string", "model", "invalid_type");
        const char* field = legacy ? "prompt" : "input";
        if (!r.contains(field)) throw_api(400, std::string("'") + field + "' is required", field, "missing_field");
        const json& in = r[field];
        if (legacy ? !in.is_string() : !(in.is_string() || in.is_array()))
            throw_api(400, std::string("'") + field + "' must be " + (legacy ? "a string" : "a string or an array of strings"), field,
                      "invalid_type");
        if (in.is_array())
            for (size_t i = 0; i < in.size(); ++i)
                if (!in[i].is_string())
                    throw_api(400, "'input[" + std::to_string(i) + "]' must be a string", "input", "invalid_type");
        int64_t dims = 0;
        if (r.contains("dimensions") && !r["dimensions"].is_null()) {
            if (!r["dimensions"].is_number_integer() || r["dimensions"].get<int64_t>() < 1)
                throw_api(400, "'dimensions' must be a positive integer", "dimensions", "invalid_value");
            dims = r["dimensions"].get<int64_t>();
        }
        if (r.contains("truncate") && !r["truncate"].is_null() && !r["truncate"].is_boolean())
            throw_api(400, "'truncate' must be a boolean", "truncate", "invalid_type");
        if (in.is_array() && in.empty())
            return res.set_content(dump(json{{"model", r["model"]}, {"embeddings", json::array()}}), "application/json");
        httplib::Response inner;
        api.embeddings(dump(json{{"model", ollama_model_name(r["model"].get<std::string>())}, {"input", in}}), inner);
        const json b = json::parse(inner.body, nullptr, false);
        const int status = inner.status < 0 ? 200 : inner.status;  // (a handler leaves 200 unset)
        if (status != 200 || b.is_discarded() || !b.is_object() || !b.contains("data"))
            return send_error(res, status == 200 ? 500 : status, error_message(b, "embedding failed"));
        json vecs = json::array();
        for (const json& d : b["data"]) {
            std::vector<double> v = d["embedding"].get<std::vector<double>>();
            if (!legacy) {
                if (dims > 0 && static_cast<size_t>(dims) < v.size()) v.resize(static_cast<size_t>(dims));
                double n = 0;
                for (double x : v) n += x * x;
                if (n > 0)
                    for (double& x : v) x /= std::sqrt(n);
            }
            vecs.push_back(v);
        }
        if (legacy) return res.set_content(dump(json{{"embedding", vecs.empty() ? json::array() : vecs[0]}}), "application/json");
        const int n_tokens = b.contains("usage") ? b["usage"].value("prompt_tokens", 0) : 0;
        res.set_content(dump(json{{"model", r["model"]}, {"embeddings", vecs}, {"total_duration", nanos(Clock::now() - start)},
                                  {"load_duration", 0}, {"prompt_eval_count", n_tokens}}),
                        "application/json");
    } catch (const ApiError& e) {
        send_error(res, e.status, e.message);
    }
}

}  // namespace

void add_ollama_routes(httplib::Server& http, OllamaModel m, InnerApi api) {
    auto facts = std::make_shared<const ModelFacts>(facts_of(m));
    http.Post("/api/chat", [api, id = m.id](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& r) {
        generation(api, id, req, res, r, true);
    });
    http.Post("/api/generate", [api, id = m.id](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& r) {
        generation(api, id, req, res, r, false);
    });
    http.Post("/api/embed", [api](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& r) {
        embed(api, req, res, r, false);
    });
    http.Post("/api/embeddings", [api](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& r) {
        embed(api, req, res, r, true);
    });
    http.Get("/api/tags", [facts](const httplib::Request&, httplib::Response& res) {
        res.set_content(dump(json{{"models", json::array({facts->entry()})}}), "application/json");
    });
    http.Get("/api/ps", [facts](const httplib::Request&, httplib::Response& res) {
        json e = facts->entry();
        e["expires_at"] = rfc3339(std::chrono::system_clock::now() + std::chrono::hours(24 * 365));
        e["size_vram"] = 0;
        res.set_content(dump(json{{"models", json::array({e})}}), "application/json");
    });
    http.Get("/api/version", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(dump(json{{"version", GLIA_VERSION}}), "application/json");
    });
    http.Post("/api/show", [api, m, facts](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& r) {
        try {
            const json b = read_json(api, req, res, r);
            const char* key = b.contains("model") ? "model" : "name";  // older clients send "name"
            if (!b.contains(key)) throw_api(400, "'model' is required", "model", "missing_field");
            if (!b[key].is_string()) throw_api(400, std::string("'") + key + "' must be a string", key, "invalid_type");
            const std::string name = ollama_model_name(b[key].get<std::string>());
            if (name != m.id) return send_error(res, 404, "model \"" + b[key].get<std::string>() + "\" not found; this server serves '" + m.id + "'");
            json caps = json::array({"completion"});
            if (m.tools) caps.push_back("tools");
            if (m.fim) caps.push_back("insert");
            res.set_content(dump(json{{"license", ""},
                                      {"modelfile", "FROM " + m.model->file().path() + "\n"},
                                      {"parameters", ""},
                                      {"template", m.chat_template},
                                      {"details", facts->details()},
                                      {"model_info", model_info(m.model->file())},
                                      {"capabilities", caps},
                                      {"modified_at", facts->modified_at}}),
                            "application/json");
        } catch (const ApiError& e) {
            send_error(res, e.status, e.message);
        }
    });
}

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
