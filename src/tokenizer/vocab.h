// Vocabulary and tokenizers built from GGUF metadata (tokenizer.ggml.*).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace glia::gguf { class File; }

namespace glia::tok {

enum class Kind { SPM, BPE, WPM, UGM, RWKV, NONE };
const char* kind_name(Kind k);

// Token attributes (tokenizer.ggml.token_type): 1 normal, 2 unknown, 3 control,
// 4 user-defined, 5 unused, 6 byte.
enum class TokenType : int32_t { UNDEFINED = 0, NORMAL = 1, UNKNOWN = 2, CONTROL = 3,
                                 USER_DEFINED = 4, UNUSED = 5, BYTE = 6 };

class Vocab {
public:
    // Reads tokenizer.ggml.* keys. Throws glia::Error on missing/invalid metadata.
    static std::unique_ptr<Vocab> from_gguf(const gguf::File& f);
    virtual ~Vocab() = default;

    Kind kind() const { return kind_; }
    int32_t n_tokens() const { return static_cast<int32_t>(pieces_.size()); }
    int32_t bos() const { return bos_; }   // -1 when none
    int32_t eos() const { return eos_; }   // -1 when none
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    bool is_eog(int32_t id) const;          // end of generation (eos, eot, eom ...)
    bool is_control(int32_t id) const;
    const std::string& raw_piece(int32_t id) const { return pieces_.at(id); }

    // add_special: add BOS/EOS as the vocabulary's flags say.
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

    Kind kind_ = Kind::NONE;
    std::vector<std::string> pieces_;
    std::vector<float> scores_;
    std::vector<TokenType> types_;
    int32_t bos_ = -1, eos_ = -1, unk_ = -1, eot_ = -1, eom_ = -1, pad_ = -1;
    bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = true;
};

}  // namespace glia::tok
