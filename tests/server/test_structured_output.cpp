// Structured output: JSON schemas compiled to grammars, the byte-level matcher (what it
// accepts and refuses), refused keywords, and token masks over a 150k-token vocabulary:
// random walks through the mask always end in JSON that parses and validates, the tokens
// of valid documents are always allowed, and the mask's cost per token is measured.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include "grammar_test_util.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "gguf/gguf.h"
#include "grammar/token_mask.h"
#include "server/json_schema.h"
#include "test_util.h"
#include "tokenizer/vocab.h"

using namespace glia;
using namespace glia::server;

namespace {

using test::accepts;

// A reference validator for the keywords the compiler supports (independent code).
bool valid(const json& v, const json& s, const json& root) {
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("$ref")) {
        const std::string ref = s["$ref"];
        if (ref == "#") return valid(v, root, root);
        const auto slash = ref.rfind('/');
        return valid(v, root[ref.substr(2, slash - 2)][ref.substr(slash + 1)], root);
    }
    if (s.contains("const") && v != s["const"]) return false;
    if (s.contains("enum") && std::find(s["enum"].begin(), s["enum"].end(), v) == s["enum"].end()) return false;
    if (s.contains("anyOf")) {
        bool any = false;
        for (const json& a : s["anyOf"]) any = any || valid(v, a, root);
        if (!any) return false;
    }
    if (s.contains("type")) {
        std::vector<std::string> types;
        if (s["type"].is_string()) types.push_back(s["type"]);
        else for (const json& t : s["type"]) types.push_back(t);
        bool ok = false;
        for (const std::string& t : types)
            ok = ok || (t == "object" && v.is_object()) || (t == "array" && v.is_array()) || (t == "string" && v.is_string()) ||
                 (t == "number" && v.is_number()) || (t == "integer" && v.is_number_integer()) ||
                 (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null());
        if (!ok) return false;
    }
    if (v.is_object()) {
        for (const json& r : s.value("required", json::array()))
            if (!v.contains(r.get<std::string>())) return false;
        for (const auto& [k, x] : v.items()) {
            if (s.contains("properties") && s["properties"].contains(k)) {
                if (!valid(x, s["properties"][k], root)) return false;
            } else if (s.contains("additionalProperties") && !valid(x, s["additionalProperties"], root)) {
                return false;
            }
        }
    }
    if (v.is_array()) {
        if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
        if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
        if (s.contains("items"))
            for (const json& x : v)
                if (!valid(x, s["items"], root)) return false;
    }
    if (v.is_string()) {
        size_t cps = 0;
        for (unsigned char c : v.get<std::string>()) cps += (c & 0xC0) != 0x80;
        if (s.contains("minLength") && cps < s["minLength"].get<size_t>()) return false;
        if (s.contains("maxLength") && cps > s["maxLength"].get<size_t>()) return false;
    }
    return true;
}

const json kPerson = json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer"},
    "email": {"type": ["string", "null"], "maxLength": 20},
    "role": {"enum": ["admin", "user", 3, null]},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "minItems": 1, "maxItems": 3},
    "score": {"type": "number"},
    "ok": {"type": "boolean"},
    "kind": {"const": "person"},
    "pet": {"anyOf": [{"type": "object", "properties": {"dog": {"type": "string", "maxLength": 5}}, "required": ["dog"],
                        "additionalProperties": false},
                       {"type": "object", "properties": {"cat": {"type": "integer"}}, "required": ["cat"],
                        "additionalProperties": false}]}
  },
  "required": ["name", "age", "kind"],
  "additionalProperties": false
})");

const json kTree = json::parse(R"({
  "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                     "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
                     "required": ["v"], "additionalProperties": false}},
  "$ref": "#/$defs/node"
})");

}  // namespace

TEST(StructuredOutput, MatcherAcceptsValidAndRefusesInvalidText) {
    auto g = compile_schema(kPerson, "schema");
    EXPECT_TRUE(accepts(g, R"({"name":"Al","age":3,"kind":"person"})"));
    EXPECT_TRUE(accepts(g, R"({ "name": "\u00e9\n", "age": -0, "kind" : "person",
        "email": null, "role": 3, "tags": ["a", "bb"], "score": -1.5e+3, "ok": true, "pet": {"cat": 2} })"));
    // Keys come in a fixed order (as the reference's grammars write them): the required
    // ones as 'properties' lists them, then optional ones in that order.
    EXPECT_FALSE(accepts(g, R"({"kind":"person","age":3,"name":"Al"})"));
    EXPECT_FALSE(accepts(g, R"({"name":"Al","age":3,"kind":"person","tags":["a"],"role":3})"));
    EXPECT_TRUE(accepts(g, R"({"name":"日本語","age":1,"kind":"person","pet":{"dog":"rex"}})"));
    const char* bad[] = {
        R"({"name":"Al","age":3})",                              // required "kind" missing
        R"({"name":"Al","age":3,"kind":"person","x":1})",        // no other keys
        R"({"name":"Al","age":3.5,"kind":"person"})",            // integer
        R"({"name":"Al","age":03,"kind":"person"})",             // leading zero
        R"({"name":"Al","age":1234567890123456,"kind":"person"})",  // past a double's exact integers
        R"({"name":"","age":3,"kind":"person"})",                // minLength
        R"({"name":"abcdefghijklm","age":3,"kind":"person"})",   // maxLength 12
        R"({"name":"Al","name":"B","age":3,"kind":"person"})",   // duplicate key
        R"({"name":"Al","age":3,"kind":"persons"})",             // const
        R"({"name":"Al","age":3,"kind":"person","role":"root"})",  // enum
        R"({"name":"Al","age":3,"kind":"person","tags":[]})",    // minItems
        R"({"name":"Al","age":3,"kind":"person","tags":["a","b","c","d"]})",  // maxItems
        R"({"name":"Al","age":3,"kind":"person","pet":{"dog":"a","cat":1}})",  // neither alternative
        R"({"name":"A\ud800","age":3,"kind":"person"})",         // surrogate escape
        "{\"name\":\"A\x01\",\"age\":3,\"kind\":\"person\"}",    // control byte in a string
        "{\"name\":\"A\xc3\",\"age\":3,\"kind\":\"person\"}",    // cut UTF-8
        "{\"name\":\"A\xc0\x80\",\"age\":3,\"kind\":\"person\"}",  // overlong UTF-8
        R"({"name":"Al","age":3,"kind":"person"} x)",            // text after the value
        R"({"name":"Al","age":3,"kind":"person",})",             // trailing comma
    };
    for (const char* b : bad) EXPECT_FALSE(accepts(g, b)) << b;
    // Whitespace runs are bounded.
    EXPECT_FALSE(accepts(g, "{" + std::string(17, ' ') + R"("name":"Al","age":3,"kind":"person"})"));
    EXPECT_FALSE(accepts(g, "{\n\n" R"("name":"Al","age":3,"kind":"person"})"));
    EXPECT_TRUE(accepts(g, "{\n  " R"("name":"Al",
  "age":3,
  "kind":"person"
})"));
    // A prefix is not a whole value, but it is a live one.
    grammar::Matcher m(g);
    EXPECT_TRUE(m.feed(R"({"name":"Al","age":12)"));
    EXPECT_FALSE(m.accepting());
    EXPECT_FALSE(m.feed("}"));  // "kind" still required; the state is unchanged
    EXPECT_TRUE(m.feed(R"(,"kind":"person"})"));
    EXPECT_TRUE(m.complete());
}

TEST(StructuredOutput, RecursiveSchemasAndAnyJsonObject) {
    auto t = compile_schema(kTree, "schema");
    EXPECT_TRUE(accepts(t, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4,"kids":[]}]}]})"));
    EXPECT_FALSE(accepts(t, R"({"v":1,"kids":[{"v":2},{"v":3},{"v":4}]})"));
    EXPECT_FALSE(accepts(t, R"({"kids":[]})"));
    auto o = any_object_grammar();
    EXPECT_TRUE(accepts(o, R"({"a":[1,2.5,{"b":null}],"c":"d","e":true,"f":{}})"));
    EXPECT_TRUE(accepts(o, "{}"));
    EXPECT_FALSE(accepts(o, "[1]"));
    EXPECT_FALSE(accepts(o, R"({"a":1,"a":2})"));
    EXPECT_FALSE(accepts(o, R"({"a":tru})"));
    // A root number ends with the text.
    auto n = compile_schema(json{{"type", "number"}}, "schema");
    EXPECT_TRUE(accepts(n, "12.5"));
    EXPECT_FALSE(accepts(n, "12."));
    auto e = compile_schema(json::parse(R"({"enum":[1,12]})"), "schema");
    EXPECT_TRUE(accepts(e, "1"));
    EXPECT_TRUE(accepts(e, "12"));
    EXPECT_FALSE(accepts(e, "123"));
}

TEST(StructuredOutput, RefusesWhatItCannotEnforceNamingTheKeyword) {
    const std::pair<const char*, const char*> cases[] = {
        {R"({"type":"string","pattern":"^(?!a)b"})", "'pattern'"},
        {R"({"type":"string","format":"date","pattern":"^2"})", "'pattern'"},
        {R"({"type":"integer","minimum":1e300})", "'minimum'"},
        {R"({"type":"array","uniqueItems":true})", "'uniqueItems'"},
        {R"({"not":{"type":"string"}})", "'not'"},
        {R"({"type":"object","properties":{"a":{"type":"number","multipleOf":2}}})", "'multipleOf'"},
        {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "'required'"},
        {R"({"type":"wat"})", "'type'"},
        {R"({"$ref":"#/$defs/missing"})", "'$ref'"},
        {R"({"$ref":"https://example.com/s.json"})", "'$ref'"},
        {R"({"type":"array","maxItems":1,"minItems":2})", "'maxItems'"},
        {R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})", "itself"},
    };
    for (const auto& [schema, needle] : cases) {
        try {
            compile_schema(json::parse(schema), "response_format.json_schema.schema");
            ADD_FAILURE() << "accepted: " << schema;
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 400);
            EXPECT_NE(e.message.find(needle), std::string::npos) << schema << " -> " << e.message;
            EXPECT_EQ(e.param, "response_format.json_schema.schema");
        }
    }
    // The place is named too.
    try {
        compile_schema(json::parse(R"({"properties":{"a":{"properties":{"b":{"pattern":"(x)\\1"}}}}})"), "s");
        ADD_FAILURE();
    } catch (const ApiError& e) {
        EXPECT_NE(e.message.find("properties.a.properties.b"), std::string::npos) << e.message;
    }
}

namespace {

std::unique_ptr<tok::Vocab> qwen2_vocab() {
    auto f = gguf::File::open(test::shared_path("vocab/ggml-vocab-qwen2.gguf"));
    return tok::Vocab::from_gguf(*f);
}

}  // namespace

// Random walks through the mask: every step samples uniformly among the allowed tokens;
// every finished walk parses and validates.
TEST(StructuredOutput, RandomWalksThroughTheMaskAlwaysValidate) {
    auto v = qwen2_vocab();
    ASSERT_GT(v->n_tokens(), 150000);
    grammar::TokenIndex index(*v);
    const json schemas[] = {kPerson, kTree,
                            json::parse(R"({"type":"array","items":{"enum":["x","y\"z",true]},"maxItems":4})"),
                            json::parse(R"({"type":"object","properties":{"q":{"type":"string","maxLength":8}},
                                            "additionalProperties":{"type":"integer"},"required":["q"]})")};
    std::mt19937 rng(42);
    std::vector<int32_t> short_ids;  // one-byte tokens and end-of-generation ones
    for (int id = 0; id < index.n_vocab(); ++id)
        if (index.is_eog(id) || index.bytes(id).size() == 1) short_ids.push_back(id);
    grammar::TokenMask mask;
    int finished = 0, steps = 0;
    double mask_s = 0;
    for (const json& schema : schemas) {
        auto g = compile_schema(schema, "schema");
        for (int walk = 0; walk < 8; ++walk) {
            grammar::Matcher m(g);
            std::string out;
            for (int step = 0; step < 800 && !m.complete(); ++step) {
                const auto t0 = std::chrono::steady_clock::now();
                index.mask(m, mask);
                mask_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                ++steps;
                // Half the steps take an allowed one-byte token when there is one (closing
                // quotes and brackets are), so walks end; the others any allowed token.
                int32_t t = -1;
                if (rng() % 2) {
                    std::vector<int32_t> ok;
                    for (int32_t id : short_ids)
                        if (mask.test(id)) ok.push_back(id);
                    if (!ok.empty()) t = ok[rng() % ok.size()];
                }
                for (int tries = 0; t < 0 && tries < 64; ++tries) {
                    const int32_t id = static_cast<int32_t>(rng() % index.n_vocab());
                    if (mask.test(id)) t = id;
                }
                if (t < 0) {
                    std::vector<int32_t> ok;
                    for (int id = 0; id < index.n_vocab(); ++id)
                        if (mask.test(id)) ok.push_back(id);
                    ASSERT_FALSE(ok.empty()) << "dead end after " << out;
                    t = ok[rng() % ok.size()];
                }
                if (index.is_eog(t)) {
                    ASSERT_TRUE(m.accepting());
                    break;
                }
                ASSERT_TRUE(m.feed(index.bytes(t))) << "the mask allowed a token the matcher refuses: " << index.bytes(t);
                out += index.bytes(t);
            }
            if (!m.accepting()) continue;  // a walk may wander past its budget in free strings
            ++finished;
            const json parsed = json::parse(out, nullptr, false);
            ASSERT_FALSE(parsed.is_discarded()) << out;
            EXPECT_TRUE(valid(parsed, schema, schema)) << out << "\nschema: " << schema.dump();
        }
    }
    std::printf("%d walks finished, %d steps, %.3f ms per mask\n", finished, steps, mask_s / steps * 1e3);
    EXPECT_GE(finished, 20);
}

// The tokens of valid documents are allowed at every step, and the mask's cost per token
// on a 151k-token vocabulary (printed; bench/LOG.md records it) stays far below a decode step.
TEST(StructuredOutput, DocumentTokensAreAllowedAndTheMaskIsCheap) {
    auto v = qwen2_vocab();
    grammar::TokenIndex index(*v);
    const std::pair<json, std::string> docs[] = {
        {kPerson, R"({"name": "Zoë Smith", "age": 42, "kind": "person", "email": null, "role": "admin",
  "tags": ["x", "y"], "score": 1.25e-3, "ok": false, "pet": {"dog": "Rex"}})"},
        {kTree, R"({"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3}]})"},
        {json{{"type", "object"}}, R"({"title": "A long string value: the quick brown fox jumps over the lazy dog, )"
                                    R"(twice, and then \"quotes\" and \\ backslashes and unicode: ∀x ∈ ℝ.", "n": [1, 2, 3]})"},
    };
    grammar::TokenMask mask;
    double total = 0, worst = 0;
    int n = 0;
    for (const auto& [schema, text] : docs) {
        auto g = compile_schema(schema, "schema");
        grammar::Matcher m(g);
        for (int32_t t : v->tokenize(text, false, false)) {
            const auto t0 = std::chrono::steady_clock::now();
            index.mask(m, mask);
            const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            total += dt;
            worst = std::max(worst, dt);
            ++n;
            ASSERT_TRUE(mask.test(t)) << "token '" << index.bytes(t) << "' refused in " << text;
            ASSERT_TRUE(m.feed(index.bytes(t)));
        }
        EXPECT_TRUE(m.accepting()) << text;
        index.mask(m, mask);
        EXPECT_TRUE(mask.test(v->eos() >= 0 ? v->eos() : v->eog_ids().at(0)));
    }
    std::printf("mask over %d tokens: %.3f ms per token on average, %.3f ms at worst (%d steps)\n", index.n_vocab(),
                total / n * 1e3, worst * 1e3, n);
    EXPECT_LT(total / n, 0.010) << "the mask should cost well under a decode step";
}
#endif
