#include "server/browser_policy.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <stdexcept>

namespace glia::server {
namespace {

std::string lower(std::string_view s) {
    std::string r(s);
    std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return r;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    for (size_t a = 0; a <= s.size();) {
        size_t b = s.find(',', a);
        if (b == std::string::npos) b = s.size();
        const std::string_view e = trim(std::string_view(s).substr(a, b - a));
        if (!e.empty()) out.emplace_back(e);
        a = b + 1;
    }
    return out;
}

// "host", "host:port", "[v6]" or "[v6]:port" -> the host in lower case (no brackets, no
// trailing dot) and the port (-1 when absent). False when malformed.
bool parse_authority(std::string_view a, std::string& host, int& port) {
    port = -1;
    std::string_view h, rest;
    if (!a.empty() && a.front() == '[') {
        const size_t close = a.find(']');
        if (close == std::string_view::npos) return false;
        h = a.substr(1, close - 1);
        rest = a.substr(close + 1);
        if (h.empty() || !std::all_of(h.begin(), h.end(), [](unsigned char c) { return std::isxdigit(c) || c == ':' || c == '.'; }))
            return false;
    } else {
        const size_t colon = a.find(':');
        h = a.substr(0, colon);
        rest = colon == std::string_view::npos ? std::string_view() : a.substr(colon);
        if (h.empty() || !std::all_of(h.begin(), h.end(), [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '.' || c == '_'; }))
            return false;
    }
    if (!rest.empty()) {
        if (rest.front() != ':' || rest.size() < 2 || rest.size() > 6) return false;
        const std::string_view d = rest.substr(1);
        if (!std::all_of(d.begin(), d.end(), [](unsigned char c) { return std::isdigit(c); })) return false;
        port = std::stoi(std::string(d));
        if (port > 65535) return false;
    }
    host = lower(h);
    if (host.size() > 1 && host.back() == '.') host.pop_back();
    return true;
}

// "scheme://authority" (what browsers send as Origin) -> "scheme://host:port" with the
// scheme's default port filled in; "" when it is not an http(s) origin.
std::string normalize_origin(std::string_view o) {
    const size_t sep = o.find("://");
    if (sep == std::string_view::npos) return "";
    const std::string scheme = lower(o.substr(0, sep));
    if (scheme != "http" && scheme != "https") return "";
    std::string host;
    int port;
    if (!parse_authority(o.substr(sep + 3), host, port)) return "";
    if (port < 0) port = scheme == "https" ? 443 : 80;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    return scheme + "://" + host + ":" + std::to_string(port);
}

std::string printable(std::string_view s) {
    std::string q;
    for (unsigned char c : s.substr(0, 200)) q += c >= 0x20 && c < 0x7F ? static_cast<char>(c) : '?';
    return q;
}

}  // namespace

bool is_loopback_name(std::string_view host) {
    std::string h = lower(host);
    if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
    if (h.size() > 1 && h.back() == '.') h.pop_back();
    if (h == "localhost" || (h.size() > 10 && h.compare(h.size() - 10, 10, ".localhost") == 0)) return true;
    if (h == "::1" || h == "0:0:0:0:0:0:0:1") return true;
    // 127.0.0.0/8 in dotted decimal
    int parts = 0;
    size_t i = 0;
    while (i <= h.size() && parts < 5) {
        size_t j = i;
        while (j < h.size() && std::isdigit(static_cast<unsigned char>(h[j]))) ++j;
        if (j == i || j - i > 3 || std::stoi(h.substr(i, j - i)) > 255) return false;
        if (parts == 0 && h.substr(i, j - i) != "127") return false;
        ++parts;
        if (j == h.size()) break;
        if (h[j] != '.') return false;
        i = j + 1;
    }
    return parts == 4;
}

BrowserPolicy make_browser_policy(const std::string& bind_host, const std::string& allowed_hosts,
                                  const std::string& cors_origins) {
    BrowserPolicy p;
    const std::vector<std::string> hosts = split_list(allowed_hosts);
    if (hosts.size() == 1 && hosts[0] == "*") {
        p.check_host = false;
    } else {
        p.check_host = !hosts.empty() || is_loopback_name(bind_host);
        for (const std::string& h : hosts) {
            std::string name;
            int port;
            if (h == "*" || !parse_authority(h, name, port))
                throw std::invalid_argument("--allowed-hosts: '" + printable(h) + "' is not a host name (give names like "
                                            "example.com or 192.168.1.5, comma-separated, or '*' alone)");
            p.hosts.push_back(name);
        }
    }
    const std::vector<std::string> origins = split_list(cors_origins);
    if (origins.size() == 1 && origins[0] == "*") {
        p.any_origin = true;
    } else {
        for (std::string o : origins) {
            if (!o.empty() && o.back() == '/') o.pop_back();
            const std::string n = o == "*" ? "" : normalize_origin(o);
            if (n.empty())
                throw std::invalid_argument("--cors-origin: '" + printable(o) + "' is not an origin (give origins like "
                                            "http://localhost:3000 or https://app.example.com, comma-separated, or '*' alone)");
            p.origins.push_back(n);
        }
    }
    return p;
}

BrowserVerdict check_browser_request(const BrowserPolicy& p, const std::string& host, bool has_origin,
                                     const std::string& origin) {
    BrowserVerdict v;
    std::string name;
    int port = -1;
    const bool host_ok = !host.empty() && parse_authority(host, name, port);
    if (p.check_host && !host.empty()) {
        if (!host_ok || !(is_loopback_name(name) || std::find(p.hosts.begin(), p.hosts.end(), name) != p.hosts.end())) {
            v.status = 403;
            v.code = "host_not_allowed";
            v.message = "the Host header '" + printable(host) + "' does not name this server: it answers only "
                        "localhost, 127.x.x.x and [::1]" + (p.hosts.empty() ? std::string() : " and the --allowed-hosts") +
                        " (a guard against DNS rebinding); to reach it under this name start it with --allowed-hosts " +
                        (host_ok ? name : std::string("NAME")) + " (or '*')";
            return v;
        }
    }
    if (!has_origin) return v;
    const std::string o = normalize_origin(origin);
    if (p.any_origin) {
        v.allow_origin = origin;
        return v;
    }
    // Same origin: the page was loaded from this server under the name and port of Host.
    if (!o.empty() && host_ok) {
        const std::string scheme = o.substr(0, o.find("://"));
        const std::string self = normalize_origin(scheme + "://" + host);
        if (o == self) return v;
    }
    if (!o.empty() && std::find(p.origins.begin(), p.origins.end(), o) != p.origins.end()) {
        v.allow_origin = origin;
        return v;
    }
    v.status = 403;
    v.code = "origin_not_allowed";
    v.message = "cross-origin request from '" + printable(origin) + "' refused: this server answers browser pages of "
                "its own origin only; to allow this one start it with --cors-origin " +
                (o.empty() ? std::string("ORIGIN") : printable(origin)) + " (or '*' for any)";
    return v;
}

std::string preflight_allow_headers(const std::string& requested) {
    const std::string fallback = "Authorization, Content-Type";
    if (requested.empty() || requested.size() > 2048) return fallback;
    for (unsigned char c : requested)
        if (!(std::isalnum(c) || c == '-' || c == '_' || c == ',' || c == ' ' || c == '.')) return fallback;
    return requested;
}

}  // namespace glia::server
