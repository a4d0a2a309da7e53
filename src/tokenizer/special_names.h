// Token roles that only a token's text can tell.
//
// GGUF files name their BOS/EOS/EOT/... ids in tokenizer.ggml.*_token_id keys, but many
// conversions leave some out, and some type an end-of-turn marker USER_DEFINED or even
// NORMAL. The reference implementation then recognises the token by its text and retypes
// it as a control token (it warns "its type will be overridden"), so that text typed by a
// user can never produce it. glia keeps every such text fact in the one table of
// special_names.cpp; vocab.cpp applies it, together with what the file itself declares
// (its special-token ids and the end-of-turn marker of its chat template).
#pragma once
#include <cstdint>
#include <span>
#include <string_view>

namespace glia::tok {

// What a token text names. A text may have several roles (bits).
namespace role {
enum : uint32_t {
    EOT = 1u << 0,        // end of turn (taken as the EOT id when no key gives one)
    EOM = 1u << 1,        // end of message (tool call pending)
    FIM_PRE = 1u << 2,    // fill-in-the-middle: prefix, suffix, middle, pad, repository, file separator
    FIM_SUF = 1u << 3,
    FIM_MID = 1u << 4,
    FIM_PAD = 1u << 5,
    FIM_REP = 1u << 6,
    FIM_SEP = 1u << 7,
    EOG = 1u << 8,        // ends generation wherever it appears
    RENDER = 1u << 9,     // always rendered as text (a user-defined token, never control)
};
}  // namespace role

struct NameFact {
    std::string_view text;
    uint32_t roles;
    std::string_view origin;  // the model family that uses this text, for humans
};

// The whole table, in a fixed order.
std::span<const NameFact> name_facts();
// The table's entry for `text`, or nullptr (each text appears once).
const NameFact* find_name(std::string_view text);
// A short human name for one role bit ("end-of-turn", "FIM prefix", ...).
const char* role_name(uint32_t one_role);

// Two conventions the table cannot express as single texts; vocab.cpp applies them after
// the end-of-generation set is complete.
//  - o200k_harmony (gpt-oss) and solar-open: when "<|return|>" and "<|call|>", or "<|calls|>"
//    and "<|flush|>", end generation, "<|end|>" only ends a message inside an answer: it is
//    removed from the set and rendered as text (USER_DEFINED).
//  - gemma-4 and paddleocr: when "<|tool_response>" ends generation, "</s>" is ordinary
//    text (NORMAL) and does not.
inline constexpr std::string_view kHarmonyEnd = "<|end|>";
inline constexpr std::string_view kToolResponse = "<|tool_response>";
inline constexpr std::string_view kSlashS = "</s>";

}  // namespace glia::tok
