//===- fp4_mma_layout_test.cpp - E2M1 codes and sm_120a MMA fragments on the CPU -===//
//
// runtime/src/base/fp4_mma_layout.h, which tc's sm_120a FP4 GEMM loads its
// fragments with (runtime/src/cuda/kernels/fp4_gemm.cu) and which cannot
// run here or on the H200: the E2M1 / E8M0 / E4M3 codes against
// float_format's, the fragment positions against entries worked out by
// hand from the PTX ISA's formulas ("Matrix Fragments for mma.m16n8k64")
// and as bijections onto the tiles, the scale selectors ("Block Scaling for
// mma.sync": each row of scale_A / column of scale_B supplied by exactly
// one lane for every thread-id), and cuBLASLt's 128x4 scale layout's
// offsets at hand-picked points.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <set>
#include <utility>

#include <gtest/gtest.h>

#include "runtime/src/base/float_format.h"
#include "runtime/src/base/fp4_math.h"
#include "runtime/src/base/fp4_mma_layout.h"
#include "runtime/src/schema/block_scale_layout.h"

namespace tc::rt::fp4 {
namespace {

TEST(Fp4MmaLayout, E2M1CodesAreFloat4E2M1Bits) {
  for (int c = 0; c < 16; ++c) {
    double v = e2m1Value(static_cast<uint8_t>(c));
    EXPECT_EQ(v, decodeFloat(static_cast<uint64_t>(c), DType::F4E2M1FN)) << c;
    EXPECT_EQ(std::signbit(v), c >= 8) << c;
    EXPECT_EQ(e2m1Code(v), c) << v;
    // roundE2M1's results are grid values: their codes round-trip.
    EXPECT_EQ(e2m1Code(roundE2M1(v, -1.0)), c) << v;
  }
  EXPECT_EQ(e2m1Code(roundE2M1(NAN, -1.0)), 7); // NaN saturates to +6
}

TEST(Fp4MmaLayout, ScaleBytes) {
  for (int b = 0; b < 256; ++b) {
    double e4 = e4m3Value(static_cast<uint8_t>(b));
    double want = decodeFloat(static_cast<uint64_t>(b), DType::F8E4M3FN);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(e4)) << b;
    else
      EXPECT_EQ(e4, want) << b;
    double e8 = e8m0Value(static_cast<uint8_t>(b));
    if (b == 255) {
      EXPECT_TRUE(std::isnan(e8));
      EXPECT_EQ(e8m0Code(e8), 255);
    } else {
      EXPECT_EQ(e8, std::ldexp(1.0, b - 127)) << b;
      EXPECT_EQ(e8m0Code(e8), b);
      EXPECT_EQ(e8, decodeFloat(static_cast<uint64_t>(b), DType::F8E8M0FNU)) << b;
      if (b <= 252) // amax 2^(e + 2) (finite in f32) has the scale 2^e
        EXPECT_EQ(e8m0Code(mxScaleInv(static_cast<float>(e8 * 4), kE2M1Emax)), b) << b;
    }
  }
}

// Entries of the ISA's formulas, by hand: groupID = lane >> 2, t = lane % 4.
TEST(Fp4MmaLayout, FragmentsMatchTheIsaTables) {
  auto eq = [](MmaPos p, int row, int col) { return p.row == row && p.col == col; };
  // A: lane 0's a0, a7, a8, a16, a24; lane 5 (g 1, t 1): a3 row g col 8 + 3,
  // a19 col 8 + 3 + 32, a27 row g + 8; lane 31 (g 7, t 3): a31.
  EXPECT_TRUE(eq(mmaAPos(0, 0), 0, 0));
  EXPECT_TRUE(eq(mmaAPos(0, 7), 0, 7));
  EXPECT_TRUE(eq(mmaAPos(0, 8), 8, 0));
  EXPECT_TRUE(eq(mmaAPos(0, 16), 0, 32));
  EXPECT_TRUE(eq(mmaAPos(0, 24), 8, 32));
  EXPECT_TRUE(eq(mmaAPos(5, 3), 1, 11));
  EXPECT_TRUE(eq(mmaAPos(5, 19), 1, 43));
  EXPECT_TRUE(eq(mmaAPos(5, 27), 9, 43));
  EXPECT_TRUE(eq(mmaAPos(31, 31), 15, 63));
  // B (k, n): lane 6 (g 1, t 2): b0 row 16, b9 row 16 + 1 + 32; lane 31: b15.
  EXPECT_TRUE(eq(mmaBPos(6, 0), 16, 1));
  EXPECT_TRUE(eq(mmaBPos(6, 9), 49, 1));
  EXPECT_TRUE(eq(mmaBPos(31, 15), 63, 7));
  // C (row, n): lane 7 (g 1, t 3): c0 (1, 6), c3 (9, 7).
  EXPECT_TRUE(eq(mmaCPos(7, 0), 1, 6));
  EXPECT_TRUE(eq(mmaCPos(7, 3), 9, 7));
}

TEST(Fp4MmaLayout, FragmentsCoverTheirTilesOnce) {
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 32; ++i) {
      MmaPos p = mmaAPos(lane, i);
      EXPECT_TRUE(p.row >= 0 && p.row < kMmaM && p.col >= 0 && p.col < kMmaK);
      a.insert({p.row, p.col});
      // A register's 8 nibbles are 8 consecutive K elements of one row (one
      // 32-bit load of the packed row, element 0 in the low nibble).
      MmaPos first = mmaAPos(lane, i / 8 * 8);
      EXPECT_TRUE(p.row == first.row && p.col == first.col + i % 8);
      EXPECT_EQ(first.col % 8, 0);
    }
    for (int i = 0; i < 16; ++i) {
      MmaPos p = mmaBPos(lane, i);
      EXPECT_TRUE(p.row >= 0 && p.row < kMmaK && p.col >= 0 && p.col < kMmaN);
      b.insert({p.row, p.col});
      MmaPos first = mmaBPos(lane, i / 8 * 8);
      EXPECT_TRUE(p.col == first.col && p.row == first.row + i % 8);
    }
    for (int i = 0; i < 4; ++i) {
      MmaPos p = mmaCPos(lane, i);
      c.insert({p.row, p.col});
    }
  }
  EXPECT_EQ(a.size(), size_t(kMmaM * kMmaK));
  EXPECT_EQ(b.size(), size_t(kMmaK * kMmaN));
  EXPECT_EQ(c.size(), size_t(kMmaM * kMmaN));
}

TEST(Fp4MmaLayout, ScaleSelectors) {
  for (int tid = 0; tid < 2; ++tid) {
    std::multiset<int> rows;
    for (int lane = 0; lane < 32; ++lane) {
      int r = mmaScaleARow(lane, tid);
      if (r >= 0) {
        rows.insert(r);
        EXPECT_EQ((lane & 3) >> 1, tid) << "the thread pair thread-id-a names";
        EXPECT_EQ(r % 8, lane >> 2) << "a lane supplies rows of its own group";
      }
    }
    EXPECT_EQ(rows.size(), 16u);
    for (int r = 0; r < 16; ++r)
      EXPECT_EQ(rows.count(r), 1u) << r;
  }
  EXPECT_EQ(mmaScaleARow(0, 0), 0);
  EXPECT_EQ(mmaScaleARow(1, 0), 8);
  EXPECT_EQ(mmaScaleARow(2, 0), -1);
  EXPECT_EQ(mmaScaleARow(14, 1), 3);
  EXPECT_EQ(mmaScaleARow(15, 1), 11);
  for (int tid = 0; tid < 4; ++tid) {
    std::multiset<int> cols;
    for (int lane = 0; lane < 32; ++lane)
      if (int n = mmaScaleBCol(lane, tid); n >= 0) {
        cols.insert(n);
        EXPECT_EQ(lane & 3, tid);
      }
    EXPECT_EQ(cols.size(), 8u);
    for (int n = 0; n < 8; ++n)
      EXPECT_EQ(cols.count(n), 1u) << n;
  }
  // scale_vec::2X: byte-id 0 -> bytes 0, 1; byte-id 2 -> bytes 2, 3.
  EXPECT_EQ(mmaScaleByte(0, 0), 0);
  EXPECT_EQ(mmaScaleByte(0, 1), 1);
  EXPECT_EQ(mmaScaleByte(2, 0), 2);
  EXPECT_EQ(mmaScaleByte(2, 1), 3);
}

// cuBLASLt's 128x4 layout at hand-picked points, and 4 consecutive scale
// columns of a row as one aligned word (what fp4_gemm.cu loads).
TEST(Fp4MmaLayout, BlockScaleLayout) {
  const int64_t kBlocks = 10; // 3 tiles of 4 columns per 128-row band
  EXPECT_EQ(blockScaleOffset(0, 0, kBlocks), 0);
  EXPECT_EQ(blockScaleOffset(0, 1, kBlocks), 1);
  EXPECT_EQ(blockScaleOffset(1, 0, kBlocks), 16);
  EXPECT_EQ(blockScaleOffset(32, 0, kBlocks), 4);
  EXPECT_EQ(blockScaleOffset(127, 3, kBlocks), 31 * 16 + 3 * 4 + 3);
  EXPECT_EQ(blockScaleOffset(0, 4, kBlocks), 512);
  EXPECT_EQ(blockScaleOffset(128, 0, kBlocks), 3 * 512);
  EXPECT_EQ(blockScaleLayoutBytes(129, kBlocks), 256 * 12);
  for (int64_t r : {0, 5, 77, 130})
    for (int64_t c = 0; c < 12; c += 4) {
      int64_t base = blockScaleOffset(r, c, kBlocks);
      EXPECT_EQ(base % 4, 0);
      for (int64_t j = 1; j < 4; ++j)
        EXPECT_EQ(blockScaleOffset(r, c + j, kBlocks), base + j);
    }
}

} // namespace
} // namespace tc::rt::fp4
