//===- library_abi_test.cpp - the library-call ABI table ------------------===//
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "runtime/src/schema/library_abi.h"

namespace tc::rt {
namespace {

// Tests that the table names every callee once, gives scratch launchers a
// last output named "scratch", and that has_* conditions name Bool attributes
// of the callee.
TEST(LibraryAbi, TableIsConsistent) {
  std::set<std::string> names;
  for (const LibraryCallee &c : libraryCallees()) {
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
    EXPECT_EQ(findLibraryCallee(c.name), &c);
    ASSERT_FALSE(c.outputs.empty()) << c.name;
    EXPECT_EQ(c.scratchBytes != nullptr, std::string(c.outputs.back().name) == "scratch")
        << c.name;
    for (const auto *list : {&c.inputs, &c.outputs})
      for (const LibraryOperandSpec &o : *list)
        if (o.presentIf) {
          const LibraryAttrSpec *a = c.findAttr(o.presentIf);
          ASSERT_NE(a, nullptr) << c.name << " " << o.name;
          EXPECT_EQ(a->kind, LibraryAttrKind::Bool) << c.name << " " << o.name;
        }
  }
  EXPECT_EQ(findLibraryCallee("flash_attention"), nullptr);
  EXPECT_EQ(libraryCalleeNames().rfind("softmax_fwd, layer_norm_fwd", 0), 0u);
}

// Tests the scratch formulas against hand-computed sizes.
TEST(LibraryAbi, ScratchBytes) {
  EXPECT_EQ(normBackwardScratchBytes(130, 8), 2u * 3 * 8 * 4); // ceil(130 / 64) = 3 chunks
  EXPECT_EQ(normBackwardScratchBytes(130, 8, /*colSum=*/true), 3u * 3 * 8 * 4);
  EXPECT_EQ(normBackwardScratchBytes(0, 8), 0u);
  EXPECT_EQ(crossEntropyScratchBytes(32), (64u + 32) * 4);
  EXPECT_EQ(crossEntropyScratchBytes(-1), 64u * 4);
  // 1000 tokens: 2 chunks of 512; vocab 100 -> 200 counts -> 256, 2 * 128, 1024.
  EXPECT_EQ(embeddingBackwardScratchBytes(1000, 100), (256u + 2 * 128 + 1024) * 4);
  EXPECT_EQ(embeddingBackwardScratchBytes(0, 100), 0u);
  EXPECT_EQ(attentionBackwardScratchBytes(2, 3, 5), 256u); // 30 floats in one granule
  EXPECT_EQ(attentionBackwardScratchBytes(0, 3, 5), 256u); // never 0
  // With the column sums: D (256 bytes), then 2 batches x [ceil(130 / 64) = 3
  // chunks x 4 heads x 64 + ceil(70 / 64) = 2 chunks x 2 kv heads x (64 + 32)]
  // floats = 2 * (768 + 384) * 4 = 9216 bytes (36 granules).
  EXPECT_EQ(attentionBackwardScratchBytes(2, 4, 2, 130, 70, 64, 32, false),
            attentionBackwardScratchBytes(2, 4, 130));
  EXPECT_EQ(attentionBackwardScratchBytes(2, 4, 2, 130, 70, 64, 32, true),
            attentionBackwardScratchBytes(2, 4, 130) + 9216u);
  EXPECT_EQ(findLibraryCallee("attention_bwd")
                ->scratchBytes({{"batch", 2}, {"heads", 4}, {"kv_heads", 2}, {"tq", 130},
                                {"tk", 70}, {"d", 64}, {"dv", 32}, {"has_col_sum", 1}}),
            attentionBackwardScratchBytes(2, 4, 130) + 9216u);
  // Head dim 128 without a key mask (causal only with tq == tk): then cuDNN's
  // backward workspace, [2, 4, 130, 130] bf16 + 16 MiB, after the column sums.
  const int64_t ws = 2 * 4 * 130 * 130 * 2 + (int64_t(16) << 20);
  EXPECT_EQ(attentionLibraryWorkspaceBytes(2, 4, 130, 130, 128, 128, false, true), ws);
  EXPECT_EQ(attentionLibraryWorkspaceBytes(2, 4, 130, 70, 128, 128, false, false),
            2 * 4 * 130 * 70 * 2 + (int64_t(16) << 20));
  EXPECT_EQ(attentionLibraryWorkspaceBytes(2, 4, 130, 70, 128, 128, false, true), 0);
  EXPECT_EQ(attentionLibraryWorkspaceBytes(2, 4, 130, 130, 128, 128, true, true), 0);
  EXPECT_EQ(attentionLibraryWorkspaceBytes(2, 4, 130, 130, 64, 64, false, true), 0);
  // The runtime's routing and the plan's workspace read one condition.
  EXPECT_TRUE(attentionBackwardOnLibrary(130, 130, 128, 128, false, true));
  EXPECT_TRUE(attentionBackwardOnLibrary(130, 70, 128, 128, false, false));
  EXPECT_FALSE(attentionBackwardOnLibrary(130, 70, 128, 128, false, true));
  EXPECT_FALSE(attentionBackwardOnLibrary(130, 130, 128, 128, true, true));
  EXPECT_FALSE(attentionBackwardOnLibrary(130, 130, 128, 64, false, true));
  EXPECT_FALSE(attentionBackwardOnLibrary(130, 130, 64, 64, false, true));
  // The ~1B step's 8 x 16 x 1024: 272 MiB; one of 32 heads at T = 4096 (1 GiB) is
  // past kMaxPlannedAttentionWorkspaceBytes: not planned.
  EXPECT_EQ(attentionLibraryWorkspaceBytes(8, 16, 1024, 1024, 128, 128, false, true),
            int64_t(272) << 20);
  EXPECT_EQ(attentionLibraryWorkspaceBytes(1, 32, 4096, 4096, 128, 128, false, true), 0);
  const AttentionScratchLayout l =
      attentionBackwardScratchLayout(2, 4, 2, 130, 130, 128, 128, true, false, true);
  const size_t sums128 = 2 * (3 * 4 * 128 + 3 * 2 * 256) * 4; // 15360: 60 granules
  EXPECT_EQ(l.colSums, attentionBackwardScratchBytes(2, 4, 130));
  EXPECT_EQ(l.libraryWorkspace, l.colSums + sums128);
  EXPECT_EQ(l.total, l.libraryWorkspace + (ws + 255) / 256 * 256);
  EXPECT_EQ(findLibraryCallee("attention_bwd")
                ->scratchBytes({{"batch", 2},
                                {"heads", 4},
                                {"kv_heads", 2},
                                {"tq", 130},
                                {"tk", 130},
                                {"d", 128},
                                {"dv", 128},
                                {"has_col_sum", 1},
                                {"causal", 1}}),
            l.total);
  EXPECT_EQ(findLibraryCallee("attention_bwd")
                ->scratchBytes({{"batch", 2},
                                {"heads", 4},
                                {"kv_heads", 2},
                                {"tq", 130},
                                {"tk", 130},
                                {"d", 128},
                                {"dv", 128},
                                {"has_col_sum", 1},
                                {"causal", 1},
                                {"has_key_mask", 1}}),
            l.libraryWorkspace);
  EXPECT_EQ(sumSquaresScratchBytes(), static_cast<size_t>(kMaxNormBlocks) * 4);
  const LibraryCallee *ce = findLibraryCallee("cross_entropy_fwd");
  ASSERT_NE(ce, nullptr);
  EXPECT_EQ(ce->scratchBytes({{"rows", 32}, {"cols", 256}}), 384u);
  EXPECT_EQ(findLibraryCallee("softmax_fwd")->scratchBytes, nullptr);
}

// Tests that has_* attributes and trailing groups place the operands.
TEST(LibraryAbi, Layout) {
  const LibraryCallee *ln = findLibraryCallee("layer_norm_fwd");
  ASSERT_NE(ln, nullptr);
  LibraryLayout l;
  // x, bias (no weight) -> y, mean, rstd.
  EXPECT_EQ(layoutLibraryCall(*ln, {{"has_bias", 1}}, 2, 3, &l), "");
  EXPECT_EQ(l.inputs, (std::vector<int>{0, -1, 1}));
  EXPECT_EQ(l.outputs, (std::vector<int>{0, 1, 2, -1}));
  // y only: mean and rstd come together or not at all.
  EXPECT_EQ(layoutLibraryCall(*ln, {}, 1, 1, &l), "");
  EXPECT_EQ(l.outputs, (std::vector<int>{0, -1, -1, -1}));
  EXPECT_EQ(layoutLibraryCall(*ln, {}, 1, 2, &l), "takes 1 or 3 outputs (has_amax = 0), got 2");
  // has_amax: the amax of y follows the statistics, with or without them.
  EXPECT_EQ(layoutLibraryCall(*ln, {{"has_amax", 1}}, 1, 4, &l), "");
  EXPECT_EQ(l.outputs, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(layoutLibraryCall(*ln, {{"has_amax", 1}}, 1, 2, &l), "");
  EXPECT_EQ(l.outputs, (std::vector<int>{0, -1, -1, 1}));
  // attention_bwd: the amax, then the column sums, before the scratch.
  const LibraryCallee *ab = findLibraryCallee("attention_bwd");
  ASSERT_NE(ab, nullptr);
  EXPECT_EQ(layoutLibraryCall(*ab, {{"has_amax", 1}, {"amax_of", 7}}, 6, 5, &l), "");
  EXPECT_EQ(l.outputs, (std::vector<int>{0, 1, 2, 3, -1, 4}));
  EXPECT_EQ(layoutLibraryCall(*ab, {}, 6, 4, &l), "");
  EXPECT_EQ(l.outputs, (std::vector<int>{0, 1, 2, -1, -1, 3}));
  EXPECT_EQ(layoutLibraryCall(*ab, {{"has_col_sum", 1}}, 6, 5, &l), "");
  EXPECT_EQ(l.outputs, (std::vector<int>{0, 1, 2, -1, 3, 4}));
  EXPECT_EQ(layoutLibraryCall(*ab, {{"has_amax", 1}, {"has_col_sum", 1}}, 6, 6, &l), "");
  EXPECT_EQ(l.outputs, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(layoutLibraryCall(*ln, {{"has_weight", 1}, {"has_bias", 1}}, 2, 1, &l),
            "takes 3 inputs (has_weight = 1, has_bias = 1), got 2");
  const LibraryCallee *sgd = findLibraryCallee("sgd");
  ASSERT_NE(sgd, nullptr);
  EXPECT_EQ(layoutLibraryCall(*sgd, {}, 5, 1, &l), "takes 2 to 4 inputs, got 5");
}

// Tests the attribute checks: required, kinds, sizes, unknown names.
TEST(LibraryAbi, Attributes) {
  const LibraryCallee &sm = *findLibraryCallee("softmax_fwd");
  using K = LibraryAttrKind;
  EXPECT_EQ(checkLibraryAttrs(sm, {{"rows", K::Int, 4}, {"cols", K::Int, 8}}, true), "");
  EXPECT_EQ(checkLibraryAttrs(sm, {{"rows", K::Int, 4}}, true),
            "needs the integer attribute 'cols'");
  EXPECT_EQ(checkLibraryAttrs(sm, {{"rows", K::Int, -4}, {"cols", K::Int, 8}}, true),
            "attribute 'rows' is negative (-4)");
  EXPECT_EQ(checkLibraryAttrs(sm, {{"rows", K::Int, 4}, {"cols", K::Float, 0}}, true),
            "attribute 'cols' is float, wants integer");
  // In the artifact a bool is an Int.
  EXPECT_EQ(
      checkLibraryAttrs(sm, {{"rows", K::Int, 4}, {"cols", K::Int, 8}, {"log", K::Int, 1}}, true),
      "");
  EXPECT_EQ(
      checkLibraryAttrs(sm, {{"rows", K::Int, 4}, {"cols", K::Int, 8}, {"lg", K::Int, 1}}, true),
      "has no attribute 'lg' (it takes rows, cols, log)");
  EXPECT_EQ(
      checkLibraryAttrs(sm, {{"rows", K::Int, 4}, {"cols", K::Int, 8}, {"lg", K::Int, 1}}, false),
      "");
}

} // namespace
} // namespace tc::rt
