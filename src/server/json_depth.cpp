#if GLIA_HAVE_SERVER
#include "server/json_depth.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

namespace glia::server {

namespace {

// Walks the brackets and braces outside strings; stops (returning the offset) where the
// nesting first passes `limit`, else returns npos. `deepest` gets the deepest level seen.
size_t scan(std::string_view text, int limit, int& deepest) {
    int depth = 0;
    deepest = 0;
    bool in_string = false, escaped = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
            if (depth > limit) return i;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return std::string_view::npos;
}

}  // namespace

int json_text_depth(std::string_view text) {
    int deepest = 0;
    scan(text, std::numeric_limits<int>::max(), deepest);
    return deepest;
}

size_t json_too_deep_at(std::string_view text, int limit) {
    int deepest = 0;
    return scan(text, limit, deepest);
}

int json_depth(const json& value) {
    int deepest = 0;
    std::vector<std::pair<const json*, int>> todo{{&value, 0}};
    while (!todo.empty()) {
        auto [v, d] = todo.back();
        todo.pop_back();
        if (!v->is_structured()) continue;
        deepest = std::max(deepest, d + 1);
        for (const json& child : *v) todo.emplace_back(&child, d + 1);
    }
    return deepest;
}

void check_json_depth(std::string_view text, const std::string& where, int limit) {
    const size_t at = json_too_deep_at(text, limit);
    if (at == std::string_view::npos) return;
    const std::string what = where.empty() ? "the request body" : "'" + where + "'";
    throw_api(400, what + " nests arrays and objects deeper than " + std::to_string(limit) +
                       " levels (passed at byte offset " + std::to_string(at) + ")",
              where, "too_deep");
}

}  // namespace glia::server
#endif
