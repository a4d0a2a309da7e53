#if GLIA_HAVE_SERVER
#include "server/request_text.h"

namespace glia::server {
namespace {

json walk(const json& v, const tok::PromptTokenizer& pt, const std::string& field, int depth) {
    if (depth > kMaxTemplateDepth)
        throw_api(400, "'" + field + "' nests deeper than " + std::to_string(kMaxTemplateDepth) + " levels", field,
                  "invalid_value");
    if (v.is_string()) return pt.protect(v.get_ref<const std::string&>());
    if (v.is_array()) {
        json out = json::array();
        for (const json& x : v) out.push_back(walk(x, pt, field, depth + 1));
        return out;
    }
    if (v.is_object()) {
        json out = json::object();
        for (const auto& [k, x] : v.items()) out[pt.protect(k)] = walk(x, pt, field, depth + 1);
        return out;
    }
    return v;  // numbers, booleans, null
}

}  // namespace

json protect_request_text(const json& v, const tok::PromptTokenizer& pt, const std::string& field) {
    return walk(v, pt, field, 0);
}

json protect_messages(const json& messages, const tok::PromptTokenizer& pt) {
    json out = json::array();
    for (size_t i = 0; i < messages.size(); ++i) {
        const json& m = messages[i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        json p = json::object();
        for (const auto& [k, x] : m.items()) p[pt.protect(k)] = k == "role" ? x : walk(x, pt, where, 1);
        out.push_back(std::move(p));
    }
    return out;
}

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
