// BPE pre-tokenizers: the regex table and PCRE2-based splitting.
#include "tokenizer/pretokenizer.h"

#include <initializer_list>

#include "core/error.h"
#include "tokenizer/unicode.h"

#if GLIA_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

namespace glia::tok {

namespace {

// ---------------------------------------------------------------------------------------
// The regexes. Sources: the reference implementation's table (llama.cpp), which takes
// them from each model's tokenizer.json; (?i:...) contractions are spelled out with
// explicit case classes so that Unicode case folding cannot widen them.

#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

// GPT-2.
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Llama 3 (digits in runs of up to three).
constexpr const char* kLlama3 = CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen 2 (single digits).
constexpr const char* kQwen2 = CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen 3.5 (combining marks continue a word).
constexpr const char* kQwen35 = CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Seed-Coder.
constexpr const char* kSeedCoder = CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Bailing MoE (its possessive quantifiers change nothing here and are written greedy).
constexpr const char* kBailing =
    R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
// Tekken (Mistral): upper-case runs followed by lower-case runs.
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-4o (o200k).
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)" CONTRACTIONS
    R"(?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)" CONTRACTIONS
    R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Kimi K2: as GPT-4o, with Han characters kept apart from other letters.
constexpr const char* kKimiK2 =
    R"(\p{Han}+|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+)" CONTRACTIONS
    R"(?|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*)" CONTRACTIONS
    R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek V3 / Hunyuan dense: CJK runs, then a word regex.
constexpr const char* kDeepseek3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek LLM: its tokenizer.json lists the cased letters (Lu, Ll, Lt) of the Unicode
// version it was made with; written with escapes so that no editor normalizes them.
constexpr const char* kDeepseekLetters = R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
constexpr const char* kDeepseekPunct = R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
constexpr const char* kDeepseekCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
// Poro / BLOOM / GPT-3 Finnish.
constexpr const char* kPoro = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)";

#undef CONTRACTIONS

std::vector<std::string> list(std::initializer_list<const char*> l) { return {l.begin(), l.end()}; }

}  // namespace

PreTokenizerConfig pre_tokenizer_config(std::string_view pre) {
    auto is = [&](std::initializer_list<std::string_view> names) {
        for (auto n : names)
            if (pre == n) return true;
        return false;
    };
    PreTokenizerConfig c;
    if (pre.empty() || pre == "default") {
        c.type = "default";
    } else if (is({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                   "jina-v5-nano"})) {
        c.type = "llama3";
        c.regexes = list({kLlama3});
        c.ignore_merges = true;
        c.add_bos = true;
    } else if (is({"dbrx", "smaug-bpe"})) {
        c.type = pre == "dbrx" ? "dbrx" : "smaug";
        c.regexes = list({kLlama3});
    } else if (is({"glm4", "chatglm-bpe"})) {
        c.type = "chatglm4";
        c.regexes = list({kLlama3});
        c.no_bos = true;
    } else if (pre == "deepseek-llm") {
        c.type = "deepseek-llm";
        c.regexes = list({"[\r\n]", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"});
    } else if (pre == "deepseek-coder") {
        c.type = "deepseek-coder";
        c.regexes = list({"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"});
    } else if (is({"deepseek-v3", "hunyuan-dense"})) {
        c.type = "deepseek3-llm";
        c.regexes = list({R"(\p{N}{1,3})", R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)", kDeepseek3Words});
    } else if (pre == "falcon") {
        c.type = "falcon";
        c.regexes = list({R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"});
    } else if (is({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
        c.type = "starcoder";
        c.regexes = list({R"(\p{N})", kGpt2});
    } else if (is({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
                   "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4"})) {
        c.type = "gpt2";
        c.regexes = list({kGpt2});
    } else if (is({"jina-v1-en", "jina-v2-code", "roberta-bpe"})) {
        c.type = "gpt2";
        c.regexes = list({kGpt2});
        c.add_sep = true;
    } else if (is({"qwen2", "deepseek-r1-qwen", "kormo", "megrez", "stablelm2", "hunyuan", "grok-2"})) {
        c.type = "qwen2";
        c.regexes = list({kQwen2});
    } else if (pre == "qwen35") {
        c.type = "qwen35";
        c.regexes = list({kQwen35});
    } else if (is({"poro-chat", "bloom", "gpt3-finnish"})) {
        c.type = "poro";
        c.regexes = list({kPoro});
    } else if (pre == "viking") {
        c.type = "viking";
        c.regexes = list({kPoro, R"(\p{N})"});
    } else if (pre == "tekken") {
        c.type = "tekken";
        c.regexes = list({kTekken});
        c.ignore_merges = true;
        c.add_bos = true;
    } else if (pre == "chameleon") {
        c.type = "chameleon";
        c.regexes = list({"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\t\n]|    |  )", R"(\p{N})",
                          R"([\p{P}!-/:-@\[-`{-~])", kGpt2});
        c.add_bos = true;
    } else if (is({"gpt-4o", "llama4", "minimax-m2"})) {
        c.type = "gpt4o";
        c.regexes = list({kGpt4o});
    } else if (pre == "kimi-k2") {
        c.type = "kimi-k2";
        c.regexes = list({kKimiK2});
    } else if (pre == "superbpe") {
        c.type = "superbpe";
        c.regexes = list({R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"});
    } else if (is({"bailingmoe", "bailingmoe2", "llada-moe"})) {
        c.type = "bailingmoe";
        c.regexes = list({kBailing});
    } else if (pre == "seed-coder") {
        c.type = "seed-coder";
        c.regexes = list({kSeedCoder});
    } else if (pre == "gemma4") {
        // SentencePiece-style BPE: spaces become U+2581, words are only split at newlines,
        // merges run on raw UTF-8 and unknown bytes use <0xNN> tokens.
        c.type = "gemma4";
        c.regexes = list({"[^\n]+|[\n]+"});
        c.byte_encode = false;
        c.escape_spaces = true;
        c.add_bos = true;
        c.newline_words_whole = true;
    } else {
        c.type = "default";
        c.known = false;
    }
    if (c.type == "default")
        c.regexes = list({R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"});
    return c;
}

// ---------------------------------------------------------------------------------------
// Splitting

std::string PreTokenizer::rewrite_whitespace(std::string_view re) {
    // The reference's whitespace set (PCRE2's \s with UCP differs at U+0085 and U+180E).
    static constexpr std::string_view ws = R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
    std::string out;
    out.reserve(re.size() + 64);
    bool in_class = false;
    for (size_t i = 0; i < re.size(); ++i) {
        const char c = re[i];
        if (c == '\\' && i + 1 < re.size()) {
            const char e = re[i + 1];
            if (e == 's') {
                if (in_class) out.append(ws);
                else out.append("[").append(ws).append("]");
            } else if (e == 'S' && !in_class) {
                out.append("[^").append(ws).append("]");
            } else {
                out += c;
                out += e;
            }
            ++i;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            out += c;
            // A ']' right after '[' or '[^' is a literal.
            if (i + 1 < re.size() && re[i + 1] == '^') out += re[++i];
            if (i + 1 < re.size() && re[i + 1] == ']') out += re[++i];
            continue;
        }
        if (in_class && c == ']') in_class = false;
        out += c;
    }
    return out;
}

#if GLIA_HAVE_PCRE2

struct PreTokenizer::Impl {
    std::vector<pcre2_code*> codes;
    ~Impl() {
        for (auto* c : codes) pcre2_code_free(c);
    }
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes) : impl_(std::make_unique<Impl>()) {
    for (const std::string& re : regexes) {
        const std::string pat = rewrite_whitespace(re);
        int err = 0;
        PCRE2_SIZE erroff = 0;
        pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                                         PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &erroff, nullptr);
        if (!code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            fail("pre-tokenizer regex does not compile at offset ", erroff, ": ", reinterpret_cast<const char*>(msg),
                 " (regex: ", re, ")");
        }
        pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional: without JIT the interpreter runs
        impl_->codes.push_back(code);
    }
}

PreTokenizer::~PreTokenizer() = default;

std::vector<PreTokenizer::Span> PreTokenizer::split(std::string_view text) const {
    std::vector<Span> pieces;
    if (text.empty()) return pieces;
    pieces.push_back({0, text.size()});
    std::vector<Span> next;
    for (pcre2_code* code : impl_->codes) {
        pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
        next.clear();
        for (const Span& p : pieces) {
            const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + p.off);
            size_t start = 0;  // first byte not yet emitted
            size_t pos = 0;    // where the next match may start
            while (pos <= p.len) {
                int rc = pcre2_match(code, subject, p.len, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
                if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
                    rc = pcre2_match(code, subject, p.len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    PCRE2_UCHAR msg[256];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    pcre2_match_data_free(md);
                    fail("pre-tokenizer: regex match failed: ", reinterpret_cast<const char*>(msg));
                }
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
                const size_t ms = ov[0], me = ov[1];
                if (ms > start) next.push_back({p.off + start, ms - start});
                if (me > ms) {
                    next.push_back({p.off + ms, me - ms});
                    start = pos = me;
                } else {
                    // An empty match splits here; move on by one character.
                    start = ms;
                    if (ms >= p.len) break;
                    pos = ms + unicode::utf8_len(static_cast<uint8_t>(text[p.off + ms]));
                }
            }
            if (start < p.len) next.push_back({p.off + start, p.len - start});
        }
        pcre2_match_data_free(md);
        pieces.swap(next);
    }
    return pieces;
}

#else  // !GLIA_HAVE_PCRE2

struct PreTokenizer::Impl {};

PreTokenizer::PreTokenizer(const std::vector<std::string>&) {
    fail("BPE tokenizers need PCRE2, and glia was built without PCRE2: install libpcre2-dev (Debian) and "
         "rebuild");
}

PreTokenizer::~PreTokenizer() = default;

std::vector<PreTokenizer::Span> PreTokenizer::split(std::string_view) const { return {}; }

#endif

std::vector<std::string> PreTokenizer::split_strings(std::string_view text) const {
    std::vector<std::string> out;
    for (const Span& s : split(text)) out.emplace_back(text.substr(s.off, s.len));
    return out;
}

}  // namespace glia::tok
