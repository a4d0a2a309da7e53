#include "server/reasoning.h"

namespace glia::server {
namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == ':' || c == '-';
}

}  // namespace

ThinkMarkers detect_think_markers(const std::string& t) {
    // <think>...</think> itself first, then any other tag pair whose name has "think" in it
    // (<seed:think>, ...), both written by the template.
    if (t.find("<think>") != std::string::npos && t.find("</think>") != std::string::npos) return {"<think>", "</think>"};
    for (size_t p = t.find("</"); p != std::string::npos; p = t.find("</", p + 2)) {
        size_t e = p + 2;
        while (e < t.size() && e - p < 40 && name_char(t[e])) ++e;
        if (e >= t.size() || t[e] != '>' || e == p + 2) continue;
        const std::string name = t.substr(p + 2, e - p - 2);
        if (name.find("think") == std::string::npos) continue;
        const std::string open = "<" + name + ">";
        if (t.find(open) != std::string::npos) return {open, "</" + name + ">"};
    }
    return {};
}

bool prompt_opens_thought(const std::string& prompt, const ThinkMarkers& m) {
    if (m.empty()) return false;
    size_t n = prompt.size();
    while (n > 0 && is_space(prompt[n - 1])) --n;
    return n >= m.open.size() && prompt.compare(n - m.open.size(), m.open.size(), m.open) == 0;
}

SplitReply split_reasoning(const std::string& text, const ThinkMarkers& m, bool opened) {
    if (m.empty()) return {"", text};
    ReasoningStream s(m, opened);
    s.append(text, true);
    return {s.reasoning(), s.content()};
}

ReasoningStream::ReasoningStream(ThinkMarkers m, bool opened)
    : m_(std::move(m)), state_(m_.empty() ? State::ANSWER : opened ? State::THOUGHT_START : State::START) {}

void ReasoningStream::append(const std::string& piece, bool final) {
    pending_ += piece;
    run(final);
}

void ReasoningStream::run(bool final) {
    for (;;) {
        switch (state_) {
        case State::START: {  // the reply may open a thought, after whitespace
            size_t i = 0;
            while (i < pending_.size() && is_space(pending_[i])) ++i;
            const std::string rest = pending_.substr(i);
            if (rest.compare(0, m_.open.size(), m_.open) == 0 && rest.size() >= m_.open.size()) {
                pending_.erase(0, i + m_.open.size());
                state_ = State::THOUGHT_START;
                continue;
            }
            if (!final && m_.open.compare(0, rest.size(), rest) == 0) return;  // may still become the marker
            state_ = State::ANSWER;
            continue;
        }
        case State::THOUGHT_START:
        case State::ANSWER_START: {  // whitespace after a marker is dropped
            size_t i = 0;
            while (i < pending_.size() && is_space(pending_[i])) ++i;
            pending_.erase(0, i);
            if (pending_.empty() && !final) return;
            state_ = state_ == State::THOUGHT_START ? State::THOUGHT : State::ANSWER;
            continue;
        }
        case State::THOUGHT: {
            const size_t close = pending_.find(m_.close);
            size_t keep;
            if (close != std::string::npos) {
                keep = close;
            } else if (final) {
                keep = pending_.size();
            } else {
                // Hold back what may be the start of the close marker ...
                size_t hold = 0;
                for (size_t k = std::min(m_.close.size() - 1, pending_.size()); k > 0; --k)
                    if (pending_.compare(pending_.size() - k, k, m_.close, 0, k) == 0) {
                        hold = k;
                        break;
                    }
                keep = pending_.size() - hold;
            }
            // ... and whitespace that may end the thought (dropped if it does).
            size_t end = keep;
            while (end > 0 && is_space(pending_[end - 1])) --end;
            reasoning_ += pending_.substr(0, end);
            if (close != std::string::npos) {
                pending_.erase(0, close + m_.close.size());
                state_ = State::ANSWER_START;
                continue;
            }
            pending_.erase(0, final ? pending_.size() : end);
            return;
        }
        case State::ANSWER:
            content_ += pending_;
            pending_.clear();
            return;
        }
    }
}

std::string ReasoningStream::take_reasoning() {
    std::string d = reasoning_.substr(reasoning_sent_);
    reasoning_sent_ = reasoning_.size();
    return d;
}

std::string ReasoningStream::take_content() {
    std::string d = content_.substr(content_sent_);
    content_sent_ = content_.size();
    return d;
}

}  // namespace glia::server
