#include "runtime/speculative.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "tokenizer/vocab.h"

namespace glia {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The largest softmax probability of a row of logits.
double top_prob(const float* l, int n) {
    const float mx = *std::max_element(l, l + n);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(double(l[i]) - mx);
    return 1.0 / sum;
}

std::string shown(const std::string& piece) {
    std::string s;
    for (unsigned char c : piece) {
        if (c == '\n') s += "\\n";
        else if (c < 0x20) s += cat("\\x", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
        else s += static_cast<char>(c);
    }
    return "'" + s + "'";
}

}  // namespace

void check_draft_vocab(const tok::Vocab& target, const tok::Vocab& draft, const std::string& draft_name) {
    const int32_t n = std::min(target.n_tokens(), draft.n_tokens());
    for (int32_t id = 0; id < n; ++id)
        if (target.raw_piece(id) != draft.raw_piece(id) || target.token_type(id) != draft.token_type(id))
            fail("the draft model ", draft_name, " does not share the target's vocabulary: token ", id, " is ",
                 shown(draft.raw_piece(id)), " in the draft but ", shown(target.raw_piece(id)),
                 " in the target (a draft must use the target's tokenizer)");
    if (target.n_tokens() != draft.n_tokens())
        fail("the draft model ", draft_name, " does not share the target's vocabulary: it has ", draft.n_tokens(),
             " tokens, the target ", target.n_tokens(), " (the first ", n, " agree; token ", n, " is in ",
             draft.n_tokens() > n ? "the draft" : "the target", " only)");
}

Speculator::Speculator(Session& target, Sampler& sampler, const SpecOptions& opt)
    : target_(target), sampler_(sampler), opt_(opt) {
    if (opt_.ngram == (opt_.draft != nullptr))
        fail("speculative decoding drafts by prompt lookup or by a draft model: give one of the two");
    if (opt_.draft_max < 1) fail("--draft-max must be at least 1, not ", opt_.draft_max);
    if (opt_.draft_min < 0 || opt_.draft_min > opt_.draft_max)
        fail("--draft-min must be between 0 and --draft-max (", opt_.draft_max, "), not ", opt_.draft_min);
    auto refuse_recurrent = [](const Model& m, const char* role) {
        fail("speculative decoding needs to drop the drafted tokens the target rejects, but the ", role, " ",
             m.file().path(), " (", m.profile().arch,
             ") has recurrent layers whose state cannot be rolled back to an earlier token; run it without "
             "--spec-ngram / --model-draft");
    };
    if (!target_.can_truncate()) refuse_recurrent(target_.model(), "model");
    if (opt_.ngram) {
        ngram_ = std::make_unique<NgramDraft>(opt_.ngram_min, opt_.ngram_max);
        return;
    }
    check_draft_vocab(target_.model().vocab(), opt_.draft->vocab(), opt_.draft->file().path());
    SessionOptions so = opt_.draft_session;
    if (so.n_ctx <= 0) so.n_ctx = target_.n_ctx();
    draft_ = std::make_unique<Session>(*opt_.draft, so);
    if (!draft_->can_truncate()) refuse_recurrent(*opt_.draft, "draft model");
    draft_sampler_ = std::make_unique<Sampler>(sampler_.params());
}

Speculator::~Speculator() = default;

void Speculator::reset() {
    stats_ = {};
    if (ngram_) ngram_->reset();
    if (draft_) {
        draft_->reset();
        draft_text_.clear();
    }
}

std::string Speculator::kind() const { return ngram_ ? "prompt lookup" : "draft model"; }

// Brings the draft session to the text: keeps what it evaluated that still agrees, then
// evaluates the rest (at least the last token, for its logits).
const std::vector<float>& Speculator::sync_draft(const std::vector<int32_t>& text) {
    size_t c = 0;
    while (c < draft_text_.size() && c < text.size() && draft_text_[c] == text[c]) ++c;
    if (c == text.size()) --c;
    draft_->truncate(static_cast<int>(c));
    draft_text_.resize(c);
    draft_text_.insert(draft_text_.end(), text.begin() + static_cast<long>(c), text.end());
    return draft_->decode(std::vector<int32_t>(text.begin() + static_cast<long>(c), text.end()), false);
}

void Speculator::draft_tokens(const std::vector<int32_t>& text, int k) {
    if (ngram_) {
        drafts_ = ngram_->draft(text, k);
        return;
    }
    const std::vector<float>* logits = &sync_draft(text);
    const bool greedy = sampler_.params().temperature <= 0;
    const int V = draft_->n_vocab(), V_target = target_.n_vocab();
    std::vector<int32_t> hist = text;
    for (int j = 0; j < k; ++j) {
        const float* row = logits->data();
        int32_t d;
        if (greedy) {
            d = draft_sampler_->sample(row, V, hist);
            if (opt_.draft_p_min > 0 && top_prob(row, V) < opt_.draft_p_min) break;
        } else {
            TokenDist q;
            draft_sampler_->distribution(row, V, hist, q.ids, q.p);
            std::discrete_distribution<size_t> pick(q.p.begin(), q.p.end());
            d = q.ids[pick(sampler_.rng())];
            q_.push_back(std::move(q));
        }
        if (d >= V_target) break;  // a token the target cannot take
        drafts_.push_back(d);
        hist.push_back(d);
        if (j + 1 < k) {
            logits = &draft_->decode({d}, false);
            draft_text_.push_back(d);
        }
    }
    q_.resize(drafts_.size());
}

std::vector<int32_t> Speculator::step(const std::vector<int32_t>& text, int max_new) {
    if (text.empty() || target_.n_past() != static_cast<int>(text.size()) - 1)
        fail("speculative step: the target has evaluated ", target_.n_past(), " tokens of a text of ", text.size(),
             " (it must have evaluated all but the last)");
    if (max_new < 1) fail("speculative step: asked for ", max_new, " tokens");
    const int room = target_.n_ctx() - static_cast<int>(text.size());  // drafts that fit after the last token
    const int k_max = std::max(0, std::min({opt_.draft_max, max_new - 1, room}));
    const auto t0 = Clock::now();
    drafts_.clear();
    q_.clear();
    if (k_max > 0) draft_tokens(text, k_max);
    if (static_cast<int>(drafts_.size()) < std::max(1, opt_.draft_min)) drafts_.clear();
    stats_.draft_s += seconds_since(t0);

    const auto t1 = Clock::now();
    batch_.assign(1, text.back());
    batch_.insert(batch_.end(), drafts_.begin(), drafts_.end());
    const std::vector<float>& logits = target_.decode(batch_, !drafts_.empty());
    const int V = target_.n_vocab();
    const bool greedy = sampler_.params().temperature <= 0;
    std::vector<int32_t> out;
    hist_ = text;
    size_t accepted = 0;
    for (; accepted < drafts_.size(); ++accepted) {
        const float* row = logits.data() + accepted * static_cast<size_t>(V);
        const int32_t d = drafts_[accepted];
        int32_t pick = d;
        if (greedy) {
            pick = sampler_.sample(row, V, hist_);
        } else {
            sampler_.distribution(row, V, hist_, p_.ids, p_.p);
            TokenDist lookup;
            if (ngram_) lookup.one_hot(d);
            const SpecVerdict v = spec_accept(p_, ngram_ ? lookup : q_[accepted], d, sampler_.rng());
            pick = v.token;
        }
        out.push_back(pick);
        if (pick != d) break;
        hist_.push_back(d);
    }
    if (accepted == drafts_.size())
        out.push_back(sampler_.sample(logits.data() + accepted * static_cast<size_t>(V), V, hist_));
    target_.truncate(static_cast<int>(text.size() + accepted));
    stats_.verify_s += seconds_since(t1);
    ++stats_.steps;
    stats_.drafted += static_cast<long long>(drafts_.size());
    stats_.accepted += static_cast<long long>(accepted);
    stats_.emitted += static_cast<long long>(out.size());
    return out;
}

}  // namespace glia
