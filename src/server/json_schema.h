// JSON schemas (response_format json_schema, tool parameters) compiled to the grammar that
// sampling enforces (grammar/json_grammar.h).
//
// Supported: type (a name or a list of names), properties, required, additionalProperties
// (a schema or a boolean; absent means any value, as the specification says), items,
// minItems, maxItems, minLength, maxLength, enum, const, anyOf, allOf of one schema, and
// local $ref ("#", "#/$defs/NAME", "#/definitions/NAME"; recursion allowed). Annotations
// (title, description, default, examples, $schema, $id, $comment, deprecated, readOnly,
// writeOnly) are ignored. Anything else (pattern, format, minimum, oneOf, ...) cannot be
// enforced token by token here and is refused: an ApiError (400) naming the keyword and
// where it is, rather than output that would not validate.
#pragma once
#include <memory>
#include <string>

#include "grammar/json_grammar.h"
#include "server/openai.h"

namespace glia::server {

// `where`: the request field the schema came from, for error messages and `param`.
std::shared_ptr<grammar::Grammar> compile_schema(const json& schema, const std::string& where);
// Compiles into an existing grammar (tool calls put schemas inside their own markup);
// returns the schema's node.
int compile_schema_into(grammar::Grammar& g, const json& schema, const std::string& where);
// Any JSON object (response_format json_object).
std::shared_ptr<grammar::Grammar> any_object_grammar();

}  // namespace glia::server
