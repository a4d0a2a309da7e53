// Chat templates: rendering a conversation with the model's `tokenizer.chat_template`
// (a Jinja template) the way Hugging Face transformers' apply_chat_template does.
#pragma once
#include <optional>
#include <string>

#include "jinja/jinja.h"
#include "jinja/value.h"

namespace glia::gguf { class File; }

namespace glia::tok {

// The file's chat template (tokenizer.chat_template), or "" when it has none.
std::string chat_template(const gguf::File& f);

// Renders `template_source` for a conversation. `conversation` is either an array of
// messages ({"role", "content", ...}) or an object with "messages" and optionally
// "tools" plus any other template variables (e.g. "enable_thinking"); variables it does
// not give stay undefined, as in the reference renders. bos/eos are the texts of the
// model's BOS/EOS tokens. Throws jinja::Error (naming the template line) on syntax errors,
// undefined values, type errors and raise_exception().
std::string render_chat(const std::string& template_source, const jinja::Value& conversation,
                        const std::string& bos, const std::string& eos, bool add_generation_prompt,
                        const jinja::RenderOptions& opt = {});

// What the template writes right after a message's content: renders a user message and an
// assistant answer with marker contents and returns the text that follows each (up to
// `max_len` bytes; "" when the content does not appear). The vocabulary reads its
// end-of-turn token from the front of these. Returns {} when the template does not
// render such a conversation (a syntax error, raise_exception, ...): nothing is derived then.
struct MessageEnds {
    std::string after_user, after_assistant;
};
std::optional<MessageEnds> message_ends(const std::string& template_source, const std::string& bos,
                                        const std::string& eos, size_t max_len = 64);

// A parsed template, for rendering many times (chat turns).
class ChatTemplate {
public:
    explicit ChatTemplate(const std::string& source);  // throws jinja::Error (syntax)
    std::string render(const jinja::Value& conversation, const std::string& bos, const std::string& eos,
                       bool add_generation_prompt, const jinja::RenderOptions& opt = {}) const;

private:
    jinja::Template tmpl_;
};

}  // namespace glia::tok
