//===- executor_test.cpp - input checks, errors, precision, lifetimes -----===//
#include <cmath>
#include <limits>

#include "test_util.h"

namespace tc::rt {
namespace {

using namespace tc::rt::test;

Function addFunction() {
  FnBuilder b("infer");
  int32_t x = b.input("x", f32({2, 16}));
  int32_t ids = b.input("ids", i64({2}));
  b.output("y", b.op("tc.add", {x, x}, f32({2, 16})));
  b.output("ids", ids);
  return b.fn;
}

TEST(Executor, BadInputDTypeOrShapeNamesTheInput) {
  Function fn = addFunction();
  Artifact a;
  std::vector<HostTensor> outs;
  HostTensor x = tensor(f32({2, 16}), std::vector<double>(32, 1));
  HostTensor ids = itensor(i64({2}), {1, 2});
  ASSERT_TRUE(runFunction(a, fn, {x, ids}, &outs).isOk());
  Status st = runFunction(a, fn, {itensor(i64({2, 8}), std::vector<int64_t>(16, 0)), ids}, &outs);
  EXPECT_EQ(st.code(), StatusCode::InvalidArgument);
  EXPECT_EQ(st.message(), "input 'x': expected f32 2x16, got i64 2x8");
  st = runFunction(a, fn, {x, itensor(i32({2}), {1, 2})}, &outs);
  EXPECT_EQ(st.message(), "input 'ids': expected i64 2, got i32 2");
  st = runFunction(a, fn, {x}, &outs);
  EXPECT_NE(st.message().find("takes 2 inputs (x, ids), got 1"), std::string::npos) << st.message();
  HostTensor shortData = x;
  shortData.data.resize(8);
  st = runFunction(a, fn, {shortData, ids}, &outs);
  EXPECT_NE(st.message().find("input 'x'"), std::string::npos) << st.message();
  EXPECT_TRUE(checkInputs(fn, {x, ids}).isOk());
}

TEST(Executor, UnsupportedOp) {
  FnBuilder b("infer");
  int32_t x = b.input("x", f32({2}));
  b.output("y", b.op("tc.foo", {x}, f32({2})));
  std::vector<HostTensor> outs;
  Artifact a;
  Status st = runFunction(a, b.fn, {tensor(f32({2}), {1, 2})}, &outs);
  EXPECT_EQ(st.code(), StatusCode::Unimplemented);
  EXPECT_EQ(st.message(), "unsupported op 'tc.foo' in function 'infer'");
}

TEST(Executor, KernelErrorsNameOpAndValue) {
  FnBuilder b("infer");
  int32_t x = b.input("x", f32({2}));
  int32_t y = b.op("tc.exp", {x}, f32({3})); // wrong declared shape
  b.output("y", y);
  std::vector<HostTensor> outs;
  Artifact a;
  Status st = runFunction(a, b.fn, {tensor(f32({2}), {1, 2})}, &outs);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("op 'tc.exp' #0 in function 'infer' (result %1)"),
            std::string::npos)
      << st.message();
  // Missing required attributes, wrong attribute kinds.
  st = tryRunOp("tc.softmax", {tensor(f32({2}), {1, 2})}, {f32({2})}, {}, &outs);
  EXPECT_NE(st.message().find("missing attribute 'axis'"), std::string::npos) << st.message();
  st = tryRunOp("tc.softmax", {tensor(f32({2}), {1, 2})}, {f32({2})}, {{"axis", aStr("x")}}, &outs);
  EXPECT_NE(st.message().find("'axis' must be an integer"), std::string::npos) << st.message();
  st = tryRunOp("tc.softmax", {tensor(f32({2}), {1, 2})}, {f32({2})}, {{"axis", aInt(3)}}, &outs);
  EXPECT_NE(st.message().find("out of range"), std::string::npos) << st.message();
  // Structural problems are caught before running.
  Function broken = b.fn;
  broken.ops[0].operands = {5};
  st = runFunction(a, broken, {tensor(f32({2}), {1, 2})}, &outs);
  EXPECT_NE(st.message().find("%5"), std::string::npos) << st.message();
}

TEST(Executor, F32RoundsAtEveryOpF64DoesNot) {
  FnBuilder b("infer");
  int32_t x = b.input("x", f32({1}));
  int32_t e = b.op("tc.constant", {}, f32({1}), {{"value", aTensor(tensor(f32({1}), {1e-10}))}});
  int32_t s = b.op("tc.add", {x, e}, f32({1}));
  int32_t d = b.op("tc.sub", {s, x}, f32({1}));
  b.output("d", d);
  Artifact a;
  std::vector<HostTensor> outs;
  ASSERT_TRUE(runFunction(a, b.fn, {tensor(f32({1}), {1})}, &outs).isOk());
  expectValues(outs[0], {0}); // 1 + 1e-10 rounds to 1 in f32
  ASSERT_TRUE(runFunction(a, b.fn, {tensor(f32({1}), {1})}, &outs, f64Mode()).isOk());
  // Kept in double until the output is stored as f32.
  expectValues(outs[0], {static_cast<float>((1 + static_cast<double>(1e-10f)) - 1)});
}

TEST(Executor, NarrowFormatsAreEmulatedExactly) {
  TensorType bf = ty(DType::BF16, {2});
  HostTensor one = tensor(bf, {1, 256});
  HostTensor small = tensor(bf, {std::ldexp(1, -8), 1});
  // 1 + 2^-8 is a tie: rounds to even 1.0; 256 + 1 rounds to 256.
  for (ExecOptions o : {ExecOptions{}, f64Mode()})
    expectValues(runOp("tc.add", {one, small}, bf, {}, o), {1, 256});
  TensorType h = ty(DType::F16, {1});
  expectValues(runOp("tc.mul", {tensor(h, {300}), tensor(h, {300})}, h),
               {std::numeric_limits<double>::infinity()});
  TensorType e4 = ty(DType::F8E4M3FN, {1});
  expectValues(runOp("tc.add", {tensor(e4, {448}), tensor(e4, {64})}, e4),
               {std::numeric_limits<double>::quiet_NaN()});
  TensorType i8 = ty(DType::I8, {1});
  expectInts(runOp("tc.add", {itensor(i8, {127}), itensor(i8, {1})}, i8), {-128});
}

TEST(Executor, MultiOpProgramAndValueReuse) {
  // y = softmax(x @ w + b) summed; x used twice, intermediate values freed.
  Artifact a;
  appendParameter(&a, "w", tensor(f32({2, 2}), {1, 0, 0, 1}));
  FnBuilder b("eval_step");
  int32_t x = b.input("x", f32({1, 2}));
  int32_t w = b.op("tc.parameter", {}, f32({2, 2}), {{"name", aStr("w")}});
  int32_t m = b.op("tc.matmul", {x, w}, f32({1, 2}));
  int32_t s = b.op("tc.add", {m, x}, f32({1, 2}));
  int32_t p = b.op("tc.softmax", {s}, f32({1, 2}), {{"axis", aInt(1)}});
  int32_t r = b.op("tc.reduce_sum", {p}, f32({}), {{"axes", aInts({0, 1})}});
  b.output("total", r);
  b.output("s", s);
  std::vector<HostTensor> outs;
  Status st = runFunction(a, b.fn, {tensor(f32({1, 2}), {1, 2})}, &outs);
  ASSERT_TRUE(st.isOk()) << st.toString();
  expectValues(outs[0], {1}, 1e-6);
  expectValues(outs[1], {2, 4});
}

TEST(Executor, TracedRunHandsOutTheAskedValuesInOpOrder) {
  // What tc-run --check compares against: the values whose ids are asked
  // for, each rounded to its type, as soon as its op ran; the outputs are
  // those of an untraced run; a sink's error stops the run with it.
  Artifact a;
  appendParameter(&a, "w", tensor(f32({2, 2}), {1, 0, 0, 1}));
  FnBuilder b("eval_step");
  int32_t x = b.input("x", f32({1, 2}));
  int32_t w = b.op("tc.parameter", {}, f32({2, 2}), {{"name", aStr("w")}});
  int32_t m = b.op("tc.matmul", {x, w}, f32({1, 2}));
  int32_t sum = b.op("tc.add", {m, x}, f32({1, 2}));
  int32_t s = b.op("tc.cast", {sum}, ty(DType::BF16, {1, 2}));
  b.output("s", s);
  a.functions.push_back(b.fn);
  std::unique_ptr<CpuExecutor> cpu;
  ASSERT_TRUE(CpuExecutor::create(&a, ExecOptions(), &cpu).isOk());
  std::vector<HostTensor> plain, traced;
  std::vector<HostTensor> in = {tensor(f32({1, 2}), {1.00390625f, 2})};
  {
    Status r = cpu->run("eval_step", in, &plain);
    ASSERT_TRUE(r.isOk()) << r.toString();
  }
  std::vector<std::pair<size_t, int32_t>> seen;
  std::vector<HostTensor> got;
  Status st = cpu->runTraced("eval_step", in, &traced, {m, s},
                             [&](size_t op, int32_t id, const HostTensor &t) {
                               seen.push_back({op, id});
                               got.push_back(t);
                               return Status::ok();
                             });
  ASSERT_TRUE(st.isOk()) << st.toString();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::make_pair(size_t(1), m));
  EXPECT_EQ(seen[1], std::make_pair(size_t(3), s));
  expectValues(got[0], {1.00390625, 2});
  EXPECT_EQ(got[1].type.dtype, DType::BF16);
  expectValues(got[1], {2, 4}); // 2.0078125 rounds to bf16's 2 (a tie, to even)
  EXPECT_EQ(traced[0].data, plain[0].data);
  st = cpu->runTraced("eval_step", in, &traced, {m},
                      [&](size_t, int32_t, const HostTensor &) { return dataLoss("sink full"); });
  EXPECT_EQ(st.code(), StatusCode::DataLoss);
  EXPECT_NE(st.message().find("sink full"), std::string::npos) << st.message();
}

} // namespace
} // namespace tc::rt
