//===- ops_nn_test.cpp - reductions, scans, softmax, norms, losses, matmul ===//
#include <chrono>
#include <cmath>
#include <limits>

#include "test_util.h"

namespace tc::rt {
namespace {

using namespace tc::rt::test;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

Attrs axes(std::vector<int64_t> a, bool keep = false) {
  return {{"axes", aInts(std::move(a))}, {"keepdims", aInt(keep)}};
}

TEST(Reduce, SumMeanMaxMinProd) {
  HostTensor x = tensor(f32({2, 3}), {1, 2, 3, 4, 5, 6});
  expectValues(runOp("tc.reduce_sum", {x}, f32({2}), axes({1})), {6, 15});
  expectValues(runOp("tc.reduce_sum", {x}, f32({2, 1}), axes({1}, true)), {6, 15});
  expectValues(runOp("tc.reduce_sum", {x}, f32({3}), axes({0})), {5, 7, 9});
  expectValues(runOp("tc.reduce_sum", {x}, f32({}), axes({0, 1})), {21});
  expectValues(runOp("tc.reduce_sum", {x}, f32({1, 1}), axes({0, 1}, true)), {21});
  expectValues(runOp("tc.reduce_sum", {x}, f32({2, 3}), axes({})), {1, 2, 3, 4, 5, 6});
  expectValues(runOp("tc.reduce_mean", {x}, f32({2}), axes({1})), {2, 5});
  expectValues(runOp("tc.reduce_max", {x}, f32({3}), axes({0})), {4, 5, 6});
  expectValues(runOp("tc.reduce_min", {x}, f32({2}), axes({1})), {1, 4});
  expectValues(runOp("tc.reduce_prod", {x}, f32({2}), axes({1})), {6, 120});
  // The default keepdims is false.
  expectValues(runOp("tc.reduce_sum", {x}, f32({2}), {{"axes", aInts({1})}}), {6, 15});
  // NaN propagates through max/min.
  HostTensor n = tensor(f32({3}), {1, kNaN, 3});
  expectValues(runOp("tc.reduce_max", {n}, f32({}), axes({0})), {kNaN});
  expectValues(runOp("tc.reduce_min", {n}, f32({}), axes({0})), {kNaN});
  // Middle axis of a rank-3 tensor.
  HostTensor r3 = tensor(f32({2, 2, 2}), {1, 2, 3, 4, 5, 6, 7, 8});
  expectValues(runOp("tc.reduce_sum", {r3}, f32({2, 2}), axes({1})), {4, 6, 12, 14});
}

TEST(Reduce, EmptyAxesGiveIdentities) {
  HostTensor e = tensor(f32({2, 0}), {});
  expectValues(runOp("tc.reduce_sum", {e}, f32({2}), axes({1})), {0, 0});
  expectValues(runOp("tc.reduce_prod", {e}, f32({2}), axes({1})), {1, 1});
  expectValues(runOp("tc.reduce_max", {e}, f32({2}), axes({1})), {-kInf, -kInf});
  expectValues(runOp("tc.reduce_min", {e}, f32({2}), axes({1})), {kInf, kInf});
  expectValues(runOp("tc.reduce_mean", {e}, f32({2}), axes({1})), {kNaN, kNaN});
  HostTensor ei = itensor(i32({1, 0}), {});
  expectInts(runOp("tc.reduce_max", {ei}, i32({1}), axes({1})), {INT32_MIN});
  expectInts(runOp("tc.reduce_min", {ei}, i32({1}), axes({1})), {INT32_MAX});
  expectInts(runOp("tc.reduce_min", {itensor(ty(DType::U8, {0}), {})}, ty(DType::U8, {}),
                   axes({0})),
             {255});
}

TEST(Reduce, Integers) {
  HostTensor x = itensor(i64({2, 3}), {1, -2, 3, 4, 5, 6});
  expectInts(runOp("tc.reduce_sum", {x}, i64({2}), axes({1})), {2, 15});
  expectInts(runOp("tc.reduce_mean", {x}, i64({2}), axes({1})), {0, 5}); // truncates
  expectInts(runOp("tc.reduce_max", {x}, i64({2}), axes({1})), {3, 6});
  expectInts(runOp("tc.reduce_min", {x}, i64({3}), axes({0})), {1, -2, 3});
  expectInts(runOp("tc.reduce_prod", {x}, i64({2}), axes({1})), {-6, 120});
  TensorType i8 = ty(DType::I8, {2});
  expectInts(runOp("tc.reduce_sum", {itensor(i8, {100, 100})}, ty(DType::I8, {}), axes({0})),
             {-56}); // wraps at the boundary
}

TEST(ArgReduce, TiesKeepdimsAndNaN) {
  HostTensor x = tensor(f32({2, 4}), {1, 3, 3, 0, 5, 5, -1, -1});
  expectInts(runOp("tc.argmax", {x}, i64({2}), {{"axis", aInt(1)}}), {1, 0});
  expectInts(runOp("tc.argmax", {x}, i64({2}),
                   {{"axis", aInt(1)}, {"select_last_index", aInt(1)}}),
             {2, 1});
  expectInts(runOp("tc.argmin", {x}, i64({2, 1}), {{"axis", aInt(1)}, {"keepdims", aInt(1)}}),
             {3, 2});
  expectInts(runOp("tc.argmin", {x}, i64({2}),
                   {{"axis", aInt(1)}, {"select_last_index", aInt(1)}}),
             {3, 3});
  expectInts(runOp("tc.argmax", {x}, i64({4}), {{"axis", aInt(0)}}), {1, 1, 0, 0});
  expectInts(runOp("tc.argmax", {tensor(f32({3}), {1, kNaN, 5})}, i64({}), {{"axis", aInt(0)}}),
             {1});
  expectInts(runOp("tc.argmin", {itensor(i32({3}), {4, -2, -2})}, i64({}), {{"axis", aInt(0)}}),
             {1});
}

TEST(CumSum, ExclusiveAndReverse) {
  HostTensor x = tensor(f32({4}), {1, 2, 3, 4});
  expectValues(runOp("tc.cumsum", {x}, f32({4}), {{"axis", aInt(0)}}), {1, 3, 6, 10});
  expectValues(runOp("tc.cumsum", {x}, f32({4}), {{"axis", aInt(0)}, {"exclusive", aInt(1)}}),
               {0, 1, 3, 6});
  expectValues(runOp("tc.cumsum", {x}, f32({4}), {{"axis", aInt(0)}, {"reverse", aInt(1)}}),
               {10, 9, 7, 4});
  expectValues(runOp("tc.cumsum", {x}, f32({4}),
                     {{"axis", aInt(0)}, {"reverse", aInt(1)}, {"exclusive", aInt(1)}}),
               {9, 7, 4, 0});
  HostTensor m = itensor(i64({2, 3}), {1, 2, 3, 4, 5, 6});
  expectInts(runOp("tc.cumsum", {m}, i64({2, 3}), {{"axis", aInt(0)}}), {1, 2, 3, 5, 7, 9});
  expectInts(runOp("tc.cumsum", {m}, i64({2, 3}), {{"axis", aInt(1)}}), {1, 3, 6, 4, 9, 15});
}

TEST(Softmax, AlongAnyAxis) {
  double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0), s = e1 + e2 + e3;
  HostTensor x = tensor(f64({3}), {1, 2, 3});
  expectValues(runOp("tc.softmax", {x}, f64({3}), {{"axis", aInt(0)}}),
               {e1 / s, e2 / s, e3 / s}, 1e-15);
  expectValues(runOp("tc.log_softmax", {x}, f64({3}), {{"axis", aInt(0)}}),
               {1 - std::log(s), 2 - std::log(s), 3 - std::log(s)}, 1e-14);
  // Axis 0 of a [2, 2]: columns; large values do not overflow.
  HostTensor y = tensor(f64({2, 2}), {1000, 0, 1000, 0});
  expectValues(runOp("tc.softmax", {y}, f64({2, 2}), {{"axis", aInt(0)}}), {0.5, 0.5, 0.5, 0.5});
}

TEST(LayerNorm, OptionalScaleAndBias) {
  HostTensor x = tensor(f64({2, 4}), {1, 2, 3, 4, 0, 0, 4, 4});
  HostTensor g = tensor(f64({4}), {1, 2, 1, 1});
  HostTensor b = tensor(f64({4}), {0, 0, 0, 10});
  double d = std::sqrt(1.25); // row 0: mean 2.5, var 1.25; row 1: mean 2, var 4
  std::vector<double> plain = {-1.5 / d, -0.5 / d, 0.5 / d, 1.5 / d, -1, -1, 1, 1};
  Attrs at = {{"axis", aInt(1)}, {"epsilon", aFloat(0)}};
  expectValues(runOp("tc.layer_norm", {x}, f64({2, 4}), at, f64Mode()), plain, 1e-15);
  Attrs full = at;
  full["operand_present"] = aInts({1, 1, 1});
  expectValues(runOp("tc.layer_norm", {x, g, b}, f64({2, 4}), full, f64Mode()),
               {-1.5 / d, -1 / d, 0.5 / d, 1.5 / d + 10, -1, -2, 1, 11}, 1e-15);
  Attrs scaleOnly = at;
  scaleOnly["operand_present"] = aInts({1, 1, 0});
  expectValues(runOp("tc.layer_norm", {x, g}, f64({2, 4}), scaleOnly, f64Mode()),
               {-1.5 / d, -1 / d, 0.5 / d, 1.5 / d, -1, -2, 1, 1}, 1e-15);
  Attrs biasOnly = at;
  biasOnly["operand_present"] = aInts({1, 0, 1});
  expectValues(runOp("tc.layer_norm", {x, b}, f64({2, 4}), biasOnly, f64Mode()),
               {-1.5 / d, -0.5 / d, 0.5 / d, 1.5 / d + 10, -1, -1, 1, 11}, 1e-15);
  // epsilon matters for a constant row; axis 0 normalises everything.
  Attrs eps = {{"axis", aInt(0)}, {"epsilon", aFloat(1e-5)}};
  HostTensor c = tensor(f64({2}), {3, 5});
  expectValues(runOp("tc.layer_norm", {c}, f64({2}), eps, f64Mode()),
               {-1 / std::sqrt(1 + 1e-5), 1 / std::sqrt(1 + 1e-5)}, 1e-15);
  std::vector<HostTensor> outs;
  Attrs wrong = at;
  wrong["operand_present"] = aInts({1, 1, 1});
  Status st = tryRunOp("tc.layer_norm", {x, g}, {f64({2, 4})}, wrong, &outs);
  EXPECT_NE(st.message().find("operand_present"), std::string::npos) << st.message();
}

TEST(RmsNorm, WithAndWithoutScale) {
  HostTensor x = tensor(f64({1, 4}), {1, 2, 3, 4});
  double r = std::sqrt(7.5);
  Attrs at = {{"axis", aInt(1)}, {"epsilon", aFloat(0)}};
  expectValues(runOp("tc.rms_norm", {x}, f64({1, 4}), at, f64Mode()),
               {1 / r, 2 / r, 3 / r, 4 / r}, 1e-15);
  at["operand_present"] = aInts({1, 1});
  expectValues(runOp("tc.rms_norm", {x, tensor(f64({4}), {2, 2, 2, 0})}, f64({1, 4}), at,
                     f64Mode()),
               {2 / r, 4 / r, 6 / r, 0}, 1e-15);
}

TEST(Loss, CrossEntropyReductionsWeightsIgnore) {
  HostTensor logits = tensor(f64({2, 2}), {0, 0, 1, 2});
  HostTensor labels = itensor(i64({2}), {0, 1});
  double l0 = std::log(2.0), l1 = std::log(1 + std::exp(-1.0));
  auto ce = [&](HostTensor lab, TensorType out, Attrs a, std::vector<HostTensor> extra = {}) {
    std::vector<HostTensor> ins = {logits, lab};
    ins.insert(ins.end(), extra.begin(), extra.end());
    return runOp("tc.cross_entropy", ins, out, a, f64Mode());
  };
  expectValues(ce(labels, f64({}), {}), {(l0 + l1) / 2}, 1e-15); // default mean
  expectValues(ce(labels, f64({}), {{"reduction", aStr("sum")}}), {l0 + l1}, 1e-15);
  expectValues(ce(labels, f64({2}), {{"reduction", aStr("none")}}), {l0, l1}, 1e-15);
  HostTensor ignored = itensor(i64({2}), {0, -100});
  expectValues(ce(ignored, f64({}), {}), {l0}, 1e-15);
  expectValues(ce(ignored, f64({2}), {{"reduction", aStr("none")}}), {l0, 0}, 1e-15);
  expectValues(ce(itensor(i64({2}), {7, 7}), f64({}), {{"ignore_index", aInt(7)}}), {kNaN});
  expectValues(ce(itensor(i64({2}), {7, 7}), f64({}),
                  {{"ignore_index", aInt(7)}, {"reduction", aStr("sum")}}),
               {0});
  // Weighted mean: sum(w[y] l) / sum(w[y]).
  HostTensor w = tensor(f64({2}), {2, 1});
  expectValues(ce(labels, f64({}), {{"operand_present", aInts({1, 1, 1})}}, {w}),
               {(2 * l0 + l1) / 3}, 1e-15);
  expectValues(ce(labels, f64({2}),
                  {{"operand_present", aInts({1, 1, 1})}, {"reduction", aStr("none")}}, {w}),
               {2 * l0, l1}, 1e-15);
  // i32 labels work too.
  expectValues(ce(itensor(i32({2}), {0, 1}), f64({}), {}), {(l0 + l1) / 2}, 1e-15);
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.cross_entropy", {logits, itensor(i64({2}), {0, 2})}, {f64({})}, {},
                       &outs);
  EXPECT_EQ(st.code(), StatusCode::OutOfRange);
  EXPECT_NE(st.message().find("tc.cross_entropy"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("label 2 of row 1"), std::string::npos) << st.message();
}

TEST(Loss, NllLoss) {
  HostTensor logp = tensor(f64({2, 2}), {-1, -2, -3, -0.5});
  HostTensor labels = itensor(i64({2}), {1, 0});
  expectValues(runOp("tc.nll_loss", {logp, labels}, f64({})), {2.5});
  expectValues(runOp("tc.nll_loss", {logp, labels}, f64({2}), {{"reduction", aStr("none")}}),
               {2, 3});
  expectValues(runOp("tc.nll_loss", {logp, itensor(i64({2}), {1, -100})}, f64({})), {2});
  expectValues(runOp("tc.nll_loss", {logp, labels, tensor(f64({2}), {1, 3})}, f64({}),
                     {{"operand_present", aInts({1, 1, 1})}}),
               {(3 * 2 + 1 * 3) / 4.0});
}

TEST(Matmul, PlainTransposedBatched) {
  HostTensor a = tensor(f32({2, 3}), {1, 2, 3, 4, 5, 6});
  HostTensor b = tensor(f32({3, 2}), {1, 0, 0, 1, 1, 1});
  expectValues(runOp("tc.matmul", {a, b}, f32({2, 2})), {4, 5, 10, 11});
  HostTensor at = tensor(f32({3, 2}), {1, 4, 2, 5, 3, 6}); // a transposed
  expectValues(runOp("tc.matmul", {at, b}, f32({2, 2}), {{"transpose_lhs", aInt(1)}}),
               {4, 5, 10, 11});
  HostTensor bt = tensor(f32({2, 3}), {1, 0, 1, 0, 1, 1}); // b transposed
  expectValues(runOp("tc.matmul", {a, bt}, f32({2, 2}), {{"transpose_rhs", aInt(1)}}),
               {4, 5, 10, 11});
  expectValues(runOp("tc.matmul", {at, bt}, f32({2, 2}),
                     {{"transpose_lhs", aInt(1)}, {"transpose_rhs", aInt(1)}}),
               {4, 5, 10, 11});
  // Batch [2, 1] x [3]: broadcast to [2, 3].
  HostTensor ab = tensor(f32({2, 1, 1, 2}), {1, 2, 3, 4});
  HostTensor bb = tensor(f32({3, 2, 1}), {1, 1, 2, 2, 3, 3});
  expectValues(runOp("tc.matmul", {ab, bb}, f32({2, 3, 1, 1})), {3, 6, 9, 7, 14, 21});
  HostTensor ai = itensor(i64({1, 2}), {3, -4}), bi = itensor(i64({2, 1}), {5, 6});
  expectInts(runOp("tc.matmul", {ai, bi}, i64({1, 1})), {-9});
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.matmul", {a, a}, {f32({2, 3})}, {}, &outs);
  EXPECT_NE(st.message().find("lhs K 3 != rhs K 2"), std::string::npos) << st.message();
}

TEST(Matmul, FastEnoughForTraining) {
  const int64_t m = 512, k = 256, n = 256;
  std::vector<double> av(m * k), bv(k * n);
  for (size_t i = 0; i < av.size(); ++i)
    av[i] = static_cast<double>(i % 17) / 17.0 - 0.5;
  for (size_t i = 0; i < bv.size(); ++i)
    bv[i] = static_cast<double>(i % 13) / 13.0 - 0.5;
  HostTensor a = tensor(f32({m, k}), av), b = tensor(f32({k, n}), bv);
  FnBuilder fb;
  int32_t x = fb.input("a", a.type), y = fb.input("b", b.type);
  fb.output("c", fb.op("tc.matmul", {x, y}, f32({m, n})));
  std::vector<HostTensor> outs;
  Artifact empty;
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(runFunction(empty, fb.fn, {a, b}, &outs).isOk());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[512x256]x[256x256] f32 matmul (with decode/encode): %.4f s\n", seconds);
  EXPECT_LT(seconds, 0.5); // typically ~0.02 s; generous for a shared machine
  // Spot-check one element.
  std::vector<double> c = hostTensorToDoubles(outs[0]);
  std::vector<double> ad = hostTensorToDoubles(a), bd = hostTensorToDoubles(b);
  double want = 0;
  for (int64_t p = 0; p < k; ++p)
    want += ad[7 * k + p] * bd[p * n + 9];
  EXPECT_EQ(c[7 * n + 9], static_cast<double>(static_cast<float>(want)));
}

} // namespace
} // namespace tc::rt
