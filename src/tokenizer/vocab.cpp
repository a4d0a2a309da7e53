// Vocabulary loading, special-token handling and the tokenizer-independent parts of
// tokenize / token_to_piece.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "gguf/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/special_names.h"
#include "tokenizer/spm.h"
#include "tokenizer/ugm.h"
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
    } else if (model == "t5") {
        v = std::make_unique<UgmVocab>();
    } else if (model == "rwkv" || model == "plamo2") {
        fail(f.path(), ": tokenizer model '", model, "' not supported yet");
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

    detect_special_tokens(f);

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
    finish_load();
}

void Vocab::retype(int32_t id, uint32_t add, std::string reason, bool replace) {
    const uint32_t before = attrs_[id];
    const uint32_t after = replace ? add : (before | add);
    if (after == before) return;
    attrs_[id] = after;
    for (TypeOverride& o : overrides_)
        if (o.id == id) {
            o.reason += "; " + reason;
            return;
        }
    overrides_.push_back({id, types_[id], 0, std::move(reason)});
}

// Special tokens the file does not type as such (convert scripts do not always record
// them), found the way the reference finds them, and then from what the file declares:
//  1. EOT / EOM / FIM ids by text (special_names.cpp) when no key gave them;
//  2. control tokens whose text says "unused" are unused;
//  3. the end-of-generation set: FIM pad/repository/separator, every end-of-generation
//     text of the table (made a control token), EOS/EOT/EOM;
//  4. from the file itself: its EOS/EOT/EOM/padding ids and the marker its chat template
//     puts after a message, where the file typed them USER_DEFINED (text that a user
//     types must not produce an end-of-turn);
//  5. the two conventions of special_names.h (o200k_harmony's "<|end|>", gemma-4's "</s>").
// Text facts come only from the table; retype() records every change for `glia inspect`.
void Vocab::detect_special_tokens(const gguf::File& f) {
    overrides_.clear();
    auto name_reason = [](const NameFact& nf, uint32_t r) {
        return cat("text table: ", role_name(r), " marker (", nf.origin, ")");
    };
    // Iterating the hash map (not the ids) mirrors the reference when several candidate
    // texts exist: the first one met wins.
    struct Slot {
        uint32_t role;
        int32_t* id;
    };
    const Slot slots[] = {{role::EOT, &eot_},         {role::EOM, &eom_},         {role::FIM_PRE, &fim_pre_},
                          {role::FIM_SUF, &fim_suf_}, {role::FIM_MID, &fim_mid_}, {role::FIM_PAD, &fim_pad_},
                          {role::FIM_REP, &fim_rep_}, {role::FIM_SEP, &fim_sep_}};
    // One pass over the texts; the end-of-generation and always-rendered names are applied
    // after it, in the reference's order.
    std::vector<std::pair<int32_t, const NameFact*>> eog_names, render_names;
    for (const auto& [text, id] : token_to_id_) {
        const NameFact* nf = find_name(text);
        if (!nf) continue;
        for (const Slot& sl : slots)
            if ((nf->roles & sl.role) && *sl.id < 0) {
                *sl.id = id;
                retype(id, attr::CONTROL, name_reason(*nf, sl.role));
            }
        if (nf->roles & role::EOG) eog_names.emplace_back(id, nf);
        if (nf->roles & role::RENDER) render_names.emplace_back(id, nf);
    }

    for (int32_t id = 0; id < n_tokens(); ++id)
        if ((attrs_[id] & attr::CONTROL) && pieces_[id].find("unused") != std::string::npos) attrs_[id] |= attr::UNUSED;

    std::vector<int32_t> eog;
    for (int32_t id : {fim_pad_, fim_rep_, fim_sep_})
        if (id >= 0) eog.push_back(id);
    for (const auto& [id, nf] : eog_names) {
        eog.push_back(id);
        retype(id, attr::CONTROL, name_reason(*nf, role::EOG));
    }
    for (const auto& [id, nf] : render_names)
        retype(id, attr::USER_DEFINED, cat("text table: shown as text (", nf->origin, ")"), true);
    for (int32_t id : {eos_, eot_, eom_})
        if (id >= 0) eog.push_back(id);

    // 4. What the file declares. Only USER_DEFINED tokens: a NORMAL token named as padding
    // is ordinary text that happens to be reused (e.g. "!"), and must keep rendering.
    auto declared_control = [&](int32_t id, const std::string& why, bool ends_generation) {
        if (id < 0 || (attrs_[id] & (attr::CONTROL | attr::UNKNOWN)) || !(attrs_[id] & attr::USER_DEFINED)) return;
        const NameFact* nf = find_name(pieces_[id]);
        if (nf && (nf->roles & role::RENDER)) return;
        retype(id, attr::CONTROL, why);
        if (ends_generation) eog.push_back(id);
    };
    for (const auto& [key, ends] : {std::pair<const char*, bool>{"eos", true}, {"eot", true}, {"eom", true},
                                    {"padding", false}}) {
        const std::string k = cat("tokenizer.ggml.", key, "_token_id");
        int32_t id = -1;
        read_special_id(f, k.c_str(), id);
        declared_control(id, cat("the file declares it as its ", key, " token (", k, ")"), ends);
    }
    if (const std::string src = chat_template(f); !src.empty()) {
        const std::string bos = bos_ >= 0 ? pieces_[bos_] : "", eos = eos_ >= 0 ? pieces_[eos_] : "";
        if (auto ends = message_ends(src, bos, eos)) {
            // The longest special token at the front of what follows the message.
            auto marker = [&](const std::string& rest) {
                for (size_t n = rest.size(); n > 0; --n) {
                    const int32_t id = find_token(std::string_view(rest).substr(0, n));
                    if (id >= 0 && (attrs_[id] & (attr::CONTROL | attr::USER_DEFINED))) return id;
                }
                return -1;
            };
            const int32_t a = marker(ends->after_assistant), u = marker(ends->after_user);
            declared_control(a, "the chat template ends an assistant message with it", true);
            declared_control(u, "the chat template ends a user message with it", false);
        }
    }

    std::sort(eog.begin(), eog.end());
    eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

    // 5. The conventions of special_names.h.
    int32_t end_id = -1, slash_s = -1;
    bool has_return = false, has_call = false, has_flush = false, has_tool_response = false;
    for (int32_t id : eog) {
        const std::string& t = pieces_[id];
        if (t == "<|return|>") has_return = true;
        else if (t == "<|call|>" || t == "<|calls|>") has_call = true;
        else if (t == "<|flush|>") has_flush = true;
        else if (t == kHarmonyEnd) end_id = id;
        else if (t == kToolResponse) has_tool_response = true;
        else if (t == kSlashS) slash_s = id;
    }
    if (end_id >= 0 && has_call && (has_return || has_flush)) {
        eog.erase(std::find(eog.begin(), eog.end(), end_id));
        retype(end_id, attr::USER_DEFINED, "o200k_harmony: '<|end|>' ends a message inside an answer, shown as text",
               true);
    }
    if (slash_s >= 0 && has_tool_response) {
        eog.erase(std::find(eog.begin(), eog.end(), slash_s));
        retype(slash_s, attr::NORMAL, "with '<|tool_response>' ending generation (gemma-4), '</s>' is ordinary text",
               true);
    }
    eog_ids_ = std::move(eog);

    // Drop records that ended where they started (e.g. retyped and retyped back), and
    // keep the final attributes.
    std::vector<TypeOverride> kept;
    for (TypeOverride& o : overrides_) {
        o.attrs = attrs_[o.id];
        if (o.attrs != attr_from_type(static_cast<int64_t>(o.file_type))) kept.push_back(std::move(o));
    }
    std::sort(kept.begin(), kept.end(), [](const TypeOverride& a, const TypeOverride& b) { return a.id < b.id; });
    overrides_ = std::move(kept);
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

const char* token_type_name(TokenType t) {
    switch (t) {
        case TokenType::UNDEFINED: return "undefined";
        case TokenType::NORMAL: return "normal";
        case TokenType::UNKNOWN: return "unknown";
        case TokenType::CONTROL: return "control";
        case TokenType::USER_DEFINED: return "user-defined";
        case TokenType::UNUSED: return "unused";
        case TokenType::BYTE: return "byte";
    }
    return "?";
}

std::string attr_names(uint32_t a) {
    static const std::pair<uint32_t, const char*> names[] = {
        {attr::CONTROL, "control"}, {attr::USER_DEFINED, "user-defined"}, {attr::NORMAL, "normal"},
        {attr::UNKNOWN, "unknown"}, {attr::UNUSED, "unused"},             {attr::BYTE, "byte"},
        {attr::LSTRIP, "lstrip"},   {attr::RSTRIP, "rstrip"}};
    std::string s;
    for (const auto& [bit, name] : names)
        if (a & bit) s += cat(s.empty() ? "" : "|", name);
    return s.empty() ? "undefined" : s;
}

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
