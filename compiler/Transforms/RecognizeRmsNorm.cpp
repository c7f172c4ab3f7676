//===- RecognizeRmsNorm.cpp - tc-recognize-rms-norm ------------------------===//
//
// RMSNorm has no ONNX operator before opset 23, so exporters write it out:
// `w * (x * 1 / sqrt(mean(x^2, last axis) + eps))` (HuggingFace's
// LlamaRMSNorm; also with rsqrt, reciprocal, x * x, the scale on either
// side, or no scale). This pass matches that chain from its mean and, when
// every intermediate value is read only by the next step, replaces it by one
// tc.rms_norm, which the GPU runs as one kernel forward and backward.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>

namespace tc {
#define GEN_PASS_DEF_TCRECOGNIZERMSNORM
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

/// The value of a one-element float constant.
std::optional<double> scalarConstant(Value v) {
  if (typeOf(v).getNumElements() != 1)
    return std::nullopt;
  return splatFloatValue(v);
}

/// The single user of `v`, if it has exactly one.
Operation *onlyUser(Value v) { return v.hasOneUse() ? *v.getUsers().begin() : nullptr; }

/// x when `sq` is x^2 (pow(x, 2) or x * x).
Value squared(Value sq) {
  Operation *def = sq.getDefiningOp();
  if (auto p = llvm::dyn_cast_or_null<PowOp>(def)) {
    std::optional<double> e = scalarConstant(p.getRhs());
    if (e && *e == 2.0)
      return p.getLhs();
  }
  if (auto m = llvm::dyn_cast_or_null<MulOp>(def))
    if (m.getLhs() == m.getRhs())
      return m.getLhs();
  return {};
}

/// From `mean` = reduce_mean(x^2, last axis, keepdims): the tc.rms_norm that
/// replaces the whole chain, or nothing when the chain is not RMSNorm's.
/// Once mean(x^2) + eps is found (an RMSNorm by all signs), a failure says
/// why in `*why`.
bool matchAndRewrite(ReduceMeanOp mean, OpBuilder &b, std::string *why) {
  auto xt = RankedTensorType();
  Value x = squared(mean.getInput());
  if (!x || !mean.getKeepdims() || !mean.getInput().hasOneUse())
    return false;
  xt = typeOf(x);
  int64_t rank = xt.getRank();
  if (rank < 1 || mean.getAxes().size() != 1 || (mean.getAxes()[0] != rank - 1 &&
                                                 mean.getAxes()[0] != -1))
    return false;
  SmallVector<Operation *> chain = {mean.getInput().getDefiningOp(), mean};
  // + eps
  auto add = llvm::dyn_cast_or_null<AddOp>(onlyUser(mean.getResult()));
  if (!add)
    return false;
  std::optional<double> eps = scalarConstant(otherOperand(add, mean.getResult()));
  if (!eps || *eps < 0 || add.getType() != mean.getType())
    return false;
  chain.push_back(add);
  // 1 / sqrt(.): rsqrt, reciprocal(sqrt), 1 / sqrt; or x / sqrt(.) below.
  Value r;
  Operation *u = onlyUser(add.getResult());
  Operation *sqrtOp = nullptr;
  if (auto rs = llvm::dyn_cast_or_null<RsqrtOp>(u)) {
    r = rs.getResult();
    chain.push_back(rs);
  } else if (auto sq = llvm::dyn_cast_or_null<SqrtOp>(u)) {
    sqrtOp = sq;
    chain.push_back(sq);
    Operation *v = onlyUser(sq.getResult());
    if (auto rc = llvm::dyn_cast_or_null<ReciprocalOp>(v)) {
      r = rc.getResult();
      chain.push_back(rc);
    } else if (auto dv = llvm::dyn_cast_or_null<DivOp>(v);
               dv && dv.getRhs() == sq.getResult()) {
      std::optional<double> one = scalarConstant(dv.getLhs());
      if (one && *one == 1.0) {
        r = dv.getResult();
        chain.push_back(dv);
      } else if (dv.getLhs() == x && dv.getType() == xt) {
        r = sq.getResult(); // x / sqrt(.) is the normalised x itself
      }
    }
  }
  if (!r) {
    *why = "mean(x^2) + eps is not followed by rsqrt, 1 / sqrt or a division of x by its sqrt";
    return false;
  }
  // x * r (or x / sqrt(.)).
  Value normed;
  if (r == (sqrtOp ? sqrtOp->getResult(0) : Value())) {
    normed = onlyUser(r)->getResult(0);
    chain.push_back(onlyUser(r));
  } else {
    auto m = llvm::dyn_cast_or_null<MulOp>(onlyUser(r));
    if (!m || otherOperand(m, r) != x || m.getType() != xt) {
      *why = "the reciprocal RMS does not multiply the same x (or is read elsewhere)";
      return false;
    }
    normed = m.getResult();
    chain.push_back(m);
  }
  // Optional scale: w * normed with w [C] of x's element type.
  Value scale, result = normed;
  if (auto m = llvm::dyn_cast_or_null<MulOp>(onlyUser(normed))) {
    Value w = otherOperand(m, normed);
    if (w && m.getType() == xt && typeOf(w).getRank() == 1 &&
        typeOf(w).getDimSize(0) == xt.getDimSize(rank - 1) &&
        typeOf(w).getElementType() == xt.getElementType()) {
      scale = w;
      result = m.getResult();
      chain.push_back(m);
    }
  }
  b.setInsertionPointAfter(result.getDefiningOp());
  auto norm = RmsNormOp::create(b, result.getLoc(), xt, /*amax=*/Type(), x, scale,
                                b.getI64IntegerAttr(rank - 1), b.getF64FloatAttr(*eps));
  result.replaceAllUsesWith(norm.getResult());
  for (Operation *op : llvm::reverse(chain))
    if (op->use_empty())
      op->erase();
  return true;
}

struct RecognizeRmsNormPass : tc::impl::TcRecognizeRmsNormBase<RecognizeRmsNormPass> {
  void runOnOperation() override {
    SmallVector<ReduceMeanOp> means;
    getOperation().walk([&](ReduceMeanOp m) { means.push_back(m); });
    OpBuilder b(&getContext());
    for (ReduceMeanOp m : means) {
      std::string why;
      if (!matchAndRewrite(m, b, &why) && !why.empty()) {
        std::string node;
        if (auto n = llvm::dyn_cast<NameLoc>(m->getLoc()))
          node = " at node '" + n.getName().str() + "'";
        m->emitRemark() << "RMSNorm" << node << " left unfused (written out): " << why;
      }
    }
  }
};

} // namespace
