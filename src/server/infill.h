// Fill in the middle: code completion between a prefix and a suffix, with the
// vocabulary's FIM tokens (tokenizer.ggml.fim_pre/suf/mid_token_id, the older
// prefix/suffix/middle keys, or the tokens found by their text; see tok::Vocab).
//
// The prompt, in token ids (user text is always text, never control tokens):
//   [BOS] extra <FIM_PRE> prefix <FIM_SUF> suffix <FIM_MID> middle
// where the extra context (other files) is, when the vocabulary has the repository tokens,
//   <FIM_REP>project\n <FIM_SEP>name\ntext ... <FIM_SEP>\n
// and otherwise the files' texts one after the other. Too long a prompt is cut to the
// budget: the suffix keeps at most a quarter of it (from its start), the prefix the rest
// (its end, nearest the gap), and the extra files what is left (the last ones first).
//
// Routes: POST /infill (the reference server's shape: input_prefix, input_suffix,
// input_extra [{filename, text}], prompt (text after <FIM_MID>), n_predict and the
// sampling fields of /v1/completions; the answer is {"content", "stop", "stop_type",
// "tokens_predicted", "tokens_evaluated", "truncated"}, streamed as server-sent events of
// the same objects), and "suffix" on /v1/completions (the prompt is the prefix).
// A vocabulary without FIM tokens gets a 400 that says so.
#pragma once
#if GLIA_HAVE_SERVER
#include <httplib.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "server/openai.h"
#include "server/relay.h"

namespace glia::tok {
class Vocab;
}

namespace glia::server {

struct InfillInput {
    std::string prefix, suffix;
    std::string middle;                                       // after <FIM_MID>: the start of the fill
    std::vector<std::pair<std::string, std::string>> extra;  // (file name, text)
};

struct InfillPrompt {
    std::vector<int32_t> tokens;
    bool truncated = false;  // parts of the input were cut to fit the budget
};

// The vocabulary has the prefix, suffix and middle tokens.
bool has_fim(const tok::Vocab& v);

// The prompt of `in` in at most `budget` tokens. Throws ApiError (400, naming `field`) when
// the vocabulary has no FIM tokens, or when even the fixed part does not fit.
InfillPrompt infill_prompt(const tok::Vocab& v, const InfillInput& in, int budget, const std::string& field);

// The tokens a prompt may take in a context of n_ctx when max_tokens are to follow
// (a quarter of the context is kept for the fill when max_tokens is not given).
int infill_budget(int n_ctx, std::optional<int> max_tokens);

// The infill fields of a /infill body; throws ApiError (400) naming the field.
InfillInput parse_infill(const json& body);

void add_infill_route(httplib::Server& http, const tok::Vocab& vocab, int n_ctx, InnerApi api);

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
