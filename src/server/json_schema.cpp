#if GLIA_HAVE_SERVER
#include "server/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "grammar/regex.h"
#include "server/json_depth.h"

namespace glia::server {

namespace {

using grammar::Grammar;
using grammar::Kind;
using grammar::Node;

constexpr int kMaxSchemaDepth = 64;        // nesting of the schema's JSON, and of subschemas and $ref hops
constexpr int kMaxGrammarNodes = 100000;   // the compiled grammar's size

const std::set<std::string> kAnnotations = {"title",    "description", "default",  "examples",  "$schema",
                                            "$id",      "$comment",    "deprecated", "readOnly", "writeOnly",
                                            "$defs",    "definitions"};

class Compiler {
public:
    Compiler(const json& root, std::string where, Grammar& g) : root_(root), where_(std::move(where)), g_(&g) {}

    int run() {
        if (const int d = json_depth(root_); d > kMaxSchemaDepth)
            bad("", "", "nests " + std::to_string(d) + " levels deep; at most " + std::to_string(kMaxSchemaDepth) +
                            " are supported");
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

    // One level of subschema or $ref deeper; the levels (kMaxSchemaDepth) and the grammar's
    // size (kMaxGrammarNodes) are bounded.
    int node(const json& s, const std::string& path) {
        if (depth_ >= kMaxSchemaDepth)
            bad(path, "", "nests subschemas and $ref more than " + std::to_string(kMaxSchemaDepth) + " levels deep");
        if (g_->size() + keys_ > kMaxGrammarNodes)
            bad(path, "", "compiles to a grammar of more than " + std::to_string(kMaxGrammarNodes) + " nodes");
        ++depth_;
        const int id = node_at(s, path);
        --depth_;
        return id;
    }

    int node_at(const json& s, const std::string& path) {
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
        if (s.contains("nullable")) {
            if (!s["nullable"].is_boolean()) bad(path, "nullable", "must be a boolean");
            if (s["nullable"].get<bool>()) {
                json inner = s;
                inner.erase("nullable");
                Node any;
                any.kind = Kind::ANY_OF;
                any.alternatives = {node_at(inner, path), g_->literals({"null"})};
                return g_->add(std::move(any));
            }
        }
        if (s.contains("const")) return g_->literals({s["const"].dump()});
        if (s.contains("enum")) {
            const json& e = s["enum"];
            if (!e.is_array() || e.empty()) bad(path, "enum", "must be a non-empty array");
            std::vector<std::string> texts;
            for (const json& v : e) texts.push_back(v.dump());
            std::sort(texts.begin(), texts.end());
            texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
            return g_->literals(std::move(texts));
        }
        if (s.contains("anyOf")) return alternatives(s["anyOf"], join(path, "anyOf"), "anyOf");
        // oneOf as anyOf: a value the alternatives both accept is not refused (as the
        // reference's grammars do).
        if (s.contains("oneOf")) return alternatives(s["oneOf"], join(path, "oneOf"), "oneOf");
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
        if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems"))
            return typed(s, "array", path);
        if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format"))
            return typed(s, "string", path);
        if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum"))
            return typed(s, "number", path);
        return g_->any_value();
    }

    void check_keyword(const std::string& k, const std::string& path) const {
        static const std::set<std::string> known = {
            "type",      "properties", "required", "additionalProperties", "items",   "prefixItems",
            "minItems",  "maxItems",   "minLength", "maxLength",           "pattern", "format",
            "minimum",   "maximum",    "exclusiveMinimum", "exclusiveMaximum",   "enum",    "const",
            "anyOf",     "oneOf",      "allOf",    "nullable"};
        if (known.count(k) || kAnnotations.count(k)) return;
        bad(path, k, "is not supported (supported: type, properties, required, additionalProperties, items, "
                     "prefixItems, minItems, maxItems, minLength, maxLength, pattern, format, minimum, maximum, "
                     "exclusiveMinimum, exclusiveMaximum, enum, const, anyOf, oneOf, allOf of one schema, nullable, $ref)");
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
        if (type == "array") return array(s, path);
        if (type == "string") {
            const int lo = s.contains("minLength") ? count(s, "minLength", path) : 0;
            const int hi = s.contains("maxLength") ? count(s, "maxLength", path) : -1;
            if (hi >= 0 && hi < lo) bad(path, "maxLength", "is below minLength");
            const int id = g_->string(lo, hi);
            g_->node(id).pattern = pattern(s, path);
            return id;
        }
        if (type == "number" || type == "integer") return number(s, type == "integer", path);
        if (type == "boolean") return g_->literals({"true", "false"});
        if (type == "null") return g_->literals({"null"});
        bad(path, "type", "names an unknown type \"" + type + "\" (object, array, string, number, integer, boolean, null)");
    }

    // Keys in a fixed order, as the reference's grammars write them: the required ones
    // in the order 'properties' lists them, then the optional ones in that order (any of
    // them), then other keys where additionalProperties allows them. Absent, it allows
    // none when 'properties' is given (as the reference does), any key otherwise.
    int object(const json& s, const std::string& path) {
        Node n;
        n.kind = Kind::OBJECT;
        std::vector<std::string> names;
        if (s.contains("properties")) {
            const json& p = s["properties"];
            if (!p.is_object()) bad(path, "properties", "must be an object");
            keys_ += static_cast<int64_t>(p.size());
            if (g_->size() + keys_ > kMaxGrammarNodes)
                bad(path, "properties", "has " + std::to_string(p.size()) + " entries: the schema compiles to a grammar of more than " +
                                            std::to_string(kMaxGrammarNodes) + " nodes");
            for (const auto& [k, v] : p.items()) names.push_back(k);
        }
        std::vector<char> required(names.size(), 0);
        if (s.contains("required")) {
            const json& r = s["required"];
            if (!r.is_array()) bad(path, "required", "must be an array of property names");
            for (const json& x : r) {
                if (!x.is_string()) bad(path, "required", "must list property names, got " + x.dump());
                const auto it = std::find(names.begin(), names.end(), x.get<std::string>());
                if (it == names.end())
                    bad(path, "required", "names \"" + x.get<std::string>() + "\", which 'properties' does not define");
                required[it - names.begin()] = 1;
            }
        }
        std::vector<std::string> order;
        for (int want = 1; want >= 0; --want)
            for (size_t i = 0; i < names.size(); ++i)
                if (required[i] == want) order.push_back(names[i]);
        n.required = static_cast<int>(std::count(required.begin(), required.end(), 1));
        const int id = g_->add(Node{});  // before the children: they may refer back
        for (const std::string& k : order) {
            const std::string text = json(k).dump();
            n.keys.push_back(text.substr(1, text.size() - 2));
            n.values.push_back(node(s["properties"][k], join(join(path, "properties"), k)));
        }
        if (!s.contains("additionalProperties")) n.additional = s.contains("properties") ? -1 : g_->any_value();
        else if (s["additionalProperties"].is_boolean()) n.additional = s["additionalProperties"].get<bool>() ? g_->any_value() : -1;
        else n.additional = node(s["additionalProperties"], join(path, "additionalProperties"));
        g_->set(id, std::move(n));
        return id;
    }

    int array(const json& s, const std::string& path) {
        Node n;
        n.kind = Kind::ARRAY;
        // prefixItems (or items as a list, the older spelling) then items for the rest.
        const json* prefix = s.contains("prefixItems") ? &s["prefixItems"]
                             : s.contains("items") && s["items"].is_array() ? &s["items"] : nullptr;
        const char* pk = s.contains("prefixItems") ? "prefixItems" : "items";
        if (prefix) {
            if (!prefix->is_array()) bad(path, pk, "must be an array of schemas");
            for (size_t i = 0; i < prefix->size(); ++i)
                n.prefix.push_back(node((*prefix)[i], join(join(path, pk), std::to_string(i))));
        }
        const bool rest = s.contains("items") && !s["items"].is_array();
        if (rest && s["items"].is_boolean() && !s["items"].get<bool>()) n.items = -1;
        else n.items = rest ? node(s["items"], join(path, "items")) : g_->any_value();
        if (s.contains("minItems")) n.min_items = count(s, "minItems", path);
        if (s.contains("maxItems")) n.max_items = count(s, "maxItems", path);
        if (n.items < 0) {
            const int np = static_cast<int>(n.prefix.size());
            n.max_items = n.max_items < 0 ? np : std::min(n.max_items, np);
            if (n.min_items > np) bad(path, "minItems", "asks for more items than prefixItems allows");
        }
        if (n.max_items >= 0 && n.max_items < n.min_items) bad(path, "maxItems", "is below minItems");
        return g_->add(std::move(n));
    }

    double bound(const json& s, const char* k, const std::string& path) const {
        const json& v = s.at(k);
        if (!v.is_number() || !std::isfinite(v.get<double>())) bad(path, k, "must be a number, got " + v.dump());
        return v.get<double>();
    }

    int number(const json& s, bool integer, const std::string& path) {
        Node n;
        n.kind = integer ? Kind::INTEGER : Kind::NUMBER;
        if (s.contains("minimum")) n.has_min = true, n.minimum = bound(s, "minimum", path);
        if (s.contains("maximum")) n.has_max = true, n.maximum = bound(s, "maximum", path);
        // A number (since draft 6), or a boolean that makes minimum/maximum exclusive (draft 4).
        for (const char* k : {"exclusiveMinimum", "exclusiveMaximum"}) {
            if (!s.contains(k)) continue;
            const bool lower = std::string(k) == "exclusiveMinimum";
            bool& has = lower ? n.has_min : n.has_max;
            double& b = lower ? n.minimum : n.maximum;
            bool& excl = lower ? n.min_exclusive : n.max_exclusive;
            if (s[k].is_boolean()) {
                if (s[k].get<bool>() && !has) bad(path, k, std::string("is true without '") + (lower ? "minimum" : "maximum") + "'");
                excl = excl || s[k].get<bool>();
                continue;
            }
            const double x = bound(s, k, path);
            if (!has || (lower ? x >= b : x <= b)) has = true, b = x, excl = true;
        }
        if (integer) {  // whole bounds, inclusive
            if (n.has_min) n.minimum = n.min_exclusive ? std::floor(n.minimum) + 1 : std::ceil(n.minimum), n.min_exclusive = false;
            if (n.has_max) n.maximum = n.max_exclusive ? std::ceil(n.maximum) - 1 : std::floor(n.maximum), n.max_exclusive = false;
        }
        if (n.has_min && n.has_max &&
            (n.minimum > n.maximum || (n.minimum == n.maximum && (n.min_exclusive || n.max_exclusive))))
            bad(path, "maximum", std::string("leaves no ") + (integer ? "integer" : "number") + " above the minimum");
        // What can be written: integers of kMaxIntegerDigits bytes, numbers of
        // kMaxBoundedDigits digits before the point.
        const double top = integer ? grammar_pow10(grammar::kMaxIntegerDigits - 1) - 1 : grammar_pow10(grammar::kMaxBoundedDigits);
        if (n.has_min && n.minimum >= top) bad(path, "minimum", "is beyond the numbers this server writes (below " + json(top).dump() + ")");
        if (n.has_max && n.maximum <= -top) bad(path, "maximum", "is beyond the numbers this server writes (above -" + json(top).dump() + ")");
        return g_->add(std::move(n));
    }

    static double grammar_pow10(int k) {
        double p = 1;
        while (k-- > 0) p *= 10;
        return p;
    }

    // `pattern`, or a `format` written as one (date, time, date-time, uuid, email; other
    // formats are annotations, as the specification's default vocabulary has them).
    std::shared_ptr<const grammar::Regex> pattern(const json& s, const std::string& path) const {
        static const std::map<std::string, std::string> formats = [] {
            const std::string date = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])";
            const std::string time = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,3})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
            return std::map<std::string, std::string>{
                {"date", "^" + date + "$"},
                {"time", "^" + time + "$"},
                {"date-time", "^" + date + "T" + time + "$"},
                {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
                {"email", "^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)+$"}};
        }();
        const char* k = nullptr;
        std::string text;
        if (s.contains("format")) {
            if (!s["format"].is_string()) bad(path, "format", "must be a string");
            auto it = formats.find(s["format"].get<std::string>());
            if (it != formats.end()) k = "format", text = it->second;
        }
        if (s.contains("pattern")) {
            if (!s["pattern"].is_string()) bad(path, "pattern", "must be a string");
            if (k) bad(path, "pattern", "together with a 'format' this server enforces is not supported");
            k = "pattern";
            text = s["pattern"].get<std::string>();
        }
        if (!k) return nullptr;
        try {
            return grammar::compile_regex(text);
        } catch (const glia::Error& e) {
            bad(path, k, std::string("cannot be enforced: ") + e.what());
        }
    }

    const json& root_;
    std::string where_;
    Grammar* g_;
    std::map<std::string, int> refs_;
    int depth_ = 0;
    int64_t keys_ = 0;  // object keys so far: they count towards the grammar's size
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
