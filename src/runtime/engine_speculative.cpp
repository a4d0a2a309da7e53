// Speculative decoding in the engine: drafts by prompt lookup or a draft model, and their
// verification against the step's logits (spec_accept.h: greedy output never changes).
#include "runtime/engine_impl.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <string>

#include "core/error.h"
#include "gguf/gguf.h"
#include "grammar/token_mask.h"
#include "model/model.h"
#include "runtime/engine_draft.h"
#include "runtime/ngram_draft.h"
#include "runtime/runner.h"
#include "runtime/spec_accept.h"
#include "tokenizer/vocab.h"

namespace glia {

// Prompt lookup for the decoding sequences that can speculate, once every running
// sequence has the pages of its next token: a draft is kept only where its pages are
// free as well (it never preempts anyone). With a draft model this only says how many
// tokens each may draft (spec_k): the draft model runs outside the lock (draft_by_model()).
void Engine::Impl::draft() {
    PageTable& pages = runner->pages();
    for (auto& up : running) {
        Sequence& s = *up;
        s.drafts.clear();
        s.draft_q.clear();
        s.spec_k = 0;
        if (opt.spec_draft_max <= 0 || s.n_prompt_done < s.n_target || s.next < 0 || s.matcher ||
            !s.req.logit_bias.empty() || s.req.logprobs || s.req.top_logprobs > 0 || s.req.embed != Pooling::NONE)
            continue;
        const int room = pages.n_cells() - static_cast<int>(s.history.size());
        const int k = std::min({opt.spec_draft_max, s.req.max_tokens - s.n_generated - 1, room});
        if (k <= 0) continue;
        if (drafter) {
            s.spec_k = k;
            continue;
        }
        if (!s.ngram) s.ngram = std::make_unique<NgramDraft>(opt.spec_ngram_min, opt.spec_ngram_max);
        s.drafts = s.ngram->draft(s.history, k);
        if (static_cast<int>(s.drafts.size()) < opt.spec_draft_min) s.drafts.clear();
        const int need = static_cast<int>(s.history.size() + s.drafts.size());
        if (!s.drafts.empty() && (!pages.can_reserve(s.slot, need) || !pages.reserve(s.slot, need))) s.drafts.clear();
    }
}

// The draft model's drafts for the sequences draft() chose, all of them batched
// (runtime/engine_draft.h); each kept where it is long enough (spec_draft_min) and the
// target's pages for it are free. Runs on the engine thread outside the lock (only
// this thread touches running sequences' drafting state and the page tables). False
// when the draft's forward pass failed (every request has been ended).
bool Engine::Impl::draft_by_model() {
    std::vector<DraftJob> jobs;
    std::vector<Sequence*> seqs;
    for (auto& up : running) {
        Sequence& s = *up;
        if (s.spec_k <= 0 || s.cancelled) continue;
        DraftJob j;
        j.slot = s.slot;
        j.text = &s.history;
        j.k = s.spec_k;
        j.sampler = s.sampler.get();
        j.cached = &s.draft_cached;
        j.draft_sampler = &s.draft_sampler;
        j.drafts = &s.drafts;
        j.q = &s.draft_q;
        jobs.push_back(j);
        seqs.push_back(&s);
    }
    if (jobs.empty()) return true;
    try {
        drafter->draft(jobs);
    } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lk(mu);
        for (auto& s : running) {
            release(*s);
            finish(*s, FinishReason::ERROR, std::string("draft model: ") + e.what());
        }
        running.clear();
        st.running = 0;
        return false;
    }
    PageTable& pages = runner->pages();
    for (Sequence* s : seqs) {
        s->spec_k = 0;
        const int need = static_cast<int>(s->history.size() + s->drafts.size());
        if (static_cast<int>(s->drafts.size()) < std::max(1, opt.spec_draft_min) || !pages.can_reserve(s->slot, need) ||
            !pages.reserve(s->slot, need)) {
            s->drafts.clear();
            s->draft_q.clear();
        }
    }
    return true;
}

// A speculating sequence's rows: the target's pick after `next` and after each drafted
// token (ids, or logits to sample from). Drafted tokens are kept while the pick agrees
// (greedy; with sampling, by the acceptance rule of runtime/spec_accept.h), then one
// token of the target's own; each is emitted as a one-token step would. The cells of
// the drafts not kept are written over by the next step (attention reads only the
// positions up to each query's own, and only whole pages below the emitted tokens are
// published).
void Engine::Impl::verify(Sequence& s, const int32_t* ids, const float* logits, int V, uint64_t& window_tokens) {
    const std::vector<int32_t> drafts = std::move(s.drafts);
    const std::vector<TokenDist> q_model = std::move(s.draft_q);  // the draft model's (sampled)
    s.drafts.clear();
    s.draft_q.clear();
    size_t kept = 0;
    for (size_t j = 0; j <= drafts.size(); ++j) {
        const float* l = logits ? logits + j * static_cast<size_t>(V) : nullptr;
        int32_t tok = ids ? ids[j] : -1;
        if (!ids && (j == drafts.size() || s.sampler->params().temperature <= 0)) {
            tok = s.sampler->sample(l, V, s.history);
        } else if (!ids) {
            s.sampler->distribution(l, V, s.history, spec_p.ids, spec_p.p);
            // Prompt lookup's draft is certain: q is 1 at the drafted token.
            TokenDist lookup;
            if (j >= q_model.size()) lookup.one_hot(drafts[j]);
            tok = spec_accept(spec_p, j < q_model.size() ? q_model[j] : lookup, drafts[j], s.sampler->rng()).token;
        }
        const bool agrees = j < drafts.size() && tok == drafts[j];
        kept += agrees;
        emit(s, tok, l, V, window_tokens);
        if (!agrees || s.cancelled) break;
    }
    st.spec_drafted += drafts.size();
    st.spec_accepted += kept;
}

}  // namespace glia
