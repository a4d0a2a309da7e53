#include "runtime/engine_draft.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "runtime/runner.h"
#include "runtime/speculative.h"

namespace glia {

namespace {

// The largest softmax probability of a row of logits.
double top_prob(const float* l, int n) {
    const float mx = *std::max_element(l, l + n);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(double(l[i]) - mx);
    return 1.0 / sum;
}

}  // namespace

EngineDrafter::EngineDrafter(const Model& target, const Model& draft, const EngineDraftOptions& opt)
    : draft_(draft), opt_(opt), n_vocab_target_(target.profile().n_vocab) {
    check_draft_vocab(target.vocab(), draft.vocab(), draft.file().path());
    if (opt_.chunk < 1) fail("draft model: the catch-up chunk must be at least 1 token");
    RunnerOptions ro;
    ro.n_ctx = opt_.n_ctx;
    ro.n_slots = opt_.n_slots;
    ro.block_size = opt_.block_size;
    ro.n_threads = opt_.n_threads;
    runner_ = std::make_unique<Runner>(draft, ro);
    if (runner_->slot_state_bytes() > 0)
        fail("speculative decoding needs to drop the drafted tokens the target rejects, but the draft model ",
             draft.file().path(), " (", draft.profile().arch,
             ") has recurrent layers whose state cannot be rolled back; use a draft model without them");
}

EngineDrafter::~EngineDrafter() = default;

void EngineDrafter::release(int slot) { runner_->pages().release(slot); }

int EngineDrafter::pages_used() const { return runner_->pages().pages_used(); }

void EngineDrafter::draft(std::vector<DraftJob>& jobs) {
    PageTable& pages = runner_->pages();
    const int V = runner_->model().profile().n_vocab;
    // Per job: the next text token to feed (text->size(): caught up, feed the latest
    // draft), whether it still drafts, and its output row in the current step (-1: none).
    struct State {
        size_t feed = 0;
        bool active = false;
        int row = -1;
    };
    std::vector<State> st(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
        DraftJob& j = jobs[i];
        j.drafts->clear();
        j.q->clear();
        const int n = static_cast<int>(j.text->size());
        if (j.k < 1 || n < 1) continue;
        // Positions up to n + k - 2 are written: the text, then every draft but the last.
        if (!pages.reserve(j.slot, n + j.k - 1)) continue;
        // Keep what agrees with the text; feed the rest (at least the last token, for its logits).
        std::vector<int32_t>& c = *j.cached;
        size_t agree = 0;
        while (agree < c.size() && agree < j.text->size() && c[agree] == (*j.text)[agree]) ++agree;
        agree = std::min(agree, j.text->size() - 1);
        c.resize(agree);
        st[i].feed = agree;
        st[i].active = true;
        if (!*j.draft_sampler) *j.draft_sampler = std::make_unique<Sampler>(j.sampler->params());
    }
    std::vector<int32_t> tokens, pos, seq, out_ids;
    for (;;) {
        tokens.clear(), pos.clear(), seq.clear(), out_ids.clear();
        for (size_t i = 0; i < jobs.size(); ++i) {
            DraftJob& j = jobs[i];
            st[i].row = -1;
            if (!st[i].active) continue;
            const std::vector<int32_t>& text = *j.text;
            if (st[i].feed < text.size()) {  // catching up with the text
                const size_t m = std::min(text.size() - st[i].feed, static_cast<size_t>(opt_.chunk));
                for (size_t t = st[i].feed; t < st[i].feed + m; ++t) {
                    tokens.push_back(text[t]);
                    pos.push_back(static_cast<int32_t>(t));
                    seq.push_back(j.slot);
                    j.cached->push_back(text[t]);
                }
                st[i].feed += m;
                if (st[i].feed < text.size()) continue;
            } else {  // the latest draft, at the position after the last one fed
                tokens.push_back(j.drafts->back());
                pos.push_back(static_cast<int32_t>(j.cached->size()));
                seq.push_back(j.slot);
                j.cached->push_back(j.drafts->back());
            }
            st[i].row = static_cast<int>(out_ids.size());
            out_ids.push_back(static_cast<int32_t>(tokens.size()) - 1);
        }
        if (tokens.empty()) break;
        // A step of catch-up chunks only still computes one row, to keep the shapes non-empty.
        const bool any_out = !out_ids.empty();
        if (!any_out) out_ids.push_back(static_cast<int32_t>(tokens.size()) - 1);
        StepInputs in = StepInputs::of(tokens, pos, seq, out_ids);
        const float* logits = runner_->forward(in);
        if (!any_out) continue;
        for (size_t i = 0; i < jobs.size(); ++i) {
            if (st[i].row < 0) continue;
            DraftJob& j = jobs[i];
            const float* row = logits + static_cast<size_t>(st[i].row) * V;
            Sampler& ds = **j.draft_sampler;
            const bool greedy = ds.params().temperature <= 0;
            int32_t d;
            if (greedy && ds.plain_greedy()) {
                d = argmax(row, V);
            } else {
                hist_ = *j.text;
                hist_.insert(hist_.end(), j.drafts->begin(), j.drafts->end());
                if (greedy) {
                    d = ds.sample(row, V, hist_);
                } else {
                    TokenDist q;
                    ds.distribution(row, V, hist_, q.ids, q.p);
                    std::discrete_distribution<size_t> pick(q.p.begin(), q.p.end());
                    d = q.ids[pick(j.sampler->rng())];
                    j.q->push_back(std::move(q));
                }
            }
            const bool unsure = greedy && opt_.p_min > 0 && top_prob(row, V) < opt_.p_min;
            if (unsure || d >= n_vocab_target_) {  // not drafted: drafting ends here
                if (!greedy) j.q->pop_back();
                st[i].active = false;
                continue;
            }
            j.drafts->push_back(d);
            if (static_cast<int>(j.drafts->size()) >= j.k) st[i].active = false;
        }
    }
}

}  // namespace glia
