//===- reference_test.cpp - runtime/include/tc/reference.h ----------------===//
//
// The public reference evaluation the compiler folds constants with: one op
// and whole functions on host tensors, rounding as the types declare, errors
// as messages, the op-supported query.
//
//===----------------------------------------------------------------------===//
#include "tc/reference.h"

#include "test_util.h"

namespace tc::rt {
namespace {

using namespace tc::rt::test;

std::vector<double> values(const HostTensor &t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.type.numElements(); ++i)
    v.push_back(loadAsDouble(t.data.data(), t.type.dtype, i));
  return v;
}

TEST(Reference, RunsOneOpOnHostTensors) {
  Op add;
  add.name = "tc.add";
  add.operands = {7, 9}; // ignored: runOp numbers the values itself
  std::vector<HostTensor> out;
  std::string error;
  ASSERT_TRUE(reference::runOp(add, {tensor(f32({3}), {1, 2, 3}), tensor(f32({3}), {10, 20, 30})},
                               {f32({3})}, &out, &error))
      << error;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, f32({3}));
  EXPECT_EQ(values(out[0]), (std::vector<double>{11, 22, 33}));
}

TEST(Reference, RoundsToTheDeclaredType) {
  // 1 + 2^-8 is halfway between the bf16 values 1 and 1 + 2^-7: the result
  // rounds to even, 1 (an f32 result would keep it).
  Op add;
  add.name = "tc.add";
  std::vector<HostTensor> out;
  std::string error;
  TensorType bf = ty(DType::BF16, {1});
  ASSERT_TRUE(reference::runOp(add, {tensor(bf, {1}), tensor(bf, {0.00390625})}, {bf}, &out, &error))
      << error;
  EXPECT_EQ(values(out[0]), (std::vector<double>{1}));
}

TEST(Reference, RunsAFunction) {
  FnBuilder b("fold");
  int32_t x = b.input("x", f32({2}));
  b.output("y", b.op("tc.mul", {x, x}, f32({2})));
  std::vector<HostTensor> out;
  std::string error;
  ASSERT_TRUE(reference::runFunction(b.fn, {tensor(f32({2}), {3, -4})}, &out, &error)) << error;
  EXPECT_EQ(values(out[0]), (std::vector<double>{9, 16}));
}

TEST(Reference, ErrorsComeBackAsMessages) {
  Op op;
  op.name = "tc.no_such_op";
  std::vector<HostTensor> out;
  std::string error;
  EXPECT_FALSE(reference::runOp(op, {}, {f32({1})}, &out, &error));
  EXPECT_NE(error.find("tc.no_such_op"), std::string::npos) << error;
  // A parameter has no data: folding never sees weights.
  FnBuilder b("fold");
  b.output("w", b.op("tc.parameter", {}, f32({2}), {{"name", aStr("w")}}));
  error.clear();
  EXPECT_FALSE(reference::runFunction(b.fn, {}, &out, &error));
  EXPECT_NE(error.find("'w'"), std::string::npos) << error;
  EXPECT_FALSE(reference::runFunction(b.fn, {}, &out, nullptr)); // error is optional
}

TEST(Reference, SupportedOps) {
  EXPECT_TRUE(reference::isSupportedOp("tc.add"));
  EXPECT_TRUE(reference::isSupportedOp("tc.matmul"));
  EXPECT_FALSE(reference::isSupportedOp("tc.no_such_op"));
  EXPECT_FALSE(reference::isSupportedOp("add"));
}

} // namespace
} // namespace tc::rt
