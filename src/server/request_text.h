// Text from a request on its way into a chat template. Everything a client sends is
// text: only the template's own text may become control tokens (DESIGN.md, principle 6).
// Message contents, names, tool-call ids, names and arguments, tool results, and the tool
// definitions (names, descriptions, parameter schemas, their keys included) are escaped
// with tok::PromptTokenizer::protect before rendering; the rendered prompt is then
// tokenized with PromptTokenizer::tokenize, which turns the escapes back into text.
#pragma once
#if GLIA_HAVE_SERVER
#include <string>

#include "server/openai.h"
#include "tokenizer/chat_template.h"

namespace glia::server {

// Nesting allowed in a request value that reaches the template (deeper: 400).
constexpr int kMaxTemplateDepth = 64;

// `v` with every string and object key protected; throws ApiError 400 naming `field`
// when v nests deeper than kMaxTemplateDepth.
json protect_request_text(const json& v, const tok::PromptTokenizer& pt, const std::string& field);

// The messages of a chat: as protect_request_text, except each message's "role" (one of
// the roles check_messages accepts, which the template compares against).
json protect_messages(const json& messages, const tok::PromptTokenizer& pt);

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
