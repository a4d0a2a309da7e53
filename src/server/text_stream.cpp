#include "server/text_stream.h"

#include <algorithm>

namespace glia::server {

TextStream::TextStream(std::vector<std::string> stop) : stop_(std::move(stop)) {
    std::erase_if(stop_, [](const std::string& s) { return s.empty(); });
    for (const auto& s : stop_) max_stop_ = std::max(max_stop_, s.size());
}

bool TextStream::append(const std::string& piece) {
    if (stopped_) return true;
    const size_t old = text_.size();
    text_ += piece;
    if (stop_.empty()) return false;
    // A stop string completed by this piece starts at most max_stop_ - 1 bytes before it.
    const size_t from = old >= max_stop_ ? old - max_stop_ + 1 : 0;
    size_t best = std::string::npos;
    for (const auto& s : stop_) {
        const size_t at = text_.find(s, from);
        if (at < best || (at == best && at != std::string::npos && s.size() > matched_.size())) {
            best = at;
            matched_ = s;
        }
    }
    if (best == std::string::npos) return false;
    text_.resize(best);
    sent_ = std::min(sent_, best);
    stopped_ = true;
    return true;
}

size_t utf8_complete_prefix(const std::string& s, size_t n) {
    // Look back at most 3 bytes for the lead byte of the last character.
    for (size_t k = 1; k <= 4 && k <= n; ++k) {
        const unsigned char c = static_cast<unsigned char>(s[n - k]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte
        size_t len = 1;
        if ((c & 0xE0) == 0xC0) len = 2;
        else if ((c & 0xF0) == 0xE0) len = 3;
        else if ((c & 0xF8) == 0xF0) len = 4;
        return len > k ? n - k : n;
    }
    return n;  // only continuation bytes (invalid UTF-8): nothing to wait for
}

std::string TextStream::take(bool final) {
    size_t end = text_.size();
    if (!final && !stopped_) {
        // Hold back the longest tail that is a proper prefix of a stop string.
        size_t hold = 0;
        for (const auto& s : stop_) {
            for (size_t k = std::min(s.size() - 1, end - sent_); k > hold; --k) {
                if (text_.compare(end - k, k, s, 0, k) == 0) {
                    hold = k;
                    break;
                }
            }
        }
        end -= hold;
        end = std::max(sent_, utf8_complete_prefix(text_, end));
    }
    std::string out = text_.substr(sent_, end - sent_);
    sent_ = end;
    return out;
}

}  // namespace glia::server
