#include "server/request_head.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

namespace glia::server {
namespace {

bool is_tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// A short, printable quote of client bytes for an error message.
std::string quote(std::string_view s) {
    std::string q;
    for (unsigned char c : s.substr(0, 64)) q += c >= 0x20 && c < 0x7F ? static_cast<char>(c) : '?';
    if (s.size() > 64) q += "...";
    return q;
}

void refuse(RequestHead& out, int status, std::string message, const char* code) {
    out.status = status;
    out.message = std::move(message);
    out.code = code;
}

// The field name of a header line (for naming it in a 431), or "" when it has none.
std::string_view field_name(std::string_view line) {
    const size_t colon = line.find(':');
    return colon == std::string_view::npos ? std::string_view() : line.substr(0, colon);
}

void check_request_line(std::string_view line, RequestHead& out) {
    // method SP request-target SP HTTP-version
    const size_t sp1 = line.find(' ');
    const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
        return refuse(out, 400, "malformed request line '" + quote(line) + "': expected 'METHOD TARGET HTTP/1.1'",
                      "malformed_request");
    const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                           version = line.substr(sp2 + 1);
    if (method.empty() || !std::all_of(method.begin(), method.end(), [](unsigned char c) { return is_tchar(c); }))
        return refuse(out, 400, "malformed request method '" + quote(method) + "'", "malformed_request");
    if (target.empty() ||
        std::any_of(target.begin(), target.end(), [](unsigned char c) { return c <= 0x20 || c == 0x7F; }))
        return refuse(out, 400, "malformed request target '" + quote(target) + "'", "malformed_request");
    if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || !std::isdigit(static_cast<unsigned char>(version[5])) ||
        !std::isdigit(static_cast<unsigned char>(version[7])))
        return refuse(out, 400, "malformed HTTP version '" + quote(version) + "'", "malformed_request");
    if (version != "HTTP/1.1" && version != "HTTP/1.0")
        return refuse(out, 505, "HTTP version '" + quote(version) + "' is not supported (HTTP/1.1 and HTTP/1.0 are)",
                      "http_version_not_supported");
    out.method = std::string(method);
}

}  // namespace

const char* status_reason(int status) {
    switch (status) {
        case 400: return "Bad Request";
        case 408: return "Request Timeout";
        case 413: return "Payload Too Large";
        case 414: return "URI Too Long";
        case 431: return "Request Header Fields Too Large";
        case 501: return "Not Implemented";
        case 505: return "HTTP Version Not Supported";
        default: return "Error";
    }
}

void check_head(std::string_view head, const HeadLimits& limits, RequestHead& out) {
    out = RequestHead{};
    out.head_bytes = head.size();
    std::vector<std::string_view> lines;  // without their line ends
    for (size_t start = 0; start < head.size();) {
        const size_t nl = head.find('\n', start);
        if (nl == std::string_view::npos) return refuse(out, 400, "the request head does not end with an empty line", "malformed_request");
        if (nl == start || head[nl - 1] != '\r')
            return refuse(out, 400, "a line of the request head ends with LF alone (CR LF is required)", "malformed_request");
        lines.push_back(head.substr(start, nl - 1 - start));
        start = nl + 1;
    }
    if (lines.size() < 2 || !lines.back().empty())
        return refuse(out, 400, "the request head does not end with an empty line", "malformed_request");
    lines.pop_back();
    if (lines[0].size() + 2 > limits.max_line)
        return refuse(out, 414, "the request line is longer than " + std::to_string(limits.max_line) + " bytes", "uri_too_long");
    for (std::string_view l : lines)
        if (l.find('\r') != std::string_view::npos || l.find('\0') != std::string_view::npos)
            return refuse(out, 400, "the request head holds a bare CR or a NUL byte", "malformed_request");
    check_request_line(lines[0], out);
    if (out.status) return;
    const bool http10 = lines[0].substr(lines[0].size() - 8) == "HTTP/1.0";

    int hosts = 0;
    bool has_length = false, has_te = false;
    std::string_view length;
    std::vector<std::string_view> codings;  // of all Transfer-Encoding fields, in order
    for (size_t i = 1; i < lines.size(); ++i) {
        const std::string_view l = lines[i];
        if (l.size() + 2 > limits.max_field)
            return refuse(out, 431, "the header field '" + quote(field_name(l)) + "' is longer than " +
                                        std::to_string(limits.max_field) + " bytes", "header_too_large");
        if (l.front() == ' ' || l.front() == '\t')
            return refuse(out, 400, "a header line starts with white space (obsolete line folding is not accepted)",
                          "malformed_header");
        const size_t colon = l.find(':');
        if (colon == std::string_view::npos)
            return refuse(out, 400, "the header line '" + quote(l) + "' has no ':'", "malformed_header");
        const std::string_view name = l.substr(0, colon), value = trim(l.substr(colon + 1));
        if (name.empty() || !std::all_of(name.begin(), name.end(), [](unsigned char c) { return is_tchar(c); }))
            return refuse(out, 400, "the header field name '" + quote(name) + "' is not a token (no white space before ':')",
                          "malformed_header");
        if (iequals(name, "Host")) {
            ++hosts;
        } else if (iequals(name, "Content-Length")) {
            if (value.empty() || value.size() > 18 ||
                !std::all_of(value.begin(), value.end(), [](unsigned char c) { return c >= '0' && c <= '9'; }))
                return refuse(out, 400, "the Content-Length '" + quote(value) + "' is not a byte count", "invalid_content_length");
            const std::string_view digits = value.substr(std::min(value.find_first_not_of('0'), value.size() - 1));
            if (has_length && digits != length)
                return refuse(out, 400, "the request has Content-Length fields that disagree ('" + quote(length) + "' and '" +
                                            quote(digits) + "')", "invalid_content_length");
            has_length = true;
            length = digits;
        } else if (iequals(name, "Transfer-Encoding")) {
            has_te = true;
            for (size_t a = 0; a <= value.size();) {
                size_t b = value.find(',', a);
                if (b == std::string_view::npos) b = value.size();
                const std::string_view c = trim(value.substr(a, b - a));
                if (!c.empty()) codings.push_back(c);
                a = b + 1;
            }
        }
    }
    if (hosts > 1) return refuse(out, 400, "the request has more than one Host header", "malformed_header");
    if (hosts == 0 && !http10) return refuse(out, 400, "the request has no Host header (HTTP/1.1 requires one)", "missing_host");
    if (has_te) {
        if (has_length)
            return refuse(out, 400, "the request has both Content-Length and Transfer-Encoding; send one", "ambiguous_framing");
        if (http10) return refuse(out, 400, "Transfer-Encoding is not allowed in an HTTP/1.0 request", "ambiguous_framing");
        if (codings.empty() || !iequals(codings.back(), "chunked"))
            return refuse(out, 400, "the request's Transfer-Encoding does not end with 'chunked': its length is unknown",
                          "ambiguous_framing");
        for (std::string_view c : codings)
            if (!iequals(c, "chunked") || codings.size() > 1)
                return refuse(out, 501, "the transfer coding '" + quote(c) + "' is not supported (only 'chunked' alone is)",
                              "unsupported_transfer_encoding");
        out.framing = BodyFraming::CHUNKED;
    } else if (has_length) {
        out.length = std::stoull(std::string(length));
        out.framing = out.length > 0 ? BodyFraming::LENGTH : BodyFraming::NONE;
    }
}

HeadReader::Result HeadReader::scan(std::string_view data, RequestHead& out) {
    for (; pos_ < data.size(); ++pos_) {
        if (pos_ >= limits_.max_head) {
            refuse(out, 431, "the request's head (request line and header fields) is larger than " +
                                 std::to_string(limits_.max_head) + " bytes", "header_too_large");
            return DONE;
        }
        if (data[pos_] != '\n') continue;
        const size_t len = pos_ + 1 - line_start_;  // with its line end
        if (line_start_ == 0 && len > limits_.max_line) break;
        if (line_start_ > 0 && len > limits_.max_field) break;
        if (line_start_ > 0 && (len == 1 || (len == 2 && data[line_start_] == '\r'))) {
            check_head(data.substr(0, pos_ + 1), limits_, out);
            return DONE;
        }
        line_start_ = pos_ + 1;
    }
    // A line (whole or not yet) past its limit is refused without waiting for its end.
    const size_t len = pos_ - line_start_ + (pos_ < data.size() ? 1 : 0);
    if (line_start_ == 0 && len > limits_.max_line) {
        refuse(out, 414, "the request line is longer than " + std::to_string(limits_.max_line) + " bytes", "uri_too_long");
        return DONE;
    }
    if (line_start_ > 0 && len > limits_.max_field) {
        const std::string_view line = data.substr(line_start_, std::min<size_t>(len, 256));
        const std::string_view name = field_name(line);
        refuse(out, 431, "the header field '" + quote(name.empty() ? line.substr(0, 32) : name) + "' is longer than " +
                             std::to_string(limits_.max_field) + " bytes", "header_too_large");
        return DONE;
    }
    return NEED_MORE;
}

size_t ChunkedEnd::feed(const char* p, size_t n) {
    size_t i = 0;
    while (i < n && state_ != DONE) {
        if (state_ == BAD) return n;
        if (state_ == DATA) {
            const size_t k = static_cast<size_t>(std::min<uint64_t>(left_, n - i));
            i += k;
            left_ -= k;
            if (left_ == 0) state_ = DATA_CR;
            continue;
        }
        const char c = p[i++];
        switch (state_) {
            case SIZE: {
                const int d = std::isxdigit(static_cast<unsigned char>(c)) ? (std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10)) : -1;
                if (d >= 0 && digits_ < 15) {
                    left_ = left_ * 16 + static_cast<uint64_t>(d);
                    ++digits_;
                } else if (digits_ > 0 && (c == ';' || c == ' ' || c == '\t')) {
                    state_ = EXT;
                } else if (digits_ > 0 && c == '\r') {
                    state_ = SIZE_LF;
                } else {
                    state_ = BAD;
                }
                break;
            }
            case EXT:
                if (c == '\r') state_ = SIZE_LF;
                else if (c == '\n') state_ = BAD;
                break;
            case SIZE_LF:
                state_ = c != '\n' ? BAD : left_ == 0 ? TRAILER : DATA;
                digits_ = 0;
                break;
            case DATA_CR: state_ = c == '\r' ? DATA_LF : BAD; break;
            case DATA_LF: state_ = c == '\n' ? SIZE : BAD; break;
            case TRAILER: state_ = c == '\r' ? TRAILER_LF : c == '\n' ? BAD : LINE; break;
            case TRAILER_LF: state_ = c == '\n' ? DONE : BAD; break;
            case LINE:
                if (c == '\r') state_ = LINE_LF;
                else if (c == '\n') state_ = BAD;
                break;
            case LINE_LF: state_ = c == '\n' ? TRAILER : BAD; break;
            default: break;
        }
    }
    return i;
}

}  // namespace glia::server
