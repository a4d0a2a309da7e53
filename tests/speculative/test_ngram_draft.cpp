// Prompt lookup: the tokens that followed the most recent earlier occurrence of the
// text's longest matching end.
#include <gtest/gtest.h>

#include "runtime/ngram_draft.h"

using glia::NgramDraft;
using V = std::vector<int32_t>;

TEST(NgramDraft, DraftsWhatFollowedTheLastOccurrence) {
    NgramDraft d(1, 3);
    // The end "6 7" occurred twice before; the later occurrence (followed by 9 9) wins.
    const V text{5, 6, 7, 8, 1, 5, 6, 7, 9, 9, 2, 6, 7};
    EXPECT_EQ(d.draft(text, 8), (V{9, 9, 2, 6, 7}));
    EXPECT_EQ(d.draft(text, 2), (V{9, 9}));
    EXPECT_TRUE(d.draft(text, 0).empty());
}

TEST(NgramDraft, LongerMatchWinsOverRecentShorterOne) {
    NgramDraft d(1, 3);
    // The end "1 2 3" occurred at the start (then 4); "3" alone occurred later (then 0).
    EXPECT_EQ(d.draft(V{1, 2, 3, 4, 7, 3, 0, 1, 2, 3}, 1), (V{4}));
    NgramDraft only1(1, 1);
    EXPECT_EQ(only1.draft(V{1, 2, 3, 4, 7, 3, 0, 1, 2, 3}, 1), (V{0}));
}

TEST(NgramDraft, NoMatchGivesNothing) {
    NgramDraft d(2, 4);
    EXPECT_TRUE(d.draft(V{1, 2, 3, 4, 5}, 4).empty());
    EXPECT_TRUE(d.draft(V{1}, 4).empty());
    EXPECT_TRUE(d.draft(V{}, 4).empty());
}

TEST(NgramDraft, GrowingTextIsIndexedAsItGrows) {
    NgramDraft inc(1, 3);
    V text{3, 1, 4, 1, 5};
    for (int32_t t : {9, 2, 6, 5, 3, 1, 4}) {
        text.push_back(t);
        NgramDraft fresh(1, 3);
        EXPECT_EQ(inc.draft(text, 5), fresh.draft(text, 5)) << "after " << text.size() << " tokens";
    }
    EXPECT_EQ(inc.draft(text, 3), (V{1, 5, 9}));  // ... 3 1 4 | 1 5 9
    // A different (shorter) text starts over.
    EXPECT_EQ(inc.draft(V{8, 8, 8}, 2), (V{8}));
}
