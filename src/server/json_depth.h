// How deeply a JSON text or value nests, measured without recursion.
//
// Every request body is checked right after it is read, before anything walks it
// recursively (the schema compiler, tool definitions, messages fed to the chat template,
// nlohmann's own dump): a body nested deeper than kMaxRequestDepth is a 400. The limit is
// far above what real clients send (an OpenAI tool schema of 20 nested objects is about
// 45 levels of the body) and far below what would strain a thread's stack.
#pragma once
#include <string>
#include <string_view>

#include "server/openai.h"

namespace glia::server {

inline constexpr int kMaxRequestDepth = 128;  // arrays and objects, the outermost one counted

// Nesting of a JSON text: brackets and braces outside strings (the text need not be
// valid JSON; a parse that follows reports that).
int json_text_depth(std::string_view text);
// The byte offset where the text's nesting first passes `limit`, or npos.
size_t json_too_deep_at(std::string_view text, int limit);
// Nesting of a parsed value (a scalar is 0, [] is 1).
int json_depth(const json& value);
// A 400 naming `where` ("" for the body), the limit and the byte offset where it is passed
// when `text` nests deeper than `limit`.
void check_json_depth(std::string_view text, const std::string& where = "", int limit = kMaxRequestDepth);

}  // namespace glia::server
