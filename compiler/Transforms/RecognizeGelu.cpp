//===- RecognizeGelu.cpp - tc-recognize-gelu --------------------------------===//
//
// HuggingFace's gelu_new (GPT-2, Phi) and torch's GELU(approximate="tanh")
// (and, with the `erf` option, the exact GELU: GPT-NeoX / Pythia's "gelu",
// 0.5 x (1 + erf(x / sqrt 2))) reach ONNX written out (opsets before 20 have
// no Gelu):
// `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`, with x^3 as
// pow(x, 3) or x * x * x and the products in any order. This pass matches the
// chain from its tanh and replaces its result by one tc.gelu
// {approximate = "tanh"} of x: one op the precision plan keeps in fp32 math
// (the chain rounded every step to bf16, its constants too), whose GEMM
// epilogue cuBLASLt computes (tc-fuse-matmul-epilogue). Intermediate values
// read elsewhere stay; the chain's other ops are left for the canonicalizer.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <optional>

namespace tc {
#define GEN_PASS_DEF_TCRECOGNIZEGELU
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

/// Whether `v` is a one-element float constant equal to `want` within the
/// rounding of an f32 (exporters write the constants in the model's type).
bool isScalar(Value v, double want) {
  if (!v || llvm::cast<RankedTensorType>(v.getType()).getNumElements() != 1)
    return false;
  std::optional<double> got = splatFloatValue(v);
  return got && std::fabs(*got - want) <= 1e-6 * std::fabs(want);
}

/// Whether `v` is x^3: pow(x, 3), x * (x * x) or (x * x) * x.
bool isCube(Value v, Value x) {
  Operation *def = v.getDefiningOp();
  if (auto p = llvm::dyn_cast_or_null<PowOp>(def))
    return p.getLhs() == x && isScalar(p.getRhs(), 3.0);
  auto m = llvm::dyn_cast_or_null<MulOp>(def);
  if (!m)
    return false;
  auto square = [&](Value s) {
    auto sq = s.getDefiningOp<MulOp>();
    return sq && sq.getLhs() == x && sq.getRhs() == x;
  };
  return (m.getLhs() == x && square(m.getRhs())) || (m.getRhs() == x && square(m.getLhs()));
}

/// The product `a * b` of `op` (a tc.mul) with `a` a scalar constant `want`:
/// b, or null.
Value scaledBy(Operation *op, double want) {
  auto m = llvm::dyn_cast_or_null<MulOp>(op);
  if (!m)
    return {};
  if (isScalar(m.getRhs(), want))
    return m.getLhs();
  if (isScalar(m.getLhs(), want))
    return m.getRhs();
  return {};
}

/// x when `v` = x + 0.044715 * x^3.
Value innerOf(Value v) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add)
    return {};
  for (auto [x, w] : {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())})
    if (Value cube = scaledBy(w.getDefiningOp(), 0.044715); cube && isCube(cube, x))
      return x;
  return {};
}

/// Whether `v` = x * 0.5 (either order).
bool isHalfOf(Value v, Value x) { return scaledBy(v.getDefiningOp(), 0.5) == x; }

/// From f, the tanh (or erf) of a written-out GELU of x: the op whose result
/// is 0.5 x (1 + f), the product of x, 0.5 and 1 + f in any order, or null.
Operation *halfXOnePlus(Value f, Value x) {
  if (!x || !f.hasOneUse())
    return nullptr;
  auto one = llvm::dyn_cast<AddOp>(*f.getUsers().begin());
  Value c1 = one ? otherOperand(one, f) : Value();
  if (!c1 || !isScalar(c1, 1.0) || !one.getResult().hasOneUse())
    return nullptr;
  auto m1 = llvm::dyn_cast<MulOp>(*one.getResult().getUsers().begin());
  if (!m1)
    return nullptr;
  Value o1 = otherOperand(m1, one.getResult());
  if (!o1)
    return nullptr;
  if (isHalfOf(o1, x)) // (x * 0.5) * (1 + f)
    return m1;
  bool oneIsX = o1 == x, oneIsHalf = isScalar(o1, 0.5);
  if ((!oneIsX && !oneIsHalf) || !m1.getResult().hasOneUse())
    return nullptr;
  auto m2 = llvm::dyn_cast<MulOp>(*m1.getResult().getUsers().begin());
  Value o2 = m2 ? otherOperand(m2, m1.getResult()) : Value();
  if (!o2 || !(oneIsX ? isScalar(o2, 0.5) : o2 == x)) // ((1 + f) * x) * 0.5, or * 0.5 then x
    return nullptr;
  return m2;
}

/// From the tanh of a written-out tanh GELU: the op whose result is GELU(x)
/// and x, or nothing.
std::optional<std::pair<Operation *, Value>> match(TanhOp t) {
  Value inner = scaledBy(t.getInput().getDefiningOp(), std::sqrt(2.0 / M_PI));
  Value x = inner ? innerOf(inner) : Value();
  if (Operation *root = halfXOnePlus(t.getResult(), x))
    return std::pair<Operation *, Value>(root, x);
  return std::nullopt;
}

/// From the erf of a written-out exact GELU, erf(x / sqrt(2)) or erf(x *
/// (1 / sqrt(2))): the op whose result is GELU(x) and x, or nothing.
std::optional<std::pair<Operation *, Value>> match(ErfOp e) {
  Operation *def = e.getInput().getDefiningOp();
  Value x = scaledBy(def, M_SQRT1_2);
  if (auto d = llvm::dyn_cast_or_null<DivOp>(def); d && isScalar(d.getRhs(), M_SQRT2))
    x = d.getLhs();
  if (Operation *root = halfXOnePlus(e.getResult(), x))
    return std::pair<Operation *, Value>(root, x);
  return std::nullopt;
}

struct TcRecognizeGelu : tc::impl::TcRecognizeGeluBase<TcRecognizeGelu> {
  using TcRecognizeGeluBase::TcRecognizeGeluBase;
  void runOnOperation() override {
    SmallVector<std::tuple<Operation *, Value, StringRef>> found;
    getOperation().walk([&](Operation *op) {
      std::optional<std::pair<Operation *, Value>> m;
      StringRef form;
      if (auto t = llvm::dyn_cast<TanhOp>(op))
        m = match(t), form = "tanh";
      else if (auto e = llvm::dyn_cast<ErfOp>(op); e && erf)
        m = match(e), form = "none";
      if (m)
        found.emplace_back(m->first, m->second, form);
    });
    for (auto [root, x, form] : found) {
      if (root->getResult(0).getType() != x.getType())
        continue; // a broadcast product: not GELU of x elementwise
      OpBuilder b(root);
      auto gelu = GeluOp::create(b, root->getLoc(), x.getType(), x, b.getStringAttr(form));
      root->getResult(0).replaceAllUsesWith(gelu.getResult());
    }
  }
};

} // namespace
