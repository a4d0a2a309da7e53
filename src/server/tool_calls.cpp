#if GLIA_HAVE_SERVER
#include "server/tool_calls.h"

#include <random>

#include "server/json_schema.h"

namespace glia::server {

namespace {

const std::string kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
const std::string kPythonTag = "<|python_tag|>";
const std::string kMistral = "[TOOL_CALLS]", kArgs = "[ARGS]", kCallId = "[CALL_ID]";

std::string trim(const std::string& s) {
    const size_t a = s.find_first_not_of(" \t\r\n");
    if (a == std::string::npos) return "";
    const size_t b = s.find_last_not_of(" \t\r\n");
    return s.substr(a, b - a + 1);
}

std::string new_call_id() {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char* digits = "0123456789abcdef";
    std::string s = "call_";
    for (int i = 0; i < 24; ++i) s += digits[rng() & 15];
    return s;
}

// End (one past) of the JSON object or array that starts at `pos` (after whitespace);
// npos when there is none or it is cut off.
size_t json_end(const std::string& s, size_t pos) {
    pos = s.find_first_not_of(" \t\r\n", pos);
    if (pos == std::string::npos || (s[pos] != '{' && s[pos] != '[')) return std::string::npos;
    int depth = 0;
    bool in_str = false, esc = false;
    for (size_t i = pos; i < s.size(); ++i) {
        const char c = s[i];
        if (in_str) {
            if (esc) esc = false;
            else if (c == '\\') esc = true;
            else if (c == '"') in_str = false;
            continue;
        }
        if (c == '"') in_str = true;
        else if (c == '{' || c == '[') ++depth;
        else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
    }
    return std::string::npos;
}

// {"name": ..., "arguments" | "parameters": {...} or a JSON string}.
bool call_from_json(const json& j, ToolCall& out) {
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
    out.name = j["name"].get<std::string>();
    const json* args = nullptr;
    for (const char* k : {"arguments", "parameters"})
        if (j.contains(k)) args = &j[k];
    if (!args) out.arguments = "{}";
    else if (args->is_string()) out.arguments = args->get<std::string>();
    else if (args->is_object()) out.arguments = dump(*args);
    else return false;
    out.id = j.contains("id") && j["id"].is_string() ? j["id"].get<std::string>() : new_call_id();
    return true;
}

ParsedReply parse_hermes(const std::string& text) {
    ParsedReply r;
    size_t pos = 0;
    for (size_t b; (b = text.find(kHermesOpen, pos)) != std::string::npos;) {
        r.content += text.substr(pos, b - pos);
        const size_t start = b + kHermesOpen.size();
        const size_t e = text.find(kHermesClose, start);
        const std::string body = trim(text.substr(start, e == std::string::npos ? std::string::npos : e - start));
        const size_t end = e == std::string::npos ? text.size() : e + kHermesClose.size();
        ToolCall c;
        if (call_from_json(json::parse(body, nullptr, false), c)) r.calls.push_back(std::move(c));
        else r.content += text.substr(b, end - b);  // not a call after all: it stays text
        pos = end;
    }
    r.content = trim(r.content + text.substr(pos));
    return r;
}

ParsedReply parse_llama3(const std::string& text) {
    ParsedReply r;
    std::string t = trim(text);
    if (t.rfind(kPythonTag, 0) == 0) t = trim(t.substr(kPythonTag.size()));
    // One call, or several separated by ';'.
    size_t pos = 0;
    std::vector<ToolCall> calls;
    while (pos < t.size()) {
        const size_t e = json_end(t, pos);
        if (e == std::string::npos) break;
        ToolCall c;
        if (!call_from_json(json::parse(t.substr(pos, e - pos), nullptr, false), c)) break;
        calls.push_back(std::move(c));
        pos = t.find_first_not_of(" \t\r\n;", e);
        if (pos == std::string::npos) pos = t.size();
    }
    if (!calls.empty() && pos >= t.size()) r.calls = std::move(calls);
    else r.content = text;
    return r;
}

ParsedReply parse_mistral(const std::string& text) {
    ParsedReply r;
    size_t b = text.find(kMistral);
    r.content = trim(text.substr(0, b));
    while (b != std::string::npos) {
        size_t pos = b + kMistral.size();
        const size_t next = text.find(kMistral, pos);
        const std::string seg = text.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
        const std::string t = trim(seg);
        if (!t.empty() && t[0] == '[') {
            const json arr = json::parse(t, nullptr, false);
            bool ok = arr.is_array();
            std::vector<ToolCall> calls;
            for (size_t i = 0; ok && i < arr.size(); ++i) {
                ToolCall c;
                ok = call_from_json(arr[i], c);
                calls.push_back(std::move(c));
            }
            if (ok) r.calls.insert(r.calls.end(), calls.begin(), calls.end());
            else r.content += kMistral + seg;
        } else {
            const size_t a = t.find(kArgs);
            ToolCall c;
            bool ok = a != std::string::npos;
            if (ok) {
                std::string head = t.substr(0, a);
                const size_t ci = head.find(kCallId);
                if (ci != std::string::npos) {
                    c.id = trim(head.substr(ci + kCallId.size()));
                    head = head.substr(0, ci);
                }
                c.name = trim(head);
                const size_t e = json_end(t, a + kArgs.size());
                const json args = e == std::string::npos ? json() : json::parse(t.substr(a + kArgs.size(), e - a - kArgs.size()), nullptr, false);
                ok = !c.name.empty() && args.is_object();
                if (ok) c.arguments = dump(args);
                if (c.id.empty()) c.id = new_call_id();
            }
            if (ok) r.calls.push_back(std::move(c));
            else r.content += kMistral + seg;
        }
        b = next;
    }
    return r;
}

// Bytes at the end of `text` that could begin `marker`.
size_t partial_marker(const std::string& text, const std::string& marker) {
    for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
        if (text.compare(text.size() - n, n, marker, 0, n) == 0) return n;
    return 0;
}

int literal(grammar::Grammar& g, const std::string& raw) { return g.literals({raw}); }

}  // namespace

ToolFormat detect_tool_format(const std::string& t) {
    if (t.find(kMistral) != std::string::npos) return t.find(kArgs) != std::string::npos ? ToolFormat::MISTRAL : ToolFormat::MISTRAL_ARRAY;
    // XML parameters (<function=...>) are a different format inside the same tags.
    if (t.find(kHermesOpen) != std::string::npos && t.find("<function=") == std::string::npos) return ToolFormat::HERMES;
    if (t.find("<|start_header_id|>") != std::string::npos && t.find("\"parameters\"") != std::string::npos)
        return ToolFormat::LLAMA3;
    return ToolFormat::NONE;
}

const char* tool_format_name(ToolFormat f) {
    switch (f) {
        case ToolFormat::HERMES: return "hermes";
        case ToolFormat::LLAMA3: return "llama3-json";
        case ToolFormat::MISTRAL: return "mistral";
        case ToolFormat::MISTRAL_ARRAY: return "mistral-array";
        case ToolFormat::NONE: break;
    }
    return "none";
}

ParsedReply parse_tool_calls(ToolFormat f, const std::string& text) {
    switch (f) {
        case ToolFormat::HERMES: return parse_hermes(text);
        case ToolFormat::LLAMA3: return parse_llama3(text);
        case ToolFormat::MISTRAL:
        case ToolFormat::MISTRAL_ARRAY: return parse_mistral(text);
        case ToolFormat::NONE: break;
    }
    return ParsedReply{text, {}};
}

size_t content_prefix(ToolFormat f, const std::string& text) {
    if (f == ToolFormat::NONE) return text.size();
    if (f == ToolFormat::LLAMA3) {
        // A call is the whole reply: hold it all while it may still be one.
        const size_t i = text.find_first_not_of(" \t\r\n");
        if (i == std::string::npos) return 0;
        if (text[i] == '{' || kPythonTag.compare(0, std::min(kPythonTag.size(), text.size() - i), text, i) == 0) return 0;
        return text.size();
    }
    const std::string& marker = f == ToolFormat::HERMES ? kHermesOpen : kMistral;
    const size_t at = text.find(marker);
    if (at != std::string::npos) return at;
    return text.size() - partial_marker(text, marker);
}

std::vector<std::string> tool_markers(ToolFormat f) {
    switch (f) {
        case ToolFormat::HERMES: return {kHermesOpen, kHermesClose};
        case ToolFormat::LLAMA3: return {kPythonTag};
        case ToolFormat::MISTRAL: return {kMistral, kArgs, kCallId};
        case ToolFormat::MISTRAL_ARRAY: return {kMistral};
        case ToolFormat::NONE: break;
    }
    return {};
}

std::shared_ptr<grammar::Grammar> tool_call_grammar(ToolFormat f, const json& tools, const std::string& name) {
    using grammar::Kind;
    using grammar::Node;
    if (f == ToolFormat::NONE)
        throw_api(400, "tool_choice needs a tool-call format, and this model's chat template has none that this server knows",
                  "tool_choice", "invalid_value");
    auto g = std::make_shared<grammar::Grammar>();
    Node any;
    any.kind = Kind::ANY_OF;
    std::vector<std::pair<std::string, int>> fns;  // (name, arguments node)
    for (size_t i = 0; i < tools.size(); ++i) {
        const json& fn = tools[i]["function"];
        const std::string n = fn["name"].get<std::string>();
        if (!name.empty() && n != name) continue;
        const json params = fn.contains("parameters") ? fn["parameters"] : json{{"type", "object"}};
        fns.emplace_back(n, compile_schema_into(*g, params, "tools[" + std::to_string(i) + "].function.parameters"));
    }
    if (fns.empty())
        throw_api(400, "tool_choice names the function '" + name + "', which 'tools' does not define", "tool_choice",
                  "invalid_value");
    const std::string args_key = f == ToolFormat::LLAMA3 ? "parameters" : "arguments";
    for (const auto& [n, args] : fns) {
        if (f == ToolFormat::MISTRAL) {
            Node seq;
            seq.kind = Kind::SEQUENCE;
            seq.alternatives = {literal(*g, n + kArgs), args};
            any.alternatives.push_back(g->add(std::move(seq)));
            continue;
        }
        Node obj;
        obj.kind = Kind::OBJECT;
        obj.keys = {"name", args_key};
        obj.values = {g->literals({dump(json(n))}), args};
        obj.required = 2;  // both keys, name first
        any.alternatives.push_back(g->add(std::move(obj)));
    }
    const int call = g->add(std::move(any));
    Node root;
    root.kind = Kind::SEQUENCE;
    switch (f) {
        case ToolFormat::HERMES: root.alternatives = {literal(*g, kHermesOpen + "\n"), call, literal(*g, "\n" + kHermesClose)}; break;
        case ToolFormat::LLAMA3: root.alternatives = {call}; break;
        case ToolFormat::MISTRAL: root.alternatives = {literal(*g, kMistral), call}; break;
        case ToolFormat::MISTRAL_ARRAY: {
            Node arr;
            arr.kind = Kind::ARRAY;
            arr.items = call;
            arr.min_items = arr.max_items = 1;
            root.alternatives = {literal(*g, kMistral), g->add(std::move(arr))};
            break;
        }
        case ToolFormat::NONE: break;
    }
    g->set_root(g->add(std::move(root)));
    g->validate();
    return g;
}

}  // namespace glia::server
#endif
