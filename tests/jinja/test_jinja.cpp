// Unit tests of the Jinja interpreter: lexer/whitespace control, parser, evaluator,
// values, JSON, errors (kinds, messages, lines), and tok::render_chat / chat_template.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "gguf/gguf.h"
#include "jinja/jinja.h"
#include "jinja/lexer.h"
#include "jinja/value.h"
#include "temp_path.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"

namespace {

using namespace glia::jinja;

Value test_context() {
    return Value::parse_json(R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null}],)"
                             R"("d":{"b":2,"a":1},"s":"  Hello World  ","n":null,"l":[3,1,2],"f":1.5})");
}

std::string render(const std::string& src, const Value& ctx = test_context()) {
    RenderOptions opt;
    opt.now = reference_time();
    return Template(src).render(ctx, opt);
}

Error render_error(const std::string& src, const Value& ctx = test_context()) {
    try {
        render(src, ctx);
    } catch (const Error& e) {
        return e;
    }
    ADD_FAILURE() << "no error from: " << src;
    return Error(ErrorKind::Type, "none");
}

// ---- the reference table ----

struct RefCase {
    const char* tmpl;
    const char* expected;
    bool ok;
};

const RefCase kReference[] = {
#include "reference_cases.inc"
};

TEST(JinjaReference, SnippetsRenderLikeJinja2) {
    int n = 0;
    for (const RefCase& c : kReference) {
        SCOPED_TRACE(c.tmpl);
        if (c.ok) {
            try {
                EXPECT_EQ(render(c.tmpl), c.expected);
            } catch (const Error& e) {
                ADD_FAILURE() << "error: " << e.what();
            }
        } else {
            EXPECT_THROW(render(c.tmpl), Error);
        }
        ++n;
    }
    EXPECT_GT(n, 100);
}

// ---- lexer and whitespace control ----

TEST(JinjaLexer, TrailingNewlineAndLineEndings) {
    EXPECT_EQ(render("x\n"), "x");
    EXPECT_EQ(render("x\n\n"), "x\n");
    EXPECT_EQ(render("x\r\ny\rz"), "x\ny\nz");
    EXPECT_EQ(render("a\xE2\x80\xA8" "b"), "a\nb");  // U+2028 is a Python line boundary
    LexOptions keep;
    keep.keep_trailing_newline = true;
    EXPECT_EQ(Template("x\n", keep).render(Value::object()), "x\n");
}

TEST(JinjaLexer, TrimAndLstripBlocks) {
    EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
    EXPECT_EQ(render("  {# comment #}\nx"), "x");
    EXPECT_EQ(render("{{ 'a' }}\n{{ 'b' }}"), "a\nb");  // no trimming after }}
    LexOptions plain;
    plain.trim_blocks = plain.lstrip_blocks = false;
    EXPECT_EQ(Template("a\n  {% if true %}\n  b\n  {% endif %}\nc", plain).render(Value::object()), "a\n  \n  b\n  \nc");
}

TEST(JinjaLexer, ExplicitWhitespaceControl) {
    EXPECT_EQ(render("x  {%- if true -%}  y  {%- endif -%}  z"), "xyz");
    EXPECT_EQ(render("a {{- ' b ' -}} c"), "a b c");
    EXPECT_EQ(render("a\n  {%+ if true %}b{% endif %}"), "a\n  b");  // + keeps the indentation
    EXPECT_EQ(render("{% if true +%}\nb{% endif %}"), "\nb");        // + keeps the newline
}

TEST(JinjaLexer, RawBlocksAndComments) {
    EXPECT_EQ(render("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
    EXPECT_EQ(render("{# {{ x }} #}y"), "y");
    EXPECT_EQ(render("{{ {'a': {'b': 1}}['a'] }}"), "{'b': 1}");  // braces inside {{ }}
}

TEST(JinjaLexer, StringLiteralEscapes) {
    EXPECT_EQ(render(R"({{ "\x41\u00e9\t|\\n" }})"), "A\xC3\xA9\t|\\n");
    EXPECT_EQ(render(R"({{ 'it\'s' ~ "q\"q" }})"), "it's" "q\"q");
    EXPECT_EQ(render(R"({{ '\d' }})"), "\\d");  // unknown escapes stay
    EXPECT_EQ(render("{{ 'a' 'b' }}"), "ab");   // adjacent literals concatenate
}

TEST(JinjaLexer, Numbers) {
    EXPECT_EQ(render("{{ 0x1F }} {{ 0b101 }} {{ 1_000 }} {{ 1.5e3 }} {{ 2e-5 }}"), "31 5 1000 1500.0 2e-05");
    EXPECT_EQ(render("{{ l.0 }}"), "3");
}

// ---- parser ----

TEST(JinjaParser, Precedence) {
    EXPECT_EQ(render("{{ 2 + 3 * 4 }}|{{ -2 ** 2 }}|{{ 10 - 2 - 3 }}|{{ 'a' ~ 2 * 3 }}"), "14|4|5|a6");
    EXPECT_EQ(render_error("{{ 'a' ~ 1 + 2 }}").kind(), ErrorKind::Type);  // ('a' ~ 1) + 2
    EXPECT_EQ(render("{{ not 1 == 2 }}|{{ l|length + 1 }}|{{ -(l|length) }}"), "True|4|-3");
    EXPECT_EQ(render_error("{{ -l|length }}").kind(), ErrorKind::Type);  // (-l)|length, as in Jinja2
    EXPECT_EQ(render("{{ 1 if false else 2 if false else 3 }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }}"), "3|True|False");
    EXPECT_EQ(render("{{ 'x' if 'a' in 'cat' }}{{ 5 not in l }}"), "xTrue");
}

TEST(JinjaParser, SyntaxErrorsNameTheLine) {
    Error e = render_error("line1\n{% if true %}\nno end");
    EXPECT_EQ(e.kind(), ErrorKind::Syntax);
    EXPECT_NE(e.message().find("endif"), std::string::npos) << e.what();

    e = render_error("a\nb\n{{ 1 + }}");
    EXPECT_EQ(e.kind(), ErrorKind::Syntax);
    EXPECT_EQ(e.line(), 3);
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();

    e = render_error("\n\n\n{% frobnicate %}");
    EXPECT_EQ(e.line(), 4);
    EXPECT_NE(e.message().find("unknown tag 'frobnicate'"), std::string::npos) << e.what();

    EXPECT_EQ(render_error("{{ 'unterminated }}").kind(), ErrorKind::Syntax);
    EXPECT_EQ(render_error("{% endif %}").kind(), ErrorKind::Syntax);
    EXPECT_EQ(render_error("{% break %}").kind(), ErrorKind::Syntax);  // outside a loop
    EXPECT_EQ(render_error("{# never closed").kind(), ErrorKind::Syntax);
    EXPECT_EQ(render_error("{{ (1 }}").kind(), ErrorKind::Syntax);
}

// ---- evaluator ----

TEST(JinjaEval, UndefinedIsLenientUntilUsed) {
    EXPECT_EQ(render("[{{ nope }}]"), "[]");
    EXPECT_EQ(render("{{ nope is defined }}{{ nope is undefined }}{{ nope|length }}{{ nope|default('d') }}"),
              "FalseTrue0d");
    EXPECT_EQ(render("{% for x in nope %}x{% else %}empty{% endfor %}{% if not nope %}!{% endif %}"), "empty!");
    EXPECT_EQ(render("{{ d.missing }}|{{ d['missing'] }}|{{ messages[7] }}|{{ nope ~ 'x' }}"), "|||x");

    Error e = render_error("ok\n{{ nope.attr }}");
    EXPECT_EQ(e.kind(), ErrorKind::Undefined);
    EXPECT_EQ(e.message(), "'nope' is undefined");
    EXPECT_EQ(e.line(), 2);

    e = render_error("{{ d.missing.deeper }}");
    EXPECT_EQ(e.message(), "'dict object' has no attribute 'missing'");
    e = render_error("{{ n.split('x') }}");
    EXPECT_EQ(e.message(), "'None' has no attribute 'split'");
    EXPECT_EQ(render_error("{{ nope + 1 }}").kind(), ErrorKind::Undefined);
    EXPECT_EQ(render_error("{{ nope() }}").kind(), ErrorKind::Undefined);
}

TEST(JinjaEval, TypeErrorsLikePython) {
    EXPECT_EQ(render_error("{{ 'a' + n }}").message(), "can only concatenate str (not \"NoneType\") to str");
    EXPECT_EQ(render_error("{{ 'a' + d }}").message(), "can only concatenate str (not \"dict\") to str");
    EXPECT_EQ(render_error("{{ 'x' in n }}").message(), "argument of type 'NoneType' is not iterable");
    EXPECT_EQ(render_error("{{ n|length }}").message(), "object of type 'NoneType' has no len()");
    EXPECT_EQ(render_error("{% for x in n %}{% endfor %}").message(), "'NoneType' object is not iterable");
    EXPECT_EQ(render_error("{{ 1 / 0 }}").kind(), ErrorKind::Type);
    EXPECT_EQ(render_error("{{ 'a' < 1 }}").kind(), ErrorKind::Type);
    EXPECT_EQ(render_error("{{ x|no_such_filter }}").message(), "no filter named 'no_such_filter'");
    // An unknown filter in a branch that is never taken is not an error (as in Jinja2).
    EXPECT_EQ(render("{% if false %}{{ x|from_json }}{% endif %}ok"), "ok");
}

TEST(JinjaEval, SandboxForbidsMutation) {
    Error e = render_error("{{ l.append(4) }}");
    EXPECT_EQ(e.kind(), ErrorKind::Security);
    EXPECT_EQ(e.message(), "access to attribute 'append' of 'list' object is unsafe.");
    EXPECT_EQ(render_error("{{ d.update({'x': 1}) }}").kind(), ErrorKind::Security);
    EXPECT_EQ(render_error("{% set x = l.pop() %}").kind(), ErrorKind::Security);
}

TEST(JinjaEval, RaiseException) {
    Error e = render_error("a\nb\n{{ raise_exception('System role not supported') }}");
    EXPECT_EQ(e.kind(), ErrorKind::Raised);
    EXPECT_EQ(e.message(), "System role not supported");
    EXPECT_EQ(e.line(), 3);
    EXPECT_NE(std::string(e.what()).find("System role not supported"), std::string::npos);
}

TEST(JinjaEval, ErrorsInsideMacrosNameTheMacroLine) {
    Error e = render_error("{% macro m(x) %}\n{{ x.y.z }}\n{% endmacro %}\n\n{{ m(d) }}");
    EXPECT_EQ(e.line(), 2);
}

TEST(JinjaEval, Scoping) {
    // A plain set inside a loop stays in that iteration; namespace carries state.
    EXPECT_EQ(render("{% set x = 0 %}{% for i in [1,2,3] %}{{ x }}{% set x = i %}{% endfor %}|{{ x }}"), "000|0");
    EXPECT_EQ(render("{% set ns = namespace(x=0) %}{% for i in [1,2,3] %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"),
              "6");
    // if blocks do not open a scope.
    EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
    // Macros see top-level variables as they are when called.
    EXPECT_EQ(render("{% macro m() %}{{ g }}{% endmacro %}{% set g = 1 %}{{ m() }}{% set g = 2 %}{{ m() }}"), "12");
    // Set blocks and with blocks keep their sets.
    EXPECT_EQ(render("{% set b %}{% set inner = 1 %}x{% endset %}{{ b }}{{ inner }}"), "x");
    EXPECT_EQ(render("{% with z = 5 %}{{ z }}{% endwith %}{{ z }}"), "5");
    // Assigning an attribute of something that is not a namespace is an error.
    EXPECT_EQ(render_error("{% set d.x = 1 %}").kind(), ErrorKind::Type);
}

TEST(JinjaEval, LoopVariable) {
    EXPECT_EQ(render("{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
              "10TrueFalse3;21FalseFalse3;32FalseTrue3;");
    EXPECT_EQ(render("{% for x in l %}{{ loop.previtem is defined }}{{ loop.nextitem }},{% endfor %}"), "False1,True2,True,");
    EXPECT_EQ(render("{% for x in l if x > 1 %}{{ x }}@{{ loop.index }}{% endfor %}"), "3@12@2");
    EXPECT_EQ(render("{% for x in l %}{% if x == 1 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "3");
    EXPECT_EQ(render("{% for x in l %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}"), "32");
    EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}"), "b=2;a=1;");
    EXPECT_EQ(render_error("{% for a, b in [[1, 2, 3]] %}{% endfor %}").kind(), ErrorKind::Type);
}

TEST(JinjaEval, MacrosAndCallBlocks) {
    EXPECT_EQ(render("{% macro m(a, b=a ~ '!') %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}"
                     "{{ m(1) }}|{{ m(1, 2, 3) }}|{{ m(1, c=4) }}"),
              "11!(){}|12(3,){}|11!(){'c': 4}");
    EXPECT_EQ(render("{% macro wrap(t) %}<{{ t }}:{{ caller() }}>{% endmacro %}{% call wrap('b') %}body{% endcall %}"),
              "<b:body>");
    EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
    EXPECT_EQ(render("{% filter upper %}abc{% endfilter %}"), "ABC");
    EXPECT_EQ(render("{% generation %}kept{% endgeneration %}"), "kept");
}

TEST(JinjaEval, MarkupEscapesWhatIsAddedToIt) {
    // markupsafe semantics: Markup + str escapes the str.
    EXPECT_EQ(render("{{ '<b>'|safe + '<i>' }}|{{ '<i>' + '<b>'|safe }}|{{ '<i>' ~ '<b>'|safe }}"),
              "<b>&lt;i&gt;|&lt;i&gt;<b>|<i><b>");
    EXPECT_EQ(render("{{ '\"'|e }}"), "&#34;");
}

TEST(JinjaEval, StrftimeNow) {
    EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %A %H:%M:%S') }}"),
              "15 Jan 2026|2026-01-15 Thursday 12:00:00");
    RenderOptions opt;
    std::tm t{};
    t.tm_year = 2024 - 1900;
    t.tm_mon = 1;
    t.tm_mday = 29;
    opt.now = t;
    EXPECT_EQ(Template("{{ strftime_now('%Y-%m-%d') }}").render(Value::object(), opt), "2024-02-29");
}

TEST(JinjaEval, IntegerKeysInDictLiterals) {
    EXPECT_EQ(render("{% set m = {2: 'b', 1: 'a'} %}{{ m[1] }}{{ m|dictsort }}{{ m|tojson }}{{ 2 in m }}"),
              "a[(1, 'a'), (2, 'b')]{\"2\": \"b\", \"1\": \"a\"}True");
}

// ---- values ----

TEST(JinjaValue, PythonFloatRepr) {
    EXPECT_EQ(python_float_repr(1.0), "1.0");
    EXPECT_EQ(python_float_repr(0.1), "0.1");
    EXPECT_EQ(python_float_repr(1.0 / 3), "0.3333333333333333");
    EXPECT_EQ(python_float_repr(1e16), "1e+16");
    EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
    EXPECT_EQ(python_float_repr(0.0001), "0.0001");
    EXPECT_EQ(python_float_repr(0.00001), "1e-05");
    EXPECT_EQ(python_float_repr(-2.5e-300), "-2.5e-300");
    EXPECT_EQ(python_float_repr(-0.0), "-0.0");
    EXPECT_EQ(python_float_repr(123456.789), "123456.789");
}

TEST(JinjaValue, StrAndRepr) {
    EXPECT_EQ(Value::none().str(), "None");
    EXPECT_EQ(Value(true).str(), "True");
    EXPECT_EQ(Value().str(), "");
    EXPECT_EQ(Value("it's").repr(), "\"it's\"");
    EXPECT_EQ(Value("a\"b'c\n").repr(), "'a\"b\\'c\\n'");
    EXPECT_EQ(Value::parse_json(R"({"a":[1,2.5,null,true,"x"]})").str(), "{'a': [1, 2.5, None, True, 'x']}");
    EXPECT_EQ(Value("h\xC3\xA9llo").length(), 5u);
}

TEST(JinjaValue, JsonRoundTripKeepsOrder) {
    const std::string src = R"({"z":1,"a":{"y":[1,-2,3.25e2,"\u00e9\ud83d\ude00\n\"\\"],"b":false},"n":null})";
    const Value v = Value::parse_json(src);
    ASSERT_TRUE(v.is_dict());
    EXPECT_EQ(v.object_data().items[0].first, "z");
    EXPECT_EQ(v.object_data().items[1].first, "a");
    EXPECT_EQ(to_json(v), "{\"z\": 1, \"a\": {\"y\": [1, -2, 325.0, \"\xC3\xA9\xF0\x9F\x98\x80\\n\\\"\\\\\"], \"b\": false}, \"n\": null}");
    JsonOptions ascii;
    ascii.ensure_ascii = true;
    EXPECT_EQ(to_json(Value("\xC3\xA9\xF0\x9F\x98\x80\x7F"), ascii), "\"\\u00e9\\ud83d\\ude00\\u007f\"");
    JsonOptions pretty;
    pretty.indent = 2;
    pretty.item_sep = ",";
    EXPECT_EQ(to_json(Value::parse_json(R"({"a":[1,{}],"b":[]})"), pretty),
              "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}");
}

TEST(JinjaValue, JsonErrorsNameTheOffset) {
    for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "tru", "\"abc", "01x", "[1] 2", "{\"a\":\"\\q\"}"}) {
        try {
            Value::parse_json(bad);
            ADD_FAILURE() << "accepted: " << bad;
        } catch (const Error& e) {
            EXPECT_NE(e.message().find("offset"), std::string::npos) << e.what();
        }
    }
    EXPECT_EQ(Value::parse_json("  [ ]  ").items().size(), 0u);
    EXPECT_TRUE(Value::parse_json("12345678901234567890").is_float());  // beyond int64
}

TEST(JinjaValue, ToJsonRejectsWhatPythonRejects) {
    EXPECT_THROW(render("{{ nope|tojson }}"), Error);
    EXPECT_THROW(render("{{ (l|map('string'))|tojson }}"), Error);  // a generator
    EXPECT_EQ(render("{{ (l|map('string')|list)|tojson }}"), "[\"3\", \"1\", \"2\"]");
}

// ---- chat templates ----

// A template cannot run without bound or exhaust memory: every render has a step budget,
// an output limit and a size limit on every value it builds, and ends with an error.
TEST(JinjaLimits, UnboundedTemplatesEndWithAnError) {
    auto contains = [](const std::string& src, const std::string& what) {
        const Error e = render_error(src);
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << src << ": " << e.what();
    };
    // 10^10 iterations: stopped by the step budget (a small one here, to be quick).
    {
        RenderOptions small;
        small.max_steps = 100000;
        try {
            Template("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}")
                .render(Value::object(), small);
            ADD_FAILURE() << "nested loops were not stopped";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("step limit"), std::string::npos) << e.what();
        }
    }
    // Repetition and padding are refused before allocating.
    contains("{{ 'x' * 1000000000000 }}", "more than the limit");
    contains("{{ [1, 2] * 1000000000000 }}", "more than the limit");
    contains("{{ ''.center(1000000000000) }}", "more than the limit");
    contains("{{ 'a' | center(1000000000000) }}", "more than the limit");
    contains("{{ '7'.zfill(1000000000000) }}", "more than the limit");
    contains("{{ 'a\nb\nc' | indent(100000000) }}", "more than the limit");
    // Doubling a string in a loop stops at the value limit.
    contains("{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
             "more than the limit");
    // Output past the limit.
    RenderOptions opt;
    opt.max_output = 1000;
    try {
        Template("{% for i in range(1000) %}{{ 'abc' }}{% endfor %}").render(Value::object(), opt);
        ADD_FAILURE() << "no error past the output limit";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("output is larger than the limit of 1000 bytes"), std::string::npos) << e.what();
    }
    // A smaller step budget applies.
    opt = RenderOptions();
    opt.max_steps = 100;
    EXPECT_THROW(Template("{% for i in range(1000) %}{% endfor %}").render(Value::object(), opt), Error);
    // Real templates are far within the defaults (the goldens render: test_template_goldens).
    EXPECT_EQ(render("{% for i in range(1000) %}{% endfor %}ok"), "ok");
}

TEST(ChatTemplate, RenderChatWithMessagesOrObject) {
    const std::string tmpl =
        "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}{% endfor %}"
        "{% if tools is defined %}[tools]{% endif %}{% if add_generation_prompt %}<assistant>{% endif %}";
    const Value msgs = Value::parse_json(R"([{"role":"user","content":"hi"}])");
    EXPECT_EQ(glia::tok::render_chat(tmpl, msgs, "<s>", "</s>", true), "<s><user>hi</s><assistant>");
    const Value conv = Value::parse_json(R"({"messages":[{"role":"user","content":"hi"}],"tools":[]})");
    EXPECT_EQ(glia::tok::render_chat(tmpl, conv, "", "", false), "<user>hi[tools]");
    EXPECT_THROW(glia::tok::render_chat(tmpl, Value(1), "", "", false), Error);
}

TEST(ChatTemplate, FromGgufFile) {
    const std::string path = glia::test::temp_path("jinja_tmpl.gguf");
    {
        glia::gguf::Writer w;
        w.set_str("general.architecture", "llama");
        w.set_str("tokenizer.chat_template", "{{ messages[0].content }}!");
        w.write(path);
    }
    auto f = glia::gguf::File::open(path);
    EXPECT_EQ(glia::tok::chat_template(*f), "{{ messages[0].content }}!");
    const std::string none_path = glia::test::temp_path("jinja_notmpl.gguf");
    {
        glia::gguf::Writer w;
        w.set_str("general.architecture", "llama");
        w.write(none_path);
    }
    EXPECT_EQ(glia::tok::chat_template(*glia::gguf::File::open(none_path)), "");
    std::remove(path.c_str());
    std::remove(none_path.c_str());
}

// ---- glia template ----

std::string q(const std::string& s) { return "'" + s + "'"; }

TEST(CliTemplate, GgufWithoutTemplateIsAClearError) {
    const std::string cse = glia::test::temp_path("case_min.json");
    std::ofstream(cse) << R"({"messages":[{"role":"user","content":"hi"}]})";
    std::string out;
    const int rc = glia::test::run_command(q(glia::test::glia_binary()) + " template " +
                                               q(glia::test::shared_path("models/stories260K.gguf")) + " --case " + q(cse) + " 2>&1",
                                           &out);
    EXPECT_NE(rc, 0);
    EXPECT_NE(out.find("no chat template"), std::string::npos) << out;
}

TEST(CliTemplate, StdinCaseAndNoTrailingNewline) {
    const std::string tmpl = glia::test::temp_path("t.jinja");
    std::ofstream(tmpl) << "{{ bos_token }}{{ messages[0].content }}|{{ strftime_now('%Y') }}{{ extra }}\n";
    std::string out;
    const std::string cmd = "echo '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"bos_token\":\"<s>\",\"extra\":\"!\"}' | " +
                            q(glia::test::glia_binary()) + " template " + q(tmpl) + " --case -";
    ASSERT_EQ(glia::test::run_command(cmd, &out), 0) << cmd;
    EXPECT_EQ(out, "<s>hi|2026!");
    ASSERT_EQ(glia::test::run_command(cmd + " --now 1999-12-31", &out), 0);
    EXPECT_EQ(out, "<s>hi|1999!");
}

TEST(CliTemplate, SyntaxErrorExitsNonZeroWithLine) {
    const std::string tmpl = glia::test::temp_path("bad.jinja");
    std::ofstream(tmpl) << "ok\n{% if %}";
    const std::string cse = glia::test::temp_path("case_min2.json");
    std::ofstream(cse) << R"({"messages":[]})";
    std::string out;
    EXPECT_NE(glia::test::run_command(q(glia::test::glia_binary()) + " template " + q(tmpl) + " --case " + q(cse) + " 2>&1", &out), 0);
    EXPECT_NE(out.find("line 2"), std::string::npos) << out;
}

}  // namespace
