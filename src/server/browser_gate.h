// The browser policy (browser_policy.h) applied to an httplib request, before routing:
// refuses a foreign Host or Origin with 403 and a JSON error, answers CORS preflights,
// and adds Access-Control-Allow-Origin for the cross-origin pages --cors-origin allows.
#pragma once
#if GLIA_HAVE_SERVER
#include <httplib.h>

#include "server/browser_policy.h"

namespace glia::server {

// True when the request was answered here (refused, or a preflight); else the request
// goes on to its route, with the CORS headers already set on `res` where they belong.
bool browser_gate(const BrowserPolicy& policy, const httplib::Request& req, httplib::Response& res);

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
