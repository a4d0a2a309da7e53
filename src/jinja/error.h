// Template errors: what went wrong, what kind of error it is, and the template line.
#pragma once
#include <string>

#include "core/error.h"

namespace glia::jinja {

enum class ErrorKind {
    Syntax,     // the template does not parse (TemplateSyntaxError)
    Undefined,  // an operation on an undefined value (UndefinedError)
    Type,       // wrong operand types, bad arguments (TypeError, ValueError ...)
    Security,   // a mutating method in the immutable sandbox (SecurityError)
    Raised,     // the template called raise_exception(msg) (TemplateError)
};

const char* error_kind_name(ErrorKind k);  // "syntax error", "undefined", ...

class Error : public glia::Error {
public:
    Error(ErrorKind kind, std::string message, int line = 0);
    ErrorKind kind() const { return kind_; }
    // The bare message: for Raised exactly the template's text.
    const std::string& message() const { return message_; }
    int line() const { return line_; }  // 1-based; 0 when unknown
    // A copy that names the line (the interpreter adds it where the error surfaces).
    Error with_line(int line) const { return Error(kind_, message_, line); }

private:
    ErrorKind kind_;
    std::string message_;
    int line_;
};

}  // namespace glia::jinja
