#if GLIA_HAVE_SERVER
#include "server/infill.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "server/json_body.h"
#include "tokenizer/vocab.h"

namespace glia::server {

bool has_fim(const tok::Vocab& v) { return v.fim_pre() >= 0 && v.fim_suf() >= 0 && v.fim_mid() >= 0; }

int infill_budget(int n_ctx, std::optional<int> max_tokens) {
    return n_ctx - (max_tokens ? *max_tokens : n_ctx / 4);
}

namespace {

std::vector<int32_t> text_tokens(const tok::Vocab& v, const std::string& s) {
    return s.empty() ? std::vector<int32_t>{} : v.tokenize(s, false, false);
}

void append(std::vector<int32_t>& out, const std::vector<int32_t>& x) { out.insert(out.end(), x.begin(), x.end()); }

}  // namespace

InfillPrompt infill_prompt(const tok::Vocab& v, const InfillInput& in, int budget, const std::string& field) {
    if (!has_fim(v))
        throw_api(400,
                  "'" + field + "': this model cannot fill in the middle: its vocabulary names no fill-in-the-middle tokens "
                  "(tokenizer.ggml.fim_pre_token_id, fim_suf_token_id, fim_mid_token_id); use a code model that has them",
                  field, "fim_not_supported");
    const bool bos = v.add_bos() && v.bos() >= 0;
    const std::vector<int32_t> middle = text_tokens(v, in.middle);
    const int fixed = (bos ? 1 : 0) + 3 + static_cast<int>(middle.size());
    if (fixed >= budget)
        throw_api(400, "the fill-in-the-middle prompt needs " + std::to_string(fixed) + " tokens besides the prefix and suffix, and " +
                           std::to_string(std::max(budget, 0)) + " are left for the prompt in this context (-c); shorten it or lower the tokens to generate",
                  field, "context_length_exceeded");
    InfillPrompt out;
    int avail = budget - fixed;
    std::vector<int32_t> prefix = text_tokens(v, in.prefix), suffix = text_tokens(v, in.suffix);
    // The suffix up to a quarter (its start), the prefix up to the rest (its end).
    const size_t suf_max = std::max<size_t>(static_cast<size_t>(avail) / 4, static_cast<size_t>(avail) - std::min(prefix.size(), static_cast<size_t>(avail)));
    if (suffix.size() > suf_max) {
        suffix.resize(suf_max);
        out.truncated = true;
    }
    avail -= static_cast<int>(suffix.size());
    if (prefix.size() > static_cast<size_t>(avail)) {
        prefix.erase(prefix.begin(), prefix.end() - avail);
        out.truncated = true;
    }
    avail -= static_cast<int>(prefix.size());

    // The extra files: each one's tokens, then as many of the last ones as fit.
    const bool repo = v.fim_rep() >= 0 && v.fim_sep() >= 0;
    std::vector<std::vector<int32_t>> files;
    for (const auto& [name, text] : in.extra) {
        std::vector<int32_t> f;
        if (repo) {
            f.push_back(v.fim_sep());
            append(f, text_tokens(v, name + "\n" + text));
        } else {
            append(f, text_tokens(v, text.empty() || text.back() == '\n' ? text : text + "\n"));
        }
        files.push_back(std::move(f));
    }
    std::vector<int32_t> head, tail;
    if (repo && !files.empty()) {
        head.push_back(v.fim_rep());
        append(head, text_tokens(v, "project\n"));
        tail.push_back(v.fim_sep());
        append(tail, text_tokens(v, "\n"));
    }
    size_t first = files.size();  // files [first, end) are kept
    int used = static_cast<int>(head.size() + tail.size());
    while (first > 0 && used + static_cast<int>(files[first - 1].size()) <= avail) used += static_cast<int>(files[--first].size());
    if (first > 0) out.truncated = true;

    if (bos) out.tokens.push_back(v.bos());
    if (first < files.size()) {
        append(out.tokens, head);
        for (size_t i = first; i < files.size(); ++i) append(out.tokens, files[i]);
        append(out.tokens, tail);
    }
    out.tokens.push_back(v.fim_pre());
    append(out.tokens, prefix);
    out.tokens.push_back(v.fim_suf());
    append(out.tokens, suffix);
    out.tokens.push_back(v.fim_mid());
    append(out.tokens, middle);
    return out;
}

namespace {

std::string string_field(const json& b, const char* key) {
    auto it = b.find(key);
    if (it == b.end() || it->is_null()) return "";
    if (!it->is_string()) throw_api(400, std::string("'") + key + "' must be a string", key, "invalid_type");
    return it->get<std::string>();
}

}  // namespace

InfillInput parse_infill(const json& b) {
    InfillInput in;
    in.prefix = string_field(b, "input_prefix");
    in.suffix = string_field(b, "input_suffix");
    in.middle = string_field(b, "prompt");
    if (auto it = b.find("input_extra"); it != b.end() && !it->is_null()) {
        if (!it->is_array()) throw_api(400, "'input_extra' must be an array of {\"filename\", \"text\"}", "input_extra", "invalid_type");
        for (size_t i = 0; i < it->size(); ++i) {
            const json& c = (*it)[i];
            const std::string p = "input_extra[" + std::to_string(i) + "]";
            if (!c.is_object()) throw_api(400, "'" + p + "' must be an object {\"filename\", \"text\"}", p, "invalid_type");
            auto name = c.find("filename"), text = c.find("text");
            if (name != c.end() && !name->is_null() && !name->is_string())
                throw_api(400, "'" + p + ".filename' must be a string", p + ".filename", "invalid_type");
            if (text == c.end() || !text->is_string())
                throw_api(400, "'" + p + ".text' (a string) is required", p + ".text", "invalid_type");
            in.extra.emplace_back(name != c.end() && name->is_string() ? name->get<std::string>() : "", text->get<std::string>());
        }
    }
    return in;
}

namespace {

// The reference server's completion objects: {"content", "stop", ...}.
struct InfillAnswer {
    std::string model;
    bool truncated = false;
    int prompt_tokens = 0, completion_tokens = 0;
    std::string finish = "stop";

    json final_object(const std::string& content) const {
        return json{{"content", content},
                    {"stop", true},
                    {"stop_type", finish == "length" ? "limit" : "eos"},
                    {"model", model},
                    {"tokens_predicted", completion_tokens},
                    {"tokens_evaluated", prompt_tokens},
                    {"truncated", truncated}};
    }
    void usage(const json& u) {
        if (!u.is_object()) return;
        prompt_tokens = u.value("prompt_tokens", prompt_tokens);
        completion_tokens = u.value("completion_tokens", completion_tokens);
    }
};

class InfillShaper final : public StreamShaper {
public:
    explicit InfillShaper(InfillAnswer a) : a_(std::move(a)) {}
    std::string event(const json& e) override {
        if (e.contains("error")) {
            failed_ = true;
            return "data: " + dump(e) + "\n\n";
        }
        a_.usage(e.value("usage", json()));
        const json ch = e.value("choices", json::array());
        if (!ch.is_array() || ch.empty()) return "";
        if (ch[0].contains("finish_reason") && ch[0]["finish_reason"].is_string()) a_.finish = ch[0]["finish_reason"].get<std::string>();
        const std::string text = ch[0].value("text", std::string());
        if (text.empty()) return "";
        return "data: " + dump(json{{"content", text}, {"stop", false}}) + "\n\n";
    }
    std::string end() override { return failed_ ? "" : "data: " + dump(a_.final_object("")) + "\n\n"; }

private:
    InfillAnswer a_;
    bool failed_ = false;
};

// The /v1/completions fields /infill passes on as they are.
constexpr const char* kPassed[] = {"model", "temperature", "top_k", "top_p", "min_p", "seed", "stop", "stream",
                                   "repeat_penalty", "presence_penalty", "frequency_penalty", "ignore_eos",
                                   "max_tokens", "logit_bias"};

void infill(const tok::Vocab& vocab, int n_ctx, const InnerApi& api, const httplib::Request& req, httplib::Response& res,
            const httplib::ContentReader& reader) {
    try {
        const json b = parse_body_object(api.read_body(req, res, reader));
        const InfillInput in = parse_infill(b);
        json body = json::object();
        for (const char* k : kPassed)
            if (b.contains(k) && !b[k].is_null()) body[k] = b[k];
        bool n_predict = false;
        if (auto it = b.find("n_predict"); it != b.end() && !it->is_null()) {
            if (!it->is_number_integer() || it->get<int64_t>() < -1 || it->get<int64_t>() == 0 || it->get<int64_t>() > INT32_MAX)
                throw_api(400, "'n_predict' must be a positive integer, or -1 for no limit", "n_predict", "invalid_value");
            if (it->get<int64_t>() > 0) body["max_tokens"] = *it;
            n_predict = true;
        }
        std::optional<int> max_tokens;
        if (body.contains("max_tokens") && body["max_tokens"].is_number_integer() && body["max_tokens"].get<int64_t>() > 0 &&
            body["max_tokens"].get<int64_t>() < n_ctx)
            max_tokens = body["max_tokens"].get<int>();
        const InfillPrompt p = infill_prompt(vocab, in, infill_budget(n_ctx, max_tokens), "input_prefix");
        body["prompt"] = p.tokens;
        const bool stream = body.contains("stream") && body["stream"].is_boolean() && body["stream"].get<bool>();
        if (stream) body["stream_options"] = {{"include_usage", true}};
        InfillAnswer a;
        if (body.contains("model") && body["model"].is_string()) a.model = body["model"].get<std::string>();
        a.truncated = p.truncated;
        httplib::Response inner;
        api.generate(dump(body), Endpoint::COMPLETION, inner);
        relay(inner, res, "text/event-stream", std::make_shared<InfillShaper>(a),
              [a, n_predict](int status, const json& r, httplib::Response& out) mutable {
                  out.status = status;
                  if (status != 200) {
                      std::string text = dump(r);
                      if (n_predict)
                          for (size_t at; (at = text.find("'max_tokens'")) != std::string::npos;) text.replace(at, 12, "'n_predict'");
                      return out.set_content(text, "application/json");
                  }
                  a.usage(r.value("usage", json()));
                  const json ch = r.value("choices", json::array());
                  const json c = ch.is_array() && !ch.empty() ? ch[0] : json::object();
                  if (c.contains("finish_reason") && c["finish_reason"].is_string()) a.finish = c["finish_reason"].get<std::string>();
                  if (a.model.empty()) a.model = r.value("model", std::string());
                  out.set_content(dump(a.final_object(c.value("text", std::string()))), "application/json");
              });
    } catch (const ApiError& e) {
        res.status = e.status;
        res.set_content(dump(error_json(e)), "application/json");
    }
}

}  // namespace

void add_infill_route(httplib::Server& http, const tok::Vocab& vocab, int n_ctx, InnerApi api) {
    http.Post("/infill", [&vocab, n_ctx, api](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& r) {
        infill(vocab, n_ctx, api, req, res, r);
    });
}

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
