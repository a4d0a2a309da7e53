// The syntax tree of a Jinja template: expressions and statements, each with its line.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace glia::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// ---- expressions ------------------------------------------------------------------------

enum class ExprKind {
    Literal,   // value
    Name,      // name
    List,      // items
    Tuple,     // items
    Dict,      // keys / items (pairwise)
    GetAttr,   // a.name            (a = operand)
    GetItem,   // a[index]          (a = operand, b = index)
    Slice,     // a[start:stop:step] (operand, items = {start, stop, step}, null when absent)
    Call,      // a(args)           (operand, args)
    Filter,    // a | name(args)    (operand may be null inside {% filter %})
    Test,      // a is [not] name(args)
    Unary,     // op: "-", "+", "not"
    Binary,    // op: + - * / // % ** ~ and or
    Compare,   // operand, then ops[i] with items[i]: == != < > <= >= in notin
    Cond,      // items = {then, test, else (may be null)}
};

struct CallArgsExpr {
    std::vector<ExprPtr> pos;
    std::vector<std::pair<std::string, ExprPtr>> kw;
};

struct Expr {
    ExprKind kind;
    int line = 0;
    Value value;                 // Literal
    std::string name;            // Name, GetAttr, Filter, Test; op of Unary/Binary
    ExprPtr a, b;                // operand(s)
    std::vector<ExprPtr> items;  // List/Tuple/Dict values, Slice parts, Compare rhs, Cond parts
    std::vector<ExprPtr> keys;   // Dict keys
    std::vector<std::string> ops;
    CallArgsExpr args;           // Call, Filter, Test
    bool negated = false;        // Test: "is not"

    Expr(ExprKind k, int l) : kind(k), line(l) {}
};

// ---- statements -------------------------------------------------------------------------

enum class StmtKind {
    Text,        // literal text
    Output,      // {{ expr }}
    If,          // conds[i] -> bodies[i]; else_body
    For,         // targets in iter [if cond]: body; else_body
    Set,         // target = expr          (target: names, or ns.attr)
    SetBlock,    // {% set x %}body{% endset %}, optional filter chain
    Macro,       // name(params): body
    CallBlock,   // {% call(params) expr %}body{% endcall %}
    FilterBlock, // {% filter f %}body{% endfilter %}
    With,        // {% with a = 1 %}body{% endwith %}
    Break,
    Continue,
};

struct Param {
    std::string name;
    ExprPtr def;  // may be null
};

struct Stmt {
    StmtKind kind;
    int line = 0;
    std::string text;                  // Text; Set/Macro name; Set namespace attribute
    ExprPtr expr;                      // Output, For iter, Set value, CallBlock call, loop filter
    ExprPtr cond;                      // For "if" filter
    ExprPtr filter;                    // SetBlock/FilterBlock filter chain (operand-less Filter)
    std::vector<std::string> targets;  // For/Set names (more than one: unpacking)
    bool target_tuple = false;         // `for a, in ...` style unpacking of one name
    std::string ns_attr;               // Set: `set ns.attr = ...` (targets[0] is ns)
    std::vector<ExprPtr> conds;        // If
    std::vector<Body> bodies;          // If branches
    Body body, else_body;
    std::vector<Param> params;         // Macro, CallBlock
    std::vector<std::pair<std::string, ExprPtr>> assigns;  // With
    bool recursive = false;            // For

    Stmt(StmtKind k, int l) : kind(k), line(l) {}
};

struct Program {
    Body body;
};

}  // namespace glia::jinja
