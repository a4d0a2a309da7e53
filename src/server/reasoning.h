// Reasoning output: models whose chat template lets them think between markers
// (<think> ... </think>, as qwen3 and deepseek-r1 style templates write) get the thought
// apart from the answer: chat completions return it as `reasoning_content` (streamed as
// deltas of its own) and the rest as `content`.
//
// The markers are found in the template's own text (never from the model's name); their
// tokens in the vocabulary are then shown in replies even when they are control tokens.
// A thought is recognised at the start of a reply only: either the reply opens it (the
// open marker after optional whitespace), or the rendered prompt already did (it ends
// with the open marker: deepseek-r1 and qwen3.5 templates write it in the generation
// prompt). It runs to the close marker, or to the end of a reply cut short.
//
// reasoning_format (as the reference server's): "auto" (the default; "deepseek" is the
// same) splits the thought off; "none" leaves the reply whole in content; "raw" ("deepseek-
// legacy") fills reasoning_content and keeps the whole reply, markers included, in content.
#pragma once
#include <string>

namespace glia::server {

struct ThinkMarkers {
    std::string open, close;
    bool empty() const { return open.empty(); }
};

// The markers a chat template writes around a thought; empty when it writes none.
ThinkMarkers detect_think_markers(const std::string& template_source);

// The rendered prompt ends inside a thought: the open marker, then only whitespace.
bool prompt_opens_thought(const std::string& prompt, const ThinkMarkers& m);

struct SplitReply {
    std::string reasoning, content;
};

// A whole reply split into its thought and the answer. Whitespace around the thought and
// at the start of the answer that follows it is dropped; a reply without a thought is
// all content, unchanged.
SplitReply split_reasoning(const std::string& text, const ThinkMarkers& m, bool opened);

// The same split for a reply that arrives in pieces: what is handed out, concatenated,
// equals split_reasoning of the whole text. Text that may still turn into a marker or
// into dropped whitespace is held back until the next piece tells.
class ReasoningStream {
public:
    ReasoningStream(ThinkMarkers m, bool opened);
    // Appends the next piece of the reply; `final`: nothing more comes (all is decided).
    void append(const std::string& piece, bool final);
    // What is decided and not handed out yet.
    std::string take_reasoning();
    std::string take_content();
    // All decided so far (handed out or not).
    const std::string& reasoning() const { return reasoning_; }
    const std::string& content() const { return content_; }

private:
    enum class State { START, THOUGHT_START, THOUGHT, ANSWER_START, ANSWER };
    void run(bool final);

    ThinkMarkers m_;
    State state_;
    std::string pending_;             // undecided text
    std::string reasoning_, content_;
    size_t reasoning_sent_ = 0, content_sent_ = 0;
};

}  // namespace glia::server
