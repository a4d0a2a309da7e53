// Vocabulary and tokenizers built from GGUF metadata (tokenizer.ggml.*).
//
// The behaviour follows the reference implementation (llama.cpp) exactly: the same
// default special ids per tokenizer model, the same special-token splitting (longest
// token text first, control/unknown tokens only with parse_special, user-defined tokens
// always), the same SentencePiece leading-space rule and the same piece rendering.
// Which tokens are control tokens comes from the file's token types, corrected by the
// text table of special_names.h and by what the file declares (type_overrides()).
//
// A tokenizer model is a subclass: it sets its defaults in its constructor, implements
// tokenize_text() (one run of plain text) and make_piece() (the text of one token), and
// may override encode() when its rules depend on the neighbouring fragments (SPM's
// leading space does). See spm.h (SentencePiece), bpe.h (byte-level BPE and gemma4's
// SentencePiece-style BPE), wpm.h (WordPiece) and ugm.h (Unigram).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace glia::gguf { class File; }

namespace glia::tok {

enum class Kind { SPM, BPE, WPM, UGM, RWKV, NONE };
const char* kind_name(Kind k);

// Token attributes (tokenizer.ggml.token_type): 1 normal, 2 unknown, 3 control,
// 4 user-defined, 5 unused, 6 byte.
enum class TokenType : int32_t { UNDEFINED = 0, NORMAL = 1, UNKNOWN = 2, CONTROL = 3,
                                 USER_DEFINED = 4, UNUSED = 5, BYTE = 6 };

// Attribute bits derived from the token type (and a few name-based rules), as the
// reference keeps them. LSTRIP/RSTRIP: when this special token is split out of the text,
// whitespace on its left/right is dropped.
namespace attr {
enum : uint32_t {
    UNDEFINED = 0, UNKNOWN = 1u << 0, UNUSED = 1u << 1, NORMAL = 1u << 2, CONTROL = 1u << 3,
    USER_DEFINED = 1u << 4, BYTE = 1u << 5, NORMALIZED = 1u << 6, LSTRIP = 1u << 7,
    RSTRIP = 1u << 8, SINGLE_WORD = 1u << 9,
};
}  // namespace attr

const char* token_type_name(TokenType t);   // "normal", "user-defined", ...
std::string attr_names(uint32_t attrs);      // "control|user-defined", ...

// A token whose attributes differ from what the file's token_type says, and why: the
// text names an end-of-turn or end-of-generation marker (special_names.h), the file
// declares it as its EOS/EOT/EOM/padding token, or its chat template ends a message with
// it. Such tokens become control tokens, so that plain text never produces them.
struct TypeOverride {
    int32_t id = -1;
    TokenType file_type = TokenType::UNDEFINED;  // as the file types it
    uint32_t attrs = 0;                          // what glia uses (attr:: bits)
    std::string reason;                          // one or more reasons, "; "-separated
};

class Vocab {
public:
    // Reads tokenizer.ggml.* keys: "llama" (SentencePiece), "gpt2" (byte-level BPE),
    // "gemma4" (SentencePiece-style BPE), "bert" (WordPiece), "t5" (Unigram). Throws
    // glia::Error on missing/invalid metadata, and for tokenizer models not implemented yet
    // ("tokenizer model 'rwkv' not supported yet").
    static std::unique_ptr<Vocab> from_gguf(const gguf::File& f);
    virtual ~Vocab() = default;

    Kind kind() const { return kind_; }
    int32_t n_tokens() const { return static_cast<int32_t>(pieces_.size()); }
    int32_t bos() const { return bos_; }   // -1 when none
    int32_t eos() const { return eos_; }   // -1 when none
    int32_t unk() const { return unk_; }   // -1 when none
    int32_t eot() const { return eot_; }   // -1 when none
    int32_t eom() const { return eom_; }   // -1 when none
    int32_t pad() const { return pad_; }   // -1 when none
    int32_t sep() const { return sep_; }   // -1 when none
    // Fill-in-the-middle tokens (tokenizer.ggml.fim_*_token_id, the older prefix/suffix/
    // middle keys, or found by their text); -1 when none.
    int32_t fim_pre() const { return fim_pre_; }
    int32_t fim_suf() const { return fim_suf_; }
    int32_t fim_mid() const { return fim_mid_; }
    int32_t fim_rep() const { return fim_rep_; }  // repository name follows
    int32_t fim_sep() const { return fim_sep_; }  // a file of the repository follows
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    bool add_sep() const { return add_sep_; }  // WordPiece: [SEP] after the text
    bool add_space_prefix() const { return add_space_prefix_; }
    bool is_eog(int32_t id) const;          // end of generation (eos, eot, eom ...)
    const std::vector<int32_t>& eog_ids() const { return eog_ids_; }  // sorted
    bool is_control(int32_t id) const;
    const std::string& raw_piece(int32_t id) const { return pieces_.at(id); }
    float score(int32_t id) const { return scores_.at(id); }
    TokenType token_type(int32_t id) const { return types_.at(id); }
    uint32_t token_attr(int32_t id) const { return attrs_.at(id); }
    // The tokens whose type was overridden at load, by id.
    const std::vector<TypeOverride>& type_overrides() const { return overrides_; }
    // Id of the token whose raw text is exactly `text`, or -1.
    int32_t find_token(std::string_view text) const;

    // add_special: add BOS/EOS (and SEP) as the vocabulary's flags say.
    // parse_special: turn special-token text (control/user-defined tokens) into tokens.
    std::vector<int32_t> tokenize(std::string_view text, bool add_special,
                                  bool parse_special) const;
    // Text of one token: SPM's U+2581 becomes a space, <0xNN> becomes the byte.
    // With render_special false, control tokens render as "".
    std::string token_to_piece(int32_t id, bool render_special = true) const;
    // Concatenated pieces (bytes; may hold invalid UTF-8 if ids split a character).
    std::string detokenize(const std::vector<int32_t>& ids, bool render_special = false) const;

protected:
    Vocab() = default;
    // Tokenizes one run of plain text (no special-token parsing); appends to out.
    virtual void tokenize_text(std::string_view text, std::vector<int32_t>& out) const = 0;
    // The full text of token `id` (special tokens rendered); computed once at load.
    virtual std::string make_piece(int32_t id) const = 0;

    // One piece of the input after special-token splitting: a token (token >= 0) or a
    // run of plain text text.substr(off, len).
    struct Fragment {
        int32_t token = -1;
        size_t off = 0, len = 0;
    };
    // Splits `text` around special-token texts (longest first, like the reference).
    std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
    // Turns the fragments into ids (between the optional BOS and EOS). The default pushes
    // special tokens and runs tokenize_text on plain text.
    virtual void encode(std::string_view text, const std::vector<Fragment>& frags,
                        std::vector<int32_t>& out) const;

    // Reads tokens/scores/types and the special-token keys. The subclass constructor has
    // set its defaults (kind_, bos_ ..., add_*) before this runs.
    void load(const gguf::File& f);
    // Runs inside load(), after the tokens and the special-token keys and flags are read
    // and before special tokens are detected and pieces are computed: a subclass adjusts
    // its flags or builds its own tables here.
    virtual void after_load(const gguf::File& f) { (void)f; }
    // Runs last in load(), when every token's final attributes are known (type overrides
    // included): a subclass builds the tables that depend on them here.
    virtual void finish_load() {}
    // Id for a special-token key as the reference does it: absent -> keep the default;
    // out of range (e.g. 0xFFFFFFFF) -> keep the default, no error.
    void read_special_id(const gguf::File& f, const char* key, int32_t& id) const;

    Kind kind_ = Kind::NONE;
    std::vector<std::string> pieces_;
    std::vector<float> scores_;
    std::vector<TokenType> types_;
    std::vector<uint32_t> attrs_;
    std::vector<std::string> piece_cache_;   // make_piece() of every id
    std::vector<int32_t> special_cache_;     // control/user-defined/unknown ids, longest text first
    std::vector<int32_t> eog_ids_;           // sorted
    int32_t bos_ = -1, eos_ = -1, unk_ = -1, eot_ = -1, eom_ = -1, pad_ = -1;
    int32_t sep_ = -1, mask_ = -1;
    int32_t fim_pre_ = -1, fim_suf_ = -1, fim_mid_ = -1, fim_pad_ = -1, fim_rep_ = -1, fim_sep_ = -1;
    bool add_bos_ = false, add_eos_ = false, add_sep_ = false, add_space_prefix_ = true;

private:
    struct StrHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, int32_t, StrHash, std::equal_to<>> token_to_id_;
    std::vector<TypeOverride> overrides_;
    void detect_special_tokens(const gguf::File& f);
    // Sets attribute bits of `id` (or replaces them with `replace`) and records why.
    void retype(int32_t id, uint32_t add, std::string reason, bool replace = false);
    void apply_name_rules(const gguf::File& f);
};

}  // namespace glia::tok
