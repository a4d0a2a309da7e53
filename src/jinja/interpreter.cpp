// The evaluator: walks the syntax tree with a chain of scopes.
//
// Scoping follows Jinja2: the template's top level is one scope; each for-loop
// iteration, macro call, call/filter/set block and `with` gets a child scope whose
// reads fall through to the parent and whose `set`s stay local (so a plain `set` in a
// loop body does not leak out; namespace() objects are shared by reference). `if`
// blocks do not open a scope.
#include <chrono>
#include <cstring>

#include "jinja/ast.h"
#include "jinja/builtins.h"
#include "jinja/jinja.h"
#include "jinja/parser.h"

namespace glia::jinja {
namespace {

struct Scope;
using ScopePtr = std::shared_ptr<Scope>;

struct Scope {
    ScopePtr parent;
    std::vector<std::pair<std::string, Value>> vars;

    explicit Scope(ScopePtr p = nullptr) : parent(std::move(p)) {}
    const Value* lookup(const std::string& name) const {
        for (const Scope* s = this; s; s = s->parent.get())
            for (const auto& [k, v] : s->vars)
                if (k == name) return &v;
        return nullptr;
    }
    void set(const std::string& name, Value v) {
        for (auto& [k, x] : vars)
            if (k == name) {
                x = std::move(v);
                return;
            }
        vars.emplace_back(name, std::move(v));
    }
};

enum class Flow { Normal, Break, Continue };

constexpr int kMaxCallDepth = 400;

class Interp {
public:
    Interp(const std::tm& now, uint64_t max_steps, size_t max_output) : steps_left_(max_steps), max_output_(max_output) {
        for (const char* g : {"range", "namespace", "dict", "raise_exception", "strftime_now", "joiner"})
            globals_.emplace_back(g, *global_function(g, now));
    }
    ~Interp() {
        // Macros hold their defining scope and live in it: break those cycles.
        for (auto& s : macro_scopes_) s->vars.clear();
    }

    int line() const { return line_; }

    Flow exec(const Body& body, const ScopePtr& sc, std::string& out) {
        for (const StmtPtr& st : body) {
            const Flow f = exec_stmt(*st, sc, out);
            if (f != Flow::Normal) return f;
        }
        return Flow::Normal;
    }

private:
    [[noreturn]] void fail(ErrorKind k, const std::string& msg) { throw Error(k, msg, line_); }

    // One statement or expression evaluated: fails when the render's step budget is spent.
    void tick() {
        if (steps_left_ == 0)
            fail(ErrorKind::Type, "the template did not finish within its step limit (a loop without bound?)");
        --steps_left_;
    }
    void check_output(const std::string& out) {
        if (out.size() > max_output_)
            fail(ErrorKind::Type, "the template's output is larger than the limit of " + std::to_string(max_output_) + " bytes");
    }

    Flow exec_stmt(const Stmt& s, const ScopePtr& sc, std::string& out) {
        line_ = s.line;
        tick();
        const Flow f = exec_stmt_kind(s, sc, out);
        check_output(out);
        return f;
    }

    Flow exec_stmt_kind(const Stmt& s, const ScopePtr& sc, std::string& out) {
        switch (s.kind) {
            case StmtKind::Text: out += s.text; return Flow::Normal;
            case StmtKind::Output: {
                const Value v = eval(*s.expr, sc);
                out += v.str();
                return Flow::Normal;
            }
            case StmtKind::If:
                for (size_t i = 0; i < s.conds.size(); ++i) {
                    if (eval(*s.conds[i], sc).truthy()) return exec(s.bodies[i], sc, out);
                }
                return exec(s.else_body, sc, out);
            case StmtKind::For: return exec_for(s, sc, out);
            case StmtKind::Set: {
                Value v = eval(*s.expr, sc);
                line_ = s.line;
                if (!s.ns_attr.empty()) {
                    const Value* ns = sc->lookup(s.targets[0]);
                    if (!ns || !ns->is_object() || ns->object_kind() != ObjectKind::Namespace)
                        fail(ErrorKind::Type, "cannot assign attribute on non-namespace object '" + s.targets[0] + "'");
                    ns->mutable_object().set(s.ns_attr, std::move(v));
                } else {
                    bind(*sc, s.targets, s.target_tuple, v);
                }
                return Flow::Normal;
            }
            case StmtKind::SetBlock: {
                std::string text;
                auto inner = std::make_shared<Scope>(sc);
                exec(s.body, inner, text);
                Value v(std::move(text));
                if (s.filter) v = apply_filter_chain(*s.filter, v, sc);
                sc->set(s.targets[0], std::move(v));
                return Flow::Normal;
            }
            case StmtKind::FilterBlock: {
                std::string text;
                auto inner = std::make_shared<Scope>(sc);
                exec(s.body, inner, text);
                out += apply_filter_chain(*s.filter, Value(std::move(text)), sc).str();
                return Flow::Normal;
            }
            case StmtKind::Macro: {
                const Stmt* def = &s;
                ScopePtr def_scope = sc;
                Value fn = Value::function(
                    s.text, [this, def, def_scope](const CallArgs& a) { return call_macro(*def, def_scope, a); }, true);
                macro_scopes_.push_back(sc);
                sc->set(s.text, std::move(fn));
                return Flow::Normal;
            }
            case StmtKind::CallBlock: {
                const Stmt* blk = &s;
                ScopePtr outer = sc;
                Value caller = Value::function("caller", [this, blk, outer](const CallArgs& a) {
                    auto inner = std::make_shared<Scope>(outer);
                    bind_params(inner, blk->params, a);
                    std::string text;
                    exec(blk->body, inner, text);
                    return Value(std::move(text));
                }, true);
                out += eval_call(*s.expr, sc, &caller).str();
                return Flow::Normal;
            }
            case StmtKind::With: {
                auto inner = std::make_shared<Scope>(sc);
                for (const auto& [name, e] : s.assigns) inner->set(name, eval(*e, sc));
                return exec(s.body, inner, out);
            }
            case StmtKind::Break: return Flow::Break;
            case StmtKind::Continue: return Flow::Continue;
        }
        return Flow::Normal;
    }

    void bind(Scope& sc, const std::vector<std::string>& targets, bool tuple, const Value& v) {
        if (targets.size() == 1 && !tuple) {
            sc.set(targets[0], v);
            return;
        }
        if (v.is_undefined()) raise_undefined(v);
        const std::vector<Value> items = iterate(v);
        if (items.size() < targets.size())
            fail(ErrorKind::Type, "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                                      std::to_string(items.size()) + ")");
        if (items.size() > targets.size())
            fail(ErrorKind::Type, "too many values to unpack (expected " + std::to_string(targets.size()) + ")");
        for (size_t i = 0; i < targets.size(); ++i) sc.set(targets[i], items[i]);
    }

    Flow exec_for(const Stmt& s, const ScopePtr& sc, std::string& out) {
        if (s.recursive) fail(ErrorKind::Type, "recursive for loops are not supported");
        const Value seq = eval(*s.expr, sc);
        line_ = s.line;
        std::vector<Value> items = iterate(seq);
        if (s.cond) {
            std::vector<Value> kept;
            for (const Value& x : items) {
                auto tmp = std::make_shared<Scope>(sc);
                bind(*tmp, s.targets, s.target_tuple, x);
                if (eval(*s.cond, tmp).truthy()) kept.push_back(x);
            }
            items = std::move(kept);
        }
        if (items.empty()) return exec(s.else_body, sc, out);
        const size_t n = items.size();
        const int64_t depth = 1;  // only recursive loops go deeper
        for (size_t i = 0; i < n; ++i) {
            auto it = std::make_shared<Scope>(sc);
            Value loop = Value::object(ObjectKind::Loop);
            ObjectData& L = loop.mutable_object();
            const auto ni = static_cast<int64_t>(n), ii = static_cast<int64_t>(i);
            L.items.reserve(12);
            L.items.emplace_back("index", Value(ii + 1));
            L.items.emplace_back("index0", Value(ii));
            L.items.emplace_back("revindex", Value(ni - ii));
            L.items.emplace_back("revindex0", Value(ni - ii - 1));
            L.items.emplace_back("first", Value(i == 0));
            L.items.emplace_back("last", Value(i + 1 == n));
            L.items.emplace_back("length", Value(ni));
            L.items.emplace_back("depth", Value(depth));
            L.items.emplace_back("depth0", Value(depth - 1));
            if (i > 0) L.items.emplace_back("previtem", items[i - 1]);
            if (i + 1 < n) L.items.emplace_back("nextitem", items[i + 1]);
            L.items.emplace_back("cycle", Value::function("cycle", [i](const CallArgs& a) {
                if (a.pos.empty()) type_error("no items for cycling given");
                return a.pos[i % a.pos.size()];
            }));
            tick();  // an iteration is a step even when its body is empty
            it->vars.emplace_back("loop", std::move(loop));
            bind(*it, s.targets, s.target_tuple, items[i]);
            if (exec(s.body, it, out) == Flow::Break) break;
        }
        return Flow::Normal;
    }

    // Binds a macro's (or caller's) parameters; defaults are evaluated in the call scope
    // (earlier parameters visible). Extra arguments go to `varargs` and `kwargs`.
    void bind_params(const ScopePtr& scp, const std::vector<Param>& params, const CallArgs& a) {
        Scope& sc = *scp;
        for (size_t i = 0; i < params.size(); ++i) {
            const Param& p = params[i];
            if (i < a.pos.size()) sc.set(p.name, a.pos[i]);
            else if (const Value* kv = a.kwarg(p.name)) sc.set(p.name, *kv);
            else if (p.def) sc.set(p.name, eval(*p.def, scp));
            else {
                sc.set(p.name, Value::undefined("parameter '" + p.name + "' was not provided"));
            }
        }
        std::vector<Value> extra;
        for (size_t i = params.size(); i < a.pos.size(); ++i) extra.push_back(a.pos[i]);
        sc.set("varargs", Value::array(std::move(extra), ArrayKind::Tuple));
        Value kwargs = Value::object();
        for (const auto& [k, v] : a.kw) {
            if (k == "caller") {
                sc.set("caller", v);
                continue;
            }
            bool is_param = false;
            for (const Param& p : params) is_param |= p.name == k;
            if (!is_param) kwargs.mutable_object().set(k, v);
        }
        sc.set("kwargs", std::move(kwargs));
    }

    Value call_macro(const Stmt& m, const ScopePtr& def_scope, const CallArgs& a) {
        if (depth_ >= kMaxCallDepth) fail(ErrorKind::Type, "maximum recursion depth exceeded in macro '" + m.text + "'");
        ++depth_;
        const int saved_line = line_;
        auto sc = std::make_shared<Scope>(def_scope);
        bind_params(sc, m.params, a);
        std::string text;
        exec(m.body, sc, text);
        --depth_;
        line_ = saved_line;
        return Value(std::move(text));
    }

    // ---- expressions ----

    CallArgs eval_args(const CallArgsExpr& ae, const ScopePtr& sc) {
        CallArgs a;
        a.pos.reserve(ae.pos.size());
        for (const ExprPtr& e : ae.pos) a.pos.push_back(eval(*e, sc));
        for (const auto& [k, e] : ae.kw) a.kw.emplace_back(k, eval(*e, sc));
        return a;
    }

    Value eval_call(const Expr& e, const ScopePtr& sc, const Value* caller = nullptr) {
        const Expr& callee = *e.a;
        if (callee.kind == ExprKind::GetAttr) {
            const Value obj = eval(*callee.a, sc);
            CallArgs a = eval_args(e.args, sc);
            if (caller) a.kw.emplace_back("caller", *caller);
            line_ = e.line;
            if (auto r = call_method(obj, callee.name, a)) return std::move(*r);
            return call_value(get_attr(obj, callee.name), a);
        }
        const Value f = eval(callee, sc);
        CallArgs a = eval_args(e.args, sc);
        if (caller) a.kw.emplace_back("caller", *caller);
        line_ = e.line;
        return call_value(f, a);
    }

    Value apply_filter_chain(const Expr& f, const Value& input, const ScopePtr& sc) {
        const Value v = f.a ? apply_filter_chain(*f.a, input, sc) : input;
        CallArgs a = eval_args(f.args, sc);
        line_ = f.line;
        return apply_filter(f.name, v, a);
    }

    Value lookup(const std::string& name, const ScopePtr& sc) const {
        if (const Value* v = sc->lookup(name)) return *v;
        for (const auto& [k, v] : globals_)
            if (k == name) return v;
        return Value::undefined("'" + name + "' is undefined");
    }

    Value eval(const Expr& e, const ScopePtr& sc) {
        tick();
        Value v = eval_kind(e, sc);
        // Every value a template builds stays within kMaxValueSize (concatenation doubling
        // a string in a loop stops here).
        if (v.is_string()) check_size(static_cast<int64_t>(v.as_string().size()), "a string");
        else if (v.is_array()) check_size(static_cast<int64_t>(v.items().size()), "a list");
        return v;
    }

    Value eval_kind(const Expr& e, const ScopePtr& sc) {
        line_ = e.line;
        switch (e.kind) {
            case ExprKind::Literal: return e.value;
            case ExprKind::Name: return lookup(e.name, sc);
            case ExprKind::List:
            case ExprKind::Tuple: {
                std::vector<Value> items;
                items.reserve(e.items.size());
                for (const ExprPtr& x : e.items) items.push_back(eval(*x, sc));
                return Value::array(std::move(items), e.kind == ExprKind::List ? ArrayKind::List : ArrayKind::Tuple);
            }
            case ExprKind::Dict: {
                Value d = Value::object();
                for (size_t i = 0; i < e.keys.size(); ++i) {
                    Value k = eval(*e.keys[i], sc);
                    Value v = eval(*e.items[i], sc);
                    d.mutable_object().set_key(k, std::move(v));
                }
                return d;
            }
            case ExprKind::GetAttr: {
                const Value obj = eval(*e.a, sc);
                line_ = e.line;
                return get_attr(obj, e.name);
            }
            case ExprKind::GetItem: {
                const Value obj = eval(*e.a, sc);
                const Value key = eval(*e.b, sc);
                line_ = e.line;
                return get_item(obj, key);
            }
            case ExprKind::Slice: {
                const Value obj = eval(*e.a, sc);
                Value parts[3];
                for (int i = 0; i < 3; ++i)
                    if (e.items[static_cast<size_t>(i)]) parts[i] = eval(*e.items[static_cast<size_t>(i)], sc);
                line_ = e.line;
                return slice(obj, e.items[0] ? &parts[0] : nullptr, e.items[1] ? &parts[1] : nullptr,
                             e.items[2] ? &parts[2] : nullptr);
            }
            case ExprKind::Call: return eval_call(e, sc);
            case ExprKind::Filter: {
                const Value v = e.a ? eval(*e.a, sc) : Value();
                CallArgs a = eval_args(e.args, sc);
                line_ = e.line;
                return apply_filter(e.name, v, a);
            }
            case ExprKind::Test: {
                const Value v = eval(*e.a, sc);
                CallArgs a = eval_args(e.args, sc);
                line_ = e.line;
                return Value(apply_test(e.name, v, a) != e.negated);
            }
            case ExprKind::Unary: {
                const Value v = eval(*e.a, sc);
                line_ = e.line;
                if (e.name == "not") return Value(!v.truthy());
                if (e.name == "-") return unary_minus(v);
                if (v.is_undefined()) raise_undefined(v);
                if (!v.is_number()) type_error(std::string("bad operand type for unary +: '") + v.type_name() + "'");
                return v.is_bool() ? Value(v.as_int()) : v;
            }
            case ExprKind::Binary: {
                if (e.name == "and") {
                    Value l = eval(*e.a, sc);
                    return l.truthy() ? eval(*e.b, sc) : l;
                }
                if (e.name == "or") {
                    Value l = eval(*e.a, sc);
                    return l.truthy() ? l : eval(*e.b, sc);
                }
                const Value l = eval(*e.a, sc);
                const Value r = eval(*e.b, sc);
                line_ = e.line;
                return binary_op(e.name, l, r);
            }
            case ExprKind::Compare: {
                Value l = eval(*e.a, sc);
                for (size_t i = 0; i < e.ops.size(); ++i) {
                    Value r = eval(*e.items[i], sc);
                    line_ = e.line;
                    if (!compare(e.ops[i], l, r)) return Value(false);
                    l = std::move(r);
                }
                return Value(true);
            }
            case ExprKind::Cond: {
                if (eval(*e.items[1], sc).truthy()) return eval(*e.items[0], sc);
                if (e.items[2]) return eval(*e.items[2], sc);
                return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                                        " evaluated to false and no else section was defined.");
            }
        }
        return Value();
    }

    std::vector<std::pair<std::string, Value>> globals_;
    std::vector<ScopePtr> macro_scopes_;
    int line_ = 0;
    int depth_ = 0;
    uint64_t steps_left_;
    size_t max_output_;
};

std::tm local_now() {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    localtime_r(&t, &tm);
    return tm;
}

}  // namespace

std::tm reference_time() {
    std::tm t{};
    t.tm_year = 2026 - 1900;
    t.tm_mon = 0;
    t.tm_mday = 15;
    t.tm_hour = 12;
    t.tm_wday = 4;   // Thursday
    t.tm_yday = 14;
    t.tm_isdst = 0;
    return t;
}

Template::Template(std::string_view source, const LexOptions& opt)
    : prog_(std::make_shared<Program>(parse(source, opt))) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const Value& context, const RenderOptions& opt) const {
    Interp in(opt.now ? *opt.now : local_now(), opt.max_steps, opt.max_output);
    auto top = std::make_shared<Scope>();
    if (context.is_object())
        for (const auto& [k, v] : context.object_data().items) top->set(k, v);
    std::string out;
    try {
        in.exec(prog_->body, top, out);
    } catch (const Error& e) {
        if (e.line() == 0) throw e.with_line(in.line());
        throw;
    }
    return out;
}

}  // namespace glia::jinja
