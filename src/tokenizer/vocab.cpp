// Vocabulary loading, special-token handling and the tokenizer-independent parts of
// tokenize / token_to_piece.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"
#include "tokenizer/wpm.h"

namespace glia::tok {

const char* kind_name(Kind k) {
    switch (k) {
        case Kind::SPM: return "SPM";
        case Kind::BPE: return "BPE";
        case Kind::WPM: return "WPM";
        case Kind::UGM: return "UGM";
        case Kind::RWKV: return "RWKV";
        case Kind::NONE: return "none";
    }
    return "unknown";
}

// ---------------------------------------------------------------------------------------
// Loading

std::unique_ptr<Vocab> Vocab::from_gguf(const gguf::File& f) {
    const gguf::Value* mv = f.find("tokenizer.ggml.model");
    if (!mv) fail(f.path(), ": no tokenizer in this file (key 'tokenizer.ggml.model' is missing)");
    if (mv->type != gguf::ValueType::STRING)
        fail(f.path(), ": key 'tokenizer.ggml.model': expected a string, found ", gguf::value_type_name(mv->type));
    const std::string model(mv->s);

    std::unique_ptr<Vocab> v;
    if (model == "llama") {
        v = std::make_unique<SpmVocab>();
    } else if (model == "gpt2" || model == "gemma4") {
        v = std::make_unique<BpeVocab>(f, model == "gemma4");
    } else if (model == "bert") {
        v = std::make_unique<WpmVocab>();
    } else if (model == "t5" || model == "rwkv" || model == "plamo2") {
        const char* what = model == "t5" ? "Unigram" : "";
        fail(f.path(), ": tokenizer model '", model, "' not supported yet", *what ? " (" : "", what, *what ? ")" : "");
    } else if (model == "no" || model == "none") {
        fail(f.path(), ": this file has no vocabulary (tokenizer.ggml.model = '", model, "')");
    } else {
        fail(f.path(), ": unknown tokenizer model '", model, "' (key 'tokenizer.ggml.model')");
    }
    v->load(f);
    return v;
}

namespace {

uint32_t attr_from_type(int64_t t) {
    switch (t) {
        case 1: return attr::NORMAL;
        case 2: return attr::UNKNOWN;
        case 3: return attr::CONTROL;
        case 4: return attr::USER_DEFINED;
        case 5: return attr::UNUSED;
        case 6: return attr::BYTE;
        default: return attr::UNDEFINED;
    }
}

const gguf::Value& array_key(const gguf::File& f, const char* key, gguf::ValueType elem) {
    const gguf::Value* v = f.find(key);
    if (!v) fail(f.path(), ": key '", key, "' is missing");
    if (!v->is_array()) fail(f.path(), ": key '", key, "': expected an array, found ", gguf::value_type_name(v->type));
    for (size_t i = 0; i < v->arr.size(); ++i) {
        const gguf::Value& e = v->arr[i];
        bool ok = elem == gguf::ValueType::STRING ? e.type == gguf::ValueType::STRING
                : elem == gguf::ValueType::FLOAT32 ? (e.is_float() || e.is_integer())
                                                   : e.is_integer();
        if (!ok)
            fail(f.path(), ": key '", key, "'[", i, "]: expected ", gguf::value_type_name(elem), ", found ",
                 gguf::value_type_name(e.type));
    }
    return *v;
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

}  // namespace

void Vocab::read_special_id(const gguf::File& f, const char* key, int32_t& id) const {
    const gguf::Value* v = f.find(key);
    if (!v || !v->is_integer()) return;  // absent (or not an id at all): keep the default
    const bool is_unsigned = v->type == gguf::ValueType::UINT8 || v->type == gguf::ValueType::UINT16 ||
                             v->type == gguf::ValueType::UINT32 || v->type == gguf::ValueType::UINT64;
    if (is_unsigned) {
        if (v->u < static_cast<uint64_t>(n_tokens())) id = static_cast<int32_t>(v->u);
    } else {
        if (v->i >= 0 && v->i < n_tokens()) id = static_cast<int32_t>(v->i);
    }
    // Out of range (0xFFFFFFFF is the usual "none"): the reference warns and keeps its
    // default id; so do we, silently.
}

void Vocab::load(const gguf::File& f) {
    const gguf::Value& toks = array_key(f, "tokenizer.ggml.tokens", gguf::ValueType::STRING);
    const size_t n = toks.arr.size();
    if (n == 0) fail(f.path(), ": key 'tokenizer.ggml.tokens' is an empty array");
    if (n > static_cast<size_t>(INT32_MAX)) fail(f.path(), ": key 'tokenizer.ggml.tokens' has too many entries (", n, ")");

    const gguf::Value* sv = f.find("tokenizer.ggml.scores");
    if (sv) {
        array_key(f, "tokenizer.ggml.scores", gguf::ValueType::FLOAT32);
        if (sv->arr.size() != n)
            fail(f.path(), ": key 'tokenizer.ggml.scores' has ", sv->arr.size(), " entries, but there are ", n, " tokens");
    }
    const gguf::Value* tv = f.find("tokenizer.ggml.token_type");
    if (tv) {
        array_key(f, "tokenizer.ggml.token_type", gguf::ValueType::INT32);
        if (tv->arr.size() != n)
            fail(f.path(), ": key 'tokenizer.ggml.token_type' has ", tv->arr.size(), " entries, but there are ", n,
                 " tokens");
    }

    pieces_.resize(n);
    scores_.assign(n, 0.0f);
    types_.assign(n, TokenType::NORMAL);
    attrs_.assign(n, attr::NORMAL);
    token_to_id_.clear();
    token_to_id_.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        std::string word(toks.arr[i].s);
        if (word.empty()) word = "[EMPTY_" + std::to_string(i) + "]";  // as the reference does
        token_to_id_[word] = static_cast<int32_t>(i);                  // a later duplicate wins
        pieces_[i] = std::move(word);
        if (sv) {
            const gguf::Value& s = sv->arr[i];
            scores_[i] = s.is_float() ? static_cast<float>(s.f)
                                      : static_cast<float>(s.type == gguf::ValueType::INT64 || s.type == gguf::ValueType::INT32 ||
                                                                   s.type == gguf::ValueType::INT16 || s.type == gguf::ValueType::INT8
                                                               ? static_cast<double>(s.i)
                                                               : static_cast<double>(s.u));
        }
        if (tv) {
            const gguf::Value& t = tv->arr[i];
            int64_t ty = (t.type == gguf::ValueType::UINT8 || t.type == gguf::ValueType::UINT16 ||
                          t.type == gguf::ValueType::UINT32 || t.type == gguf::ValueType::UINT64)
                             ? static_cast<int64_t>(std::min<uint64_t>(t.u, 1000))
                             : t.i;
            types_[i] = (ty >= 0 && ty <= 6) ? static_cast<TokenType>(ty) : TokenType::UNDEFINED;
            attrs_[i] = attr_from_type(ty);
        }
    }

    // Defaults set by the subclass may not exist in a tiny vocabulary.
    for (int32_t* id : {&bos_, &eos_, &unk_, &eot_, &eom_, &pad_, &sep_, &mask_, &fim_pre_, &fim_suf_, &fim_mid_,
                        &fim_pad_, &fim_rep_, &fim_sep_})
        if (*id >= n_tokens()) *id = -1;

    read_special_id(f, "tokenizer.ggml.bos_token_id", bos_);
    read_special_id(f, "tokenizer.ggml.eos_token_id", eos_);
    read_special_id(f, "tokenizer.ggml.eot_token_id", eot_);
    read_special_id(f, "tokenizer.ggml.eom_token_id", eom_);
    read_special_id(f, "tokenizer.ggml.unknown_token_id", unk_);
    read_special_id(f, "tokenizer.ggml.seperator_token_id", sep_);  // sic: the GGUF key's spelling
    read_special_id(f, "tokenizer.ggml.padding_token_id", pad_);
    read_special_id(f, "tokenizer.ggml.mask_token_id", mask_);
    read_special_id(f, "tokenizer.ggml.fim_pre_token_id", fim_pre_);
    read_special_id(f, "tokenizer.ggml.fim_suf_token_id", fim_suf_);
    read_special_id(f, "tokenizer.ggml.fim_mid_token_id", fim_mid_);
    read_special_id(f, "tokenizer.ggml.fim_pad_token_id", fim_pad_);
    read_special_id(f, "tokenizer.ggml.fim_rep_token_id", fim_rep_);
    read_special_id(f, "tokenizer.ggml.fim_sep_token_id", fim_sep_);
    // deprecated names
    read_special_id(f, "tokenizer.ggml.prefix_token_id", fim_pre_);
    read_special_id(f, "tokenizer.ggml.suffix_token_id", fim_suf_);
    read_special_id(f, "tokenizer.ggml.middle_token_id", fim_mid_);

    auto read_bool = [&](const char* key, bool& out) {
        const gguf::Value* v = f.find(key);
        if (!v) return;
        if (v->type != gguf::ValueType::BOOL)
            fail(f.path(), ": key '", key, "': expected a bool, found ", gguf::value_type_name(v->type));
        out = v->u != 0;
    };
    read_bool("tokenizer.ggml.add_bos_token", add_bos_);
    read_bool("tokenizer.ggml.add_eos_token", add_eos_);
    read_bool("tokenizer.ggml.add_sep_token", add_sep_);
    read_bool("tokenizer.ggml.add_space_prefix", add_space_prefix_);

    after_load(f);

    detect_special_tokens();

    // Special tokens for splitting: longest text first. std::sort with the reference's
    // comparator, so that ties come out in the same order with the same standard library.
    special_cache_.clear();
    for (int32_t id = 0; id < n_tokens(); ++id)
        if (attrs_[id] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN)) special_cache_.push_back(id);
    std::sort(special_cache_.begin(), special_cache_.end(),
              [&](int32_t a, int32_t b) { return pieces_[a].size() > pieces_[b].size(); });

    piece_cache_.resize(n);
    for (int32_t id = 0; id < n_tokens(); ++id) piece_cache_[id] = make_piece(id);

    apply_name_rules(f);
}

// Tokens that the reference finds by their text (convert scripts do not always record
// them): EOT / EOM / FIM ids when no key gave them, and the end-of-generation set.
void Vocab::detect_special_tokens() {
    auto make_control = [&](int32_t id) {
        if (!(attrs_[id] & attr::CONTROL)) attrs_[id] = attr::CONTROL;
    };
    auto any_of = [](const std::string& s, std::initializer_list<std::string_view> names) {
        for (auto n : names)
            if (s == n) return true;
        return false;
    };
    // Iterating the hash map (not the ids) mirrors the reference when several candidate
    // texts exist: the first one met wins.
    // Every candidate text starts with '<', '_' or U+2581 (0xE2 ...): a cheap first filter.
    auto candidate = [](const std::string& t) { return !t.empty() && (t[0] == '<' || t[0] == '_' || t[0] == '\xE2'); };
    for (const auto& [text, id] : token_to_id_) {
        if (!candidate(text)) continue;
        if (eot_ < 0 && any_of(text, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                      "<|end_of_text|>", "<EOT>", "_<EOT>",
                                      "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
                                      "<end_of_utterance>"})) {
            eot_ = id;
            make_control(id);
        }
        if (eom_ < 0 && text == "<|eom_id|>") {
            eom_ = id;
            make_control(id);
        }
        if (fim_pre_ < 0 && any_of(text, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                          "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
                                          "\xE2\x96\x81<PRE>", "<|code_prefix|>"})) {
            fim_pre_ = id;
            make_control(id);
        }
        if (fim_suf_ < 0 && any_of(text, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                          "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>", "<SUF>",
                                          "\xE2\x96\x81<SUF>", "<|code_suffix|>"})) {
            fim_suf_ = id;
            make_control(id);
        }
        if (fim_mid_ < 0 && any_of(text, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                          "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
                                          "\xE2\x96\x81<MID>", "<|code_middle|>"})) {
            fim_mid_ = id;
            make_control(id);
        }
        if (fim_pad_ < 0 && any_of(text, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"})) {
            fim_pad_ = id;
            make_control(id);
        }
        if (fim_rep_ < 0 && any_of(text, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"})) {
            fim_rep_ = id;
            make_control(id);
        }
        if (fim_sep_ < 0 && text == "<|file_sep|>") {
            fim_sep_ = id;
            make_control(id);
        }
    }

    std::vector<int32_t> eog;
    for (int32_t id : {fim_pad_, fim_rep_, fim_sep_})
        if (id >= 0) eog.push_back(id);
    for (const auto& [text, id] : token_to_id_) {
        if (!candidate(text)) continue;
        if (any_of(text, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
                          "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>",
                          "<end_of_utterance>"})) {
            eog.push_back(id);
            make_control(id);
        }
    }
    // Tokens the reference always renders (o200k_harmony).
    for (const char* t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
        if (int32_t id = find_token(t); id >= 0) attrs_[id] = attr::USER_DEFINED;
    for (int32_t id : {eos_, eot_, eom_})
        if (id >= 0) eog.push_back(id);
    std::sort(eog.begin(), eog.end());
    eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

    // o200k_harmony: with "<|return|>" and "<|call|>" present, "<|end|>" does not end generation.
    int32_t end_id = -1;
    bool has_return = false, has_call = false;
    for (int32_t id : eog) {
        if (pieces_[id] == "<|return|>") has_return = true;
        else if (pieces_[id] == "<|call|>") has_call = true;
        else if (pieces_[id] == "<|end|>") end_id = id;
    }
    if (has_return && has_call && end_id >= 0) {
        eog.erase(std::find(eog.begin(), eog.end(), end_id));
        attrs_[end_id] = attr::USER_DEFINED;
    }
    eog_ids_ = std::move(eog);
}

// Per-token strip attributes that the reference sets by model name (GGUF files do not
// carry them). They only change how special tokens are split out of the text.
void Vocab::apply_name_rules(const gguf::File& f) {
    auto str_key = [&](const char* key) {
        const gguf::Value* v = f.find(key);
        return (v && v->type == gguf::ValueType::STRING) ? std::string(v->s) : std::string();
    };
    std::string name = str_key("general.name");
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const std::string pre = str_key("tokenizer.ggml.pre");
    const std::string arch = str_key("general.architecture");
    auto contains_any = [](const std::string& s, std::initializer_list<std::string_view> subs) {
        for (auto sub : subs)
            if (s.find(sub) != std::string::npos) return true;
        return false;
    };
    auto set_attr = [&](int32_t id, uint32_t a, bool on) {
        if (id < 0) return;
        attrs_[id] = on ? (attrs_[id] | a) : (attrs_[id] & ~a);
    };
    if (contains_any(pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
        contains_any(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
        set_attr(find_token("<mask>"), attr::LSTRIP, true);
    } else if (contains_any(name, {"phi-3", "phi3"})) {
        for (int32_t id : special_cache_) set_attr(id, attr::RSTRIP, true);
        set_attr(find_token("</s>"), attr::RSTRIP, true);
        for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) set_attr(find_token(t), attr::RSTRIP, false);
    }
}

// ---------------------------------------------------------------------------------------
// Queries

int32_t Vocab::find_token(std::string_view text) const {
    auto it = token_to_id_.find(text);
    return it == token_to_id_.end() ? -1 : it->second;
}

bool Vocab::is_eog(int32_t id) const {
    return id >= 0 && std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

bool Vocab::is_control(int32_t id) const {
    return id >= 0 && id < n_tokens() && (attrs_[id] & attr::CONTROL);
}

// ---------------------------------------------------------------------------------------
// Tokenize

std::vector<Vocab::Fragment> Vocab::partition(std::string_view text, bool parse_special) const {
    std::vector<Fragment> frags;
    if (text.empty()) return frags;
    frags.push_back({-1, 0, text.size()});
    std::vector<Fragment> next;
    for (int32_t id : special_cache_) {
        const uint32_t a = attrs_[id];
        // Control and unknown tokens only with parse_special; user-defined tokens always.
        if (!parse_special && (a & (attr::CONTROL | attr::UNKNOWN))) continue;
        const std::string& st = pieces_[id];
        if (st.empty()) continue;
        next.clear();
        bool changed = false;
        for (const Fragment& fr : frags) {
            if (fr.token >= 0) {
                next.push_back(fr);
                continue;
            }
            size_t off = fr.off, len = fr.len;
            while (len > 0) {
                const size_t m = text.substr(0, off + len).find(st, off);
                if (m == std::string_view::npos) break;
                changed = true;
                if (m > off) {
                    size_t left = m - off;
                    if (a & attr::LSTRIP)
                        while (left > 0 && is_space(text[off + left - 1])) --left;
                    if (left > 0) next.push_back({-1, off, left});
                }
                next.push_back({id, 0, 0});
                const size_t end = m + st.size();
                const size_t stop = off + len;
                off = end;
                len = stop - end;
                if (len > 0 && (a & attr::RSTRIP))
                    while (len > 0 && is_space(text[off])) ++off, --len;
            }
            if (len > 0) next.push_back({-1, off, len});
        }
        if (changed) frags.swap(next);
    }
    return frags;
}

void Vocab::encode(std::string_view text, const std::vector<Fragment>& frags, std::vector<int32_t>& out) const {
    for (const Fragment& fr : frags) {
        if (fr.token >= 0) out.push_back(fr.token);
        else tokenize_text(text.substr(fr.off, fr.len), out);
    }
}

std::vector<int32_t> Vocab::tokenize(std::string_view text, bool add_special, bool parse_special) const {
    std::vector<int32_t> out;
    const std::vector<Fragment> frags = partition(text, parse_special);
    if (add_special && add_bos_ && bos_ >= 0) out.push_back(bos_);
    encode(text, frags, out);
    if (add_special && add_eos_ && eos_ >= 0) out.push_back(eos_);
    if (add_special && add_sep_ && sep_ >= 0) out.push_back(sep_);
    return out;
}

// ---------------------------------------------------------------------------------------
// Detokenize

std::string Vocab::token_to_piece(int32_t id, bool render_special) const {
    if (id < 0 || id >= n_tokens()) fail("token id ", id, " is out of range (the vocabulary has ", n_tokens(), " tokens)");
    if (!render_special && (attrs_[id] & (attr::UNKNOWN | attr::CONTROL))) return {};
    return piece_cache_[id];
}

std::string Vocab::detokenize(const std::vector<int32_t>& ids, bool render_special) const {
    std::string out;
    for (int32_t id : ids) out += token_to_piece(id, render_special);
    return out;
}

}  // namespace glia::tok
