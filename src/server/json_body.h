// Reading a request body that must be a JSON object, with errors that say where: invalid
// UTF-8 names the byte, its offset in the body and the field it is in ("'content' is not
// valid UTF-8: byte 0xff at offset 13 of the body"); a syntax error its offset, field and
// reason; nesting past max_depth is refused before a document is built. The walk that
// finds the field is nlohmann's SAX parser (iterative) with a stack of our own.
#pragma once
#if GLIA_HAVE_SERVER
#include <cstddef>
#include <string>
#include <string_view>

#include "server/json_depth.h"
#include "server/openai.h"

namespace glia::server {

// The offset of the first byte of `s` that is not part of well-formed UTF-8 (overlong
// forms, surrogates and code points past U+10FFFF included), or npos.
size_t invalid_utf8_offset(std::string_view s);

// Parses `body` as a JSON object; throws ApiError (400) naming what is wrong and where.
json parse_body_object(const std::string& body, int max_depth = kMaxRequestDepth);

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
