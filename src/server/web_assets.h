// The chat page's files (src/server/web/), compiled into the binary: CMake turns the
// folder into a C++ source at build time (cmake/embed_web.cmake), so `glia serve` needs
// nothing on disk and the page fetches nothing from elsewhere. The server answers GET /
// with index.html and GET /web/NAME with the others (server.cpp, serve_web_page).
#pragma once
#include <span>
#include <string_view>

namespace glia::server {

struct WebAsset {
    std::string_view name;          // file name in src/server/web/
    std::string_view content_type;  // from its extension
    std::string_view body;
};

std::span<const WebAsset> web_assets();

}  // namespace glia::server
