// A minimal JSON writer (the core library must not depend on a JSON package).
// Produces compact JSON; strings are escaped, invalid UTF-8 becomes U+FFFD.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace glia::json {

// Escaped and quoted JSON string.
std::string quote(std::string_view s);
// Replace invalid UTF-8 sequences with U+FFFD.
std::string sanitize_utf8(std::string_view s);
// Shortest text that reads back as the same float / double ("%.9g" / "%.17g").
std::string number(double v, int significant_digits = 17);

class Writer {
public:
    Writer& begin_object();
    Writer& end_object();
    Writer& begin_array();
    Writer& end_array();
    Writer& key(std::string_view k);
    Writer& value(std::string_view s);
    Writer& value(const char* s) { return value(std::string_view(s)); }
    Writer& value(const std::string& s) { return value(std::string_view(s)); }
    Writer& value(bool b);
    Writer& value(int64_t v);
    Writer& value(int v) { return value(int64_t(v)); }
    Writer& value(uint64_t v);
    Writer& value(double v, int significant_digits = 17);
    Writer& null();
    Writer& raw(std::string_view json);  // an already-encoded value
    template <typename T>
    Writer& array(const std::vector<T>& v) {
        begin_array();
        for (const auto& x : v) value(x);
        return end_array();
    }
    const std::string& str() const { return out_; }

private:
    void sep();
    std::string out_;
    std::vector<bool> first_;  // per open container: no element written yet
    bool after_key_ = false;
};

}  // namespace glia::json
