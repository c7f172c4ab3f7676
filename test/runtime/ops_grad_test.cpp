//===- ops_grad_test.cpp - scatter_add, insert_slice, loss gradients ------===//
#include <cmath>

#include "test_util.h"

namespace tc::rt {
namespace {

using namespace tc::rt::test;

TEST(Grad, ScatterAddAccumulatesRepeatsAndNegativeIndices) {
  // The transpose of gather: rows 1 (twice) and 2 (as -1) of a 3x2 result.
  HostTensor upd = tensor(f32({3, 2}), {1, 2, 10, 20, 100, 200});
  HostTensor idx = itensor(i64({3}), {1, -1, 1});
  expectValues(runOp("tc.scatter_add", {upd, idx}, f32({3, 2}), {{"axis", aInt(0)}}),
               {0, 0, 101, 202, 10, 20});
  // axis 1, indices of rank 2: updates [2, (2x2), 1] into [2, 3, 1].
  HostTensor u2 = tensor(f32({2, 2, 2, 1}), {1, 2, 3, 4, 5, 6, 7, 8});
  HostTensor i2 = itensor(i32({2, 2}), {0, 2, 2, 2});
  expectValues(runOp("tc.scatter_add", {u2, i2}, f32({2, 3, 1}), {{"axis", aInt(1)}}),
               {1, 0, 9, 5, 0, 21});
  // Integers wrap like every integer op.
  HostTensor ui = itensor(i64({2}), {3, 4});
  expectInts(runOp("tc.scatter_add", {ui, itensor(i64({2}), {0, 0})}, i64({2}),
                   {{"axis", aInt(0)}}),
             {7, 0});
}

TEST(Grad, ScatterAddErrors) {
  std::vector<HostTensor> outs;
  HostTensor upd = tensor(f32({2, 2}), {1, 2, 3, 4});
  Status st = tryRunOp("tc.scatter_add", {upd, itensor(i64({2}), {0, 3})}, {f32({3, 2})},
                       {{"axis", aInt(0)}}, &outs);
  EXPECT_EQ(st.code(), StatusCode::OutOfRange) << st.toString();
  EXPECT_NE(st.message().find("index 3"), std::string::npos) << st.toString();
  st = tryRunOp("tc.scatter_add", {upd, itensor(i64({3}), {0, 1, 2})}, {f32({3, 2})},
                {{"axis", aInt(0)}}, &outs);
  EXPECT_FALSE(st.isOk());
}

TEST(Grad, InsertSliceIsTheTransposeOfSlice) {
  // Every element of an 8x7 tensor read by the slice goes back to its place.
  std::vector<double> src(12);
  for (int k = 0; k < 12; ++k)
    src[k] = k + 1;
  Attrs a{{"starts", aInts({7, 6})}, {"strides", aInts({-2, -3})}};
  HostTensor y = runOp("tc.insert_slice", {tensor(f32({4, 3}), src)}, f32({8, 7}), a);
  HostTensor back = runOp("tc.slice", {y}, f32({4, 3}), a);
  expectValues(back, src);
  std::vector<double> got = hostTensorToDoubles(y);
  double sum = 0;
  for (double v : got)
    sum += v;
  EXPECT_EQ(sum, 78); // nothing else is written
  EXPECT_EQ(got[7 * 7 + 6], 1);
  EXPECT_EQ(got[1 * 7 + 0], 12);
  // Positive strides, a 1-D integer tensor.
  expectInts(runOp("tc.insert_slice", {itensor(i64({2}), {5, 6})}, i64({5}),
                   {{"starts", aInts({1})}, {"strides", aInts({2})}}),
             {0, 5, 0, 6, 0});
  std::vector<HostTensor> outs;
  EXPECT_FALSE(tryRunOp("tc.insert_slice", {itensor(i64({2}), {5, 6})}, {i64({3})},
                        {{"starts", aInts({1})}, {"strides", aInts({2})}}, &outs)
                   .isOk());
}

TEST(Grad, CrossEntropyGrad) {
  HostTensor x = tensor(f64({3, 3}), {1, 2, 3, 0, 0, 0, -1, 5, 2});
  HostTensor labels = itensor(i64({3}), {2, -100, 0});
  HostTensor g = tensor(f64({}), {2});
  auto softmax = [](std::vector<double> r) {
    double m = std::max({r[0], r[1], r[2]}), s = 0;
    for (double v : r)
      s += std::exp(v - m);
    for (double &v : r)
      v = std::exp(v - m) / s;
    return r;
  };
  std::vector<double> p0 = softmax({1, 2, 3}), p2 = softmax({-1, 5, 2});
  // mean over the 2 rows not ignored, times 2.
  std::vector<double> want = {p0[0], p0[1], p0[2] - 1, 0, 0, 0, p2[0] - 1, p2[1], p2[2]};
  HostTensor mean = runOp("tc.cross_entropy_grad", {x, labels, g}, f64({3, 3}),
                          {{"reduction", aStr("mean")}}, f64Mode());
  std::vector<double> got = hostTensorToDoubles(mean);
  for (size_t k = 0; k < 9; ++k)
    EXPECT_NEAR(got[k], want[k], 1e-15) << k;
  // sum with a class weight: rows scaled by g * w[label].
  HostTensor w = tensor(f64({3}), {0.5, 1, 3});
  got = hostTensorToDoubles(runOp("tc.cross_entropy_grad", {x, labels, g, w}, f64({3, 3}),
                                  {{"reduction", aStr("sum")}}, f64Mode()));
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_NEAR(got[k], 2 * 3 * want[k], 1e-14) << k;
    EXPECT_NEAR(got[6 + k], 2 * 0.5 * want[6 + k], 1e-14) << k;
  }
  // none: one upstream gradient per row.
  HostTensor gr = tensor(f64({3}), {1, 7, -1});
  got = hostTensorToDoubles(runOp("tc.cross_entropy_grad", {x, labels, gr}, f64({3, 3}),
                                  {{"reduction", aStr("none")}}, f64Mode()));
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_NEAR(got[k], want[k] * 2 / 2, 1e-15);
    EXPECT_EQ(got[3 + k], 0);
    EXPECT_NEAR(got[6 + k], -want[6 + k], 1e-15);
  }
}

TEST(Grad, NllLossGrad) {
  HostTensor x = tensor(f32({2, 3}), {1, 2, 3, 4, 5, 6});
  HostTensor labels = itensor(i64({2}), {1, 2});
  HostTensor w = tensor(f32({3}), {1, 2, 4});
  // mean with weights: -w[y] / (2 + 4) at the label.
  expectValues(runOp("tc.nll_loss_grad", {x, labels, tensor(f32({}), {1}), w}, f32({2, 3}),
                     {{"reduction", aStr("mean")}}),
               {0, -2.0f / 6, 0, 0, 0, -4.0f / 6}, 1e-7);
  expectValues(runOp("tc.nll_loss_grad", {x, labels, tensor(f32({}), {3})}, f32({2, 3}),
                     {{"reduction", aStr("sum")}, {"ignore_index", aInt(2)}}),
               {0, -3, 0, 0, 0, 0});
  std::vector<HostTensor> outs;
  Status st = tryRunOp("tc.nll_loss_grad", {x, itensor(i64({2}), {1, 3}), tensor(f32({}), {1})},
                       {f32({2, 3})}, {}, &outs);
  EXPECT_EQ(st.code(), StatusCode::OutOfRange) << st.toString();
  st = tryRunOp("tc.nll_loss_grad", {x, labels, tensor(f32({2}), {1, 1})}, {f32({2, 3})},
                {{"reduction", aStr("sum")}}, &outs);
  EXPECT_FALSE(st.isOk()); // grad must be a scalar for "sum"
}

} // namespace
} // namespace tc::rt
