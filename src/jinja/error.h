// Template errors: what went wrong, what kind of error it is, and the template line.
#pragma once
#include <cstdint>
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

const char* error_kind_name(ErrorKind k);

// The largest string or list a template may build (bytes, or items for lists); an operation
// that would make a larger one fails with a Type error before allocating (a template must
// not be able to exhaust memory: "x" * 10**12, "".center(10**12), doubling in a loop).
constexpr int64_t kMaxValueSize = int64_t(64) << 20;
// Throws when `n` (the size an operation is about to produce) is over kMaxValueSize.
void check_size(int64_t n, const char* what);  // "syntax error", "undefined", ...

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
