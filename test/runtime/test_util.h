//===- test_util.h - building small functions by hand for tests -*- C++ -*-===//
#ifndef TC_TEST_RUNTIME_TEST_UTIL_H
#define TC_TEST_RUNTIME_TEST_UTIL_H

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/src/schema/artifact.h"
#include "runtime/src/base/host_tensor.h"
#include "runtime/src/cpu/executor.h"

namespace tc::rt::test {

inline TensorType ty(DType t, std::vector<int64_t> shape) { return {t, std::move(shape)}; }
inline TensorType f32(std::vector<int64_t> s) { return ty(DType::F32, std::move(s)); }
inline TensorType f64(std::vector<int64_t> s) { return ty(DType::F64, std::move(s)); }
inline TensorType i64(std::vector<int64_t> s) { return ty(DType::I64, std::move(s)); }
inline TensorType i32(std::vector<int64_t> s) { return ty(DType::I32, std::move(s)); }
inline TensorType i1(std::vector<int64_t> s) { return ty(DType::I1, std::move(s)); }

inline HostTensor tensor(TensorType t, std::vector<double> v) { return makeHostTensor(t, v); }
inline HostTensor itensor(TensorType t, std::vector<int64_t> v) {
  return makeHostTensorInts(t, v);
}

inline Attr aInt(int64_t v) {
  Attr a;
  a.kind = Attr::Kind::Int;
  a.i = v;
  return a;
}
inline Attr aFloat(double v) {
  Attr a;
  a.kind = Attr::Kind::Float;
  a.f = v;
  return a;
}
inline Attr aStr(std::string v) {
  Attr a;
  a.kind = Attr::Kind::String;
  a.s = std::move(v);
  return a;
}
inline Attr aInts(std::vector<int64_t> v) {
  Attr a;
  a.kind = Attr::Kind::Ints;
  a.ints = std::move(v);
  return a;
}
inline Attr aTensor(HostTensor t) {
  Attr a;
  a.kind = Attr::Kind::Tensor;
  a.tensor = std::move(t);
  return a;
}

using Attrs = std::map<std::string, Attr>;

/// Builds a Function op by op.
struct FnBuilder {
  Function fn;
  explicit FnBuilder(std::string name = "infer") { fn.name = std::move(name); }

  int32_t value(TensorType t) {
    fn.values.push_back(std::move(t));
    return static_cast<int32_t>(fn.values.size() - 1);
  }
  int32_t input(const std::string &name, TensorType t) {
    int32_t v = value(std::move(t));
    fn.inputs.push_back(v);
    fn.inputNames.push_back(name);
    return v;
  }
  std::vector<int32_t> opN(const std::string &name, std::vector<int32_t> operands,
                           std::vector<TensorType> results, Attrs attrs = {}) {
    Op op;
    op.name = name;
    op.operands = std::move(operands);
    for (TensorType &t : results)
      op.results.push_back(value(std::move(t)));
    op.attrs = std::move(attrs);
    fn.ops.push_back(op);
    return fn.ops.back().results;
  }
  int32_t op(const std::string &name, std::vector<int32_t> operands, TensorType result,
             Attrs attrs = {}) {
    return opN(name, std::move(operands), {std::move(result)}, std::move(attrs))[0];
  }
  void output(const std::string &name, int32_t v) {
    fn.outputs.push_back(v);
    fn.outputNames.push_back(name);
  }
};

/// Runs one op on `ins` (fed as inputs x0, x1, ...).
inline Status tryRunOp(const std::string &name, const std::vector<HostTensor> &ins,
                       std::vector<TensorType> results, Attrs attrs,
                       std::vector<HostTensor> *outs, ExecOptions opts = {},
                       const Artifact *artifact = nullptr) {
  FnBuilder b;
  std::vector<int32_t> operands;
  for (size_t i = 0; i < ins.size(); ++i)
    operands.push_back(b.input("x" + std::to_string(i), ins[i].type));
  std::vector<int32_t> r = b.opN(name, operands, std::move(results), std::move(attrs));
  for (size_t i = 0; i < r.size(); ++i)
    b.output("y" + std::to_string(i), r[i]);
  Artifact empty;
  return runFunction(artifact ? *artifact : empty, b.fn, ins, outs, opts);
}

/// Runs one single-result op and expects success.
inline HostTensor runOp(const std::string &name, const std::vector<HostTensor> &ins,
                        TensorType result, Attrs attrs = {}, ExecOptions opts = {}) {
  std::vector<HostTensor> outs;
  Status st = tryRunOp(name, ins, {result}, std::move(attrs), &outs, opts);
  EXPECT_TRUE(st.isOk()) << name << ": " << st.toString();
  if (!st.isOk() || outs.empty())
    return HostTensor{result, {}};
  return outs[0];
}

/// Expects the values of `t` (NaN matches NaN; exact unless tol > 0).
inline void expectValues(const HostTensor &t, const std::vector<double> &want,
                         double tol = 0, const std::string &what = "") {
  std::vector<double> got = hostTensorToDoubles(t);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i << " = " << got[i];
    } else if (tol == 0 || std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " element " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol) << what << " element " << i;
    }
  }
}

inline void expectInts(const HostTensor &t, const std::vector<int64_t> &want,
                       const std::string &what = "") {
  EXPECT_EQ(hostTensorToInts(t), want) << what;
}

inline ExecOptions f64Mode() {
  ExecOptions o;
  o.precision = RefPrecision::F64;
  return o;
}

} // namespace tc::rt::test

#endif // TC_TEST_RUNTIME_TEST_UTIL_H
