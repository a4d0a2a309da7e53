// Which browser requests the server answers. A web page can send requests to any
// address, the server's included: a page of another origin could make it generate (a
// text/plain POST needs no preflight), and a page whose host name an attacker rebinds to
// 127.0.0.1 (DNS rebinding) is, to the browser, of the same origin as the server. So:
//  - Host: a server bound to a loopback address answers only a Host header naming
//    loopback (localhost, *.localhost, 127.x.x.x, [::1], with or without the port) or a
//    name of --allowed-hosts; a server bound to another address checks the Host only
//    when --allowed-hosts is given. '*' turns the check off. 403 otherwise.
//  - Origin: a request with an Origin header is answered only when that origin is the
//    server's own (the Origin's host and port are the Host header's) or one of
//    --cors-origin ('*': any); 403 otherwise. Requests without Origin (SDKs, curl,
//    navigations) are not browser-cross-origin and are answered as before.
//  - CORS: for an origin of --cors-origin, responses carry Access-Control-Allow-Origin,
//    and a preflight (OPTIONS with Access-Control-Request-Method) is answered 204 with
//    the methods and headers allowed; preflights are not behind --api-key.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace glia::server {

struct BrowserPolicy {
    bool check_host = true;            // the Host header must name an allowed host
    std::vector<std::string> hosts;    // --allowed-hosts, lower case, without ports
    bool any_origin = false;           // --cors-origin '*'
    std::vector<std::string> origins;  // --cors-origin, normalized ("http://host:port")
};

// From the bind address and the two options (comma lists, '*' or ""). Throws
// std::invalid_argument naming the option and the entry that is malformed.
BrowserPolicy make_browser_policy(const std::string& bind_host, const std::string& allowed_hosts,
                                  const std::string& cors_origins);

// An address that only this machine reaches (127.0.0.0/8, ::1, localhost).
bool is_loopback_name(std::string_view host);

struct BrowserVerdict {
    int status = 0;            // 0: answer; 403: refuse
    std::string message, code;
    std::string allow_origin;  // for Access-Control-Allow-Origin ("" : no CORS headers)
};

// `host`: the Host header ("" when absent); `origin`: the Origin header, when has_origin.
BrowserVerdict check_browser_request(const BrowserPolicy& p, const std::string& host, bool has_origin,
                                     const std::string& origin);

// The Access-Control-Allow-Headers of a preflight: the requested list when it is a list
// of header names, else the headers the API uses.
std::string preflight_allow_headers(const std::string& requested);

}  // namespace glia::server
