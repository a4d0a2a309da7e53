#if GLIA_HAVE_SERVER
#include "server/json_schema.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"

namespace glia::server {

namespace {

using grammar::Grammar;
using grammar::Kind;
using grammar::Node;

const std::set<std::string> kAnnotations = {"title",    "description", "default",  "examples",  "$schema",
                                            "$id",      "$comment",    "deprecated", "readOnly", "writeOnly",
                                            "$defs",    "definitions"};

class Compiler {
public:
    Compiler(const json& root, std::string where, Grammar& g) : root_(root), where_(std::move(where)), g_(&g) {}

    int run() {
        const int root = node(root_, "");
        const int saved = g_->root();
        g_->set_root(root);
        try {
            g_->validate();
        } catch (const glia::Error& e) {
            bad("", "", e.what());
        }
        g_->set_root(saved);
        return root;
    }

private:
    [[noreturn]] void bad(const std::string& path, const std::string& keyword, const std::string& why) const {
        std::string m = "'" + where_ + "'";
        if (!path.empty()) m += " at '" + path + "'";
        m += keyword.empty() ? ": " + why : ": the keyword '" + keyword + "' " + why;
        throw_api(400, m, where_, "invalid_schema");
    }

    static std::string join(const std::string& path, const std::string& k) { return path.empty() ? k : path + "." + k; }

    int count(const json& s, const char* k, const std::string& path) const {
        const json& v = s.at(k);
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (1 << 30))
            bad(path, k, "must be a non-negative integer, got " + v.dump());
        return static_cast<int>(v.get<int64_t>());
    }

    // "#", "#/$defs/X", "#/definitions/X" (JSON pointer escapes ~0 ~1 honoured).
    const json& resolve(const std::string& ref, const std::string& path) const {
        if (ref == "#") return root_;
        if (ref.rfind("#/", 0) != 0) bad(path, "$ref", "must point into this schema (\"#/$defs/NAME\"), got \"" + ref + "\"");
        const json* at = &root_;
        size_t pos = 2;
        while (pos <= ref.size()) {
            size_t end = ref.find('/', pos);
            if (end == std::string::npos) end = ref.size();
            std::string part = ref.substr(pos, end - pos);
            for (size_t i; (i = part.find("~1")) != std::string::npos;) part.replace(i, 2, "/");
            for (size_t i; (i = part.find("~0")) != std::string::npos;) part.replace(i, 2, "~");
            if (!at->is_object() || !at->contains(part)) bad(path, "$ref", "points to \"" + ref + "\", which does not exist");
            at = &(*at)[part];
            pos = end + 1;
        }
        return *at;
    }

    int node(const json& s, const std::string& path) {
        if (s.is_boolean()) {
            if (!s.get<bool>()) bad(path, "", "the schema false accepts no value");
            return g_->any_value();
        }
        if (!s.is_object()) bad(path, "", "a schema must be an object or a boolean, got " + s.dump());
        if (s.contains("$ref")) {
            if (!s["$ref"].is_string()) bad(path, "$ref", "must be a string");
            for (const auto& [k, v] : s.items())
                if (k != "$ref" && !kAnnotations.count(k)) bad(path, k, "next to $ref is not supported");
            const std::string ref = s["$ref"].get<std::string>();
            if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
            // A placeholder first, so that a recursive reference finds it.
            Node alias;
            alias.kind = Kind::ANY_OF;
            const int id = g_->add(alias);
            refs_[ref] = id;
            const int target = node(resolve(ref, path), ref);
            g_->node(id).alternatives = {target};
            return id;
        }
        for (const auto& [k, v] : s.items()) check_keyword(k, path);
        if (s.contains("const")) return g_->literals({s["const"].dump()});
        if (s.contains("enum")) {
            const json& e = s["enum"];
            if (!e.is_array() || e.empty()) bad(path, "enum", "must be a non-empty array");
            if (e.size() > size_t(grammar::kMaxLiterals))
                bad(path, "enum", "has " + std::to_string(e.size()) + " values; at most " + std::to_string(grammar::kMaxLiterals) + " are supported");
            std::vector<std::string> texts;
            for (const json& v : e) texts.push_back(v.dump());
            return g_->literals(std::move(texts));
        }
        if (s.contains("anyOf")) return alternatives(s["anyOf"], join(path, "anyOf"), "anyOf");
        if (s.contains("allOf")) {
            const json& a = s["allOf"];
            if (!a.is_array() || a.size() != 1) bad(path, "allOf", "is supported with exactly one schema");
            return node(a[0], join(path, "allOf.0"));
        }
        if (s.contains("type")) {
            const json& t = s["type"];
            if (t.is_string()) return typed(s, t.get<std::string>(), path);
            if (!t.is_array() || t.empty()) bad(path, "type", "must be a type name or a non-empty list of them");
            Node any;
            any.kind = Kind::ANY_OF;
            for (const json& x : t) {
                if (!x.is_string()) bad(path, "type", "must list type names, got " + x.dump());
                any.alternatives.push_back(typed(s, x.get<std::string>(), path));
            }
            return g_->add(std::move(any));
        }
        if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties"))
            return typed(s, "object", path);
        if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) return typed(s, "array", path);
        if (s.contains("minLength") || s.contains("maxLength")) return typed(s, "string", path);
        return g_->any_value();
    }

    void check_keyword(const std::string& k, const std::string& path) const {
        static const std::set<std::string> known = {"type",     "properties", "required", "additionalProperties",
                                                    "items",    "minItems",   "maxItems", "minLength",
                                                    "maxLength", "enum",      "const",    "anyOf",
                                                    "allOf"};
        if (known.count(k) || kAnnotations.count(k)) return;
        bad(path, k, "is not supported (supported: type, properties, required, additionalProperties, items, "
                     "minItems, maxItems, minLength, maxLength, enum, const, anyOf, $ref)");
    }

    int alternatives(const json& a, const std::string& path, const char* kw) {
        if (!a.is_array() || a.empty()) bad(path, kw, "must be a non-empty array of schemas");
        Node any;
        any.kind = Kind::ANY_OF;
        for (size_t i = 0; i < a.size(); ++i) any.alternatives.push_back(node(a[i], join(path, std::to_string(i))));
        return g_->add(std::move(any));
    }

    // Keywords that belong to another type are ignored, as the specification says.
    int typed(const json& s, const std::string& type, const std::string& path) {
        if (type == "object") return object(s, path);
        if (type == "array") {
            Node n;
            n.kind = Kind::ARRAY;
            n.items = s.contains("items") ? node(s["items"], join(path, "items")) : g_->any_value();
            if (s.contains("minItems")) n.min_items = count(s, "minItems", path);
            if (s.contains("maxItems")) n.max_items = count(s, "maxItems", path);
            if (n.max_items >= 0 && n.max_items < n.min_items) bad(path, "maxItems", "is below minItems");
            return g_->add(std::move(n));
        }
        if (type == "string") {
            const int lo = s.contains("minLength") ? count(s, "minLength", path) : 0;
            const int hi = s.contains("maxLength") ? count(s, "maxLength", path) : -1;
            if (hi >= 0 && hi < lo) bad(path, "maxLength", "is below minLength");
            return g_->string(lo, hi);
        }
        if (type == "number" || type == "integer") {
            Node n;
            n.kind = type == "number" ? Kind::NUMBER : Kind::INTEGER;
            return g_->add(std::move(n));
        }
        if (type == "boolean") return g_->literals({"true", "false"});
        if (type == "null") return g_->literals({"null"});
        bad(path, "type", "names an unknown type \"" + type + "\" (object, array, string, number, integer, boolean, null)");
    }

    int object(const json& s, const std::string& path) {
        Node n;
        n.kind = Kind::OBJECT;
        std::vector<std::string> names;
        if (s.contains("properties")) {
            const json& p = s["properties"];
            if (!p.is_object()) bad(path, "properties", "must be an object");
            if (p.size() > size_t(grammar::kMaxKeys))
                bad(path, "properties", "has " + std::to_string(p.size()) + " entries; at most " + std::to_string(grammar::kMaxKeys) + " are supported");
            for (const auto& [k, v] : p.items()) names.push_back(k);
        }
        if (s.contains("required")) {
            const json& r = s["required"];
            if (!r.is_array()) bad(path, "required", "must be an array of property names");
            for (const json& x : r) {
                if (!x.is_string()) bad(path, "required", "must list property names, got " + x.dump());
                const auto it = std::find(names.begin(), names.end(), x.get<std::string>());
                if (it == names.end())
                    bad(path, "required", "names \"" + x.get<std::string>() + "\", which 'properties' does not define");
                n.required |= 1ull << (it - names.begin());
            }
        }
        const int id = g_->add(Node{});  // before the children: they may refer back
        for (const std::string& k : names) {
            const std::string text = json(k).dump();
            n.keys.push_back(text.substr(1, text.size() - 2));
            n.values.push_back(node(s["properties"][k], join(join(path, "properties"), k)));
        }
        if (!s.contains("additionalProperties")) n.additional = g_->any_value();
        else if (s["additionalProperties"].is_boolean()) n.additional = s["additionalProperties"].get<bool>() ? g_->any_value() : -1;
        else n.additional = node(s["additionalProperties"], join(path, "additionalProperties"));
        g_->node(id) = std::move(n);
        return id;
    }

    const json& root_;
    std::string where_;
    Grammar* g_;
    std::map<std::string, int> refs_;
};

}  // namespace

std::shared_ptr<grammar::Grammar> compile_schema(const json& schema, const std::string& where) {
    auto g = std::make_shared<grammar::Grammar>();
    g->set_root(Compiler(schema, where, *g).run());
    return g;
}

int compile_schema_into(grammar::Grammar& g, const json& schema, const std::string& where) {
    return Compiler(schema, where, g).run();
}

std::shared_ptr<grammar::Grammar> any_object_grammar() {
    auto g = std::make_shared<grammar::Grammar>();
    g->set_root(g->any_object());
    g->validate();
    return g;
}

}  // namespace glia::server
#endif
