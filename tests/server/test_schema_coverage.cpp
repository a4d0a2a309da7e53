// JSON-schema coverage and limits: numeric bounds (integers exactly, zod's safe-integer
// bounds), patterns and formats, oneOf, nullable, type lists, const, prefixItems, enums
// of any size; depth limits on the schema, its $ref chains and the output; bounded
// whitespace; and the request-depth measure.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include "grammar_test_util.h"

#include "grammar/regex.h"
#include "server/json_depth.h"
#include "server/json_schema.h"

using namespace glia;
using namespace glia::server;

namespace {

using test::accepts;

std::shared_ptr<grammar::Grammar> compile(const std::string& schema) { return compile_schema(json::parse(schema), "schema"); }

// The 400's message ("" when the schema compiles).
std::string refusal(const json& schema) {
    try {
        compile_schema(schema, "schema");
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        return e.message;
    }
    return "";
}

json nested(const std::string& open, const std::string& close, int levels, const std::string& inner = "{}") {
    std::string s;
    for (int i = 0; i < levels; ++i) s += open;
    s += inner;
    for (int i = 0; i < levels; ++i) s += close;
    return json::parse(s);
}

}  // namespace

TEST(SchemaCoverage, IntegerBoundsAreExact) {
    auto g = compile(R"({"type":"integer","minimum":3,"maximum":170})");
    for (const char* ok : {"3", "9", "10", "17", "99", "100", "170"}) EXPECT_TRUE(accepts(g, ok)) << ok;
    for (const char* bad : {"2", "0", "-3", "171", "180", "1000", "1.5", "03"}) EXPECT_FALSE(accepts(g, bad)) << bad;
    // Inside a document: the number ends at the comma, which is refused for an out-of-range value.
    auto o = compile(R"({"type":"object","properties":{"n":{"type":"integer","exclusiveMinimum":-5,"exclusiveMaximum":5}},
                         "required":["n"],"additionalProperties":false})");
    EXPECT_TRUE(accepts(o, R"({"n":-4})"));
    EXPECT_TRUE(accepts(o, R"({"n": 4 })"));
    EXPECT_FALSE(accepts(o, R"({"n":5})"));
    EXPECT_FALSE(accepts(o, R"({"n":-5})"));
    EXPECT_FALSE(accepts(o, R"({"n":44})"));
    // Draft 4's boolean exclusiveMinimum.
    auto d4 = compile(R"({"type":"integer","minimum":0,"exclusiveMinimum":true})");
    EXPECT_FALSE(accepts(d4, "0"));
    EXPECT_TRUE(accepts(d4, "1"));
    // zod's z.number().int() (the AI SDK's generateObject).
    auto z = compile(R"({"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991})");
    for (const char* ok : {"0", "-1", "42", "99999999999999", "-9999999999999"}) EXPECT_TRUE(accepts(z, ok)) << ok;
    EXPECT_FALSE(accepts(z, "1.0"));
    // The prefix is checked byte by byte: "2" cannot begin a value of [30, 39].
    grammar::Matcher m(compile(R"({"type":"integer","minimum":30,"maximum":39})"));
    EXPECT_FALSE(m.feed("2"));
    EXPECT_FALSE(m.feed("-"));
    EXPECT_TRUE(m.feed("3"));
    EXPECT_FALSE(m.accepting());
    EXPECT_TRUE(m.feed("5"));
    EXPECT_TRUE(m.accepting());
    EXPECT_FALSE(m.feed("0"));
    EXPECT_NE(refusal(json::parse(R"({"type":"integer","minimum":5,"maximum":4})")).find("'maximum'"), std::string::npos);
    EXPECT_NE(refusal(json::parse(R"({"type":"integer","minimum":2.5,"maximum":2.9})")).find("no integer"), std::string::npos);
}

TEST(SchemaCoverage, NumberBounds) {
    auto g = compile(R"({"type":"number","minimum":0.5,"exclusiveMaximum":2.5})");
    for (const char* ok : {"0.5", "1", "2", "2.49", "1.25", "0.51"}) EXPECT_TRUE(accepts(g, ok)) << ok;
    for (const char* bad : {"0.4", "2.5", "2.51", "-1", "3", "0", "1e0", "25"}) EXPECT_FALSE(accepts(g, bad)) << bad;
    auto pos = compile(R"({"type":"number","exclusiveMinimum":0})");
    EXPECT_TRUE(accepts(pos, "0.001"));
    EXPECT_TRUE(accepts(pos, "12345"));
    EXPECT_FALSE(accepts(pos, "0"));
    EXPECT_FALSE(accepts(pos, "-0.5"));
    // A bound alone implies a number.
    EXPECT_TRUE(accepts(compile(R"({"maximum":10})"), "-7.5"));
    EXPECT_FALSE(accepts(compile(R"({"maximum":10})"), "\"x\""));
}

TEST(SchemaCoverage, PatternsAndFormats) {
    auto g = compile(R"({"type":"string","pattern":"^[a-z]{2,4}-\\d+$"})");
    for (const char* ok : {R"("ab-1")", R"("abcd-0123")"}) EXPECT_TRUE(accepts(g, ok)) << ok;
    for (const char* bad : {R"("a-1")", R"("abcde-1")", R"("ab-")", R"("AB-1")", R"("ab-1x")"}) EXPECT_FALSE(accepts(g, bad)) << bad;
    // Unanchored: anywhere in the string.
    auto u = compile(R"({"type":"string","pattern":"b+c"})");
    EXPECT_TRUE(accepts(u, R"("abbcx")"));
    EXPECT_FALSE(accepts(u, R"("abx")"));
    // Characters written as escapes count as the characters they stand for.
    auto e = compile(R"({"type":"string","pattern":"^(é|\\n)+$"})");
    EXPECT_TRUE(accepts(e, "\"é\\u00e9\\n\""));
    EXPECT_FALSE(accepts(e, "\"e\""));
    // A byte that cannot begin any allowed character is refused at once.
    grammar::Matcher m(e);
    EXPECT_TRUE(m.feed("\""));
    EXPECT_FALSE(m.feed("\xe6"));  // a three-byte character (U+6000 and up): not é
    EXPECT_TRUE(m.feed("\xc3"));
    // Formats.
    auto date = compile(R"({"type":"string","format":"date"})");
    EXPECT_TRUE(accepts(date, R"("2024-02-29")"));
    EXPECT_FALSE(accepts(date, R"("2024-13-01")"));
    EXPECT_FALSE(accepts(date, R"("24-01-01")"));
    auto dt = compile(R"({"format":"date-time"})");
    EXPECT_TRUE(accepts(dt, R"("2024-01-02T03:04:05Z")"));
    EXPECT_TRUE(accepts(dt, R"("2024-01-02T23:59:59.123+01:00")"));
    EXPECT_FALSE(accepts(dt, R"("2024-01-02 03:04:05Z")"));
    auto t = compile(R"({"type":"string","format":"time"})");
    EXPECT_TRUE(accepts(t, R"("12:30:00Z")"));
    EXPECT_FALSE(accepts(t, R"("24:00:00Z")"));
    auto uuid = compile(R"({"type":"string","format":"uuid"})");
    EXPECT_TRUE(accepts(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
    EXPECT_FALSE(accepts(uuid, R"("123e4567-e89b-12d3-a456-42661417400")"));
    auto email = compile(R"({"type":"string","format":"email"})");
    EXPECT_TRUE(accepts(email, R"("a.b@example.com")"));
    EXPECT_FALSE(accepts(email, R"("a.b@example")"));
    EXPECT_FALSE(accepts(email, R"("@example.com")"));
    // Other formats are annotations.
    EXPECT_TRUE(accepts(compile(R"({"type":"string","format":"uri"})"), R"("anything")"));
    // What cannot be expressed is refused, naming the keyword.
    for (const char* p : {"(?=a)b", "(a)\\1", "a**", "\\bword", "a^b", "[a-", "(ab", "a{1000}"}) {
        const std::string msg = refusal(json{{"type", "string"}, {"pattern", p}});
        EXPECT_NE(msg.find("'pattern'"), std::string::npos) << p << ": " << msg;
    }
}

TEST(SchemaCoverage, OneOfNullableTypeListsConstPrefixItemsAndLargeEnums) {
    auto one = compile(R"({"oneOf":[{"type":"integer"},{"type":"string","maxLength":2}]})");
    EXPECT_TRUE(accepts(one, "7"));
    EXPECT_TRUE(accepts(one, R"("ab")"));
    EXPECT_FALSE(accepts(one, R"("abc")"));
    auto nul = compile(R"({"type":"string","nullable":true,"maxLength":1})");
    EXPECT_TRUE(accepts(nul, "null"));
    EXPECT_TRUE(accepts(nul, R"("a")"));
    EXPECT_FALSE(accepts(nul, R"("ab")"));
    auto tl = compile(R"({"type":["string","null"]})");
    EXPECT_TRUE(accepts(tl, "null"));
    EXPECT_FALSE(accepts(tl, "1"));
    EXPECT_TRUE(accepts(compile(R"({"const":{"a":[1,2]}})"), R"({"a":[1,2]})"));
    auto tuple = compile(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":false,"minItems":1})");
    EXPECT_TRUE(accepts(tuple, R"([1,"a"])"));
    EXPECT_TRUE(accepts(tuple, "[1]"));
    EXPECT_FALSE(accepts(tuple, "[]"));
    EXPECT_FALSE(accepts(tuple, R"([1,"a",2])"));
    EXPECT_FALSE(accepts(tuple, R"(["a"])"));
    auto rest = compile(R"({"prefixItems":[{"type":"string"}],"items":{"type":"integer"},"maxItems":3})");
    EXPECT_TRUE(accepts(rest, R"(["a",1,2])"));
    EXPECT_FALSE(accepts(rest, R"(["a","b"])"));
    EXPECT_FALSE(accepts(rest, R"(["a",1,2,3])"));
    // An enum of 300 values (was at most 64).
    json values = json::array();
    for (int i = 0; i < 300; ++i) values.push_back("v" + std::to_string(i));
    auto big = compile_schema(json{{"enum", values}}, "schema");
    EXPECT_TRUE(accepts(big, R"("v0")"));
    EXPECT_TRUE(accepts(big, R"("v150")"));
    EXPECT_TRUE(accepts(big, R"("v299")"));
    EXPECT_FALSE(accepts(big, R"("v300")"));
}

// An object of 100 properties (at most 64 before): its keys are written in a fixed
// order, the required ones as 'properties' lists them, then any of the optional ones in
// that order; the object's state is a position in that list.
TEST(SchemaCoverage, ObjectsOfManyPropertiesKeepAFixedOrder) {
    json props = json::object();
    for (int i = 0; i < 100; ++i)
        props["p" + std::to_string(i)] = i % 2 ? json{{"type", "integer"}} : json{{"type", "string"}, {"maxLength", 3}};
    // Required in another order than 'properties': the order written is the latter's.
    const json schema = {{"type", "object"}, {"properties", props}, {"required", json::array({"p77", "p3", "p40"})}};
    EXPECT_EQ(refusal(schema), "");
    auto g = compile_schema(schema, "schema");
    EXPECT_TRUE(accepts(g, R"({"p3":1,"p40":"a","p77":7})"));
    EXPECT_TRUE(accepts(g, R"({"p3":1,"p40":"a","p77":7,"p0":"x","p5":5,"p64":"y","p99":9})"));
    EXPECT_TRUE(accepts(g, "{\n  \"p3\": 1,\n  \"p40\": \"a\",\n  \"p77\": 7,\n  \"p98\": \"z\"\n}"));
    const char* bad[] = {
        R"({"p3":1,"p40":"a"})",                          // p77 missing
        R"({})",                                           // all missing
        R"({"p40":"a","p3":1,"p77":7})",                  // required out of order
        R"({"p0":"x","p3":1,"p40":"a","p77":7})",         // an optional key before the required ones
        R"({"p3":1,"p40":"a","p77":7,"p5":5,"p0":"x"})",  // optional keys out of order
        R"({"p3":1,"p40":"a","p77":7,"p5":5,"p5":6})",    // a repeat
        R"({"p3":1,"p40":"a","p77":7,"p3":2})",           // a required key again
        R"({"p3":1,"p40":"a","p77":7,"p100":1})",         // not a property: no other keys
        R"({"p3":1,"p40":"a","p77":7,"p1":"s"})",         // p1's value is an integer
        R"({"p3":1,"p40":"a","p77":7,"p5":5,})",          // trailing comma
    };
    for (const char* b : bad) EXPECT_FALSE(accepts(g, b)) << b;
    // Byte by byte: while a required key is due, nothing else may begin.
    grammar::Matcher m(g);
    EXPECT_TRUE(m.feed("{\"p"));
    EXPECT_FALSE(m.feed("4"));
    EXPECT_TRUE(m.feed("3\":1,\"p"));
    EXPECT_FALSE(m.feed("3"));
    EXPECT_TRUE(m.feed("40\":\"a\",\"p77\":7"));
    EXPECT_TRUE(m.feed("}"));
    EXPECT_TRUE(m.complete());
    // Other keys, where allowed, come after the listed ones and never repeat a listed one.
    json open = schema;
    open["additionalProperties"] = {{"type", "boolean"}};
    auto o = compile_schema(open, "schema");
    EXPECT_TRUE(accepts(o, R"({"p3":1,"p40":"a","p77":7,"p9":9,"zz":true,"yy":false})"));
    EXPECT_FALSE(accepts(o, R"({"p3":1,"zz":true,"p40":"a","p77":7})"));   // before a required key
    EXPECT_FALSE(accepts(o, R"({"p3":1,"p40":"a","p77":7,"zz":true,"p9":9})"));  // a listed key after another
    EXPECT_FALSE(accepts(o, R"({"p3":1,"p40":"a","p77":7,"p9":9,"p8":true})"));  // a listed key, out of order
    EXPECT_FALSE(accepts(o, R"({"p3":1,"p40":"a","p77":7,"zz":true,"zz":true})"));
    EXPECT_FALSE(accepts(o, R"({"p3":1,"p40":"a","p77":7,"zz":1})"));
    // Keys that share prefixes, one an escape: each is itself.
    auto q = compile(R"({"type":"object","properties":{"a":{"const":1},"ab":{"const":2},"a\"b":{"const":3}},"additionalProperties":true})");
    EXPECT_TRUE(accepts(q, R"({"a":1,"ab":2,"a\"b":3,"abc":0})"));
    EXPECT_TRUE(accepts(q, R"({"ab":2,"abc":0})"));
    EXPECT_FALSE(accepts(q, R"({"ab":2,"a":1})"));
    EXPECT_FALSE(accepts(q, R"({"ab":2,"abc":0,"ab":2})"));
    EXPECT_FALSE(accepts(q, R"({"a":2})"));
    // A grammar's size is still bounded: 150,000 properties are a 400 naming the limit.
    json huge = json::object();
    for (int i = 0; i < 150000; ++i) huge["k" + std::to_string(i)] = json::object();
    const std::string msg = refusal(json{{"type", "object"}, {"properties", huge}});
    EXPECT_NE(msg.find("'properties'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("100000"), std::string::npos) << msg;
}

// additionalProperties absent: no key beyond 'properties' (as the reference's grammars
// have it); without 'properties', any key.
TEST(SchemaCoverage, AbsentAdditionalPropertiesAllowsNoOtherKeys) {
    auto g = compile(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
    EXPECT_TRUE(accepts(g, R"({"city":"Oslo"})"));
    EXPECT_FALSE(accepts(g, R"({"city":"Oslo","x":1})"));
    grammar::Matcher m(g);
    EXPECT_TRUE(m.feed(R"({"city":"Oslo")"));
    EXPECT_FALSE(m.feed(","));  // nothing may follow the last key
    EXPECT_TRUE(accepts(compile(R"({"type":"object","properties":{"a":{}},"additionalProperties":true})"), R"({"a":1,"x":1})"));
    EXPECT_TRUE(accepts(compile(R"({"type":"object"})"), R"({"x":1,"y":[2]})"));
    EXPECT_TRUE(accepts(compile(R"({"type":"object","additionalProperties":{"type":"integer"}})"), R"({"x":1})"));
}

TEST(SchemaCoverage, DeepSchemasAreA400NamingTheLimit) {
    // 5,000 levels of items: the compiler measures the depth first (no recursion).
    const json deep = nested(R"({"type":"array","items":)", "}", 5000);
    std::string msg = refusal(deep);
    EXPECT_NE(msg.find("64"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'schema'"), std::string::npos) << msg;
    EXPECT_NE(refusal(nested(R"({"type":"object","properties":{"a":)", "}}", 3000)), "");
    EXPECT_NE(refusal(nested(R"({"anyOf":[)", "]}", 3000)), "");
    // A $ref chain is shallow JSON but deep recursion: 2,000 definitions, each naming the next.
    json defs = json::object();
    for (int i = 0; i < 2000; ++i) defs["d" + std::to_string(i)] = {{"$ref", "#/$defs/d" + std::to_string(i + 1)}};
    defs["d2000"] = {{"type", "integer"}};
    msg = refusal(json{{"$defs", defs}, {"$ref", "#/$defs/d0"}});
    EXPECT_NE(msg.find("$ref"), std::string::npos) << msg;
    // Within the limits: 30 levels compile and match.
    auto g = compile_schema(nested(R"({"type":"array","items":)", "}", 30, R"({"type":"integer"})"), "schema");
    EXPECT_TRUE(accepts(g, nested("[", "]", 30, "1").dump()));
    // anyOfs sharing their alternatives (2^25 paths through 25 definitions) expand once each.
    json ex = json::object();
    for (int i = 0; i < 25; ++i) {
        const std::string next = "#/$defs/a" + std::to_string(i + 1);
        ex["a" + std::to_string(i)] = {{"anyOf", json::array({{{"$ref", next}}, {{"$ref", next}}})}};
    }
    ex["a25"] = {{"type", "boolean"}};
    auto wide = compile_schema(json{{"$defs", ex}, {"$ref", "#/$defs/a0"}}, "schema");
    EXPECT_TRUE(accepts(wide, "true"));
    EXPECT_FALSE(accepts(wide, "1"));
}

TEST(SchemaCoverage, OutputNestsAtMostKMaxDepth) {
    auto any = compile_schema(json::object(), "schema");
    EXPECT_TRUE(accepts(any, nested("[", "]", grammar::kMaxDepth - 1, "[]").dump()));
    grammar::Matcher m(any);
    EXPECT_FALSE(m.feed(std::string(grammar::kMaxDepth + 1, '[')));
}

TEST(SchemaCoverage, WhitespaceRunsAreBounded) {
    // One space, or a newline and indentation, at most kMaxWhitespace bytes; a tab only
    // after a newline (a model that favours tabs padded every gap with 16 of them).
    auto g = compile(R"({"type":"object","properties":{"a":{"type":"array"}}})");
    const std::string indent = "\n" + std::string(grammar::kMaxWhitespace - 2, ' ') + "\t";
    EXPECT_TRUE(accepts(g, "{" + indent + "\"a\"" + indent + ":" + indent + "[" + indent + "1" + indent + "]" + indent + "}"));
    EXPECT_TRUE(accepts(g, "{ \"a\" : [ 1, 2 ] }"));
    EXPECT_FALSE(accepts(g, "{" + indent + " \"a\":[]}"));
    EXPECT_FALSE(accepts(g, "{\"a\":[1" + std::string(grammar::kMaxWhitespace + 1, '\t') + "]}"));
    EXPECT_FALSE(accepts(g, "{\"a\":[1\t]}"));
    EXPECT_FALSE(accepts(g, "{\"a\":[1  ]}"));
    EXPECT_FALSE(accepts(g, "{\"a\":[1\n\n]}"));
    EXPECT_FALSE(accepts(g, "{\"a\":[1 \n]}"));
}

TEST(SchemaCoverage, RequestDepthIsMeasuredWithoutRecursion) {
    EXPECT_EQ(json_text_depth("{}"), 1);
    EXPECT_EQ(json_text_depth(R"({"a":"[[[[", "b":[{"c":"\"]]"}]})"), 3);
    EXPECT_EQ(json_text_depth(std::string(1000000, '[')), 1000000);
    EXPECT_EQ(json_depth(json::parse(R"({"a":[1,[2]],"b":{}})")), 3);
    EXPECT_NO_THROW(check_json_depth(nested("[", "]", kMaxRequestDepth, "1").dump()));
    try {
        check_json_depth(nested("[", "]", kMaxRequestDepth + 1, "1").dump(), "body");
        ADD_FAILURE() << "no error";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_NE(e.message.find(std::to_string(kMaxRequestDepth)), std::string::npos) << e.message;
        EXPECT_EQ(e.param, "body");
    }
}
#endif
