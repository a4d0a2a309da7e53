// A response's input items and their pages (responses_items.h).
#if GLIA_HAVE_SERVER
#include "server/responses_items.h"

#include <algorithm>
#include <cctype>

namespace glia::server::responses {
namespace {

std::string type_of(const json& item) {
    auto t = item.find("type");
    return t != item.end() && t->is_string() ? t->get<std::string>() : "message";
}

const char* prefix_of(const std::string& type) {
    if (type == "message") return "msg_";
    if (type == "function_call") return "fc_";
    if (type == "function_call_output") return "fco_";
    if (type == "reasoning") return "rs_";
    return "item_";
}

bool has_id(const json& item) {
    auto id = item.find("id");
    return id != item.end() && id->is_string() && !id->get_ref<const std::string&>().empty();
}

// A query parameter's first value, or nullptr when absent.
const std::string* param(const std::multimap<std::string, std::string>& q, const char* name) {
    auto it = q.find(name);
    return it == q.end() ? nullptr : &it->second;
}

std::string quoted(const std::string& s) {
    std::string q = "\"";
    q.append(s, 0, 64);
    q += '"';
    return q;
}

int limit_of(const std::multimap<std::string, std::string>& q) {
    const std::string* v = param(q, "limit");
    if (!v) return 20;
    const bool digits = !v->empty() && v->size() <= 3 && std::all_of(v->begin(), v->end(), [](unsigned char c) { return std::isdigit(c); });
    const int n = digits ? std::stoi(*v) : 0;
    if (n < 1 || n > 100) invalid_value("limit", "is " + quoted(*v) + "; expected an integer from 1 to 100");
    return n;
}

}  // namespace

json input_item(const json& item) {
    json out = item;
    const std::string type = type_of(item);
    out["type"] = type;
    if (type == "message") {
        auto c = item.find("content");
        if (c != item.end() && c->is_string()) {
            auto role = item.find("role");
            const bool assistant = role != item.end() && *role == "assistant";
            json part = {{"type", assistant ? "output_text" : "input_text"}, {"text", *c}};
            if (assistant) part["annotations"] = json::array();
            out["content"] = json::array({part});
        }
    }
    if ((type == "message" || type == "function_call" || type == "function_call_output") &&
        (!out.contains("status") || out["status"].is_null()))
        out["status"] = "completed";
    return out;
}

json with_ids(json items, const std::string& base) {
    for (size_t i = 0; i < items.size(); ++i)
        if (items[i].is_object() && !has_id(items[i]))
            items[i]["id"] = prefix_of(type_of(items[i])) + base + "_in" + std::to_string(i);
    return items;
}

json list_input_items(const json& items, const std::multimap<std::string, std::string>& query) {
    const int limit = limit_of(query);
    bool desc = true;
    if (const std::string* o = param(query, "order")) {
        if (*o != "asc" && *o != "desc") invalid_value("order", "is " + quoted(*o) + "; expected asc or desc");
        desc = *o == "desc";
    }
    const size_t n = items.is_array() ? items.size() : 0;
    auto at = [&](size_t k) -> const json& { return items[desc ? n - 1 - k : k]; };  // k-th in the listing's order
    size_t start = 0;
    if (const std::string* after = param(query, "after")) {
        size_t k = 0;
        while (k < n && at(k).value("id", std::string()) != *after) ++k;
        if (k == n) invalid_value("after", "is " + quoted(*after) + "; no input item of this response has that id");
        start = k + 1;
    }
    json data = json::array();
    for (size_t k = start; k < n && data.size() < size_t(limit); ++k) data.push_back(at(k));
    json page = {{"object", "list"}, {"data", data}, {"first_id", nullptr}, {"last_id", nullptr},
                 {"has_more", start + data.size() < n}};
    if (!data.empty()) {
        page["first_id"] = data.front().value("id", json());
        page["last_id"] = data.back().value("id", json());
    }
    return page;
}

}  // namespace glia::server::responses
#endif  // GLIA_HAVE_SERVER
