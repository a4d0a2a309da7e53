#include "jinja/parser.h"

#include <initializer_list>

#include "jinja/error.h"

namespace glia::jinja {
namespace {

class Parser {
public:
    explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

    Program program() {
        Program p;
        std::string stop;
        p.body = subparse({}, stop);
        return p;
    }

private:
    // ---- token helpers ----
    const Token& cur() const { return t_[i_]; }
    const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
    void next() { if (i_ + 1 < t_.size()) ++i_; }
    bool is_op(const char* op) const { return cur().kind == Tok::Op && cur().text == op; }
    bool is_name(const char* n) const { return cur().kind == Tok::Name && cur().text == n; }
    bool skip_op(const char* op) {
        if (!is_op(op)) return false;
        next();
        return true;
    }
    bool skip_name(const char* n) {
        if (!is_name(n)) return false;
        next();
        return true;
    }
    static std::string describe(const Token& t) {
        switch (t.kind) {
            case Tok::Text: return "template text";
            case Tok::VarBegin: return "'{{'";
            case Tok::VarEnd: return "end of print statement '}}'";
            case Tok::BlockBegin: return "'{%'";
            case Tok::BlockEnd: return "end of statement block '%}'";
            case Tok::Name: return "'" + t.text + "'";
            case Tok::String: return "string literal";
            case Tok::Int: case Tok::Float: return "number " + t.text;
            case Tok::Op: return "'" + t.text + "'";
            case Tok::Eof: return "end of template";
        }
        return "token";
    }
    [[noreturn]] void fail(const std::string& msg) const { throw Error(ErrorKind::Syntax, msg, cur().line); }
    [[noreturn]] void unexpected(const std::string& wanted) const {
        fail("expected " + wanted + ", got " + describe(cur()));
    }
    void expect_op(const char* op) {
        if (!skip_op(op)) unexpected(std::string("'") + op + "'");
    }
    void expect_block_end() {
        if (cur().kind != Tok::BlockEnd) unexpected("end of statement block '%}'");
        next();
    }
    std::string expect_name() {
        if (cur().kind != Tok::Name) unexpected("a name");
        std::string n = cur().text;
        next();
        return n;
    }
    ExprPtr make(ExprKind k) { return std::make_unique<Expr>(k, cur().line); }

    // ---- statements ----

    // Parses until a block tag whose name is in `ends` (the tag name is consumed; the
    // block end is not) or the end of the template (only allowed when `ends` is empty).
    Body subparse(std::initializer_list<const char*> ends, std::string& stop) {
        Body body;
        for (;;) {
            const Token& t = cur();
            if (t.kind == Tok::Eof) {
                if (ends.size() == 0) return body;
                std::string want;
                for (const char* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
                fail("unexpected end of template: missing " + want + " (opened at line " + std::to_string(open_line_) + ")");
            }
            if (t.kind == Tok::Text) {
                auto s = std::make_unique<Stmt>(StmtKind::Text, t.line);
                s->text = t.text;
                body.push_back(std::move(s));
                next();
            } else if (t.kind == Tok::VarBegin) {
                auto s = std::make_unique<Stmt>(StmtKind::Output, t.line);
                next();
                s->expr = parse_tuple(true, {});
                if (cur().kind != Tok::VarEnd) unexpected("end of print statement '}}'");
                next();
                body.push_back(std::move(s));
            } else if (t.kind == Tok::BlockBegin) {
                next();
                if (cur().kind != Tok::Name) unexpected("a statement name");
                for (const char* e : ends)
                    if (cur().text == e) {
                        stop = e;
                        next();
                        return body;
                    }
                body.push_back(statement(ends));
            } else {
                unexpected("template text or a tag");
            }
        }
    }

    StmtPtr statement(std::initializer_list<const char*> enclosing) {
        const std::string name = cur().text;
        const int line = cur().line;
        const int saved_open = open_line_;
        open_line_ = line;
        StmtPtr s;
        if (name == "if") s = stmt_if();
        else if (name == "for") s = stmt_for();
        else if (name == "set") s = stmt_set();
        else if (name == "macro") s = stmt_macro();
        else if (name == "call") s = stmt_call();
        else if (name == "filter") s = stmt_filter();
        else if (name == "with") s = stmt_with();
        else if (name == "generation") s = stmt_generation();
        else if (name == "break" || name == "continue") {
            if (loop_depth_ == 0) fail("'" + name + "' outside of a for loop");
            next();
            expect_block_end();
            s = std::make_unique<Stmt>(name == "break" ? StmtKind::Break : StmtKind::Continue, line);
        } else {
            std::string msg = "encountered unknown tag '" + name + "'";
            if (enclosing.size()) {
                msg += "; the innermost block that needs closing looks for ";
                bool first = true;
                for (const char* e : enclosing) {
                    msg += (first ? "'" : " or '") + std::string(e) + "'";
                    first = false;
                }
            }
            fail(msg);
        }
        open_line_ = saved_open;
        return s;
    }

    StmtPtr stmt_if() {
        auto s = std::make_unique<Stmt>(StmtKind::If, cur().line);
        next();  // if
        for (;;) {
            s->conds.push_back(parse_tuple(false, {}));
            expect_block_end();
            std::string stop;
            s->bodies.push_back(subparse({"elif", "else", "endif"}, stop));
            if (stop == "elif") continue;
            if (stop == "else") {
                expect_block_end();
                s->else_body = subparse({"endif"}, stop);
            }
            expect_block_end();
            return s;
        }
    }

    // Assignment targets: `a`, `a, b`, `(a, b)`.
    void parse_targets(std::vector<std::string>& names, bool& tuple) {
        const bool paren = skip_op("(");
        names.push_back(expect_name());
        while (skip_op(",")) {
            tuple = true;
            if (cur().kind != Tok::Name) break;
            names.push_back(expect_name());
        }
        if (paren) {
            tuple = true;
            expect_op(")");
        }
    }

    StmtPtr stmt_for() {
        auto s = std::make_unique<Stmt>(StmtKind::For, cur().line);
        next();  // for
        parse_targets(s->targets, s->target_tuple);
        if (!skip_name("in")) unexpected("'in'");
        s->expr = parse_tuple(false, {"recursive"});
        if (skip_name("if")) s->cond = parse_expression(true);
        if (skip_name("recursive")) s->recursive = true;
        expect_block_end();
        ++loop_depth_;
        std::string stop;
        s->body = subparse({"endfor", "else"}, stop);
        --loop_depth_;
        if (stop == "else") {
            expect_block_end();
            const int saved = loop_depth_;
            loop_depth_ = 0;
            s->else_body = subparse({"endfor"}, stop);
            loop_depth_ = saved;
        }
        expect_block_end();
        return s;
    }

    StmtPtr stmt_set() {
        auto s = std::make_unique<Stmt>(StmtKind::Set, cur().line);
        next();  // set
        if (cur().kind == Tok::Name && peek().kind == Tok::Op && peek().text == ".") {
            s->targets.push_back(expect_name());
            next();  // .
            s->ns_attr = expect_name();
        } else {
            parse_targets(s->targets, s->target_tuple);
        }
        if (skip_op("=")) {
            s->expr = parse_tuple(true, {});
            expect_block_end();
            return s;
        }
        if (!s->ns_attr.empty() || s->targets.size() != 1) unexpected("'='");
        s->kind = StmtKind::SetBlock;
        if (is_op("|")) s->filter = parse_filter_chain(nullptr);
        expect_block_end();
        std::string stop;
        s->body = subparse({"endset"}, stop);
        expect_block_end();
        return s;
    }

    void parse_params(std::vector<Param>& params) {
        expect_op("(");
        while (!is_op(")")) {
            if (!params.empty()) expect_op(",");
            if (is_op(")")) break;
            Param p;
            p.name = expect_name();
            if (skip_op("=")) p.def = parse_expression(true);
            params.push_back(std::move(p));
        }
        expect_op(")");
    }

    StmtPtr stmt_macro() {
        auto s = std::make_unique<Stmt>(StmtKind::Macro, cur().line);
        next();  // macro
        s->text = expect_name();
        parse_params(s->params);
        expect_block_end();
        const int saved = loop_depth_;
        loop_depth_ = 0;
        std::string stop;
        s->body = subparse({"endmacro"}, stop);
        loop_depth_ = saved;
        expect_block_end();
        return s;
    }

    StmtPtr stmt_call() {
        auto s = std::make_unique<Stmt>(StmtKind::CallBlock, cur().line);
        next();  // call
        if (is_op("(")) parse_params(s->params);
        s->expr = parse_expression(true);
        if (s->expr->kind != ExprKind::Call) fail("expected a call after 'call'");
        expect_block_end();
        const int saved = loop_depth_;
        loop_depth_ = 0;
        std::string stop;
        s->body = subparse({"endcall"}, stop);
        loop_depth_ = saved;
        expect_block_end();
        return s;
    }

    StmtPtr stmt_filter() {
        auto s = std::make_unique<Stmt>(StmtKind::FilterBlock, cur().line);
        // The filter chain starts right after the tag name: `filter upper|trim`.
        s->filter = parse_filter_chain(nullptr, /*first_without_pipe=*/true);
        expect_block_end();
        std::string stop;
        s->body = subparse({"endfilter"}, stop);
        expect_block_end();
        return s;
    }

    StmtPtr stmt_with() {
        auto s = std::make_unique<Stmt>(StmtKind::With, cur().line);
        next();  // with
        while (cur().kind != Tok::BlockEnd) {
            if (!s->assigns.empty()) expect_op(",");
            std::string n = expect_name();
            expect_op("=");
            s->assigns.emplace_back(std::move(n), parse_expression(true));
        }
        expect_block_end();
        std::string stop;
        s->body = subparse({"endwith"}, stop);
        expect_block_end();
        return s;
    }

    StmtPtr stmt_generation() {
        // transformers' {% generation %}: renders its body unchanged.
        auto s = std::make_unique<Stmt>(StmtKind::With, cur().line);
        next();
        expect_block_end();
        std::string stop;
        s->body = subparse({"endgeneration"}, stop);
        expect_block_end();
        return s;
    }

    // ---- expressions ----

    bool is_tuple_end(std::initializer_list<const char*> extra) const {
        if (cur().kind == Tok::VarEnd || cur().kind == Tok::BlockEnd || cur().kind == Tok::Eof) return true;
        if (is_op(")")) return true;
        for (const char* e : extra)
            if (is_name(e)) return true;
        return false;
    }

    ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra, bool explicit_parens = false) {
        const int line = cur().line;
        std::vector<ExprPtr> items;
        bool is_tuple = false;
        for (;;) {
            if (!items.empty()) expect_op(",");
            if (is_tuple_end(extra)) break;
            items.push_back(parse_expression(with_condexpr));
            if (is_op(",")) is_tuple = true;
            else break;
        }
        if (!is_tuple) {
            if (!items.empty()) return std::move(items[0]);
            if (!explicit_parens) unexpected("an expression");
        }
        auto e = std::make_unique<Expr>(ExprKind::Tuple, line);
        e->items = std::move(items);
        return e;
    }

    ExprPtr parse_expression(bool with_condexpr) {
        return with_condexpr ? parse_condexpr() : parse_or();
    }

    ExprPtr parse_condexpr() {
        ExprPtr e = parse_or();
        while (is_name("if")) {
            const int line = cur().line;
            next();
            ExprPtr test = parse_or();
            ExprPtr otherwise;
            if (skip_name("else")) otherwise = parse_condexpr();
            auto c = std::make_unique<Expr>(ExprKind::Cond, line);
            c->items.push_back(std::move(e));
            c->items.push_back(std::move(test));
            c->items.push_back(std::move(otherwise));
            e = std::move(c);
        }
        return e;
    }

    ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r, int line) {
        auto e = std::make_unique<Expr>(ExprKind::Binary, line);
        e->name = op;
        e->a = std::move(l);
        e->b = std::move(r);
        return e;
    }

    ExprPtr parse_or() {
        ExprPtr l = parse_and();
        while (is_name("or")) {
            const int line = cur().line;
            next();
            l = binary("or", std::move(l), parse_and(), line);
        }
        return l;
    }

    ExprPtr parse_and() {
        ExprPtr l = parse_not();
        while (is_name("and")) {
            const int line = cur().line;
            next();
            l = binary("and", std::move(l), parse_not(), line);
        }
        return l;
    }

    ExprPtr parse_not() {
        if (is_name("not")) {
            auto e = make(ExprKind::Unary);
            next();
            e->name = "not";
            e->a = parse_not();
            return e;
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        const int line = cur().line;
        ExprPtr first = parse_math1();
        std::vector<std::string> ops;
        std::vector<ExprPtr> rhs;
        for (;;) {
            if (cur().kind == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                          cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
                ops.push_back(cur().text);
                next();
            } else if (is_name("in")) {
                ops.push_back("in");
                next();
            } else if (is_name("not") && peek().kind == Tok::Name && peek().text == "in") {
                ops.push_back("notin");
                next();
                next();
            } else {
                break;
            }
            rhs.push_back(parse_math1());
        }
        if (ops.empty()) return first;
        auto e = std::make_unique<Expr>(ExprKind::Compare, line);
        e->a = std::move(first);
        e->ops = std::move(ops);
        e->items = std::move(rhs);
        return e;
    }

    ExprPtr parse_math1() {
        ExprPtr l = parse_concat();
        while (is_op("+") || is_op("-")) {
            const std::string op = cur().text;
            const int line = cur().line;
            next();
            l = binary(op, std::move(l), parse_concat(), line);
        }
        return l;
    }

    ExprPtr parse_concat() {
        ExprPtr l = parse_math2();
        while (is_op("~")) {
            const int line = cur().line;
            next();
            l = binary("~", std::move(l), parse_math2(), line);
        }
        return l;
    }

    ExprPtr parse_math2() {
        ExprPtr l = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const std::string op = cur().text;
            const int line = cur().line;
            next();
            l = binary(op, std::move(l), parse_pow(), line);
        }
        return l;
    }

    ExprPtr parse_pow() {
        ExprPtr l = parse_unary(true);
        while (is_op("**")) {
            const int line = cur().line;
            next();
            l = binary("**", std::move(l), parse_unary(true), line);
        }
        return l;
    }

    ExprPtr parse_unary(bool with_filter) {
        ExprPtr node;
        if (is_op("-") || is_op("+")) {
            auto e = make(ExprKind::Unary);
            e->name = cur().text;
            next();
            e->a = parse_unary(false);
            node = std::move(e);
        } else {
            node = parse_primary();
        }
        node = parse_postfix(std::move(node));
        if (with_filter) node = parse_filter_expr(std::move(node));
        return node;
    }

    ExprPtr parse_primary() {
        const Token& t = cur();
        if (t.kind == Tok::Name) {
            auto e = make(ExprKind::Literal);
            if (t.text == "true" || t.text == "True") e->value = Value(true);
            else if (t.text == "false" || t.text == "False") e->value = Value(false);
            else if (t.text == "none" || t.text == "None") e->value = Value::none();
            else {
                e->kind = ExprKind::Name;
                e->name = t.text;
            }
            next();
            return e;
        }
        if (t.kind == Tok::String) {
            auto e = make(ExprKind::Literal);
            std::string s;
            while (cur().kind == Tok::String) {
                s += cur().text;
                next();
            }
            e->value = Value(std::move(s));
            return e;
        }
        if (t.kind == Tok::Int || t.kind == Tok::Float) {
            auto e = make(ExprKind::Literal);
            e->value = t.kind == Tok::Int ? Value(t.ival) : Value(t.fval);
            next();
            return e;
        }
        if (is_op("(")) {
            next();
            ExprPtr e = parse_tuple(true, {}, true);
            expect_op(")");
            return e;
        }
        if (is_op("[")) {
            auto e = make(ExprKind::List);
            next();
            while (!is_op("]")) {
                if (!e->items.empty()) expect_op(",");
                if (is_op("]")) break;
                e->items.push_back(parse_expression(true));
            }
            expect_op("]");
            return e;
        }
        if (is_op("{")) {
            auto e = make(ExprKind::Dict);
            next();
            while (!is_op("}")) {
                if (!e->keys.empty()) expect_op(",");
                if (is_op("}")) break;
                e->keys.push_back(parse_expression(true));
                expect_op(":");
                e->items.push_back(parse_expression(true));
            }
            expect_op("}");
            return e;
        }
        unexpected("an expression");
    }

    ExprPtr parse_postfix(ExprPtr node) {
        for (;;) {
            if (is_op(".")) {
                const int line = cur().line;
                next();
                if (cur().kind == Tok::Name) {
                    auto e = std::make_unique<Expr>(ExprKind::GetAttr, line);
                    e->name = cur().text;
                    e->a = std::move(node);
                    next();
                    node = std::move(e);
                } else if (cur().kind == Tok::Int) {
                    auto e = std::make_unique<Expr>(ExprKind::GetItem, line);
                    e->a = std::move(node);
                    e->b = std::make_unique<Expr>(ExprKind::Literal, line);
                    e->b->value = Value(cur().ival);
                    next();
                    node = std::move(e);
                } else {
                    unexpected("an attribute name after '.'");
                }
            } else if (is_op("[")) {
                const int line = cur().line;
                next();
                std::vector<ExprPtr> subs;
                while (!is_op("]")) {
                    if (!subs.empty()) expect_op(",");
                    if (is_op("]")) break;
                    subs.push_back(parse_subscribed(node));
                }
                expect_op("]");
                if (subs.empty()) fail("empty subscript");
                if (subs.size() == 1 && subs[0]->kind == ExprKind::Slice && !subs[0]->a) {
                    subs[0]->a = std::move(node);
                    node = std::move(subs[0]);
                } else {
                    auto e = std::make_unique<Expr>(ExprKind::GetItem, line);
                    e->a = std::move(node);
                    if (subs.size() == 1) e->b = std::move(subs[0]);
                    else {
                        e->b = std::make_unique<Expr>(ExprKind::Tuple, line);
                        e->b->items = std::move(subs);
                    }
                    node = std::move(e);
                }
            } else if (is_op("(")) {
                node = parse_call(std::move(node));
            } else {
                return node;
            }
        }
    }

    // One subscript: an expression or a slice start:stop:step (a Slice with no operand).
    ExprPtr parse_subscribed(const ExprPtr&) {
        const int line = cur().line;
        ExprPtr start;
        if (!is_op(":")) {
            start = parse_expression(true);
            if (!is_op(":")) return start;
        }
        next();  // :
        auto e = std::make_unique<Expr>(ExprKind::Slice, line);
        e->items.resize(3);
        e->items[0] = std::move(start);
        if (!is_op("]") && !is_op(",") && !is_op(":")) e->items[1] = parse_expression(true);
        if (skip_op(":")) {
            if (!is_op("]") && !is_op(",")) e->items[2] = parse_expression(true);
        }
        return e;
    }

    void parse_call_args(CallArgsExpr& args) {
        expect_op("(");
        bool first = true;
        while (!is_op(")")) {
            if (!first) {
                expect_op(",");
                if (is_op(")")) break;
            }
            first = false;
            if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
            if (cur().kind == Tok::Name && peek().kind == Tok::Op && peek().text == "=") {
                std::string k = cur().text;
                next();
                next();
                args.kw.emplace_back(std::move(k), parse_expression(true));
            } else {
                if (!args.kw.empty()) fail("a positional argument follows keyword arguments");
                args.pos.push_back(parse_expression(true));
            }
        }
        expect_op(")");
    }

    ExprPtr parse_call(ExprPtr callee) {
        auto e = make(ExprKind::Call);
        e->a = std::move(callee);
        parse_call_args(e->args);
        return e;
    }

    ExprPtr parse_filter_expr(ExprPtr node) {
        for (;;) {
            if (is_op("|")) node = parse_filter_chain(std::move(node), false, true);
            else if (is_name("is")) node = parse_test(std::move(node));
            else if (is_op("(")) node = parse_call(std::move(node));
            else return node;
        }
    }

    // `| name[.name][(args)]`, repeated unless `single`. With first_without_pipe the first
    // filter name comes without a '|' (the {% filter %} tag).
    ExprPtr parse_filter_chain(ExprPtr node, bool first_without_pipe = false, bool single = false) {
        bool first = true;
        while (first_without_pipe ? (first || is_op("|")) : is_op("|")) {
            if (!(first && first_without_pipe)) next();  // |
            else next();                                 // the 'filter' tag name
            first = false;
            auto e = make(ExprKind::Filter);
            e->name = expect_name();
            while (is_op(".")) {
                next();
                e->name += "." + expect_name();
            }
            if (is_op("(")) parse_call_args(e->args);
            e->a = std::move(node);
            node = std::move(e);
            if (single) break;
        }
        return node;
    }

    ExprPtr parse_test(ExprPtr node) {
        auto e = make(ExprKind::Test);
        next();  // is
        if (skip_name("not")) e->negated = true;
        e->name = expect_name();
        while (is_op(".")) {
            next();
            e->name += "." + expect_name();
        }
        if (is_op("(")) {
            parse_call_args(e->args);
        } else if ((cur().kind == Tok::Name || cur().kind == Tok::String || cur().kind == Tok::Int ||
                    cur().kind == Tok::Float || is_op("(") || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
            if (is_name("is")) fail("tests cannot be chained with 'is'");
            e->args.pos.push_back(parse_postfix(parse_primary()));
        }
        e->a = std::move(node);
        return e;
    }

    std::vector<Token> t_;
    size_t i_ = 0;
    int loop_depth_ = 0;
    int open_line_ = 0;
};

}  // namespace

Program parse(std::string_view source, const LexOptions& opt) {
    const std::string src = normalize_source(source, opt.keep_trailing_newline);
    return Parser(tokenize(src, opt)).program();
}

}  // namespace glia::jinja
