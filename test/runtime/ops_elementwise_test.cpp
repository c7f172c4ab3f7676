//===- ops_elementwise_test.cpp - unary, binary, select, cast -------------===//
#include <cmath>
#include <limits>

#include "test_util.h"

namespace tc::rt {
namespace {

using namespace tc::rt::test;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

/// Runs a unary float op in f64 mode on `x` and compares with `want`.
void unary(const std::string &op, std::vector<double> x, std::vector<double> want,
           double tol = 1e-15) {
  TensorType t = f64({(int64_t)x.size()});
  expectValues(runOp("tc." + op, {tensor(t, x)}, t, {}, f64Mode()), want, tol, op);
}

TEST(Unary, MathFunctions) {
  unary("exp", {0, 1}, {1, M_E});
  unary("log", {1, M_E, 0, -1}, {0, 1, -kInf, kNaN});
  unary("sqrt", {4, 2}, {2, M_SQRT2});
  unary("rsqrt", {4, 0}, {0.5, kInf});
  unary("reciprocal", {4, -0.5}, {0.25, -2});
  unary("tanh", {0, 1}, {0, 0.7615941559557649});
  unary("sigmoid", {0, 2, -800}, {0.5, 0.8807970779778823, 0});
  unary("erf", {0, 1}, {0, 0.8427007929497149});
  unary("silu", {0, 1}, {0, 0.7310585786300049});
  unary("sin", {0, M_PI / 2}, {0, 1});
  unary("cos", {0, M_PI}, {1, -1});
  unary("tan", {0, M_PI / 4}, {0, 1});
  unary("asin", {0, 1}, {0, M_PI / 2});
  unary("acos", {1, -1}, {0, M_PI});
  unary("atan", {0, 1}, {0, M_PI / 4});
  unary("sinh", {0, 1}, {0, 1.1752011936438014});
  unary("cosh", {0, 1}, {1, 1.5430806348152437});
  unary("asinh", {0, 1}, {0, 0.881373587019543});
  unary("acosh", {1, 2}, {0, 1.3169578969248166});
  unary("atanh", {0, 0.5}, {0, 0.5493061443340549});
  unary("floor", {-1.5, 1.5, -0.0}, {-2, 1, -0.0});
  unary("ceil", {-1.5, 1.5}, {-1, 2});
  // Half to even.
  unary("round", {0.5, 1.5, 2.5, -2.5, -0.4, 2.6}, {0, 2, 2, -2, -0.0, 3});
}

TEST(Unary, NumericOnFloatsAndInts) {
  TensorType t = f32({5});
  HostTensor x = tensor(t, {-2, -0.5, 0, 3, kNaN});
  expectValues(runOp("tc.neg", {x}, t), {2, 0.5, -0.0, -3, kNaN});
  expectValues(runOp("tc.abs", {x}, t), {2, 0.5, 0, 3, kNaN});
  expectValues(runOp("tc.sign", {x}, t), {-1, -1, 0, 1, kNaN});
  expectValues(runOp("tc.relu", {x}, t), {0, 0, 0, 3, kNaN});
  TensorType it = ty(DType::I8, {4});
  HostTensor xi = itensor(it, {-128, -3, 0, 5});
  expectInts(runOp("tc.neg", {xi}, it), {-128, 3, 0, -5}); // wraps
  expectInts(runOp("tc.abs", {xi}, it), {-128, 3, 0, 5});
  expectInts(runOp("tc.sign", {xi}, it), {-1, -1, 0, 1});
  expectInts(runOp("tc.relu", {xi}, it), {0, 0, 0, 5});
  TensorType ut = ty(DType::U8, {2});
  expectInts(runOp("tc.neg", {itensor(ut, {1, 0})}, ut), {255, 0});
}

TEST(Unary, NotGeluPredicates) {
  expectInts(runOp("tc.not", {itensor(i1({3}), {1, 0, 1})}, i1({3})), {0, 1, 0});
  TensorType t = f64({3});
  HostTensor x = tensor(t, {-1, 0, 1});
  expectValues(runOp("tc.gelu", {x}, t, {}, f64Mode()),
               {-0.15865525393145707, 0, 0.8413447460685429}, 1e-15);
  expectValues(runOp("tc.gelu", {x}, t, {{"approximate", aStr("none")}}, f64Mode()),
               {-0.15865525393145707, 0, 0.8413447460685429}, 1e-15);
  expectValues(runOp("tc.gelu", {x}, t, {{"approximate", aStr("tanh")}}, f64Mode()),
               {-0.15880800939172324, 0, 0.8411919906082768}, 1e-15);
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.gelu", {x}, {t}, {{"approximate", aStr("fast")}}, &outs);
  EXPECT_NE(st.message().find("approximate"), std::string::npos);
  HostTensor y = tensor(f32({4}), {kNaN, kInf, -kInf, 1});
  expectInts(runOp("tc.isnan", {y}, i1({4})), {1, 0, 0, 0});
  expectInts(runOp("tc.isinf", {y}, i1({4})), {0, 1, 1, 0});
}

TEST(Cast, FloatIntBoolAndNarrowFormats) {
  HostTensor x = tensor(f32({6}), {-2.7, -0.5, 0, 2.7, 300.5, kNaN});
  expectInts(runOp("tc.cast", {x}, i32({6})), {-2, 0, 0, 2, 300, 0});
  expectInts(runOp("tc.cast", {x}, ty(DType::U8, {6})), {254, 0, 0, 2, 44, 0});
  expectInts(runOp("tc.cast", {x}, i1({6})), {1, 1, 0, 1, 1, 1}); // != 0 (NaN too)
  expectInts(runOp("tc.cast", {itensor(i64({3}), {300, -1, 0})}, ty(DType::I8, {3})),
             {44, -1, 0});
  expectInts(runOp("tc.cast", {itensor(i64({3}), {300, -1, 0})}, i1({3})), {1, 1, 0});
  expectValues(runOp("tc.cast", {itensor(ty(DType::U8, {2}), {255, 7})}, f32({2})), {255, 7});
  // bf16: round to nearest even from the f64 value.
  HostTensor d = tensor(f64({2}), {1 + std::ldexp(1, -8), 1 + 3 * std::ldexp(1, -8)});
  expectValues(runOp("tc.cast", {d}, ty(DType::BF16, {2})), {1, 1 + std::ldexp(1, -6)});
  // float8 saturation (default true) and without it.
  HostTensor big = tensor(f32({3}), {1e5, -1e6, kInf});
  expectValues(runOp("tc.cast", {big}, ty(DType::F8E4M3FN, {3})), {448, -448, 448});
  expectValues(runOp("tc.cast", {big}, ty(DType::F8E4M3FN, {3}), {{"saturate", aInt(0)}}),
               {kNaN, kNaN, kNaN});
  expectValues(runOp("tc.cast", {big}, ty(DType::F8E5M2, {3}), {{"saturate", aInt(0)}}),
               {kInf, -kInf, kInf});
  expectValues(runOp("tc.cast", {big}, ty(DType::F8E5M2, {3})), {57344, -57344, 57344});
  expectValues(runOp("tc.cast", {tensor(f32({3}), {0.3, 2.6, 100})}, ty(DType::F4E2M1FN, {3})),
               {0.5, 3, 6});
  expectValues(runOp("tc.cast", {tensor(f32({2}), {3, 0.3})}, ty(DType::F8E8M0FNU, {2})),
               {4, 0.25});
  // Back to f32 exactly.
  expectValues(runOp("tc.cast", {tensor(ty(DType::BF16, {1}), {1.5})}, f32({1})), {1.5});
}

TEST(Binary, ArithmeticWithBroadcasting) {
  HostTensor a = tensor(f32({2, 3}), {1, 2, 3, 4, 5, 6});
  HostTensor row = tensor(f32({3}), {10, 20, 30});
  expectValues(runOp("tc.add", {a, row}, f32({2, 3})), {11, 22, 33, 14, 25, 36});
  expectValues(runOp("tc.sub", {row, a}, f32({2, 3})), {9, 18, 27, 6, 15, 24});
  HostTensor col = tensor(f32({2, 1}), {1, 2});
  HostTensor r13 = tensor(f32({1, 3}), {1, 2, 3});
  expectValues(runOp("tc.mul", {col, r13}, f32({2, 3})), {1, 2, 3, 2, 4, 6});
  HostTensor s = tensor(f32({}), {2});
  expectValues(runOp("tc.div", {a, s}, f32({2, 3})), {0.5, 1, 1.5, 2, 2.5, 3});
  expectValues(runOp("tc.div", {tensor(f32({2}), {1, -1}), tensor(f32({}), {0})}, f32({2})),
               {kInf, -kInf});
  expectValues(runOp("tc.pow", {tensor(f32({2}), {2, 9}), tensor(f32({2}), {10, 0.5})}, f32({2})),
               {1024, 3});
  HostTensor m1 = tensor(f32({3}), {1, kNaN, 5}), m2 = tensor(f32({3}), {2, 0, 4});
  expectValues(runOp("tc.max", {m1, m2}, f32({3})), {2, kNaN, 5});
  expectValues(runOp("tc.min", {m1, m2}, f32({3})), {1, kNaN, 4});
  // Rank-3 broadcast of [2,1,2] with [3,1].
  HostTensor p = tensor(f32({2, 1, 2}), {1, 2, 3, 4});
  HostTensor q = tensor(f32({3, 1}), {10, 20, 30});
  expectValues(runOp("tc.add", {p, q}, f32({2, 3, 2})),
               {11, 12, 21, 22, 31, 32, 13, 14, 23, 24, 33, 34});
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.add", {a, tensor(f32({2}), {1, 2})}, {f32({2, 3})}, {}, &outs);
  EXPECT_NE(st.message().find("do not broadcast: 2x3 vs 2"), std::string::npos) << st.message();
}

TEST(Binary, IntegerSemantics) {
  TensorType t = i64({4});
  HostTensor a = itensor(t, {-7, 7, -7, 7}), b = itensor(t, {2, -2, -2, 2});
  expectInts(runOp("tc.div", {a, b}, t), {-3, -3, 3, 3}); // truncates
  expectInts(runOp("tc.rem", {a, b}, t), {1, -1, -1, 1}); // sign of divisor
  expectInts(runOp("tc.rem", {a, b}, t, {{"fmod", aInt(1)}}), {-1, 1, -1, 1});
  expectInts(runOp("tc.pow", {itensor(t, {2, 3, -1, 0}), itensor(t, {10, -1, -3, 0})}, t),
             {1024, 0, -1, 1});
  expectInts(runOp("tc.max", {a, b}, t), {2, 7, -2, 7});
  expectInts(runOp("tc.min", {a, b}, t), {-7, -2, -7, 2});
  TensorType t8 = ty(DType::I8, {2});
  expectInts(runOp("tc.add", {itensor(t8, {100, -100}), itensor(t8, {100, -100})}, t8),
             {-56, 56});
  expectInts(runOp("tc.mul", {itensor(t8, {16, 3}), itensor(t8, {16, 3})}, t8), {0, 9});
  TensorType u8 = ty(DType::U8, {2});
  expectInts(runOp("tc.sub", {itensor(u8, {0, 5}), itensor(u8, {1, 3})}, u8), {255, 2});
  TensorType u64 = ty(DType::U64, {2});
  HostTensor big = itensor(u64, {-1, 4}); // 2^64 - 1
  expectInts(runOp("tc.div", {big, itensor(u64, {2, 2})}, u64),
             {static_cast<int64_t>(UINT64_MAX / 2), 2});
  expectInts(runOp("tc.gt", {big, itensor(u64, {1, 5})}, i1({2})), {1, 0});
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.div", {a, itensor(t, {1, 0, 1, 1})}, {t}, {}, &outs);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("tc.div"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("division by zero"), std::string::npos) << st.message();
}

TEST(Binary, FloatRemainder) {
  TensorType t = f64({4});
  HostTensor a = tensor(t, {5.5, -5.5, 5.5, -4}), b = tensor(t, {-2, 2, 2, 2});
  expectValues(runOp("tc.rem", {a, b}, t), {-0.5, 0.5, 1.5, 0});
  expectValues(runOp("tc.rem", {a, b}, t, {{"fmod", aInt(1)}}), {1.5, -1.5, 1.5, -0.0});
}

TEST(Binary, ComparisonsAndLogic) {
  HostTensor a = tensor(f32({4}), {1, 2, 3, kNaN}), b = tensor(f32({}), {2});
  expectInts(runOp("tc.eq", {a, b}, i1({4})), {0, 1, 0, 0});
  expectInts(runOp("tc.ne", {a, b}, i1({4})), {1, 0, 1, 1});
  expectInts(runOp("tc.lt", {a, b}, i1({4})), {1, 0, 0, 0});
  expectInts(runOp("tc.le", {a, b}, i1({4})), {1, 1, 0, 0});
  expectInts(runOp("tc.gt", {a, b}, i1({4})), {0, 0, 1, 0});
  expectInts(runOp("tc.ge", {a, b}, i1({4})), {0, 1, 1, 0});
  expectInts(runOp("tc.eq", {itensor(i64({2}), {5, -1}), itensor(i64({2}), {5, 1})}, i1({2})),
             {1, 0});
  HostTensor p = itensor(i1({4}), {0, 0, 1, 1}), q = itensor(i1({4}), {0, 1, 0, 1});
  expectInts(runOp("tc.and", {p, q}, i1({4})), {0, 0, 0, 1});
  expectInts(runOp("tc.or", {p, q}, i1({4})), {0, 1, 1, 1});
  expectInts(runOp("tc.xor", {p, q}, i1({4})), {0, 1, 1, 0});
  expectInts(runOp("tc.eq", {p, q}, i1({4})), {1, 0, 0, 1});
}

TEST(Select, BroadcastsThreeWays) {
  HostTensor c = itensor(i1({2, 1}), {1, 0});
  HostTensor t = tensor(f32({3}), {1, 2, 3});
  HostTensor f = tensor(f32({}), {-1});
  expectValues(runOp("tc.select", {c, t, f}, f32({2, 3})), {1, 2, 3, -1, -1, -1});
  HostTensor ti = itensor(i64({2}), {7, 8}), fi = itensor(i64({2}), {-7, -8});
  expectInts(runOp("tc.select", {itensor(i1({2}), {0, 1}), ti, fi}, i64({2})), {-7, 8});
}

} // namespace
} // namespace tc::rt
