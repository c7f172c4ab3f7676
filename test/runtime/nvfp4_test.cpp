//===- nvfp4_test.cpp - NVFP4 quantization of the CPU reference -----------===//
//
// quantizeNvfp4 and roundE2M1 (runtime/src/cpu/quantize.cpp) against values
// worked out by hand from Transformer Engine's NVFP4 recipe, step by step in
// f32: S_enc = 448 * 6 / amax, S_dec_b = e4m3(block_amax * (S_enc * f32(1/6))),
// encode = 1 / (S_dec_b * f32(1 / S_enc)), q = e2m1(x * encode).
//
//===----------------------------------------------------------------------===//
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/src/cpu/kernel.h"

namespace tc::rt::cpu {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

/// Element-wise equality that tells -0 from +0 and NaN equals NaN.
void expectSame(const std::vector<double> &got, const std::vector<double> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    if (std::isnan(want[k])) {
      EXPECT_TRUE(std::isnan(got[k])) << "element " << k;
      continue;
    }
    EXPECT_EQ(got[k], want[k]) << "element " << k;
    EXPECT_EQ(std::signbit(got[k]), std::signbit(want[k])) << "sign of element " << k;
  }
}

TEST(Nvfp4, TiesRoundToEvenAndSaturateAtSix) {
  // Tensor amax 6: S_enc = 2688 / 6 = 448; 6 * (448 * f32(1/6)) = 448.00003
  // rounds to the E4M3 scale 448; 448 * f32(1/448) is 1 in f32, so encode is
  // exactly 1 and the elements round as they are: the ties 0.25, 0.75, 1.25,
  // 1.75, 2.5, 3.5 and 5 go to the neighbour with an even significand.
  std::vector<double> x = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -5,
                           6,    -6,   0.3,  2.9,  5.5, -0.25, 0, 1};
  Nvfp4Tensor t = quantizeNvfp4(x, 1, 16, /*blocks2d=*/false);
  EXPECT_EQ(t.tensorEncode, 448.0f);
  EXPECT_EQ(t.tensorDecode, 1.0f / 448.0f);
  expectSame(t.blockScale, {448});
  expectSame(t.values, {0, 1, 1, 2, 2, 4, 4, -4, 6, -6, 0.5, 3, 6, -0.0, 0, 1});
}

TEST(Nvfp4, BlockScalesAreE4M3OfTheBlockAmax) {
  // Two 1x16 blocks of one row, amaxes 6 and 3, tensor amax 6 (S_enc 448):
  // the second block's S_dec_b is 3 * 74.66667 = 224.00002 -> 224, and
  // encode = 1 / (224 * f32(1/448)) = 2, so 3 -> 6 and 1.1 -> 2.2 -> 2.
  std::vector<double> x(32, 0.0);
  x[0] = 6;
  x[16] = 3;
  x[17] = 1.1;
  x[18] = -0.2; // -0.4 -> -0.5
  Nvfp4Tensor t = quantizeNvfp4(x, 1, 32, false);
  EXPECT_EQ(t.gridRows, 1);
  EXPECT_EQ(t.gridCols, 2);
  expectSame(t.blockScale, {448, 224});
  EXPECT_EQ(t.values[16], 6);
  EXPECT_EQ(t.values[17], 2);
  EXPECT_EQ(t.values[18], -0.5);
  // A small block's scale is rounded in E4M3: amax 0.01 -> 0.01 * 74.66667
  // = 0.7466667 -> 0.75 (E4M3 steps by 2^-4 in [0.5, 1)), encode
  // 1 / (0.75 / 448) = 597.3333, and 0.01 -> 5.97 -> 6.
  std::vector<double> y(32, 0.0);
  y[0] = 6;
  y[16] = 0.01;
  Nvfp4Tensor u = quantizeNvfp4(y, 1, 32, false);
  expectSame(u.blockScale, {448, 0.75});
  EXPECT_EQ(u.values[16], 6);
}

TEST(Nvfp4, ZeroBlocksAndZeroTensors) {
  // A zero block next to a non-zero one: S_dec_b = 0, encode = min(1/0,
  // FLT_MAX), and its elements stay zero (signs kept).
  std::vector<double> x(32, 0.0);
  x[0] = 6;
  x[17] = -0.0;
  Nvfp4Tensor t = quantizeNvfp4(x, 1, 32, false);
  expectSame(t.blockScale, {448, 0});
  EXPECT_EQ(t.values[16], 0);
  EXPECT_TRUE(std::signbit(t.values[17]));
  // An all-zero tensor: S_enc = 1 (not 2688 / 0).
  Nvfp4Tensor z = quantizeNvfp4(std::vector<double>(16, 0.0), 1, 16, false);
  EXPECT_EQ(z.tensorEncode, 1.0f);
  EXPECT_EQ(z.tensorDecode, 1.0f);
  expectSame(z.blockScale, {0});
  expectSame(z.values, std::vector<double>(16, 0.0));
}

TEST(Nvfp4, TinyAmax) {
  // amax 1e-30: S_enc = 2.688e33 (finite), the block scale is 448 and the
  // element encode scale 6e30, so 1e-30 -> 6 and 0.5e-30 -> 3.
  std::vector<double> x(16, 0.0);
  x[0] = static_cast<double>(1e-30f);
  x[1] = static_cast<double>(0.5e-30f);
  Nvfp4Tensor t = quantizeNvfp4(x, 1, 16, false);
  EXPECT_EQ(t.tensorEncode, 2688.0f / 1e-30f);
  expectSame(t.blockScale, {448});
  EXPECT_EQ(t.values[0], 6);
  EXPECT_EQ(t.values[1], 3);
  // An f32 subnormal amax 1e-40: 2688 / amax overflows, S_enc = FLT_MAX;
  // S_dec_b = e4m3(1e-40 * FLT_MAX / 6 = 0.00567) = 0.005859375 (3 * 2^-9);
  // S_dec_b * (1 / FLT_MAX) is subnormal and its reciprocal overflows to
  // FLT_MAX, so the element is 1e-40 * FLT_MAX = 0.034 -> 0: Transformer
  // Engine's recipe loses such a tensor, and so does the reference.
  std::vector<double> s(16, 0.0);
  s[0] = static_cast<double>(1e-40f);
  Nvfp4Tensor v = quantizeNvfp4(s, 1, 16, false);
  EXPECT_EQ(v.tensorEncode, FLT_MAX);
  expectSame(v.blockScale, {0.005859375});
  EXPECT_EQ(v.values[0], 0);
}

TEST(Nvfp4, NaNAndInf) {
  // An inf makes the tensor amax inf: S_enc = 2688 / inf = 0 -> 1. Its block
  // scale saturates at 448 (encode 1 / 448 in f32): inf -> 6, 448 * (1/448)
  // -> 1, and NaN, which counts for no amax, becomes +6 like every NaN
  // converted to E2M1 (no NaN in the format). The other block (amax 2):
  // S_dec_b = e4m3(2 / 6 = 0.33333) = 0.34375, encode 2.909091: 2 -> 5.8 -> 6.
  std::vector<double> x(32, 0.0);
  x[0] = kInf;
  x[1] = -kInf;
  x[2] = 448;
  x[3] = kNaN;
  x[16] = 2;
  x[17] = -1; // -2.909 -> -3
  Nvfp4Tensor t = quantizeNvfp4(x, 1, 32, false);
  EXPECT_EQ(t.tensorEncode, 1.0f);
  expectSame(t.blockScale, {448, 0.34375});
  expectSame({t.values[0], t.values[1], t.values[2], t.values[3]}, {6, -6, 1, 6});
  EXPECT_EQ(t.values[16], 6);
  EXPECT_EQ(t.values[17], -3);
}

TEST(Nvfp4, PartialBlocksAnd2DBlocks) {
  // 1 x 20 in 1x16 blocks: the last block has 4 elements (amax 3 -> 224).
  std::vector<double> x(20, 0.0);
  x[0] = 6;
  x[16] = 3;
  x[19] = -1.5; // * 2 = -3
  Nvfp4Tensor t = quantizeNvfp4(x, 1, 20, false);
  EXPECT_EQ(t.gridCols, 2);
  expectSame(t.blockScale, {448, 224});
  EXPECT_EQ(t.values[19], -3);
  // 17 x 17 in 16x16 blocks: a 2 x 2 grid; one amax per block, rows 0..15
  // sharing it (element (5, 3) in the amax-6 block, (16, 16) alone in its
  // block with amax 3, (16, 0) in a block of amax 1.5).
  int64_t n = 17;
  std::vector<double> w(n * n, 0.0);
  w[5 * n + 3] = 6;
  w[0 * n + 0] = 1.1;  // shares the amax-6 block: encode 1, 1.1 -> 1
  w[16 * n + 16] = 3;  // scale 224, -> 6
  w[16 * n + 0] = 1.5; // 1.5 * 74.66667 = 112.00001 -> 112, encode 4: -> 6
  Nvfp4Tensor b = quantizeNvfp4(w, n, n, /*blocks2d=*/true);
  EXPECT_EQ(b.blockRows, 16);
  EXPECT_EQ(b.gridRows, 2);
  EXPECT_EQ(b.gridCols, 2);
  expectSame(b.blockScale, {448, 0, 112, 224});
  EXPECT_EQ(b.values[0], 1);
  EXPECT_EQ(b.values[5 * n + 3], 6);
  EXPECT_EQ(b.values[16 * n + 16], 6);
  EXPECT_EQ(b.values[16 * n + 0], 6);
}

TEST(Nvfp4, BlockTimesValueIsExactInBf16) {
  // The emulating GEMM's operand values * blockScale must be a BF16 value:
  // at most 8 significant bits (E2M1: 2, E4M3: 4).
  std::vector<double> x;
  for (int k = 0; k < 64; ++k)
    x.push_back(std::sin(k * 0.7) * std::pow(2.0, k % 9 - 4));
  Nvfp4Tensor t = quantizeNvfp4(x, 4, 16, false);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 16; ++j) {
      double p = t.values[i * 16 + j] * t.blockScale[i];
      int e;
      double m = std::frexp(p, &e);
      EXPECT_EQ(std::ldexp(m, 8), std::trunc(std::ldexp(m, 8))) << p;
    }
}

TEST(Nvfp4, StochasticRoundingOfE2M1) {
  // 2.25 lies between 2 and 3 (step 1): up with probability 0.25.
  double u = 0.2;
  EXPECT_EQ(roundE2M1(2.25, &u), 3);
  u = 0.25;
  EXPECT_EQ(roundE2M1(2.25, &u), 2);
  u = 0.9;
  EXPECT_EQ(roundE2M1(-0.3, &u), -0.0); // 0.3 between 0 and 0.5: p = 0.6
  u = 0.5;
  EXPECT_EQ(roundE2M1(-0.3, &u), -0.5);
  u = 0.999;
  EXPECT_EQ(roundE2M1(4, &u), 4); // representable values never move
  EXPECT_EQ(roundE2M1(7, &u), 6);
  EXPECT_EQ(roundE2M1(-kInf, &u), -6);
  EXPECT_EQ(roundE2M1(kNaN, &u), 6);
  EXPECT_EQ(roundE2M1(2.5), 2); // no draw: nearest even
}

TEST(Nvfp4, StochasticRoundingIsUnbiased) {
  // At least 2^16 copies of v, 15 in each 1x16 block after a 6 that makes
  // the block's encode scale 1 (see the first test): the mean of their
  // stochastic roundings is within 3 sigma of v, sigma = step * sqrt(p (1 -
  // p) / n) for the Bernoulli choice between the neighbours lo and lo +
  // step, p = (|v| - lo) / step.
  const int64_t blocks = ((1 << 16) + 14) / 15, cols = 16 * blocks, n = 15 * blocks;
  struct Case {
    double v, lo, step;
  };
  for (Case c : {Case{2.25, 2, 1}, Case{-0.3, 0, 0.5}, Case{4.9, 4, 2}, Case{1.1, 1, 0.5}}) {
    std::vector<double> x(cols, c.v);
    for (int64_t k = 0; k < cols; k += 16)
      x[k] = 6;
    std::vector<double> u = stochasticDraws(/*seed=*/7, /*stream=*/11, /*step=*/3, cols);
    Nvfp4Tensor t = quantizeNvfp4(x, 1, cols, false, &u);
    double sum = 0;
    for (int64_t k = 0; k < cols; ++k) {
      if (k % 16 == 0)
        continue;
      double a = std::fabs(t.values[k]), lo = std::fabs(c.lo);
      EXPECT_TRUE(a == lo || a == lo + c.step) << c.v << " -> " << t.values[k];
      sum += t.values[k];
    }
    double p = (std::fabs(c.v) - std::fabs(c.lo)) / c.step;
    double sigma = c.step * std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(sum / n, c.v, 3 * sigma) << c.v;
  }
  // The draws are a pure function of (seed, stream, step, index).
  std::vector<double> a = stochasticDraws(7, 11, 3, 8), b = stochasticDraws(7, 11, 4, 8);
  EXPECT_EQ(a, stochasticDraws(7, 11, 3, 8));
  EXPECT_NE(a, b);
  EXPECT_EQ(stochasticDraws(7, 11, 3, 4), std::vector<double>(a.begin(), a.begin() + 4));
}

} // namespace
} // namespace tc::rt::cpu
