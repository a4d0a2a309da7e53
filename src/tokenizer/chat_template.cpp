#include "tokenizer/chat_template.h"

#include <algorithm>
#include <cctype>

#include "gguf/gguf.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace glia::tok {

std::string chat_template(const gguf::File& f) {
    return f.get_or<std::string>("tokenizer.chat_template", "");
}

ChatTemplate::ChatTemplate(const std::string& source) : tmpl_(source) {}

std::string ChatTemplate::render(const jinja::Value& conversation, const std::string& bos, const std::string& eos,
                                 bool add_generation_prompt, const jinja::RenderOptions& opt) const {
    jinja::Value ctx = jinja::Value::object();
    jinja::ObjectData& vars = ctx.mutable_object();
    if (conversation.is_array()) {
        vars.set("messages", conversation);
    } else if (conversation.is_object()) {
        for (const auto& [k, v] : conversation.object_data().items) vars.set(k, v);
        if (!vars.find("messages")) vars.set("messages", jinja::Value::array());
    } else {
        throw jinja::Error(jinja::ErrorKind::Type, "the conversation must be a list of messages or an object with 'messages'");
    }
    vars.set("bos_token", jinja::Value(bos));
    vars.set("eos_token", jinja::Value(eos));
    vars.set("add_generation_prompt", jinja::Value(add_generation_prompt));
    return tmpl_.render(ctx, opt);
}

std::string render_chat(const std::string& template_source, const jinja::Value& conversation,
                        const std::string& bos, const std::string& eos, bool add_generation_prompt,
                        const jinja::RenderOptions& opt) {
    return ChatTemplate(template_source).render(conversation, bos, eos, add_generation_prompt, opt);
}

std::optional<MessageEnds> message_ends(const std::string& template_source, const std::string& bos,
                                        const std::string& eos, size_t max_len) {
    // Marker contents that no template rewrites (no spaces to trim, no role words).
    static const std::string kUser = "GliaProbeUser7f3a", kAssistant = "GliaProbeAssistant7f3a";
    static const jinja::Value conversation = jinja::Value::parse_json(
        "[{\"role\": \"user\", \"content\": \"" + kUser + "\"}, {\"role\": \"assistant\", \"content\": \"" + kAssistant +
        "\"}]");
    std::string out;
    try {
        jinja::RenderOptions opt;
        opt.now = jinja::reference_time();  // the same text on every load
        out = render_chat(template_source, conversation, bos, eos, /*add_generation_prompt=*/false, opt);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    auto after = [&](const std::string& marker) {
        const size_t at = out.find(marker);
        return at == std::string::npos ? std::string() : out.substr(at + marker.size(), max_len);
    };
    return MessageEnds{after(kUser), after(kAssistant)};
}

namespace {

constexpr std::string_view kMark = "\xEF\xB7\x90";  // U+FDD0

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string without_marks(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        if (s.compare(i, kMark.size(), kMark) == 0) {
            i += kMark.size();
            continue;
        }
        out += s[i++];
    }
    return out;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Undoes protect(): every "MARK hex MARK" becomes its bytes. What is not such an escape
// (a template that cut a content through one) loses its marks and stays otherwise.
std::string unescape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        const size_t m = s.find(kMark, i);
        if (m == std::string_view::npos) {
            out.append(s.substr(i));
            break;
        }
        out.append(s.substr(i, m - i));
        const size_t close = s.find(kMark, m + kMark.size());
        const std::string_view hex =
            close == std::string_view::npos ? std::string_view() : s.substr(m + kMark.size(), close - m - kMark.size());
        bool ok = close != std::string_view::npos && hex.size() % 2 == 0;
        std::string bytes;
        for (size_t k = 0; ok && k < hex.size(); k += 2) {
            const int hi = hex_value(hex[k]), lo = hex_value(hex[k + 1]);
            ok = hi >= 0 && lo >= 0;
            bytes += static_cast<char>(hi * 16 + lo);
        }
        if (ok) {
            out += bytes;
            i = close + kMark.size();
        } else {
            i = m + kMark.size();  // a stray mark: dropped
        }
    }
    return out;
}

}  // namespace

PromptTokenizer::PromptTokenizer(const Vocab& vocab) : vocab_(vocab) {
    // The same list, in the same order, as the vocabulary's own splitting uses.
    for (int32_t id = 0; id < vocab.n_tokens(); ++id)
        if (vocab.token_attr(id) & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN)) specials_.push_back(id);
    std::sort(specials_.begin(), specials_.end(),
              [&](int32_t a, int32_t b) { return vocab.raw_piece(a).size() > vocab.raw_piece(b).size(); });
    for (int32_t id : specials_)
        if ((vocab.token_attr(id) & (attr::CONTROL | attr::UNKNOWN)) && !vocab.raw_piece(id).empty()) protected_.push_back(id);
}

std::string PromptTokenizer::protect(std::string_view content) const {
    const std::string text = without_marks(content);
    // Where an escape goes: (offset, bytes replaced); 0 bytes for the empty escapes at the ends.
    std::vector<std::pair<size_t, size_t>> cuts;
    bool at_start = false, at_end = false;
    for (int32_t id : protected_) {
        const std::string& st = vocab_.raw_piece(id);
        const size_t first = std::min(unicode::utf8_len(static_cast<uint8_t>(st[0])), st.size());
        for (size_t p = text.find(st); p != std::string::npos; p = text.find(st, p + 1)) cuts.emplace_back(p, first);
        for (size_t k = 1; k < st.size() && k <= text.size() && !(at_start && at_end); ++k) {
            if (!at_end && text.compare(text.size() - k, k, st, 0, k) == 0) at_end = true;
            if (!at_start && text.compare(0, k, st, st.size() - k, k) == 0) at_start = true;
        }
    }
    if (cuts.empty() && !at_start && !at_end) return text;
    std::sort(cuts.begin(), cuts.end());
    static const char* digits = "0123456789abcdef";
    std::string out;
    out.reserve(text.size() + cuts.size() * 12 + 12);
    if (at_start) out.append(kMark).append(kMark);
    size_t pos = 0;
    for (const auto& [at, n] : cuts) {
        if (at < pos) continue;  // inside a character already escaped
        out.append(text, pos, at - pos);
        out.append(kMark);
        for (size_t k = 0; k < n; ++k) {
            const auto b = static_cast<unsigned char>(text[at + k]);
            out += digits[b >> 4];
            out += digits[b & 15];
        }
        out.append(kMark);
        pos = at + n;
    }
    out.append(text, pos, std::string::npos);
    if (at_end) out.append(kMark).append(kMark);
    return out;
}

std::vector<int32_t> PromptTokenizer::tokenize(std::string_view prompt) const {
    // Fragments as Vocab::partition makes them with parse_special: a token, or a run of text.
    struct Frag {
        int32_t token;
        size_t off, len;
    };
    std::vector<Frag> frags, next;
    if (!prompt.empty()) frags.push_back({-1, 0, prompt.size()});
    for (int32_t id : specials_) {
        const std::string& st = vocab_.raw_piece(id);
        if (st.empty()) continue;
        const uint32_t a = vocab_.token_attr(id);
        next.clear();
        bool changed = false;
        for (const Frag& fr : frags) {
            if (fr.token >= 0) {
                next.push_back(fr);
                continue;
            }
            size_t off = fr.off, len = fr.len;
            while (len > 0) {
                const size_t m = prompt.substr(0, off + len).find(st, off);
                if (m == std::string_view::npos) break;
                changed = true;
                if (m > off) {
                    size_t left = m - off;
                    if (a & attr::LSTRIP)
                        while (left > 0 && is_space(prompt[off + left - 1])) --left;
                    if (left > 0) next.push_back({-1, off, left});
                }
                next.push_back({id, 0, 0});
                const size_t stop = off + len;
                off = m + st.size();
                len = stop - off;
                if (len > 0 && (a & attr::RSTRIP))
                    while (len > 0 && is_space(prompt[off])) ++off, --len;
            }
            if (len > 0) next.push_back({-1, off, len});
        }
        if (changed) frags.swap(next);
    }
    // Each run of text follows a special token or starts the prompt, as in the vocabulary's
    // own encoding, so tokenizing it alone gives the same tokens (SentencePiece's space
    // prefix included).
    std::vector<int32_t> out;
    for (const Frag& fr : frags) {
        if (fr.token >= 0) {
            out.push_back(fr.token);
            continue;
        }
        const std::vector<int32_t> ids = vocab_.tokenize(unescape(prompt.substr(fr.off, fr.len)), false, false);
        out.insert(out.end(), ids.begin(), ids.end());
    }
    return out;
}

}  // namespace glia::tok
