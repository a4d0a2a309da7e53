// libFuzzer target for the JSON-schema compiler and the matcher it feeds: the input is a
// schema (any JSON, however nested: the compiler is called directly, without the
// request-depth check in front of it), optionally followed by a NUL byte and a text. The
// schema compiles to a grammar or is refused with ApiError (400); a grammar is then run
// on a few fixed documents, on the text after the NUL (in pieces, as tokens come), and on
// a walk that always takes the first byte the matcher allows (so that deep or recursive
// grammars get exercised, and nothing loops: the walk has a fixed length).
//
// Anything but a grammar or an ApiError (another exception, a crash, UB, a hang) is a
// finding.
#include <cstdint>
#include <string>
#include <string_view>

#include "grammar/json_grammar.h"
#include "server/json_schema.h"
#include "server/openai.h"

using namespace glia;
using namespace glia::server;

namespace {

void feed(const std::shared_ptr<grammar::Grammar>& g, std::string_view bytes, size_t piece) {
    grammar::Matcher m(g);
    for (size_t i = 0; i < bytes.size(); i += piece) {
        (void)m.feed(bytes.substr(i, piece));
        (void)m.accepting();
        (void)m.complete();
    }
}

// 300 bytes, each the first of a fixed list the matcher takes (stops when none does).
void walk(const std::shared_ptr<grammar::Grammar>& g) {
    static const std::string order = "\"}]0,:1a-.e{[ tnfru9\\\n";
    grammar::Matcher m(g);
    for (int i = 0; i < 300 && !m.complete(); ++i) {
        bool took = false;
        for (char c : order)
            if (m.feed(std::string_view(&c, 1))) {
                took = true;
                break;
            }
        if (!took) break;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const size_t nul = in.find('\0');
    const json schema = json::parse(in.substr(0, nul), nullptr, false);
    if (schema.is_discarded()) return 0;
    std::shared_ptr<grammar::Grammar> g;
    try {
        g = compile_schema(schema, "schema");
    } catch (const ApiError&) {
        return 0;
    }
    static const char* docs[] = {"{}", "[]", "\"a\"", "0", "-12.5e3", "null", "true", "{\"a\":[1,{\"b\":\"x\"}]}",
                                 "\"2024-02-29\"", "[1, \"x\", null]", "{ \"k\" :\t1 }"};
    for (const char* d : docs) feed(g, d, 1);
    if (nul != std::string_view::npos) {
        feed(g, in.substr(nul + 1), 1);
        feed(g, in.substr(nul + 1), 5);
    }
    walk(g);
    return 0;
}
