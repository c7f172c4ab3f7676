//===- Autodiff.cpp - tc-autodiff -----------------------------------------===//
//
// Reverse-mode differentiation of @infer into @grad_step.
//
// @grad_step starts as a copy of @infer. Two analyses pick the values that
// carry a gradient ("active"): those that depend on a trainable parameter
// through floating-point values ("varied") and that the loss depends on
// ("useful"). Then the ops of the copy are visited in reverse, and each
// active op's rule turns the gradients of its results into gradients of its
// active operands, which are summed per value (so a value used twice, or a
// parameter read by two tc.parameter ops, ends with one sum). The backward
// is made of ordinary tc ops plus the gradient-support ops (scatter_add,
// insert_slice, cross_entropy_grad, nll_loss_grad), inserted before the
// return; forward ops that nothing needs any more are erased at the end.
//
// Every op is built only from operands whose types the rule has made valid
// (the inferring builders abort on invalid operands), and every gradient is
// checked to have its value's type before it is summed.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Fp4Qat.h"
#include "compiler/Transforms/Fp8Plan.h"
#include "compiler/Transforms/LossScale.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace tc {
#define GEN_PASS_DEF_TCAUTODIFF
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

RankedTensorType tensorTypeOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}

bool isFloatTensor(Type t) {
  auto rt = llvm::dyn_cast<RankedTensorType>(t);
  return rt && llvm::isa<FloatType>(rt.getElementType());
}

/// The `tc.name` of result `i` of `fn`, or "".
std::string resultName(func::FuncOp fn, unsigned i) {
  if (auto d = fn.getResultAttrDict(i))
    if (auto s = d.getAs<StringAttr>("tc.name"))
      return s.getValue().str();
  return "";
}

//===----------------------------------------------------------------------===//
// Building blocks of the backward
//===----------------------------------------------------------------------===//

/// Small builders for the ops the rules emit, all at one location.
struct Emitter {
  OpBuilder &b;
  Location loc;

  /// A scalar constant tensor<elt> (binary ops broadcast it).
  Value scalar(Type elt, double v) {
    auto t = RankedTensorType::get({}, elt);
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(t, ArrayRef<Attribute>{FloatAttr::get(elt, v)}));
  }
  Value scalarLike(Value x, double v) {
    return scalar(tensorTypeOf(x).getElementType(), v);
  }
  /// A splat constant of type `t`.
  Value splat(RankedTensorType t, double v) {
    Type elt = t.getElementType();
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(t, ArrayRef<Attribute>{FloatAttr::get(elt, v)}));
  }

  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value mul(Value x, double s) { return mul(x, scalarLike(x, s)); }
  Value add(Value x, double s) { return add(x, scalarLike(x, s)); }
  /// s - x.
  Value rsub(double s, Value x) { return sub(scalarLike(x, s), x); }

  template <typename OpT> Value unary(Value x) {
    return OpT::create(b, loc, x.getType(), x);
  }
  Value neg(Value x) { return unary<NegOp>(x); }

  Value reduceSum(Value x, ArrayRef<int64_t> axes, bool keepdims) {
    return ReduceSumOp::create(b, loc, x, b.getDenseI64ArrayAttr(axes),
                               b.getBoolAttr(keepdims));
  }
  Value reduceMean(Value x, ArrayRef<int64_t> axes, bool keepdims) {
    return ReduceMeanOp::create(b, loc, x, b.getDenseI64ArrayAttr(axes),
                                b.getBoolAttr(keepdims));
  }
  Value reshape(Value x, RankedTensorType t) {
    if (x.getType() == t)
      return x;
    return ReshapeOp::create(b, loc, t, x);
  }
  Value broadcast(Value x, RankedTensorType t) {
    if (x.getType() == t)
      return x;
    return BroadcastOp::create(b, loc, t, x);
  }
  Value cast(Value x, Type elt) {
    auto t = tensorTypeOf(x);
    if (t.getElementType() == elt)
      return x;
    return CastOp::create(b, loc, RankedTensorType::get(t.getShape(), elt), x,
                          b.getBoolAttr(true));
  }
  /// select(cond, x, zero) and select(cond, zero, x).
  Value selectOr0(Value cond, Value x, bool xWhenTrue) {
    Value zero = scalarLike(x, 0.0);
    return xWhenTrue ? SelectOp::create(b, loc, cond, x, zero).getResult()
                     : SelectOp::create(b, loc, cond, zero, x).getResult();
  }

  /// The gradient of a value broadcast from `t` to g's shape: summed over
  /// the broadcast axes, then reshaped to `t`.
  Value sumTo(Value g, RankedTensorType t) {
    auto gt = tensorTypeOf(g);
    if (gt == t)
      return g;
    int64_t rg = gt.getRank(), rt = t.getRank();
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < rg; ++d) {
      int64_t dt = d - (rg - rt);
      if (dt < 0 || (t.getDimSize(dt) == 1 && gt.getDimSize(d) != 1))
        axes.push_back(d);
    }
    Value r = axes.empty() ? g : reduceSum(g, axes, /*keepdims=*/true);
    return reshape(r, t);
  }

  /// A reduction's result (or its gradient) with the reduced axes kept as 1.
  Value keepDims(Value v, RankedTensorType in, ArrayRef<int64_t> axes, bool keepdims) {
    if (keepdims)
      return v;
    SmallVector<int64_t> shape(in.getShape());
    for (int64_t a : axes)
      shape[a] = 1;
    return reshape(v, RankedTensorType::get(shape, tensorTypeOf(v).getElementType()));
  }
};

//===----------------------------------------------------------------------===//
// The differentiation of one function
//===----------------------------------------------------------------------===//

class Differentiator {
public:
  explicit Differentiator(func::FuncOp fn) : fn(fn) {}

  /// Rewrites `fn` (a copy of @infer) into @grad_step; with `lossScaling`
  /// the backward starts from the loss scale (kLossScaleEntry), not 1.
  LogicalResult run(unsigned lossIndex, StringRef lossName, bool lossScaling);

private:
  func::FuncOp fn;
  llvm::DenseSet<Value> varied, useful;
  llvm::DenseMap<Value, Value> grads;

  bool active(Value v) const { return varied.contains(v) && useful.contains(v); }

  /// Adds `g` to the gradient of `v` (ignored unless v is active).
  LogicalResult accumulate(Operation *op, Emitter &e, Value v, Value g);
  /// Applies the rule of `op` given the gradients of its results (null for
  /// results without one).
  LogicalResult backprop(Operation *op, ArrayRef<Value> resultGrads);
};

/// Ops whose derivative is zero almost everywhere: their results carry no
/// gradient at all.
bool hasZeroDerivative(Operation *op) {
  return llvm::isa<SignOp, FloorOp, CeilOp, RoundOp>(op);
}

LogicalResult Differentiator::accumulate(Operation *op, Emitter &e, Value v, Value g) {
  if (!active(v))
    return success();
  if (g.getType() != v.getType())
    return op->emitOpError() << "tc-autodiff internal error: gradient of type "
                             << g.getType() << " for an operand of type " << v.getType();
  auto it = grads.find(v);
  if (it == grads.end())
    grads[v] = g;
  else
    it->second = e.add(it->second, g);
  return success();
}

LogicalResult Differentiator::run(unsigned lossIndex, StringRef lossName, bool lossScaling) {
  MLIRContext *ctx = fn.getContext();
  Block &body = fn.getBody().front();
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(lossIndex);

  // Trainable parameters by name, in order of first appearance.
  llvm::MapVector<StringRef, SmallVector<ParameterOp>> params;
  for (Operation &op : body.without_terminator()) {
    auto p = llvm::dyn_cast<ParameterOp>(op);
    if (!p || !p.getTrainable())
      continue;
    if (!isFloatTensor(p.getType()))
      return p.emitOpError() << "trainable parameter '" << p.getName()
                             << "' has the non-floating type " << p.getType()
                             << " and cannot get a gradient";
    auto &list = params[p.getName()];
    if (!list.empty() && list.front().getType() != p.getType())
      return p.emitOpError() << "parameter '" << p.getName() << "' is read as "
                             << p.getType() << " here and as "
                             << list.front().getType() << " before";
    list.push_back(p);
  }

  // Varied: depends on a trainable parameter through floating values.
  for (Operation &op : body.without_terminator()) {
    if (auto p = llvm::dyn_cast<ParameterOp>(op)) {
      if (p.getTrainable())
        varied.insert(p.getResult());
      continue;
    }
    if (hasZeroDerivative(&op) ||
        !llvm::any_of(op.getOperands(), [&](Value v) { return varied.contains(v); }))
      continue;
    for (Value r : op.getResults())
      if (isFloatTensor(r.getType()))
        varied.insert(r);
  }
  // Useful: the loss depends on it.
  useful.insert(loss);
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (llvm::any_of(op.getResults(), [&](Value r) { return useful.contains(r); }))
      for (Value v : op.getOperands())
        useful.insert(v);

  OpBuilder b(ret);
  if (active(loss)) {
    Emitter e{b, loss.getLoc()};
    RankedTensorType lt = tensorTypeOf(loss);
    if (lossScaling) {
      // d(loss * scale): the f32 scale, in the loss's type (a scalar).
      auto scale = ParameterOp::create(b, loss.getLoc(),
                                       RankedTensorType::get({}, b.getF32Type()),
                                       b.getStringAttr(kLossScaleEntry), UnitAttr());
      scale->setAttr("tc.optimizer_state", b.getUnitAttr());
      Value seed = scale.getResult();
      if (!lt.getElementType().isF32())
        seed = CastOp::create(b, loss.getLoc(), lt, seed, b.getBoolAttr(true));
      grads[loss] = seed;
    } else {
      grads[loss] = e.splat(lt, 1.0);
    }
  }
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op.getResults()) {
      resultGrads.push_back(grads.lookup(r));
      any |= (bool)resultGrads.back();
    }
    if (!any || llvm::isa<ParameterOp>(op))
      continue;
    if (failed(backprop(&op, resultGrads)))
      return failure();
  }

  // Results: the loss, then one gradient per trainable parameter.
  SmallVector<Value> results{loss};
  SmallVector<Attribute> resultAttrs{
      DictionaryAttr::get(ctx, {NamedAttribute(StringAttr::get(ctx, "tc.name"),
                                               StringAttr::get(ctx, lossName))})};
  for (auto &[name, reads] : params) {
    Emitter e{b, reads.front().getLoc()};
    Value sum;
    for (ParameterOp p : reads)
      if (Value g = grads.lookup(p.getResult()))
        sum = sum ? e.add(sum, g) : g;
    if (!sum)
      sum = e.splat(reads.front().getType(), 0.0);
    results.push_back(sum);
    resultAttrs.push_back(DictionaryAttr::get(
        ctx, {NamedAttribute(StringAttr::get(ctx, "tc.name"),
                             StringAttr::get(ctx, "grad:" + name.str()))}));
  }
  appendFp4StepUpdate(b, fn, results, resultAttrs);
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  fn.setType(FunctionType::get(ctx, fn.getArgumentTypes(),
                               ValueRange(results).getTypes()));
  fn.setAllResultAttrs(resultAttrs);

  // Drop the forward values nothing uses any more (users come later in the
  // block, so one reverse sweep suffices).
  for (Operation *op = body.getTerminator()->getPrevNode(); op;) {
    Operation *prev = op->getPrevNode();
    if (op->use_empty() && isMemoryEffectFree(op))
      op->erase();
    op = prev;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The rules
//===----------------------------------------------------------------------===//

LogicalResult Differentiator::backprop(Operation *op, ArrayRef<Value> resultGrads) {
  OpBuilder b(fn.getBody().front().getTerminator());
  Emitter e{b, op->getLoc()};
  Value g = resultGrads.front();
  auto acc = [&](Value v, Value grad) { return accumulate(op, e, v, grad); };
  auto needs = [&](Value v) { return active(v); };
  auto unsupported = [&](const Twine &why) -> LogicalResult {
    return op->emitOpError() << "has no gradient rule in tc-autodiff: " << why;
  };

  // Elementwise unary: d(input) = g * f'(x), written with x and y = f(x).
  auto unaryRule = [&](Value x, Value y) -> FailureOr<Value> {
    return llvm::TypeSwitch<Operation *, FailureOr<Value>>(op)
        .Case([&](NegOp) { return e.neg(g); })
        .Case([&](AbsOp) { return e.mul(g, e.unary<SignOp>(x)); })
        .Case([&](ReluOp) {
          Value pos = GtOp::create(b, e.loc, x, e.scalarLike(x, 0.0));
          return e.selectOr0(pos, g, true);
        })
        .Case([&](ExpOp) { return e.mul(g, y); })
        .Case([&](LogOp) { return e.div(g, x); })
        .Case([&](SqrtOp) { return e.div(e.mul(g, 0.5), y); })
        .Case([&](RsqrtOp) { return e.mul(e.mul(g, -0.5), e.mul(y, e.mul(y, y))); })
        .Case([&](ReciprocalOp) { return e.neg(e.mul(g, e.mul(y, y))); })
        .Case([&](TanhOp) { return e.mul(g, e.rsub(1.0, e.mul(y, y))); })
        .Case([&](SigmoidOp) { return e.mul(g, e.mul(y, e.rsub(1.0, y))); })
        .Case([&](ErfOp) {
          Value d = e.unary<ExpOp>(e.neg(e.mul(x, x)));
          return e.mul(g, e.mul(d, 2.0 / std::sqrt(M_PI)));
        })
        .Case([&](SiluOp) {
          Value s = e.unary<SigmoidOp>(x);
          Value d = e.mul(s, e.add(e.mul(x, e.rsub(1.0, s)), 1.0));
          return e.mul(g, d);
        })
        .Case([&](GeluOp gelu) {
          Value x2 = e.mul(x, x);
          Value d;
          if (gelu.getApproximate() == "tanh") {
            const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
            Value u = e.mul(e.add(x, e.mul(e.mul(x, x2), c)), k);
            Value t = e.unary<TanhOp>(u);
            Value du = e.mul(e.add(e.mul(x2, 3.0 * c), 1.0), k);
            Value left = e.mul(e.add(t, 1.0), 0.5);
            Value right = e.mul(e.mul(e.mul(x, e.rsub(1.0, e.mul(t, t))), du), 0.5);
            d = e.add(left, right);
            // Named for the GPU pipeline: g * gelu_tanh'(x), which a GEMM
            // producing g computes with cuBLASLt's DGELU epilogue (tc-fuse
            // gelu-aux); the reference ignores the name.
            Value r = e.mul(g, d);
            r.getDefiningOp()->setAttr(kGeluGradAttr, StringAttr::get(r.getContext(), "tanh"));
            return r;
          }
          Value cdf = e.mul(e.add(e.unary<ErfOp>(e.mul(x, M_SQRT1_2)), 1.0), 0.5);
          Value pdf = e.mul(e.unary<ExpOp>(e.mul(x2, -0.5)), 1.0 / std::sqrt(2.0 * M_PI));
          d = e.add(cdf, e.mul(x, pdf));
          // g * gelu_erf'(x), named as the tanh form's is (tc-fuse gelu-erf).
          Value r = e.mul(g, d);
          r.getDefiningOp()->setAttr(kGeluGradAttr, StringAttr::get(r.getContext(), "none"));
          return r;
        })
        .Case([&](SinOp) { return e.mul(g, e.unary<CosOp>(x)); })
        .Case([&](CosOp) { return e.neg(e.mul(g, e.unary<SinOp>(x))); })
        .Case([&](TanOp) { return e.mul(g, e.add(e.mul(y, y), 1.0)); })
        .Case([&](AsinOp) { return e.mul(g, e.unary<RsqrtOp>(e.rsub(1.0, e.mul(x, x)))); })
        .Case([&](AcosOp) { return e.neg(e.mul(g, e.unary<RsqrtOp>(e.rsub(1.0, e.mul(x, x))))); })
        .Case([&](AtanOp) { return e.div(g, e.add(e.mul(x, x), 1.0)); })
        .Case([&](SinhOp) { return e.mul(g, e.unary<CoshOp>(x)); })
        .Case([&](CoshOp) { return e.mul(g, e.unary<SinhOp>(x)); })
        .Case([&](AsinhOp) { return e.mul(g, e.unary<RsqrtOp>(e.add(e.mul(x, x), 1.0))); })
        .Case([&](AcoshOp) { return e.mul(g, e.unary<RsqrtOp>(e.add(e.mul(x, x), -1.0))); })
        .Case([&](AtanhOp) { return e.div(g, e.rsub(1.0, e.mul(x, x))); })
        .Default([&](Operation *) { return failure(); });
  };
  // Quantisation-aware training: the straight-through estimator (the step
  // of stochastic rounding is no value to differentiate).
  if (auto fq = llvm::dyn_cast<FakeQuantizeOp>(op)) {
    if (fq.getUnscaled()) // tc-fp4-exact's, made after the backward exists
      return fq.emitError("an unscaled tc.fake_quantize has no gradient rule");
    return needs(fq.getInput()) ? acc(fq.getInput(), g) : success();
  }
  if (op->getNumOperands() == 1 && op->getNumResults() == 1 &&
      op->hasTrait<OpTrait::SameOperandsAndResultType>() &&
      !llvm::isa<CumSumOp, SoftmaxOp, LogSoftmaxOp>(op)) {
    Value x = op->getOperand(0);
    if (!needs(x))
      return success();
    FailureOr<Value> dx = unaryRule(x, op->getResult(0));
    if (failed(dx))
      return unsupported("unknown elementwise op");
    return acc(x, *dx);
  }

  // Numpy-broadcasting binary ops: gradients are summed back to each
  // operand's shape.
  auto binary = [&](Value lhs, Value rhs, auto dl, auto dr) -> LogicalResult {
    if (needs(lhs) && failed(acc(lhs, e.sumTo(dl(), tensorTypeOf(lhs)))))
      return failure();
    if (needs(rhs) && failed(acc(rhs, e.sumTo(dr(), tensorTypeOf(rhs)))))
      return failure();
    return success();
  };
  /// Weight of the lhs in max/min: 1 where it wins, 1/2 on ties (as torch).
  auto lhsShare = [&](Value lhs, Value rhs, bool isMax) {
    Value wins = isMax ? GtOp::create(b, e.loc, lhs, rhs).getResult()
                       : LtOp::create(b, e.loc, lhs, rhs).getResult();
    Value tie = EqOp::create(b, e.loc, lhs, rhs);
    Value half = SelectOp::create(b, e.loc, tie, e.scalarLike(g, 0.5), e.scalarLike(g, 0.0));
    Value one = e.scalarLike(g, 1.0);
    return e.mul(g, SelectOp::create(b, e.loc, wins, one, half).getResult());
  };

  // Reductions over `axes`.
  auto reduction = [&](auto red) -> LogicalResult {
    Value x = red.getInput();
    if (!needs(x))
      return success();
    auto xt = tensorTypeOf(x);
    ArrayRef<int64_t> axes = red.getAxes();
    bool keep = red.getKeepdims();
    Value gk = e.keepDims(g, xt, axes, keep);
    Operation *o = red.getOperation();
    if (llvm::isa<ReduceSumOp>(o))
      return acc(x, e.broadcast(gk, xt));
    if (llvm::isa<ReduceMeanOp>(o)) {
      int64_t count = 1;
      for (int64_t a : axes)
        count *= xt.getDimSize(a);
      return acc(x, e.broadcast(e.mul(gk, 1.0 / (double)count), xt));
    }
    if (llvm::isa<ReduceProdOp>(o)) {
      // The product of the others, without dividing by zero: y / x where
      // the reduced slice has no zero; at its only zero, the product of
      // the non-zero elements; 0 everywhere else.
      Value isZero = EqOp::create(b, e.loc, x, e.scalarLike(x, 0.0));
      Value zeros = e.reduceSum(e.cast(isZero, xt.getElementType()), axes, true);
      Value safe = SelectOp::create(b, e.loc, isZero, e.scalarLike(x, 1.0), x);
      Value prodNonZero = ReduceProdOp::create(b, e.loc, safe, b.getDenseI64ArrayAttr(axes),
                                               b.getBoolAttr(true));
      Value noZero = EqOp::create(b, e.loc, zeros, e.scalarLike(x, 0.0));
      Value oneZero = EqOp::create(b, e.loc, zeros, e.scalarLike(x, 1.0));
      Value atZero = e.selectOr0(oneZero, prodNonZero, true);
      Value elsewhere = e.selectOr0(noZero, e.div(prodNonZero, safe), true);
      Value others = SelectOp::create(b, e.loc, isZero, atZero, elsewhere);
      return acc(x, e.mul(gk, others));
    }
    Value yk = e.keepDims(red.getResult(), xt, axes, keep);
    // max/min: shared evenly by the elements that reach the extremum.
    Value mask = e.cast(EqOp::create(b, e.loc, x, yk), xt.getElementType());
    Value count = e.reduceSum(mask, axes, /*keepdims=*/true);
    return acc(x, e.mul(mask, e.div(gk, count)));
  };

  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](CastOp cast) -> LogicalResult {
        Value x = cast.getInput();
        if (!needs(x))
          return success();
        return acc(x, e.cast(g, tensorTypeOf(x).getElementType()));
      })
      .Case([&](AddOp o) {
        return binary(o.getLhs(), o.getRhs(), [&] { return g; }, [&] { return g; });
      })
      .Case([&](SubOp o) {
        return binary(o.getLhs(), o.getRhs(), [&] { return g; },
                      [&] { return e.neg(g); });
      })
      .Case([&](MulOp o) {
        return binary(o.getLhs(), o.getRhs(), [&] { return e.mul(g, o.getRhs()); },
                      [&] { return e.mul(g, o.getLhs()); });
      })
      .Case([&](DivOp o) {
        return binary(
            o.getLhs(), o.getRhs(), [&] { return e.div(g, o.getRhs()); },
            [&] { return e.neg(e.div(e.mul(g, o.getResult()), o.getRhs())); });
      })
      .Case([&](PowOp o) {
        Value a = o.getLhs(), p = o.getRhs();
        return binary(
            a, p,
            [&] {
              Value pm1 = e.add(p, -1.0);
              return e.mul(g, e.mul(p, PowOp::create(b, e.loc, a, pm1).getResult()));
            },
            [&] { return e.mul(g, e.mul(o.getResult(), e.unary<LogOp>(a))); });
      })
      .Case([&](MaxOp o) {
        Value gl;
        return binary(
            o.getLhs(), o.getRhs(),
            [&] { return gl = lhsShare(o.getLhs(), o.getRhs(), true); },
            [&] { return e.sub(g, gl ? gl : lhsShare(o.getLhs(), o.getRhs(), true)); });
      })
      .Case([&](MinOp o) {
        Value gl;
        return binary(
            o.getLhs(), o.getRhs(),
            [&] { return gl = lhsShare(o.getLhs(), o.getRhs(), false); },
            [&] { return e.sub(g, gl ? gl : lhsShare(o.getLhs(), o.getRhs(), false)); });
      })
      .Case([&](RemOp o) {
        // y = a - q * b with q = trunc(a / b) (fmod) or floor(a / b): an
        // integer, recovered exactly enough by rounding (a - y) / b.
        return binary(o.getLhs(), o.getRhs(), [&] { return g; }, [&] {
          Value q = e.unary<RoundOp>(e.div(e.sub(o.getLhs(), o.getResult()), o.getRhs()));
          return e.neg(e.mul(g, q));
        });
      })
      .Case([&](SelectOp o) -> LogicalResult {
        Value t = o.getOnTrue(), f = o.getOnFalse();
        if (needs(t) && failed(acc(t, e.sumTo(e.selectOr0(o.getCond(), g, true),
                                              tensorTypeOf(t)))))
          return failure();
        if (needs(f) && failed(acc(f, e.sumTo(e.selectOr0(o.getCond(), g, false),
                                              tensorTypeOf(f)))))
          return failure();
        return success();
      })
      .Case([&](ReduceSumOp o) { return reduction(o); })
      .Case([&](ReduceMeanOp o) { return reduction(o); })
      .Case([&](ReduceMaxOp o) { return reduction(o); })
      .Case([&](ReduceMinOp o) { return reduction(o); })
      .Case([&](ReduceProdOp o) { return reduction(o); })
      .Case([&](CumSumOp o) -> LogicalResult {
        // The transpose of a scan is the scan in the other direction.
        Value x = o.getInput();
        if (!needs(x))
          return success();
        return acc(x, CumSumOp::create(b, e.loc, x.getType(), g, o.getAxisAttr(),
                                       o.getExclusiveAttr(),
                                       b.getBoolAttr(!o.getReverse())));
      })
      .Case([&](SoftmaxOp o) -> LogicalResult {
        Value x = o.getInput(), y = o.getResult();
        if (!needs(x))
          return success();
        Value s = e.reduceSum(e.mul(g, y), {static_cast<int64_t>(o.getAxis())}, true);
        return acc(x, e.mul(y, e.sub(g, s)));
      })
      .Case([&](LogSoftmaxOp o) -> LogicalResult {
        Value x = o.getInput(), y = o.getResult();
        if (!needs(x))
          return success();
        Value s = e.reduceSum(g, {static_cast<int64_t>(o.getAxis())}, true);
        return acc(x, e.sub(g, e.mul(e.unary<ExpOp>(y), s)));
      })
      .Case([&](LayerNormOp o) -> LogicalResult {
        Value x = o.getInput(), scale = o.getScale(), bias = o.getBias();
        if (!needs(x) && !(scale && needs(scale)) && !(bias && needs(bias)))
          return success();
        auto xt = tensorTypeOf(x);
        Value param = scale ? scale : bias;
        auto pt = RankedTensorType::get(xt.getShape().drop_front(o.getAxis()),
                                        param ? tensorTypeOf(param).getElementType()
                                              : xt.getElementType());
        auto grad = LayerNormGradOp::create(b, e.loc, TypeRange{xt, pt, pt}, x, g, scale,
                                            o.getAxisAttr(), o.getEpsilonAttr());
        if (needs(x) && failed(acc(x, grad.getDinput())))
          return failure();
        if (scale && needs(scale) && failed(acc(scale, grad.getDscale())))
          return failure();
        if (bias && needs(bias) && failed(acc(bias, grad.getDbias())))
          return failure();
        return success();
      })
      .Case([&](RmsNormOp o) -> LogicalResult {
        Value x = o.getInput(), scale = o.getScale();
        if (!needs(x) && !(scale && needs(scale)))
          return success();
        auto xt = tensorTypeOf(x);
        auto pt = RankedTensorType::get(xt.getShape().drop_front(o.getAxis()),
                                        scale ? tensorTypeOf(scale).getElementType()
                                              : xt.getElementType());
        auto grad = RmsNormGradOp::create(b, e.loc, TypeRange{xt, pt}, x, g, scale,
                                          o.getAxisAttr(), o.getEpsilonAttr());
        if (needs(x) && failed(acc(x, grad.getDinput())))
          return failure();
        if (scale && needs(scale) && failed(acc(scale, grad.getDscale())))
          return failure();
        return success();
      })
      .Case([&](CrossEntropyOp o) -> LogicalResult {
        if (o.getWeight() && needs(o.getWeight()))
          return unsupported("the class weight operand is not differentiable "
                             "(make it a constant or a non-trainable parameter)");
        if (!needs(o.getInput()))
          return success();
        return acc(o.getInput(),
                   CrossEntropyGradOp::create(b, e.loc, o.getInput().getType(),
                                              o.getInput(), o.getLabels(), g,
                                              o.getWeight(), o.getIgnoreIndexAttr(),
                                              o.getReductionAttr()));
      })
      .Case([&](NllLossOp o) -> LogicalResult {
        if (o.getWeight() && needs(o.getWeight()))
          return unsupported("the class weight operand is not differentiable "
                             "(make it a constant or a non-trainable parameter)");
        if (!needs(o.getInput()))
          return success();
        return acc(o.getInput(),
                   NllLossGradOp::create(b, e.loc, o.getInput().getType(), o.getInput(),
                                         o.getLabels(), g, o.getWeight(),
                                         o.getIgnoreIndexAttr(), o.getReductionAttr()));
      })
      .Case([&](MatmulOp o) -> LogicalResult {
        // With A' = op(A) [.., M, K], B' = op(B) [.., K, N]: dA' = g B'^T and
        // dB' = A'^T g, written with the transpose flags (no explicit
        // transposes), then summed over broadcast batch dimensions.
        // An FP8 linear layer's backward products are FP8 too (Fp8Plan.h):
        // marked with their role and which operand is g (E5M2).
        if (o.getAlpha()) // tc-fp4-exact makes them, after the backward exists
          return unsupported("a product scaled by alpha has no gradient rule");
        Value a = o.getLhs(), bm = o.getRhs();
        bool tl = o.getTransposeLhs(), tr = o.getTransposeRhs();
        bool fp8 = o->hasAttr(kFp8Attr);
        // --fp4-qat-grads: their inputs fake-quantised (Fp4Qat.h).
        bool fp4 = o->hasAttr(kFp4GradsAttr);
        if (needs(a)) {
          MatmulOp da = tl ? MatmulOp::create(b, e.loc, bm, g, Value(), b.getBoolAttr(tr),
                                              b.getBoolAttr(true))
                           : MatmulOp::create(b, e.loc, g, bm, Value(), b.getBoolAttr(false),
                                              b.getBoolAttr(!tr));
          if (fp8)
            markFp8Backward(o, da, "dgrad", tl ? 1 : 0);
          if (fp4 && failed(quantizeFp4Backward(b, o, da, "dgrad", tl ? 1 : 0)))
            return failure();
          if (failed(acc(a, e.sumTo(da, tensorTypeOf(a)))))
            return failure();
        }
        if (needs(bm)) {
          MatmulOp db = tr ? MatmulOp::create(b, e.loc, g, a, Value(), b.getBoolAttr(true),
                                              b.getBoolAttr(tl))
                           : MatmulOp::create(b, e.loc, a, g, Value(), b.getBoolAttr(!tl),
                                              b.getBoolAttr(false));
          if (fp8)
            markFp8Backward(o, db, "wgrad", tr ? 0 : 1);
          if (fp4 && failed(quantizeFp4Backward(b, o, db, "wgrad", tr ? 0 : 1)))
            return failure();
          if (failed(acc(bm, e.sumTo(db, tensorTypeOf(bm)))))
            return failure();
        }
        return success();
      })
      .Case([&](GatherOp o) -> LogicalResult {
        Value data = o.getData();
        if (!needs(data))
          return success();
        return acc(data, ScatterAddOp::create(b, e.loc, data.getType(), g,
                                              o.getIndices(), o.getAxisAttr()));
      })
      .Case([&](ScatterAddOp o) -> LogicalResult {
        Value upd = o.getUpdates();
        if (!needs(upd))
          return success();
        return acc(upd, GatherOp::create(b, e.loc, g, o.getIndices(), o.getAxisAttr()));
      })
      .Case([&](ReshapeOp o) -> LogicalResult {
        if (!needs(o.getInput()))
          return success();
        return acc(o.getInput(), e.reshape(g, tensorTypeOf(o.getInput())));
      })
      .Case([&](TransposeOp o) -> LogicalResult {
        if (!needs(o.getInput()))
          return success();
        ArrayRef<int64_t> perm = o.getPermutation();
        SmallVector<int64_t> inverse(perm.size());
        for (auto [i, p] : llvm::enumerate(perm))
          inverse[p] = i;
        return acc(o.getInput(), TransposeOp::create(b, e.loc, g,
                                                     b.getDenseI64ArrayAttr(inverse)));
      })
      .Case([&](BroadcastOp o) -> LogicalResult {
        if (!needs(o.getInput()))
          return success();
        return acc(o.getInput(), e.sumTo(g, tensorTypeOf(o.getInput())));
      })
      .Case([&](SliceOp o) -> LogicalResult {
        if (!needs(o.getInput()))
          return success();
        return acc(o.getInput(),
                   InsertSliceOp::create(b, e.loc, o.getInput().getType(), g,
                                         o.getStartsAttr(), o.getStridesAttr()));
      })
      .Case([&](InsertSliceOp o) -> LogicalResult {
        if (!needs(o.getSource()))
          return success();
        return acc(o.getSource(),
                   SliceOp::create(b, e.loc, o.getSource().getType(), g,
                                   o.getStartsAttr(), o.getStridesAttr()));
      })
      .Case([&](ConcatOp o) -> LogicalResult {
        int64_t axis = o.getAxis(), offset = 0;
        for (Value in : o.getInputs()) {
          auto t = tensorTypeOf(in);
          if (needs(in)) {
            SmallVector<int64_t> starts(t.getRank(), 0), strides(t.getRank(), 1);
            starts[axis] = offset;
            if (failed(acc(in, SliceOp::create(b, e.loc, t, g,
                                               b.getDenseI64ArrayAttr(starts),
                                               b.getDenseI64ArrayAttr(strides)))))
              return failure();
          }
          offset += t.getDimSize(axis);
        }
        return success();
      })
      .Case([&](AttentionOp o) -> LogicalResult {
        if (resultGrads[1])
          return unsupported("its lse result reaches the loss (only the attention output "
                             "is differentiable)");
        Value q = o.getQuery(), k = o.getKey(), v = o.getValue();
        if (!g || !(needs(q) || needs(k) || needs(v)))
          return success();
        auto grad = AttentionGradOp::create(
            b, e.loc, TypeRange{q.getType(), k.getType(), v.getType()}, q, k, v, o.getResult(),
            o.getLse(), g, o.getKeyMask(), o.getScaleAttr(), o.getCausalAttr(),
            o.getMaskFillAttr(), /*amax_of=*/IntegerAttr());
        Value ins[] = {q, k, v};
        for (auto [x, dx] : llvm::zip(ins, grad.getResults()))
          if (needs(x) && failed(acc(x, dx)))
            return failure();
        return success();
      })
      .Case([&](RotaryOp o) -> LogicalResult {
        if (!g)
          return success();
        Value x = o.getInput();
        if (needs(o.getCos()) || needs(o.getSin())) {
          // Tables that depend on a trained tensor (a TorchScript export's
          // inv_freq is an initializer like the weights): with the pairs
          // (x1, x2), (g1, g2) of the rotated features, y1 = c x1 - s x2 and
          // y2 = s x1 + c x2 give dc = sum over heads of g1 x1 + g2 x2 and
          // ds = sum over heads of g2 x1 - g1 x2.
          auto xt = tensorTypeOf(x), ct = tensorTypeOf(o.getCos());
          int64_t bsz = xt.getDimSize(0), hd = xt.getDimSize(1), sq = xt.getDimSize(2);
          int64_t half = ct.getDimSize(2);
          bool inter = o.getInterleaved();
          auto part = [&](Value v, int64_t which) {
            auto t = RankedTensorType::get({bsz, hd, sq, half}, tensorTypeOf(v).getElementType());
            return SliceOp::create(b, e.loc, t, v,
                                   b.getDenseI64ArrayAttr({0, 0, 0, inter ? which : which * half}),
                                   b.getDenseI64ArrayAttr({1, 1, 1, inter ? 2 : 1}))
                .getResult();
          };
          Value x1 = part(x, 0), x2 = part(x, 1), g1 = part(g, 0), g2 = part(g, 1);
          auto table = [&](Value v) { // sum over heads, [B, S, R/2]
            return e.reshape(e.reduceSum(v, {1}, /*keepdims=*/true), ct);
          };
          if (needs(o.getCos()) &&
              failed(acc(o.getCos(), table(e.add(e.mul(g1, x1), e.mul(g2, x2))))))
            return failure();
          if (needs(o.getSin()) &&
              failed(acc(o.getSin(), table(e.sub(e.mul(g2, x1), e.mul(g1, x2))))))
            return failure();
        }
        if (!needs(x))
          return success();
        // A rotation's gradient is the inverse rotation: tc.rotary with -sin.
        Value negSin = NegOp::create(b, e.loc, o.getSin().getType(), o.getSin());
        Value dx = RotaryOp::create(b, e.loc, x.getType(), g, o.getCos(), negSin,
                                    o.getInterleavedAttr());
        return acc(x, dx);
      })
      .Case([&](SplitOp o) -> LogicalResult {
        if (!needs(o.getInput()))
          return success();
        SmallVector<Value> parts;
        for (auto [r, rg] : llvm::zip(o.getResults(), resultGrads))
          parts.push_back(rg ? rg : e.splat(tensorTypeOf(r), 0.0));
        return acc(o.getInput(), ConcatOp::create(b, e.loc, parts, o.getAxisAttr()));
      })
      .Case([&](PadOp o) -> LogicalResult {
        if (!needs(o.getInput()))
          return success();
        if (o.getMode() != "constant")
          return unsupported("the gradient of mode \"" + o.getMode() +
                             "\" is not supported (only \"constant\")");
        auto t = tensorTypeOf(o.getInput());
        SmallVector<int64_t> strides(t.getRank(), 1);
        return acc(o.getInput(),
                   SliceOp::create(b, e.loc, t, g, o.getLowAttr(),
                                   b.getDenseI64ArrayAttr(strides)));
      })
      .Default([&](Operation *) {
        return unsupported("it lies between a trainable parameter and the loss");
      });
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct AutodiffPass : tc::impl::TcAutodiffBase<AutodiffPass> {
  using TcAutodiffBase::TcAutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto infer = module.lookupSymbol<func::FuncOp>("infer");
    if (!infer || infer.isExternal()) {
      module.emitError() << "tc-autodiff: the module has no func.func @infer with a body";
      return signalPassFailure();
    }
    if (module.lookupSymbol("grad_step")) {
      module.emitError() << "tc-autodiff: the module already has a @grad_step";
      return signalPassFailure();
    }
    if (!infer.getBody().hasOneBlock()) {
      infer.emitError() << "tc-autodiff: @infer must have exactly one block";
      return signalPassFailure();
    }

    // The loss: named by the option, or the only scalar floating result.
    auto isScalarFloat = [](Type t) {
      auto rt = llvm::dyn_cast<RankedTensorType>(t);
      return rt && rt.getRank() == 0 && llvm::isa<FloatType>(rt.getElementType());
    };
    ArrayRef<Type> results = infer.getResultTypes();
    int64_t index = -1;
    if (!loss.empty()) {
      for (unsigned i = 0; i < results.size(); ++i)
        if (resultName(infer, i) == loss)
          index = i;
      if (index < 0) {
        std::string names;
        for (unsigned i = 0; i < results.size(); ++i)
          names += (i ? ", \"" : "\"") + resultName(infer, i) + "\"";
        infer.emitError() << "tc-autodiff: @infer has no result named \"" << loss
                          << "\" (its results are named " << names << ")";
        return signalPassFailure();
      }
      if (!isScalarFloat(results[index])) {
        infer.emitError() << "tc-autodiff: the loss \"" << loss << "\" has type "
                          << results[index] << ", not a floating-point scalar";
        return signalPassFailure();
      }
    } else {
      unsigned count = 0;
      for (unsigned i = 0; i < results.size(); ++i)
        if (isScalarFloat(results[i])) {
          index = i;
          ++count;
        }
      if (count != 1) {
        infer.emitError() << "tc-autodiff: @infer has " << count
                          << " floating-point scalar results; name the loss with "
                             "the pass option loss=<tc.name>";
        return signalPassFailure();
      }
    }
    std::string lossName = loss.empty() ? resultName(infer, index) : std::string(loss);
    if (lossName.empty())
      lossName = "loss";

    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(infer);
    auto grad = llvm::cast<func::FuncOp>(b.clone(*infer.getOperation()));
    grad.setSymName("grad_step");
    if (failed(Differentiator(grad).run(index, lossName, lossScaling))) {
      grad.erase();
      return signalPassFailure();
    }
  }
};

} // namespace
