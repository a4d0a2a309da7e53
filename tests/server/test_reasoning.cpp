// Reasoning output (server/reasoning.h): the thought markers found in templates, the split
// of a whole reply, the same split of a reply that arrives in pieces, and the request
// fields reasoning_format and chat_template_kwargs.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/openai.h"
#include "server/reasoning.h"
#include "test_util.h"

namespace {

using namespace glia::server;

const ThinkMarkers kThink{"<think>", "</think>"};

TEST(Reasoning, MarkersFromTheTemplateText) {
    for (const char* name : {"Qwen3.5-4B", "Qwen-QwQ-32B", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"}) {
        const ThinkMarkers m =
            detect_think_markers(glia::test::read_text(glia::test::shared_path(std::string("templates/") + name + ".jinja")));
        EXPECT_EQ(m.open, "<think>") << name;
        EXPECT_EQ(m.close, "</think>") << name;
    }
    for (const char* name : {"Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.1-8B-Instruct"})
        EXPECT_TRUE(detect_think_markers(glia::test::read_text(glia::test::shared_path(std::string("templates/") + name + ".jinja"))).empty())
            << name;
    const ThinkMarkers seed = detect_think_markers("{{ '<seed:think>' }}{{ m.reasoning }}{{ '</seed:think>' }}");
    EXPECT_EQ(seed.open, "<seed:think>");
    EXPECT_EQ(seed.close, "</seed:think>");
    EXPECT_TRUE(detect_think_markers("{{ '</think>' }} only a close").empty());
}

TEST(Reasoning, PromptOpensThought) {
    EXPECT_TRUE(prompt_opens_thought("<|im_start|>assistant\n<think>\n", kThink));
    EXPECT_FALSE(prompt_opens_thought("<|im_start|>assistant\n<think>\n\n</think>\n\n", kThink));
    EXPECT_FALSE(prompt_opens_thought("<|im_start|>assistant\n", kThink));
    EXPECT_FALSE(prompt_opens_thought("<think>\n", ThinkMarkers{}));
}

TEST(Reasoning, SplitWholeReplies) {
    struct Case {
        std::string text;
        bool opened;
        std::string reasoning, content;
    };
    const std::vector<Case> cases = {
        {"<think>\nLet me see.\n</think>\n\nThe answer.", false, "Let me see.", "The answer."},
        {"  <think>a</think>b", false, "a", "b"},
        {"Just an answer.", false, "", "Just an answer."},
        {"  Leading space stays.", false, "", "  Leading space stays."},
        {"An answer that mentions <think> later.", false, "", "An answer that mentions <think> later."},
        {"thinking on\n</think>\nanswer", true, "thinking on", "answer"},
        {"cut short, still thinking ", true, "cut short, still thinking", ""},
        {"<think>cut short", false, "cut short", ""},
        {"<think></think>answer", false, "", "answer"},
        {"", true, "", ""},
        {"<thi", false, "", "<thi"},
        {"a</think>b</think>c", true, "a", "b</think>c"},
    };
    for (const Case& c : cases) {
        const SplitReply r = split_reasoning(c.text, kThink, c.opened);
        EXPECT_EQ(r.reasoning, c.reasoning) << c.text;
        EXPECT_EQ(r.content, c.content) << c.text;
    }
    const SplitReply none = split_reasoning("<think>a</think>b", ThinkMarkers{}, false);
    EXPECT_EQ(none.reasoning, "");
    EXPECT_EQ(none.content, "<think>a</think>b");
}

// Every way of cutting a reply into pieces hands out the whole split, and never hands out
// a marker's beginning or the whitespace that ends a thought.
TEST(Reasoning, StreamEqualsWholeForEveryCut) {
    const std::vector<std::pair<std::string, bool>> replies = {
        {"<think>\nstep one\nstep two\n</think>\n\nThe answer is 4.", false},
        {" \n<think>x  </think>  y", false},
        {"no thought at all <", false},
        {"deep thought\n\n</think>\n\nanswer\n", true},
        {"unfinished <  </thin", true},
    };
    for (const auto& [text, opened] : replies) {
        const SplitReply whole = split_reasoning(text, kThink, opened);
        for (size_t a = 0; a <= text.size(); ++a)
            for (size_t b = a; b <= text.size(); ++b) {
                ReasoningStream s(kThink, opened);
                std::string r, c;
                const std::string parts[] = {text.substr(0, a), text.substr(a, b - a), text.substr(b)};
                for (int i = 0; i < 3; ++i) {
                    s.append(parts[i], i == 2);
                    const std::string dr = s.take_reasoning(), dc = s.take_content();
                    if (i < 2) {
                        EXPECT_EQ(dr.find("</"), std::string::npos) << text << " cut " << a << "," << b;
                        if (!dr.empty()) {
                            EXPECT_NE(dr.back(), '\n') << text << " cut " << a << "," << b;
                        }
                    }
                    r += dr;
                    c += dc;
                }
                ASSERT_EQ(r, whole.reasoning) << text << " cut " << a << "," << b;
                ASSERT_EQ(c, whole.content) << text << " cut " << a << "," << b;
            }
    }
}

Job chat(const std::string& extra) {
    return parse_request(R"({"messages": [{"role": "user", "content": "hi"}])" + extra + "}", Endpoint::CHAT, {});
}

TEST(Reasoning, RequestFields) {
    EXPECT_EQ(chat("").reasoning_format, ReasoningFormat::AUTO);
    EXPECT_EQ(chat(R"(, "reasoning_format": "none")").reasoning_format, ReasoningFormat::NONE);
    EXPECT_EQ(chat(R"(, "reasoning_format": "deepseek")").reasoning_format, ReasoningFormat::AUTO);
    EXPECT_EQ(chat(R"(, "reasoning_format": "raw")").reasoning_format, ReasoningFormat::RAW);
    EXPECT_EQ(chat(R"(, "reasoning_format": "deepseek-legacy")").reasoning_format, ReasoningFormat::RAW);
    const Job k = chat(R"(, "chat_template_kwargs": {"enable_thinking": false, "x": "y"})");
    ASSERT_TRUE(k.template_kwargs.is_object());
    EXPECT_EQ(k.template_kwargs["enable_thinking"], false);
    EXPECT_TRUE(chat(R"(, "chat_template_kwargs": {})").template_kwargs.is_null());

    const std::vector<std::pair<std::string, std::string>> bad = {
        {R"(, "reasoning_format": "loud")", "reasoning_format"},
        {R"(, "reasoning_format": 1)", "reasoning_format"},
        {R"(, "chat_template_kwargs": [1])", "chat_template_kwargs"},
        {R"(, "chat_template_kwargs": "x")", "chat_template_kwargs"},
        {R"(, "chat_template_kwargs": {"messages": []})", "chat_template_kwargs.messages"},
        {R"(, "chat_template_kwargs": {"add_generation_prompt": false})", "chat_template_kwargs.add_generation_prompt"},
    };
    for (const auto& [extra, field] : bad) {
        try {
            chat(extra);
            ADD_FAILURE() << "accepted: " << extra;
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 400) << extra;
            EXPECT_EQ(e.param, field) << extra;
            EXPECT_NE(e.message.find(field), std::string::npos) << e.message;
        }
    }
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
