#if GLIA_HAVE_SERVER
#include "server/browser_gate.h"

#include "server/openai.h"

namespace glia::server {

bool browser_gate(const BrowserPolicy& policy, const httplib::Request& req, httplib::Response& res) {
    const bool has_origin = req.has_header("Origin");
    const BrowserVerdict v = check_browser_request(policy, req.get_header_value("Host"), has_origin,
                                                   req.get_header_value("Origin"));
    if (has_origin) res.set_header("Vary", "Origin");
    if (v.status != 0) {
        res.status = v.status;
        res.set_content(dump(error_json({v.status, v.message, "permission_error", "", v.code})), "application/json");
        return true;
    }
    if (!v.allow_origin.empty()) {
        res.set_header("Access-Control-Allow-Origin", v.allow_origin);
        res.set_header("Access-Control-Expose-Headers", "Content-Type, Retry-After");
    }
    if (req.method != "OPTIONS") return false;
    // A preflight, or a plain OPTIONS: what may be sent here. Never behind --api-key (a
    // browser sends no credentials on a preflight).
    res.status = 204;
    res.set_header("Allow", "GET, HEAD, POST, OPTIONS");
    if (!v.allow_origin.empty() && req.has_header("Access-Control-Request-Method")) {
        res.set_header("Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers",
                       preflight_allow_headers(req.get_header_value("Access-Control-Request-Headers")));
        res.set_header("Access-Control-Max-Age", "600");
    }
    return true;
}

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
