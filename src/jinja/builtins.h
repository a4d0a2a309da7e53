// Python/Jinja2 semantics used by the interpreter: operators, attribute and item
// access, method calls on str/dict/list, filters, tests and global functions.
// Internal to src/jinja.
#pragma once
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "jinja/error.h"
#include "jinja/value.h"

namespace glia::jinja {

[[noreturn]] void raise_undefined(const Value& u);
[[noreturn]] void type_error(const std::string& msg);

// `a.name`: attribute first (methods of str/dict/list), then key.
Value get_attr(const Value& obj, const std::string& name);
// `a[key]`: key/index first, then attribute.
Value get_item(const Value& obj, const Value& key);
// a[start:stop:step] (null pointers: omitted).
Value slice(const Value& obj, const Value* start, const Value* stop, const Value* step);

// obj.name(args) for the built-in methods; nullopt when obj has no such method.
std::optional<Value> call_method(const Value& obj, const std::string& name, const CallArgs& args);
Value call_value(const Value& f, const CallArgs& args);

// The items a for loop visits: list/tuple items, dict keys, string characters; nothing
// for Undefined; a TypeError for anything else.
std::vector<Value> iterate(const Value& v);

Value binary_op(const std::string& op, const Value& a, const Value& b);  // + - * / // % ** ~
Value unary_minus(const Value& v);
bool compare(const std::string& op, const Value& a, const Value& b);   // == != < > <= >= in notin

Value apply_filter(const std::string& name, const Value& v, const CallArgs& args);
bool apply_test(const std::string& name, const Value& v, const CallArgs& args);
bool has_filter(const std::string& name);
bool has_test(const std::string& name);

// Global functions (range, namespace, dict, raise_exception, strftime_now, joiner,
// cycler). nullopt for unknown names.
std::optional<Value> global_function(const std::string& name, const std::tm& now);

// Python str.format / printf-style formatting.
std::string python_format(const std::string& fmt, const CallArgs& args);
// escape_args: the format string is Markup, so %s/%r arguments are HTML-escaped.
std::string percent_format(const std::string& fmt, const Value& args, bool escape_args = false);
// markupsafe.escape of a plain string: & < > " ' become entities.
std::string html_escape(const std::string& s);

// Python ordering of two values (-1, 0, 1); TypeError when they do not order.
int python_order(const Value& a, const Value& b);

}  // namespace glia::jinja
