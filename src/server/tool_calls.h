// Tool calling: the tool-call format of a chat template's family, the model's output
// parsed back into OpenAI tool_calls, what of a stream may be shown as content before a
// call could begin, and the grammar that forces a call (tool_choice "required" or a named
// function).
//
// Families (found from the template's own text):
// - HERMES (Hermes, Qwen 2.5/3, and the templates that use the same tags):
//     <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   (one or more)
// - LLAMA3 (Llama 3.1/3.2 JSON tool calls): {"name": "f", "parameters": {...}}, the whole
//   reply, optionally after <|python_tag|>
// - MISTRAL: [TOOL_CALLS]f[ARGS]{...} (with [CALL_ID]id before [ARGS] in some versions),
//   or the older [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]
// Other families (XML parameters, harmony channels, ...) are NONE: tools still reach the
// template, the reply stays text.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "grammar/json_grammar.h"
#include "server/openai.h"

namespace glia::server {

enum class ToolFormat { NONE, HERMES, LLAMA3, MISTRAL, MISTRAL_ARRAY };
ToolFormat detect_tool_format(const std::string& template_source);
const char* tool_format_name(ToolFormat f);

struct ToolCall {
    std::string id;         // "call_..." (the model's own id when it wrote one)
    std::string name;
    std::string arguments;  // JSON text of an object
};

struct ParsedReply {
    std::string content;  // the text outside the calls
    std::vector<ToolCall> calls;
};
ParsedReply parse_tool_calls(ToolFormat f, const std::string& text);

// Bytes of `text` (a reply so far) that are content for sure: everything before what is,
// or may become, a tool call.
size_t content_prefix(ToolFormat f, const std::string& text);

// The texts of the special tokens a family's calls contain (rendered in the reply even
// when they are control tokens, so that the parser sees them).
std::vector<std::string> tool_markers(ToolFormat f);

// A grammar of one call to one of `tools` (only `name` when not empty), arguments
// following each function's parameters schema. Throws ApiError (400) when a schema
// cannot be enforced, naming the tool.
std::shared_ptr<grammar::Grammar> tool_call_grammar(ToolFormat f, const json& tools, const std::string& name);

}  // namespace glia::server
