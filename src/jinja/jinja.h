// A small Jinja interpreter for chat templates.
//
// It renders templates the way Hugging Face transformers does (jinja2's immutable
// sandbox with trim_blocks and lstrip_blocks, the loopcontrols extension, the
// {% generation %} tag, a json.dumps-compatible tojson, raise_exception and
// strftime_now): Python semantics for values, printing, operators, string methods and
// scoping (a `set` inside a for loop stays in that iteration; namespace() carries state).
//
//   jinja::Template t(source);
//   jinja::Value ctx = jinja::Value::object();
//   ctx.mutable_object().set("messages", messages);
//   std::string text = t.render(ctx);
//
// Errors are jinja::Error (syntax errors from the constructor; undefined values, type
// errors, sandbox violations and raise_exception() from render), naming the line.
#pragma once
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "jinja/error.h"
#include "jinja/lexer.h"
#include "jinja/value.h"

namespace glia::jinja {

struct Program;

struct RenderOptions {
    // The time strftime_now() formats; unset: the local time when render() starts.
    std::optional<std::tm> now;
    // Bounds on one render, so that a template that loops without bound (or nearly so:
    // nested loops over range(100000)) ends with an error instead of running for ever:
    // statements, expressions and loop iterations evaluated, and bytes of output. Values are bounded by
    // kMaxValueSize (error.h) whatever these say.
    uint64_t max_steps = 5'000'000;  // a few seconds at most; real templates take thousands
    size_t max_output = size_t(kMaxValueSize);
};

// The fixed time the reference goldens use: Thursday 15 January 2026, 12:00:00.
std::tm reference_time();

class Template {
public:
    explicit Template(std::string_view source, const LexOptions& opt = {});
    ~Template();
    Template(Template&&) noexcept;
    Template& operator=(Template&&) noexcept;

    // Renders with the variables of `context` (an object; other types: no variables).
    std::string render(const Value& context, const RenderOptions& opt = {}) const;

private:
    std::shared_ptr<const Program> prog_;
};

}  // namespace glia::jinja
