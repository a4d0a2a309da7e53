// JSON schemas (response_format json_schema, tool parameters) compiled to the grammar that
// sampling enforces (grammar/json_grammar.h).
//
// Supported: type (a name or a list of names), properties (any number), required,
// additionalProperties (a schema or a boolean; absent, as in the reference's grammars, it
// allows no key beyond 'properties' when those are given, and any key when they are not:
// the specification would allow any), items,
// prefixItems (or items as a list), minItems, maxItems, minLength, maxLength, pattern (a
// regular-expression subset: grammar/regex.h), format (date, time, date-time, uuid and
// email enforced; other formats are annotations, as the specification's default
// vocabulary has them), minimum, maximum, exclusiveMinimum, exclusiveMaximum (integers
// exactly; a bounded number has no exponent and at most 15 digits before and after its
// point), enum (any number of values), const, anyOf, oneOf (as anyOf: a value two
// alternatives accept is not refused), allOf of one schema, nullable, and local $ref
// ("#", "#/$defs/NAME", "#/definitions/NAME"; recursion allowed). Annotations (title,
// description, default, examples, $schema, $id, $comment, deprecated, readOnly,
// writeOnly) are ignored. Anything else (multipleOf, uniqueItems, not, if/then/else, ...)
// cannot be enforced token by token here and is refused: an ApiError (400) naming the
// keyword and where it is, rather than output that would not validate. So are schemas
// nested more than 64 levels (as JSON, or through subschemas and $ref hops) and schemas
// whose grammar would exceed 100,000 nodes (an object's keys count as nodes).
//
// An object's keys are written in a fixed order, as the reference's grammars write them:
// the required ones in the order 'properties' lists them, then any of the optional ones
// in that order, then other keys (where additionalProperties allows them).
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
