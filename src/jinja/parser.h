// Jinja parser: tokens to a syntax tree, following Jinja2's grammar and precedence
// (filters and tests bind tighter than arithmetic; `not` looser than comparisons; the
// inline `a if b else c`; chained comparisons; slices; keyword arguments).
#pragma once
#include <string_view>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace glia::jinja {

// Throws jinja::Error (Syntax) naming the line.
Program parse(std::string_view source, const LexOptions& opt = {});

}  // namespace glia::jinja
