//===- ops_quantize_test.cpp - tc.quantize, tc.scaled_matmul ---------------===//
//
// The scaled narrow formats on the CPU reference, with values worked out by
// hand from the contract in TcOps.td (Transformer Engine's current scaling,
// OCP MX's E8M0 block scales, saturating round to nearest even).
//
//===----------------------------------------------------------------------===//
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>

#include "runtime/src/base/float_format.h"
#include "runtime/src/cpu/kernel.h"
#include "test_util.h"

namespace tc::rt {
namespace {

using namespace tc::rt::test;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

/// tc.quantize of `x` (f32, `shape`) into `elt` with `block`; returns
/// {result, scale_inv}.
std::vector<HostTensor> quantize(std::vector<int64_t> shape, std::vector<double> x, DType elt,
                                 std::vector<int64_t> block, DType scaleType = DType::F32,
                                 bool pow2 = false) {
  std::vector<int64_t> grid;
  for (size_t d = 0; d < shape.size(); ++d)
    grid.push_back((shape[d] + block[d] - 1) / block[d]);
  std::vector<HostTensor> outs;
  Status st =
      tryRunOp("tc.quantize", {tensor(f32(shape), x)}, {ty(elt, shape), ty(scaleType, grid)},
               {{"block", aInts(block)}, {"pow2_scale", aInt(pow2)}}, &outs);
  EXPECT_TRUE(st.isOk()) << st.toString();
  if (!st.isOk())
    return {HostTensor{ty(elt, shape), {}}, HostTensor{ty(scaleType, grid), {}}};
  return outs;
}

TEST(Quantize, TensorScaleE4M3IsTransformerEnginesCurrentScaling) {
  // amax 4: s = 448 / 4 = 112; 0.3 * 112 = 33.6 rounds to 32 (E4M3 steps by
  // 4 in [32, 64)); -2 * 112 = -224 and 4 * 112 = 448 are exact.
  auto r = quantize({4}, {1, -2, 0.3, 4}, DType::F8E4M3FN, {4});
  expectValues(r[0], {112, -224, 32, 448});
  expectValues(r[1], {static_cast<double>(1.0f / 112.0f)});
  // The quotient is rounded to f32 first: 448 / 3 = 149.33333 (f32), and
  // 3 * that is 448.00000 in f32, which stays 448 (not NaN, not 416).
  auto t = quantize({2}, {3, 1}, DType::F8E4M3FN, {2});
  expectValues(t[0], {448, 144});
  expectValues(t[1], {static_cast<double>(1.0f / (448.0f / 3.0f))});
}

TEST(Quantize, SpecialValuesSaturateOrPropagate) {
  // amax inf: s = 1, so inf saturates to the format's max, NaN stays NaN and
  // NaN does not count towards the amax.
  auto r = quantize({4}, {kInf, -1000, kNaN, 0.5}, DType::F8E4M3FN, {4});
  expectValues(r[0], {448, -448, kNaN, 0.5});
  expectValues(r[1], {1});
  auto e5 = quantize({3}, {kInf, -kInf, 1e6}, DType::F8E5M2, {3});
  expectValues(e5[0], {57344, -57344, 57344});
  // All zeros: s = 1.
  auto z = quantize({2}, {0, -0.0}, DType::F8E4M3FN, {2});
  expectValues(z[0], {0, -0.0});
  expectValues(z[1], {1});
  // An amax whose scale overflows f32 gets the largest f32 as its scale.
  float tiny = 1e-40f; // an f32 subnormal
  auto s = quantize({1}, {tiny}, DType::F8E4M3FN, {1});
  expectValues(s[1], {static_cast<double>(1.0f / FLT_MAX)});
  expectValues(s[0], {rt::roundToFloatDType(static_cast<float>(tiny) * FLT_MAX,
                                            DType::F8E4M3FN, true)});
}

TEST(Quantize, RowBlocksAndPartialBlocks) {
  // [2, 3] in rows: row amaxes 2 and 0.5 (E5M2, max 57344).
  auto r = quantize({2, 3}, {1, -2, 0.5, 0.25, 0.5, -0.125}, DType::F8E5M2, {1, 3});
  float s0 = 57344.0f / 2.0f, s1 = 57344.0f / 0.5f;
  expectValues(r[0], {28672, -57344, 14336, 28672, 57344, -14336});
  expectValues(r[1], {static_cast<double>(1.0f / s0), static_cast<double>(1.0f / s1)});
  // [1, 5] in blocks of 4: the last block has one element. 3 * 112 = 336
  // is a tie of 320 and 352 (E4M3 steps by 32 in [256, 512)): even is 320.
  auto p = quantize({1, 5}, {1, 2, 3, 4, 0.5}, DType::F8E4M3FN, {1, 4});
  expectValues(p[0], {112, 224, 320, 448, 448});
  expectValues(p[1], {static_cast<double>(1.0f / 112.0f), static_cast<double>(1.0f / 896.0f)});
}

TEST(Quantize, MxBlocksUseE8M0PowersOfTwo) {
  // E4M3 (emax 8), amax 6: scale_inv = 2^(2 - 8) = 2^-6, q = 64 x.
  auto r = quantize({1, 4}, {6, -1.5, 0.01, 0}, DType::F8E4M3FN, {1, 4}, DType::F8E8M0FNU);
  expectValues(r[1], {std::ldexp(1.0, -6)});
  expectValues(r[0], {384, -96, rt::roundToFloatDType(0.64, DType::F8E4M3FN), 0});
  // E2M1 (emax 2), amax 5: scale_inv = 2^(2 - 2) = 1; 5 is a tie between 4
  // and 6 and rounds to even (4); 2.75 -> 3, 0.3 -> 0.5 (nearest of 0, 0.5).
  auto f4 = quantize({1, 4}, {5, 2.75, 0.3, -0.2}, DType::F4E2M1FN, {1, 4}, DType::F8E8M0FNU);
  expectValues(f4[1], {1});
  expectValues(f4[0], {4, 3, 0.5, -0.0});
  // All zeros: the smallest E8M0 value; inf: NaN scale and NaN elements.
  auto z = quantize({1, 2}, {0, 0}, DType::F8E4M3FN, {1, 2}, DType::F8E8M0FNU);
  expectValues(z[1], {std::ldexp(1.0, -127)});
  auto n = quantize({1, 2}, {kInf, 1}, DType::F8E4M3FN, {1, 2}, DType::F8E8M0FNU);
  expectValues(n[1], {kNaN});
  expectValues(n[0], {kNaN, kNaN});
}

TEST(Quantize, Block128ScalesArePowersOfTwoPerBlock) {
  // Transformer Engine's Float8BlockScaling (force_pow_2_scales): s =
  // 448 / amax with its mantissa cleared. A [2, 256] tensor in 1x128
  // blocks: block (0, 0) has amax 3 -> 448 / 3 = 149.33 -> s = 128; block
  // (0, 1) amax 0.5 -> 896 -> 512; row 1: amax 1000 -> 0.448 -> 0.25, and
  // an all-zero block -> 1.
  std::vector<double> x(2 * 256, 0.0);
  x[0] = 3, x[1] = -1.1, x[128] = 0.5, x[129] = 0.3, x[256] = 1000, x[257] = -1;
  auto r = quantize({2, 256}, x, DType::F8E4M3FN, {1, 128}, DType::F32, true);
  expectValues(r[1], {1.0 / 128, 1.0 / 512, 4, 1});
  std::vector<double> q0 = hostTensorToDoubles(r[0]);
  // 3 * 128 = 384 is exact in E4M3; -1.1 * 128 = -140.8 -> -144 (steps of
  // 16 in [128, 256)); 0.3 * 512 = 153.6 -> 160; 1000 * 0.25 = 250 -> 256
  // (steps of 16, 250 nearer 256 than 240).
  EXPECT_EQ(q0[0], 384);
  EXPECT_EQ(q0[1], -144);
  EXPECT_EQ(q0[128], 256);
  EXPECT_EQ(q0[129], 160);
  EXPECT_EQ(q0[256], 256);
  EXPECT_EQ(q0[257], -0.25);
  // A 128x128 weight block and a partial one: [130, 128] in blocks
  // [128, 128] has a last block of 2 rows whose amax is over those only.
  std::vector<double> w(130 * 128, 0.01);
  w[5 * 128 + 7] = -7;    // block 0: amax 7 -> 64 -> s = 64
  w[129 * 128 + 3] = 0.1; // block 1: amax 0.1 -> 4480 -> s = 4096
  auto q = quantize({130, 128}, w, DType::F8E4M3FN, {128, 128}, DType::F32, true);
  expectValues(q[1], {1.0 / 64, 1.0 / 4096});
  std::vector<double> qw = hostTensorToDoubles(q[0]);
  EXPECT_EQ(qw[5 * 128 + 7], -448);
  EXPECT_EQ(qw[129 * 128 + 3],
            rt::roundToFloatDType(0.1f * 4096.0f, DType::F8E4M3FN, true));
  // E5M2 gradient blocks: 57344 / 3 = 19114.67 -> 16384.
  auto g = quantize({1, 4}, {3, 1, 0, -2}, DType::F8E5M2, {1, 4}, DType::F32, true);
  expectValues(g[1], {1.0 / 16384});
  expectValues(g[0], {49152, 16384, 0, -32768});
}

TEST(Quantize, ScaleHelpersFollowTheirContract) {
  EXPECT_EQ(cpu::pow2Scale(149.33333f), 128.f);
  EXPECT_EQ(cpu::pow2Scale(1.f), 1.f);
  EXPECT_EQ(cpu::pow2Scale(0.448f), 0.25f);
  EXPECT_EQ(cpu::pow2Scale(FLT_MAX), std::ldexp(1.0f, 127));
  EXPECT_EQ(cpu::currentScale(0.f, 448.f), 1.f);
  EXPECT_EQ(cpu::currentScale(INFINITY, 448.f), 1.f);
  EXPECT_EQ(cpu::currentScale(NAN, 448.f), 1.f);
  EXPECT_EQ(cpu::currentScale(2.f, 448.f), 224.f);
  EXPECT_EQ(cpu::saturatingRound(-kInf, DType::F8E5M2), -57344);
  EXPECT_TRUE(std::isnan(cpu::saturatingRound(kNaN, DType::F8E4M3FN)));
  EXPECT_EQ(cpu::mxScaleInv(1.0f, DType::F8E5M2), std::ldexp(1.0, -15));
  EXPECT_EQ(cpu::mxScaleInv(1e38f, DType::F4E2M1FN), std::ldexp(1.0, 124));
  EXPECT_EQ(cpu::mxScaleInv(1e-45f, DType::F8E4M3FN), std::ldexp(1.0, -127));
}

TEST(Quantize, AGivenAmaxReplacesTheOpsOwn) {
  // tc-fuse-fp8-amax's form: the amax taken by the producing kernel. The
  // tensor's own (4, NaN ignored) gives the same bits as no operand...
  std::vector<double> x{1, -2, 0.3, 4, kNaN, -0.5};
  auto own = quantize({2, 3}, x, DType::F8E4M3FN, {2, 3});
  std::vector<HostTensor> given;
  Status st = tryRunOp("tc.quantize", {tensor(f32({2, 3}), x), tensor(f32({}), {4})},
                       {ty(DType::F8E4M3FN, {2, 3}), f32({1, 1})}, {{"block", aInts({2, 3})}},
                       &given);
  ASSERT_TRUE(st.isOk()) << st.toString();
  expectValues(given[0], hostTensorToDoubles(own[0]));
  expectValues(given[1], hostTensorToDoubles(own[1]));
  // ... and another value is used as given: amax 8, s = 56.
  st = tryRunOp("tc.quantize", {tensor(f32({2, 3}), x), tensor(f32({}), {8})},
                {ty(DType::F8E4M3FN, {2, 3}), f32({1, 1})}, {{"block", aInts({2, 3})}}, &given);
  ASSERT_TRUE(st.isOk()) << st.toString();
  expectValues(given[0], {56, -112, rt::roundToFloatDType(0.3f * 56.0f, DType::F8E4M3FN, true),
                          224, kNaN, -28});
  expectValues(given[1], {static_cast<double>(1.0f / 56.0f)});
  // Only one f32 value, for per-tensor scaling.
  st = tryRunOp("tc.quantize", {tensor(f32({2, 3}), x), tensor(f32({}), {4})},
                {ty(DType::F8E4M3FN, {2, 3}), f32({2, 1})}, {{"block", aInts({1, 3})}}, &given);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.toString().find("amax"), std::string::npos) << st.toString();
}

TEST(Quantize, BadShapesAreErrorsNamingTheOp) {
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.quantize", {tensor(f32({4}), {1, 2, 3, 4})},
                       {ty(DType::F8E4M3FN, {4}), f32({2})}, {{"block", aInts({4})}}, &outs);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.toString().find("scale_inv"), std::string::npos) << st.toString();
  st = tryRunOp("tc.quantize", {tensor(f32({4}), {1, 2, 3, 4})},
                {f32({4}), f32({1})}, {{"block", aInts({4})}}, &outs);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.toString().find("f8E4M3FN"), std::string::npos) << st.toString();
}

TEST(ScaledMatmul, DequantizesEachBlockAndSumsExactly) {
  // lhs 2x2 in E4M3 with row scales 0.5 and 2; rhs 2x2 (transposed) with
  // one scale 0.25. deq(lhs) = [[0.5, 1], [6, 8]], deq(rhs^T) = [[1, 0.5],
  // [0.25, 2]] -> result [[0.75, 2.25], [8, 19]].
  HostTensor a = tensor(ty(DType::F8E4M3FN, {2, 2}), {1, 2, 3, 4});
  HostTensor sa = tensor(f32({2, 1}), {0.5, 2});
  HostTensor b = tensor(ty(DType::F8E4M3FN, {2, 2}), {4, 1, 2, 8});
  HostTensor sb = tensor(f32({1, 1}), {0.25});
  HostTensor y = runOp("tc.scaled_matmul", {a, sa, b, sb}, f32({2, 2}),
                       {{"transpose_rhs", aInt(1)}});
  expectValues(y, {0.75, 2.25, 8, 19});
  // A bf16 result is the exact sum rounded once: 448 * 2 + 1.125 * 0.25 =
  // 896.28125, which bf16 (8 bits of significand) rounds to 896.
  HostTensor c = tensor(ty(DType::F8E4M3FN, {1, 2}), {448, 1.125});
  HostTensor sc = tensor(f32({1, 1}), {1});
  HostTensor d = tensor(ty(DType::F8E4M3FN, {2, 1}), {2, 0.25});
  HostTensor yb = runOp("tc.scaled_matmul", {c, sc, d, sc}, ty(DType::BF16, {1, 1}));
  expectValues(yb, {896});
}

TEST(ScaledMatmul, Block128SumsTheBlocksWithBothScales) {
  // lhs [1, 256] in 1x128 blocks (scales 2, 0.5), rhs [2, 256] (read
  // transposed) in one 128x256 block row of two 128x128 blocks (scales 4,
  // 0.25): y[0, j] = sum over the K blocks of the block's partial product
  // times both scales.
  std::vector<double> a(256, 0.0), b(2 * 256, 0.0);
  a[0] = 1, a[1] = 2, a[128] = 3, a[255] = -1;
  b[0] = 1, b[1] = 1, b[128] = 2, b[255] = 4;      // row 0 of rhs
  b[256] = -1, b[256 + 128] = 1, b[256 + 255] = 8; // row 1
  HostTensor qa = tensor(ty(DType::F8E4M3FN, {1, 256}), a);
  HostTensor sa = tensor(f32({1, 2}), {2, 0.5});
  HostTensor qb = tensor(ty(DType::F8E4M3FN, {2, 256}), b);
  HostTensor sb = tensor(f32({1, 2}), {4, 0.25});
  HostTensor y =
      runOp("tc.scaled_matmul", {qa, sa, qb, sb}, f32({1, 2}), {{"transpose_rhs", aInt(1)}});
  // j = 0: (1 + 2) * 2 * 4 + (3 * 2 - 4) * 0.5 * 0.25 = 24 + 0.25.
  // j = 1: (-1) * 2 * 4 + (3 - 8) * 0.5 * 0.25 = -8 - 0.625.
  expectValues(y, {24.25, -8.625});
}

TEST(FakeQuantize, Nvfp4IsDequantizedAlongItsAxis) {
  // A [16, 2] f32 tensor blocked along axis 0 (one 1x16 block per column):
  // column 0 holds 6 and 0.25 (-> 0, a tie to even), column 1 holds 3 and
  // 1.1. Tensor amax 6: S_enc 448, column 1's block scale 224 (encode 2):
  // 1.1 -> 2.2 -> 2, dequantised 2 * 224 / 448 = 1; 3 -> 6 -> 3.
  std::vector<double> x(32, 0.0);
  x[0] = 6;
  x[2] = 0.25;
  x[1] = 3;
  x[3] = 1.1;
  HostTensor y = runOp("tc.fake_quantize", {tensor(f32({16, 2}), x)}, f32({16, 2}),
                       {{"format", aStr("nvfp4")}, {"axis", aInt(0)}});
  // The tensor decode scale is f32(1 / 448), not 1 / 448: deq = value *
  // block scale * f32(1 / 448), formed exactly and rounded once to f32.
  auto deq = [](double v, double block) {
    return static_cast<double>(static_cast<float>(v * block * (1.0f / 448.0f)));
  };
  std::vector<double> want(32, 0.0);
  want[0] = deq(6, 448);
  want[1] = deq(6, 224);
  want[3] = deq(2, 224);
  expectValues(y, want);
}

TEST(FakeQuantize, UnscaledNvfp4IsTheExactOperandAndItsTensorScale) {
  // The example above unscaled (tc-fp4-exact): code x block scale exactly
  // (6 * 448, 6 * 224, 2 * 224), the decode scale f32(1 / 448) apart.
  std::vector<double> x(32, 0.0);
  x[0] = 6;
  x[2] = 0.25;
  x[1] = 3;
  x[3] = 1.1;
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.fake_quantize", {tensor(ty(DType::BF16, {16, 2}), x)}, {ty(DType::BF16, {16, 2}), f32({})},
                       {{"format", aStr("nvfp4")}, {"axis", aInt(0)}, {"unscaled", aInt(1)}},
                       &outs);
  ASSERT_TRUE(st.isOk()) << st.toString();
  std::vector<double> want(32, 0.0);
  want[0] = 6 * 448;
  want[1] = 6 * 224;
  want[3] = 2 * 224;
  expectValues(outs[0], want);
  expectValues(outs[1], {static_cast<double>(1.0f / 448.0f)});
  // Over random tensors (1x16 and 16x16 blocks, nearest and stochastic):
  // the unscaled values times the tensor scale, rounded once, are the
  // scaled result bit for bit, and the unscaled values are bf16 exactly.
  std::mt19937 rng(7);
  std::normal_distribution<double> n(0, 3);
  for (int blocks2d = 0; blocks2d < 2; ++blocks2d)
    for (int sr = 0; sr < 2; ++sr) {
      std::vector<double> v(48 * 32);
      for (double &e : v)
        e = roundToFloatDType(n(rng) * (rng() % 7 == 0 ? 100 : 1), DType::BF16);
      Attrs attrs{{"format", aStr("nvfp4")}, {"axis", aInt(1)}, {"blocks2d", aInt(blocks2d)}};
      std::vector<HostTensor> ins{tensor(ty(DType::BF16, {48, 32}), v)};
      if (sr) {
        attrs["stochastic"] = aInt(1);
        attrs["seed"] = aInt(3);
        attrs["stream"] = aInt(11);
        ins.push_back(tensor(f32({}), {5}));
      }
      std::vector<HostTensor> scaled, unscaled;
      ASSERT_TRUE(tryRunOp("tc.fake_quantize", ins, {ty(DType::BF16, {48, 32})}, attrs, &scaled).isOk());
      attrs["unscaled"] = aInt(1);
      ASSERT_TRUE(
          tryRunOp("tc.fake_quantize", ins, {ty(DType::BF16, {48, 32}), f32({})}, attrs, &unscaled).isOk());
      double ts = hostTensorToDoubles(unscaled[1])[0];
      std::vector<double> us = hostTensorToDoubles(unscaled[0]);
      std::vector<double> sc = hostTensorToDoubles(scaled[0]);
      int64_t bad = 0;
      for (size_t i = 0; i < v.size(); ++i) {
        double u = us[i];
        bool wrong = roundToFloatDType(u, DType::BF16) != u ||
                     roundToFloatDType(u * ts, DType::BF16) != sc[i];
        if (wrong && bad++ == 0)
          ADD_FAILURE() << "element " << i << ": x " << v[i] << ", unscaled " << u
                        << ", tensor scale " << ts << ", scaled " << sc[i];
      }
      EXPECT_EQ(bad, 0) << "blocks2d " << blocks2d << " stochastic " << sr;
    }
  // mxfp4 has no tensor scale to take apart.
  st = tryRunOp("tc.fake_quantize", {tensor(f32({2}), {1, 2})}, {f32({2}), f32({})},
                {{"format", aStr("mxfp4")}, {"unscaled", aInt(1)}}, &outs);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.toString().find("unscaled needs format nvfp4"), std::string::npos) << st.toString();
}

TEST(Matmul, AlphaScalesTheSumsBeforeTheOneRounding) {
  // [1, 3] x [3, 2] in bf16 with alpha 1/3 (f32): the double sums 1 * 1 +
  // 2 * 2 + 3 * 3 = 14 and 1 + 2 + 3 = 6 times f32(1/3), rounded once.
  float third = 1.0f / 3.0f;
  HostTensor y = runOp("tc.matmul",
                       {tensor(ty(DType::BF16, {1, 3}), {1, 2, 3}), tensor(ty(DType::BF16, {3, 2}), {1, 1, 2, 1, 3, 1}),
                        tensor(f32({}), {third})},
                       ty(DType::BF16, {1, 2}));
  expectValues(y, {roundToFloatDType(14.0 * third, DType::BF16),
                   roundToFloatDType(6.0 * third, DType::BF16)});
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.matmul",
                       {tensor(f32({1, 1}), {1}), tensor(f32({1, 1}), {1}),
                        tensor(f32({2}), {1, 2})},
                       {f32({1, 1})}, {}, &outs);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.toString().find("alpha (one value)"), std::string::npos) << st.toString();
}

TEST(FakeQuantize, Mxfp4UsesTheE8M0Blocks) {
  // amax 5: scale 2^(2 - 2) = 1, so values round as they are, 5 -> 4 (tie
  // to even), 0.3 -> 0.5; the last axis by default.
  HostTensor y = runOp("tc.fake_quantize", {tensor(f32({1, 4}), {5, -0.3, 1.75, 0.2})},
                       f32({1, 4}), {{"format", aStr("mxfp4")}});
  expectValues(y, {4, -0.5, 2, 0});
  // amax 40: scale 2^(5 - 2) = 8: 40 / 8 = 5 -> 4 -> 32, 13 / 8 = 1.625 -> 1.5 -> 12.
  HostTensor z = runOp("tc.fake_quantize", {tensor(f32({2}), {40, 13})}, f32({2}),
                       {{"format", aStr("mxfp4")}});
  expectValues(z, {32, 12});
}

TEST(FakeQuantize, BadAttributesAreErrorsNamingTheOp) {
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.fake_quantize", {tensor(f32({2}), {1, 2})}, {f32({2})},
                       {{"format", aStr("int4")}}, &outs);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.toString().find("format must be nvfp4 or mxfp4, got 'int4'"), std::string::npos)
      << st.toString();
  st = tryRunOp("tc.fake_quantize", {tensor(f32({2}), {1, 2})}, {f32({2})},
                {{"format", aStr("mxfp4")}, {"blocks2d", aInt(1)}}, &outs);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.toString().find("blocks2d needs format nvfp4"), std::string::npos);
}

// --fp4-qat-grads' stochastic rounding: 2^16 rows [6, v], so that each
// row's block scale leaves v where it is (mxfp4: amax 6, scale 1; nvfp4:
// tensor and block amax 6, encode f32(1 / (448 * f32(1 / 448))) ~ 1), and
// v rounds with its own draw. The mean of the dequantised v is within 3
// sigma of v, sigma^2 = p (1 - p) step^2 / 2^16 with p = (v - lo) / step;
// another step gives other draws, the same step the same ones.
TEST(FakeQuantize, StochasticRoundingIsUnbiased) {
  const int64_t n = int64_t(1) << 16;
  for (const char *format : {"mxfp4", "nvfp4"})
    for (double v : {1.3, -2.7, 0.2, 4.5}) {
      std::vector<double> x(2 * n, 6.0);
      for (int64_t i = 0; i < n; ++i)
        x[2 * i + 1] = v;
      auto run = [&](double step) {
        return runOp("tc.fake_quantize", {tensor(f32({n, 2}), x), tensor(f32({}), {step})},
                     f32({n, 2}),
                     {{"format", aStr(format)}, {"stochastic", aInt(1)}, {"seed", aInt(42)},
                      {"stream", aInt(7)}});
      };
      HostTensor y = run(3);
      std::vector<double> got = hostTensorToDoubles(y);
      double a = std::fabs(v), stepSize = a < 2 ? 0.5 : (a < 4 ? 1 : 2);
      double lo = std::floor(a / stepSize) * stepSize, p = (a - lo) / stepSize;
      double sigma = std::sqrt(p * (1 - p) / static_cast<double>(n)) * stepSize;
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        double q = std::fabs(got[2 * i + 1]);
        // Each value is one of v's two neighbours (nvfp4: times ~1).
        EXPECT_TRUE(std::fabs(q - lo) < 1e-3 || std::fabs(q - lo - stepSize) < 1e-3)
            << format << " v " << v << " row " << i << ": " << q;
        sum += got[2 * i + 1];
      }
      double mean = sum / static_cast<double>(n);
      EXPECT_LE(std::fabs(mean - v), 3 * sigma) << format << " v " << v << ": mean " << mean;
      EXPECT_EQ(hostTensorToDoubles(run(3)), got) << format << ": the same step, other draws";
      EXPECT_NE(hostTensorToDoubles(run(4)), got) << format << ": another step, the same draws";
    }
}

TEST(FakeQuantize, StochasticRoundingNeedsItsStep) {
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.fake_quantize", {tensor(f32({2}), {1, 2})}, {f32({2})},
                       {{"format", aStr("nvfp4")}, {"stochastic", aInt(1)}}, &outs);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.toString().find("tc.fake_quantize"), std::string::npos) << st.toString();
}

} // namespace
} // namespace tc::rt
