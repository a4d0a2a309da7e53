// Errors: one exception type carrying a message that says what went wrong and where.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace glia {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Concatenate anything streamable into a string: cat("tensor ", name, " at ", off).
template <typename... Args>
std::string cat(const Args&... args) {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
}

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
    throw Error(cat(args...));
}

}  // namespace glia
