// Chat templates: rendering a conversation with the model's `tokenizer.chat_template`
// (a Jinja template) the way Hugging Face transformers' apply_chat_template does.
#pragma once
#include <optional>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/jinja.h"
#include "jinja/value.h"

namespace glia::gguf { class File; }

namespace glia::tok {

class Vocab;

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

// Special tokens in a chat prompt. The prompt is the template's own text with the
// messages' contents in it. Special-token text in the template ("<s>", "<|im_start|>",
// bos_token) is meant as those tokens; a content is text from a user, and the same
// characters typed in it must stay characters, or a user could forge turns or end-of-text.
//
// protect() escapes a content before it is rendered: the first character of every
// control or unknown token's text found in it becomes an escape (U+FDD0, its code point
// in hex, U+FDD0; U+FDD0 is a noncharacter, and one the user sent is dropped), so the
// text no longer matches; a content that begins with the end of such a text or ends with
// its beginning gets an empty escape there, so that it cannot complete one with the
// template's text either. tokenize() then splits the rendered prompt around special
// tokens exactly as Vocab::tokenize(text, false, true) does (longest text first, the
// tokens' LSTRIP/RSTRIP), undoes the escapes, and tokenizes the text between as plain
// text. A content without such text is not changed, so the template renders what it
// did before and the prompt gets the tokens it got before.
class PromptTokenizer {
public:
    explicit PromptTokenizer(const Vocab& vocab);
    std::string protect(std::string_view content) const;
    // The rendered prompt's tokens (no BOS/EOS added: the template writes its own).
    std::vector<int32_t> tokenize(std::string_view prompt) const;

private:
    const Vocab& vocab_;
    std::vector<int32_t> specials_;   // control, user-defined and unknown: longest text first
    std::vector<int32_t> protected_;  // control and unknown (user-defined ones are plain text)
};

}  // namespace glia::tok
