// The GLIA_TRACE_ALLOC summary: layer numbers folded into groups, totals per kind.
#include <gtest/gtest.h>

#include "backend/alloc_summary.h"

namespace glia {
namespace {

TEST(AllocSummary, FoldsLayerNumbers) {
    EXPECT_EQ(purpose_group("blk.12.attn_q.weight"), "blk.*.attn_q.weight");
    EXPECT_EQ(purpose_group("blk.3.k_pages"), "blk.*.k_pages");
    EXPECT_EQ(purpose_group("token_embd.weight"), "token_embd.weight");
    EXPECT_EQ(purpose_group("op scratch"), "op scratch");
    EXPECT_EQ(purpose_group("q4_k.weight"), "q4_k.weight");  // digits inside a field stay
    EXPECT_EQ(purpose_group("7"), "*");
}

TEST(AllocSummary, TotalsPerKindAndGroup) {
    std::vector<AllocRecord> live = {
        {1 << 20, MemoryKind::WEIGHTS, "blk.0.attn_q.weight"},
        {1 << 20, MemoryKind::WEIGHTS, "blk.1.attn_q.weight"},
        {3 << 20, MemoryKind::WEIGHTS, "token_embd.weight"},
        {2 << 20, MemoryKind::STATE, "blk.0.k_pages"},
    };
    const std::string s = alloc_summary("cuda:0", live, size_t(10) << 20, size_t(80) << 20);
    EXPECT_NE(s.find("7.0 MiB in 4 allocations"), std::string::npos) << s;
    EXPECT_NE(s.find("x2     blk.*.attn_q.weight"), std::string::npos) << s;
    EXPECT_NE(s.find("10.0 MiB free of 80.0 MiB"), std::string::npos) << s;
    // Largest group first.
    EXPECT_LT(s.find("token_embd.weight"), s.find("blk.*.attn_q.weight")) << s;
}

}  // namespace
}  // namespace glia
