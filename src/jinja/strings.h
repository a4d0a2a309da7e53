// Python str operations on UTF-8 text (indices and lengths count code points, as in
// Python). Internal to src/jinja.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace glia::jinja::str {

bool is_space(uint32_t c);  // Python str.isspace for one code point
bool is_digit(uint32_t c);
bool is_alpha(uint32_t c);
bool is_upper(uint32_t c);
bool is_lower(uint32_t c);
uint32_t to_upper(uint32_t c);
uint32_t to_lower(uint32_t c);

bool all_of(const std::string& s, const std::function<bool(uint32_t)>& pred);  // false if empty
bool is_upper_str(const std::string& s);
bool is_lower_str(const std::string& s);

// strip/lstrip/rstrip: chars nullopt = whitespace.
std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right);
std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(const std::string& s, bool keepends);
std::string replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count);
std::string upper(const std::string& s);
std::string lower(const std::string& s);
std::string title(const std::string& s);       // str.title()
std::string capitalize(const std::string& s);  // str.capitalize()
std::string swapcase(const std::string& s);
int64_t find(const std::string& s, const std::string& sub);   // code-point index or -1
int64_t rfind(const std::string& s, const std::string& sub);
int64_t count(const std::string& s, const std::string& sub);
std::string zfill(const std::string& s, int64_t width);
// Pads to width code points; align '<', '>' or '^' (Python centres with the extra space right).
std::string pad(const std::string& s, int64_t width, const std::string& fill, char align);

}  // namespace glia::jinja::str
