#include "args.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace glia::cli {

static std::vector<std::string> split_names(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) out.push_back(item);
    return out;
}

Args& Args::opt(const std::string& names, const std::string& value, const std::string& help,
                const std::string& def) {
    opts_.push_back({split_names(names), value, help, def});
    return *this;
}

Args& Args::two_words(const std::string& name, char sep, Joins joins) {
    for (auto& o : opts_)
        for (const auto& n : o.names)
            if (n == name) {
                o.sep = sep;
                o.joins = std::move(joins);
                return *this;
            }
    fail("internal: option ", name, " not declared");
}

const Args::Opt* Args::find(const std::string& name) const {
    for (const auto& o : opts_)
        for (const auto& n : o.names)
            if (n == name) return &o;
    return nullptr;
}

bool Args::parse(const std::vector<std::string>& argv) {
    for (size_t i = 0; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(help().c_str(), stdout);
            return false;
        }
        if (a.size() > 1 && a[0] == '-' && !(a.size() > 1 && (std::isdigit((unsigned char)a[1]) || a[1] == '.'))) {
            std::string name = a, value;
            bool inline_value = false;
            if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
                name = a.substr(0, eq);
                value = a.substr(eq + 1);
                inline_value = true;
            }
            const Opt* o = find(name);
            if (!o) fail("unknown option '", name, "' (see 'glia ", cmd_, " --help')");
            if (!o->value.empty() && !inline_value) {
                if (i + 1 >= argv.size()) fail("option ", name, " needs a value <", o->value, ">");
                value = argv[++i];
                if (o->joins && i + 1 < argv.size() && o->joins(value, argv[i + 1])) value += o->sep + argv[++i];
            } else if (o->value.empty()) {
                value = "1";
            }
            given_[o->names.back()] = value;
            given_all_.emplace_back(o->names.back(), value);
        } else {
            pos_.push_back(a);
        }
    }
    return true;
}

bool Args::has(const std::string& name) const {
    const Opt* o = find(name);
    return o && given_.count(o->names.back());
}

std::string Args::str(const std::string& name) const {
    const Opt* o = find(name);
    if (!o) fail("internal: option ", name, " not declared");
    auto it = given_.find(o->names.back());
    return it != given_.end() ? it->second : o->def;
}

std::vector<std::pair<std::string, std::string>> Args::all_of(const std::vector<std::string>& names) const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [n, v] : given_all_)
        for (const std::string& name : names) {
            const Opt* o = find(name);
            if (!o) fail("internal: option ", name, " not declared");
            if (n == o->names.back()) out.emplace_back(name, v);
        }
    return out;
}

std::vector<std::string> Args::all(const std::string& name) const {
    const Opt* o = find(name);
    if (!o) fail("internal: option ", name, " not declared");
    std::vector<std::string> out;
    for (const auto& [n, v] : given_all_)
        if (n == o->names.back()) out.push_back(v);
    return out;
}

long long Args::integer(const std::string& name) const {
    std::string s = str(name);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end) fail("option ", name, " expects an integer, got '", s, "'");
    if (errno == ERANGE) fail("option ", name, " is out of range, got '", s, "'");
    return v;
}

static std::string show(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
}

long long Args::integer(const std::string& name, long long lo, long long hi) const {
    const long long v = integer(name);
    if (v < lo || v > hi) fail("option ", name, " must be an integer between ", lo, " and ", hi, ", got '", str(name), "'");
    return v;
}

double Args::number(const std::string& name, double lo, double hi, bool lo_open) const {
    const double v = number(name);
    if (!std::isfinite(v) || v < lo || (lo_open && v == lo) || v > hi)
        fail("option ", name, " must be a number ", lo_open ? "greater than " : "between ", show(lo), lo_open ? " and at most " : " and ",
             show(hi), ", got '", str(name), "'");
    return v;
}

double Args::number(const std::string& name) const {
    std::string s = str(name);
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end) fail("option ", name, " expects a number, got '", s, "'");
    return v;
}

std::string Args::help() const {
    std::ostringstream os;
    os << "usage: glia " << cmd_ << " " << synopsis_ << "\n\noptions:\n";
    for (const auto& o : opts_) {
        std::string n;
        for (size_t i = 0; i < o.names.size(); ++i) n += (i ? ", " : "") + o.names[i];
        if (!o.value.empty()) n += " " + o.value;
        os << "  " << n;
        if (n.size() < 26) os << std::string(26 - n.size(), ' ');
        else os << "\n" << std::string(28, ' ');
        os << o.help;
        if (!o.def.empty()) os << " (default: " << o.def << ")";
        os << "\n";
    }
    os << "  -h, --help                show this help\n";
    return os.str();
}

}  // namespace glia::cli
