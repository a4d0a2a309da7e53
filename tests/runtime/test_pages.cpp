// The page table as a prefix cache: reference counts, exact prefix matching, LRU eviction
// only when free pages run out, duplicate pages merged, checkpoints.
#include <gtest/gtest.h>

#include <numeric>

#include "runtime/pages.h"

using namespace glia;

namespace {

constexpr int B = 4;  // block size of these tests

std::vector<int32_t> seq(int n, int32_t first = 1) {
    std::vector<int32_t> t(n);
    std::iota(t.begin(), t.end(), first);
    return t;
}

// Reserves and "computes" n tokens in slot: publishes every whole page.
void fill(PageTable& pt, int slot, const std::vector<int32_t>& tokens) {
    ASSERT_TRUE(pt.reserve(slot, static_cast<int>(tokens.size())));
    pt.publish(slot, tokens.data(), static_cast<int>(tokens.size()), nullptr);
}

}  // namespace

TEST(PageTable, SharesTheLongestWholePagePrefixAndCountsReferences) {
    PageTable pt(64, B, 3);
    const auto a = seq(10);  // pages [1..4] [5..8], partial [9 10]
    fill(pt, 0, a);
    EXPECT_EQ(pt.pages_used(), 3);
    // Same first 9 tokens, then different: two whole pages shared.
    auto b = a;
    b[9] = 77;
    EXPECT_EQ(pt.share_prefix(1, b.data(), 9, false), 8);
    EXPECT_EQ(pt.page(1, 0), pt.page(0, 0));
    EXPECT_EQ(pt.page(1, 1), pt.page(0, 1));
    EXPECT_EQ(pt.refs(pt.page(0, 0)), 2);
    ASSERT_TRUE(pt.reserve(1, 12));
    EXPECT_NE(pt.page(1, 2), pt.page(0, 2));
    EXPECT_EQ(pt.pages_used(), 4);
    // The attention kernels see the shared page ids in both rows of the table.
    const int32_t* t = pt.tensor().ptr<int32_t>();
    EXPECT_EQ(t[0], t[pt.n_pages()]);
    // A divergence inside the first page shares nothing.
    auto c = a;
    c[2] = 99;
    EXPECT_EQ(pt.share_prefix(2, c.data(), 10, false), 0);
    // Releasing keeps published pages cached (not free) and drops the references.
    pt.release(0);
    EXPECT_EQ(pt.refs(pt.page(1, 0)), 1);
    EXPECT_EQ(pt.pages_cached(), 0);  // a's pages 0 and 1 are still held by slot 1; page 2 was never whole
    pt.release(1);
    EXPECT_EQ(pt.pages_used(), 0);
    EXPECT_EQ(pt.pages_cached(), 2);
    EXPECT_EQ(pt.pages_available(), pt.n_pages());
}

TEST(PageTable, MatchesTokensExactlyUnderTheSameParentOnly) {
    PageTable pt(64, B, 2);
    // Two sequences whose second pages are equal but whose first pages differ.
    std::vector<int32_t> a = {1, 2, 3, 4, 9, 9, 9, 9, 5};
    std::vector<int32_t> b = {1, 2, 3, 5, 9, 9, 9, 9, 5};
    fill(pt, 0, a);
    pt.release(0);
    EXPECT_EQ(pt.share_prefix(1, b.data(), 9, false), 0);
    pt.release(1);
    EXPECT_EQ(pt.share_prefix(1, a.data(), 9, false), 8);
    pt.release(1);
    // Only whole pages within n are shared.
    EXPECT_EQ(pt.share_prefix(1, a.data(), 7, false), 4);
}

TEST(PageTable, EvictsLeastRecentlyUsedOnlyWhenFreePagesRunOut) {
    PageTable pt(8 * B, B, 2);  // 8 pages
    const auto a = seq(2 * B, 100), b = seq(2 * B, 200), c = seq(2 * B, 300);
    fill(pt, 0, a);
    pt.release(0);
    fill(pt, 0, b);
    pt.release(0);
    EXPECT_EQ(pt.pages_cached(), 4);
    // 4 free pages remain: a reservation of 4 evicts nothing.
    const auto x = seq(4 * B, 500);
    fill(pt, 0, x);
    EXPECT_EQ(pt.evictions(), 0u);
    pt.release(0);  // now 8 cached, 0 free
    EXPECT_EQ(pt.share_prefix(1, a.data(), 2 * B, false), 2 * B);  // a is used again: newest
    pt.release(1);
    // Needs 2 pages: the least recently used are b's.
    fill(pt, 0, c);
    EXPECT_EQ(pt.evictions(), 2u);
    pt.release(0);
    EXPECT_EQ(pt.share_prefix(1, b.data(), 2 * B, false), 0);
    EXPECT_EQ(pt.share_prefix(0, a.data(), 2 * B, false), 2 * B);
    pt.release(0);
    pt.release(1);
    EXPECT_EQ(pt.share_prefix(1, x.data(), 4 * B, false), 4 * B);
    pt.release(1);
    // The next eviction takes the least recently used sequence's tail page first (c's).
    fill(pt, 0, seq(B, 700));
    EXPECT_EQ(pt.evictions(), 3u);
    pt.release(0);
    EXPECT_EQ(pt.share_prefix(1, c.data(), 2 * B, false), B);
    pt.release(1);
    // Refused (nothing changed) when even eviction cannot give enough pages.
    ASSERT_TRUE(pt.reserve(0, 7 * B));
    EXPECT_FALSE(pt.reserve(1, 2 * B));
    EXPECT_EQ(pt.capacity(1), 0);
    pt.release(0);
}

TEST(PageTable, EvictionTakesTailPagesFirstAndClearDropsTheCache) {
    PageTable pt(3 * B, B, 1);
    const auto a = seq(3 * B);
    fill(pt, 0, a);
    pt.release(0);
    EXPECT_EQ(pt.pages_cached(), 3);
    fill(pt, 0, seq(B, 900));  // evicts a's last page (the oldest)
    EXPECT_EQ(pt.evictions(), 1u);
    pt.release(0);
    EXPECT_EQ(pt.share_prefix(0, a.data(), 3 * B, false), 2 * B);
    pt.release(0);
    pt.clear_cache();
    EXPECT_EQ(pt.pages_cached(), 0);
    EXPECT_EQ(pt.share_prefix(0, a.data(), 3 * B, false), 0);
}

TEST(PageTable, PagesComputedTwiceAreMerged) {
    PageTable pt(64, B, 2);
    const auto a = seq(2 * B + 1);
    ASSERT_TRUE(pt.reserve(0, 2 * B + 1));
    ASSERT_TRUE(pt.reserve(1, 2 * B + 1));
    pt.publish(0, a.data(), 2 * B + 1, nullptr);
    EXPECT_EQ(pt.pages_used(), 6);
    pt.publish(1, a.data(), 2 * B + 1, nullptr);
    EXPECT_EQ(pt.page(1, 0), pt.page(0, 0));
    EXPECT_EQ(pt.page(1, 1), pt.page(0, 1));
    EXPECT_NE(pt.page(1, 2), pt.page(0, 2));
    EXPECT_EQ(pt.pages_used(), 4);
    EXPECT_EQ(pt.tensor().ptr<int32_t>()[pt.n_pages() + 1], pt.page(0, 1));
}

TEST(PageTable, PrefixesEndAtCheckpointsWhenAsked) {
    PageTable pt(64, B, 2);
    const auto a = seq(3 * B + 1);
    ASSERT_TRUE(pt.reserve(0, 3 * B + 1));
    const std::vector<uint8_t> at1 = {1, 2, 3};
    pt.publish(0, a.data(), B, &at1);          // a step ended at the first page's end
    pt.publish(0, a.data(), 3 * B + 1, &at1);  // a step ended mid-page: no checkpoint
    EXPECT_EQ(pt.share_prefix(1, a.data(), 3 * B, true), B);
    ASSERT_NE(pt.checkpoint_before(1, B), nullptr);
    EXPECT_EQ(*pt.checkpoint_before(1, B), at1);
    pt.release(1);
    EXPECT_EQ(pt.share_prefix(1, a.data(), 3 * B, false), 3 * B);
    EXPECT_EQ(pt.checkpoint_before(1, 3 * B), nullptr);
}

TEST(PageTable, SharingIntoAnOccupiedSlotIsAnError) {
    PageTable pt(64, B, 1);
    const auto a = seq(B);
    ASSERT_TRUE(pt.reserve(0, B));
    EXPECT_THROW(pt.share_prefix(0, a.data(), B, false), std::exception);
}
