// Grammar tests' helper: whether a grammar's matcher takes the whole text and may stop there.
#pragma once
#include <memory>
#include <string>

#include "grammar/json_grammar.h"

namespace glia::test {

inline bool accepts(const std::shared_ptr<grammar::Grammar>& g, const std::string& text) {
    grammar::Matcher m(g);
    return m.feed(text) && m.accepting();
}

}  // namespace glia::test
