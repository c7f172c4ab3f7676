//===- block_scale_layout_test.cpp - cuBLASLt's 1D block-scale layout -----===//
//
// blockScaleOffset / blockScaleLayoutBytes (runtime/src/schema/
// block_scale_layout.h) against the cuBLAS documentation's "1D Block Scaling
// Factors Layout": hand-worked offsets of small cases, and on padded shapes
// that every scale has its own byte inside the layout.
//
//===----------------------------------------------------------------------===//
#include <set>

#include <gtest/gtest.h>

#include "runtime/src/schema/block_scale_layout.h"

namespace tc::rt {
namespace {

// Tests the offsets of one 128x4 tile and of the tiles around it, worked by
// hand from the documented formula (r % 32) * 16 + ((r % 128) / 32) * 4 +
// c % 4 inside a tile, tiles of 512 bytes with K fastest.
TEST(BlockScaleLayout, DocumentedOffsets) {
  EXPECT_EQ(blockScaleOffset(0, 0, 1), 0);
  EXPECT_EQ(blockScaleOffset(0, 3, 4), 3);    // the 4 scales of a row are contiguous
  EXPECT_EQ(blockScaleOffset(1, 0, 4), 16);   // the next row: the next 16-byte line
  EXPECT_EQ(blockScaleOffset(31, 2, 4), 498); // 31 * 16 + 2
  EXPECT_EQ(blockScaleOffset(32, 0, 4), 4);   // row 32 shares line 0, group 1
  EXPECT_EQ(blockScaleOffset(97, 1, 4), 1 * 16 + 3 * 4 + 1);
  EXPECT_EQ(blockScaleOffset(127, 3, 4), 511); // the tile's last byte
  // Scale column 4 starts the band's second tile; row 128 the second band,
  // after roundup(kBlocks, 4) / 4 tiles of the first.
  EXPECT_EQ(blockScaleOffset(0, 4, 6), 512);
  EXPECT_EQ(blockScaleOffset(5, 5, 6), 512 + 5 * 16 + 1);
  EXPECT_EQ(blockScaleOffset(128, 0, 6), 2 * 512);
  EXPECT_EQ(blockScaleOffset(128, 0, 3), 512);
  EXPECT_EQ(blockScaleOffset(300, 9, 12), 2 * 3 * 512 + 2 * 512 + 12 * 16 + 1 * 4 + 1);
}

// Tests the padded sizes: rows to 128, scale columns to 4.
TEST(BlockScaleLayout, PaddedBytes) {
  EXPECT_EQ(blockScaleLayoutBytes(1, 1), 128 * 4);
  EXPECT_EQ(blockScaleLayoutBytes(128, 4), 128 * 4);
  EXPECT_EQ(blockScaleLayoutBytes(129, 5), 256 * 8);
  EXPECT_EQ(blockScaleLayoutBytes(768, 24), 768 * 24); // gpt2's 768 x 768 in 1x32 blocks
  EXPECT_EQ(blockScaleLayoutBytes(0, 3), 0);
}

// Tests that the layout is one-to-one: every (r, c) of the padded matrix has
// its own byte, below the layout's size, for shapes with partial tiles.
TEST(BlockScaleLayout, EveryScaleHasItsOwnByte) {
  for (auto [outer, kBlocks] : {std::pair<int64_t, int64_t>{1, 1}, {37, 3}, {128, 4}, {200, 6},
                                {257, 13}}) {
    int64_t bytes = blockScaleLayoutBytes(outer, kBlocks);
    int64_t rows = (outer + 127) / 128 * 128, cols = (kBlocks + 3) / 4 * 4;
    std::set<int64_t> seen;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        int64_t o = blockScaleOffset(r, c, kBlocks);
        ASSERT_GE(o, 0);
        ASSERT_LT(o, bytes) << outer << "x" << kBlocks << " (" << r << ", " << c << ")";
        ASSERT_TRUE(seen.insert(o).second) << outer << "x" << kBlocks << " (" << r << ", " << c
                                           << ")";
      }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), bytes);
  }
}

} // namespace
} // namespace tc::rt
