#include "tokenizer/chat_template.h"

#include "gguf/gguf.h"

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

}  // namespace glia::tok
