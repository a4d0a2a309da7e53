// The generated text of one request as it grows token by token: finds the request's
// stop strings (the text from a stop string on is dropped), and while streaming hands
// out only what is safe to send — never the start of what may become a stop string,
// never half of a UTF-8 character.
#pragma once
#include <string>
#include <vector>

namespace glia::server {

class TextStream {
public:
    explicit TextStream(std::vector<std::string> stop = {});
    // Appends a token's bytes. Returns true when a stop string is now complete: the text
    // is cut where it starts and nothing more may be appended.
    bool append(const std::string& piece);
    bool stopped() const { return stopped_; }
    // The stop string that ended the text ("" while none has).
    const std::string& matched() const { return matched_; }
    // The text not handed out yet that is safe to send now (whole UTF-8 characters, not
    // a possible beginning of a stop string). After a stop, or with `final`, everything.
    std::string take(bool final = false);
    // All the text so far (without the stop string).
    const std::string& text() const { return text_; }

private:
    std::vector<std::string> stop_;
    size_t max_stop_ = 0;
    std::string text_, matched_;
    size_t sent_ = 0;
    bool stopped_ = false;
};

// Length of the longest prefix of s[0, n) that does not end inside a UTF-8 character.
size_t utf8_complete_prefix(const std::string& s, size_t n);

}  // namespace glia::server
