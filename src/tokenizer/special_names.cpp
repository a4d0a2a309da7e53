// The table of token texts whose role only the text tells (see special_names.h).
//
// These are the texts the reference implementation recognises when it loads a vocabulary
// (its "control-looking tokens"). A token found here is made a control token unless the
// file typed it so already, and an end-of-generation name joins the end-of-generation set.
// Add a family's marker here, with the family named, rather than anywhere else.
#include "tokenizer/special_names.h"

#include <unordered_map>

namespace glia::tok {

namespace {

using namespace role;

// U+FF5C FULLWIDTH VERTICAL LINE and U+2581 LOWER ONE EIGHTH BLOCK, as DeepSeek and
// SentencePiece write them.
#define FWBAR "\xEF\xBD\x9C"
#define SPM_SPACE "\xE2\x96\x81"

constexpr NameFact kFacts[] = {
    // End of turn: also end generation.
    {"<|eot_id|>", EOT | EOG, "llama-3"},
    {"<|im_end|>", EOT | EOG, "chatml (qwen ...)"},
    {"<|end|>", EOT | EOG, "phi-3, o200k_harmony"},
    {"<end_of_turn>", EOT | EOG, "gemma 1-3"},
    {"<|endoftext|>", EOT | EOG, "gpt-2 family"},
    {"<|end_of_text|>", EOT | EOG, "llama-3 base, granite"},
    {"<EOT>", EOT | EOG, "codellama"},
    {"_<EOT>", EOT | EOG, "codellama"},
    {"[EOT]", EOT | EOG, "kimi-k2"},
    {"<end_of_utterance>", EOT | EOG, "smoldocling"},
    {"<" FWBAR "end" SPM_SPACE "of" SPM_SPACE "sentence" FWBAR ">", EOT | EOG, "deepseek"},
    // End of message (a tool call follows).
    {"<|eom_id|>", EOM | EOG, "llama-3.1"},
    // End generation only.
    {"<|return|>", EOG, "o200k_harmony"},
    {"<|call|>", EOG, "o200k_harmony"},
    {"<|flush|>", EOG, "solar-open"},
    {"<|calls|>", EOG, "solar-open"},
    {"</s>", EOG, "SentencePiece EOS, paddleocr"},
    {"[EOS]", EOG, "kimi-k2"},
    {"<eos>", EOG, "gemma-4"},
    {"<turn|>", EOG, "gemma-4"},
    {"<|tool_response>", EOG, "gemma-4"},
    {"[e~[", EOG, "minimax"},
    // Fill-in-the-middle. pad, repository and file separator also end generation (set in
    // vocab.cpp from the ids found, as they may also come from keys).
    {"<|fim_prefix|>", FIM_PRE, "qwen"},
    {"<fim-prefix>", FIM_PRE, "starcoder style"},
    {"<fim_prefix>", FIM_PRE, "granite"},
    {"<" FWBAR "fim" SPM_SPACE "begin" FWBAR ">", FIM_PRE, "deepseek"},
    {"<PRE>", FIM_PRE, "codellama"},
    {SPM_SPACE "<PRE>", FIM_PRE, "codellama"},
    {"<|code_prefix|>", FIM_PRE, "glm-4.5"},
    {"<|prefix|>", FIM_PRE, "falcon-h1"},
    {"<|fim_suffix|>", FIM_SUF, "qwen"},
    {"<fim-suffix>", FIM_SUF, "starcoder style"},
    {"<fim_suffix>", FIM_SUF, "granite"},
    {"<" FWBAR "fim" SPM_SPACE "hole" FWBAR ">", FIM_SUF, "deepseek"},
    {"<SUF>", FIM_SUF, "codellama"},
    {SPM_SPACE "<SUF>", FIM_SUF, "codellama"},
    {"<|code_suffix|>", FIM_SUF, "glm-4.5"},
    {"<|suffix|>", FIM_SUF, "falcon-h1"},
    {"<|fim_middle|>", FIM_MID, "qwen"},
    {"<fim-middle>", FIM_MID, "starcoder style"},
    {"<fim_middle>", FIM_MID, "granite"},
    {"<" FWBAR "fim" SPM_SPACE "end" FWBAR ">", FIM_MID, "deepseek"},
    {"<MID>", FIM_MID, "codellama"},
    {SPM_SPACE "<MID>", FIM_MID, "codellama"},
    {"<|code_middle|>", FIM_MID, "glm-4.5"},
    {"<|middle|>", FIM_MID, "falcon-h1"},
    {"<|fim_pad|>", FIM_PAD, "qwen"},
    {"<fim-pad>", FIM_PAD, "starcoder style"},
    {"<fim_pad>", FIM_PAD, "granite"},
    {"<PAD>", FIM_PAD, "codellama"},
    {"[PAD]", FIM_PAD, "kimi-k2"},
    {"<|fim_repo|>", FIM_REP, "qwen"},
    {"<|repo_name|>", FIM_REP, "qwen"},
    {"<fim-repo>", FIM_REP, "starcoder style"},
    {"<REPO>", FIM_REP, "codellama"},
    {"<reponame>", FIM_REP, "granite"},
    {"<|file_sep|>", FIM_SEP, "qwen"},
    // Structure markers of an answer that are shown to the user.
    {"<|channel|>", RENDER, "o200k_harmony"},
    {"<|message|>", RENDER, "o200k_harmony"},
    {"<|start|>", RENDER, "o200k_harmony"},
    {"<|constrain|>", RENDER, "o200k_harmony"},
};

#undef FWBAR
#undef SPM_SPACE

}  // namespace

std::span<const NameFact> name_facts() { return kFacts; }

const NameFact* find_name(std::string_view text) {
    static const std::unordered_map<std::string_view, const NameFact*> index = [] {
        std::unordered_map<std::string_view, const NameFact*> m;
        for (const NameFact& f : kFacts) m.emplace(f.text, &f);
        return m;
    }();
    // Every text in the table starts with '<', '[', '_' or U+2581: skip the rest cheaply.
    if (text.empty() || (text[0] != '<' && text[0] != '[' && text[0] != '_' && text[0] != '\xE2')) return nullptr;
    auto it = index.find(text);
    return it == index.end() ? nullptr : it->second;
}

const char* role_name(uint32_t r) {
    switch (r) {
        case EOT: return "end-of-turn";
        case EOM: return "end-of-message";
        case FIM_PRE: return "FIM prefix";
        case FIM_SUF: return "FIM suffix";
        case FIM_MID: return "FIM middle";
        case FIM_PAD: return "FIM pad";
        case FIM_REP: return "FIM repository";
        case FIM_SEP: return "FIM file separator";
        case EOG: return "end-of-generation";
        case RENDER: return "always rendered";
        default: return "?";
    }
}

}  // namespace glia::tok
