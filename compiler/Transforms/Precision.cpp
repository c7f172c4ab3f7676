//===- Precision.cpp - tc-precision ----------------------------------------===//
//
// The precision plan: which element type every op computes in and why.
// `mode=bf16` rewrites @infer (before tc-autodiff, so the backward inherits
// the casts) into mixed precision: bf16 matmuls and elementwise math, f32
// norms / softmax / losses / sum reductions, f32 master weights. Every op is
// annotated with `tc.precision` and `tc.precision_reason`, which
// PrecisionReport.cpp prints. `mode=fp16` is the same plan with f16 in place
// of bf16 (torch.autocast(float16)'s split; tc-compile --fp16 adds dynamic
// loss scaling, tc-optimizer), except where the GPU has no f16 kernel.
//
// Types are rewritten in place in one walk over the (single-block) body: when
// an op is reached its operands have their final types. Only f32 values are
// ever turned into bf16; the set `lowered` remembers which, so that ops kept
// in f32 cast exactly those back up and pre-existing bf16/f16 values of a
// model are left alone. `mode=fp8` is the bf16 plan, then Fp8Plan.cpp's
// marks on the linear-layer matmuls.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Fp4Qat.h"
#include "compiler/Transforms/Fp8Plan.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

namespace tc {
#define GEN_PASS_DEF_TCPRECISION
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

constexpr llvm::StringLiteral kPrecision = "tc.precision";
constexpr llvm::StringLiteral kReason = "tc.precision_reason";

Type elementTypeOf(Value v) {
  if (auto t = llvm::dyn_cast<RankedTensorType>(v.getType()))
    return t.getElementType();
  return v.getType();
}

Type withElement(Type t, Type elt) {
  return RankedTensorType::get(llvm::cast<RankedTensorType>(t).getShape(), elt);
}

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

/// What an op is, for the plan and its reasons.
enum class Kind {
  Parameter, Constant, Matmul, Attention, Norm, Softmax, Loss, Accumulate,
  Elementwise, Movement, Cast, Other
};

Kind classify(Operation *op) {
  if (llvm::isa<ParameterOp>(op))
    return Kind::Parameter;
  if (llvm::isa<ConstantOp>(op))
    return Kind::Constant;
  if (llvm::isa<CastOp>(op))
    return Kind::Cast;
  if (llvm::isa<MatmulOp>(op))
    return Kind::Matmul;
  if (llvm::isa<AttentionOp, AttentionGradOp>(op))
    return Kind::Attention;
  if (llvm::isa<LayerNormOp, RmsNormOp, LayerNormGradOp, RmsNormGradOp>(op))
    return Kind::Norm;
  if (llvm::isa<SoftmaxOp, LogSoftmaxOp>(op))
    return Kind::Softmax;
  if (llvm::isa<CrossEntropyOp, NllLossOp>(op))
    return Kind::Loss;
  // Sums accumulate rounding error with the reduced extent: f32.
  if (llvm::isa<ReduceSumOp, ReduceMeanOp, ReduceProdOp, CumSumOp, ScatterAddOp>(op))
    return Kind::Accumulate;
  // max/min/argmax are exact in any precision: they follow their input. A
  // rotary embedding is a per-element rotation (its tables in the input's
  // precision, as HF casts cos / sin to the activations' dtype).
  if (isElementwise(op) || llvm::isa<ReduceMaxOp, ReduceMinOp, ArgMaxOp, ArgMinOp, RotaryOp>(op))
    return Kind::Elementwise;
  if (isDataMovement(op))
    return Kind::Movement;
  return Kind::Other;
}

/// The element type an op computes in: its first float result, else its
/// first float operand, else its first result (integer ops).
Type computeType(Operation *op) {
  for (Value r : op->getResults())
    if (llvm::isa<FloatType>(elementTypeOf(r)))
      return elementTypeOf(r);
  for (Value o : op->getOperands())
    if (llvm::isa<FloatType>(elementTypeOf(o)))
      return elementTypeOf(o);
  if (op->getNumResults())
    return elementTypeOf(op->getResult(0));
  return {};
}

void annotate(Operation *op, StringRef precision, StringRef reason) {
  Builder b(op->getContext());
  op->setAttr(kPrecision, b.getStringAttr(precision));
  op->setAttr(kReason, b.getStringAttr(reason));
}

/// True when `to(from(x)) == x` for every x of type `to` (bf16->f32->bf16).
bool exactRoundTrip(Type narrow, Type wide) {
  auto n = llvm::dyn_cast<FloatType>(narrow);
  auto w = llvm::dyn_cast<FloatType>(wide);
  return n && w && llvm::APFloatBase::isRepresentableBy(n.getFloatSemantics(),
                                                         w.getFloatSemantics());
}

class Planner {
public:
  Planner(func::FuncOp fn, StringRef mode) : fn(fn), mode(mode), b(fn.getContext()) {
    low = mode == "fp16" ? Type(b.getF16Type()) : Type(b.getBF16Type());
    lowName = typeName(low);
    f32 = b.getF32Type();
  }

  void run() {
    SmallVector<Operation *> ops;
    for (Operation &op : fn.getBody().front())
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (llvm::isa<func::ReturnOp>(op)) {
        restoreOperands(op, "for the function result");
        continue;
      }
      if (!llvm::isa<TCDialect>(op->getDialect()))
        continue;
      if (lowers())
        planLow(op);
      else
        annotateOnly(op);
    }
    if (lowers())
      cleanupCasts();
  }

private:
  /// bf16, fp16 and fp8 (the bf16 plan plus the marks of markFp8Matmuls)
  /// rewrite types; fp32 and tf32 only annotate.
  bool lowers() const {
    return mode == "bf16" || mode == "fp16" || mode == "fp8" || mode == "fp4";
  }

  /// Integer/bool ops: untouched in every mode. Returns true if it was one.
  bool annotateInteger(Operation *op) {
    Type t = computeType(op);
    if (t && !llvm::isa<FloatType>(t)) {
      annotate(op, typeName(t), "integer/bool: untouched");
      return true;
    }
    return false;
  }

  void annotateOnly(Operation *op) {
    if (annotateInteger(op))
      return;
    std::string p = typeName(computeType(op));
    switch (classify(op)) {
    case Kind::Parameter:
      return annotate(op, p, "parameter: fp32 master weight");
    case Kind::Matmul:
      if (mode == "tf32" && computeType(op) == f32)
        return annotate(op, "tf32", "matmul: tf32 operands, fp32 accumulation");
      return annotate(op, p, "matmul: " + mode.str() + " mode");
    case Kind::Attention:
      return annotate(op, p, "attention: " + p + " operands, fp32 math (no TF32)");
    case Kind::Cast:
      return annotate(op, p, "cast: in the model");
    case Kind::Norm:
      return annotate(op, p, "norm: kept in f32");
    case Kind::Softmax:
      return annotate(op, p, "softmax: kept in f32");
    case Kind::Loss:
      return annotate(op, p, "loss: kept in f32");
    default:
      return annotate(op, p, mode.str() + " mode");
    }
  }

  bool isLowered(Value v) const { return lowered.contains(v); }

  /// `v` converted to element type `elt`, one cast per (value, type) placed
  /// right after v's definition so every reader shares it. Reuses x for
  /// cast(x : elt -> wide) when the round trip is exact.
  Value castTo(Value v, Type elt, StringRef reason) {
    if (elementTypeOf(v) == elt)
      return v;
    if (auto c = v.getDefiningOp<CastOp>())
      if (elementTypeOf(c.getInput()) == elt && exactRoundTrip(elt, elementTypeOf(v)))
        return c.getInput();
    auto key = std::make_pair(v, elt);
    if (Value cached = casts.lookup(key))
      return cached;
    OpBuilder::InsertionGuard g(b);
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(v.getParentBlock());
    auto cast = CastOp::create(b, v.getLoc(), withElement(v.getType(), elt), v,
                               b.getBoolAttr(true));
    annotate(cast, typeName(elt), reason);
    casts[key] = cast.getResult();
    return cast.getResult();
  }

  /// Casts the operands this pass lowered to bf16 back to f32.
  void restoreOperands(Operation *op, StringRef why) {
    for (OpOperand &o : op->getOpOperands())
      if (isLowered(o.get()))
        o.set(castTo(o.get(), f32, ("cast: up to f32 " + why).str()));
  }

  /// Lowers the f32 operands `operandIdx` to bf16 and retypes the f32
  /// results (the first `numResults` of them; all by default).
  void lowerOperandsAndResults(Operation *op, ArrayRef<unsigned> operandIdx,
                               unsigned numResults = ~0u) {
    for (unsigned i : operandIdx) {
      OpOperand &o = op->getOpOperand(i);
      if (elementTypeOf(o.get()) == f32)
        o.set(castTo(o.get(), low, "cast: to " + lowName + " for " + lowName + " compute"));
    }
    for (Value r : op->getResults().take_front(std::min(numResults, op->getNumResults())))
      if (elementTypeOf(r) == f32) {
        r.setType(withElement(r.getType(), low));
        lowered.insert(r);
      }
  }

  /// The operands that carry data of the op's compute type (not indices,
  /// conditions or labels).
  SmallVector<unsigned> dataOperands(Operation *op) {
    SmallVector<unsigned> idx;
    unsigned first = 0, count = op->getNumOperands();
    if (llvm::isa<SelectOp>(op))
      first = 1;
    else if (llvm::isa<GatherOp, ScatterAddOp>(op))
      count = 1;
    for (unsigned i = first; i < count; ++i)
      if (llvm::isa<FloatType>(elementTypeOf(op->getOperand(i))))
        idx.push_back(i);
    return idx;
  }

  static bool readOnlyBySoftmax(Operation *op) {
    return op->getNumResults() == 1 && !op->getResult(0).use_empty() &&
           llvm::all_of(op->getResult(0).getUsers(),
                        [](Operation *u) { return llvm::isa<SoftmaxOp, LogSoftmaxOp>(u); });
  }

  void keepF32(Operation *op, StringRef reason) {
    restoreOperands(op, ("for " + op->getName().getStringRef()).str());
    annotate(op, typeName(computeType(op)), reason);
  }

  void planLow(Operation *op) {
    Kind kind = classify(op);
    if (kind == Kind::Cast) {
      // A cast of the model: its result type is the model's choice.
      return annotate(op, typeName(computeType(op)), "cast: in the model");
    }
    if (annotateInteger(op))
      return;
    switch (kind) {
    case Kind::Parameter:
      return annotate(op, typeName(computeType(op)), "parameter: fp32 master weight");
    case Kind::Constant:
      return annotate(op, typeName(computeType(op)), "constant: cast at use");
    case Kind::Matmul: {
      auto idx = dataOperands(op);
      bool all = llvm::all_of(idx, [&](unsigned i) {
        Value v = op->getOperand(i);
        return elementTypeOf(v) == f32 || isLowered(v);
      });
      if (idx.size() != 2 || !all)
        return annotate(op, typeName(computeType(op)), "matmul: not f32, untouched");
      lowerOperandsAndResults(op, idx);
      return annotate(op, lowName, "matmul: " + lowName + " operands, fp32 accumulation");
    }
    case Kind::Attention: {
      // q, k, v in bf16 or f16 (tensor cores); the scores, the softmax
      // statistics, lse and the accumulation stay f32 inside the fused
      // kernel. Only P and dS are rounded to the 16-bit type for the tensor
      // cores; in f16 a dS beyond f16's range (a large loss scale) is inf,
      // which the loss scaler sees and skips, as for any f16 gradient.
      SmallVector<unsigned> idx = {0, 1, 2};
      bool all = llvm::isa<AttentionOp>(op) && llvm::all_of(idx, [&](unsigned i) {
        Value v = op->getOperand(i);
        return elementTypeOf(v) == f32 || isLowered(v);
      });
      if (!all)
        return annotate(op, typeName(computeType(op)), "attention: not f32, untouched");
      lowerOperandsAndResults(op, idx, /*numResults=*/1); // lse stays f32
      return annotate(op, lowName, "attention: " + lowName + " operands, f32 softmax and accumulation");
    }
    case Kind::Norm:
      return keepF32(op, "norm: kept in f32");
    case Kind::Softmax:
      return keepF32(op, "softmax: kept in f32");
    case Kind::Loss:
      return keepF32(op, "loss: kept in f32");
    case Kind::Accumulate:
      return keepF32(op, "reduction: accumulated in f32");
    case Kind::Elementwise:
    case Kind::Movement: {
      auto idx = dataOperands(op);
      bool anyLowered = llvm::any_of(idx, [&](unsigned i) { return isLowered(op->getOperand(i)); });
      // Lowering needs every other data operand to be f32 (to cast).
      bool castable = llvm::all_of(idx, [&](unsigned i) {
        Value v = op->getOperand(i);
        return isLowered(v) || elementTypeOf(v) == f32;
      });
      const char *what = kind == Kind::Movement ? "data movement"
                         : llvm::isa<ReduceMaxOp, ReduceMinOp, ArgMaxOp, ArgMinOp>(op)
                             ? "max/min (exact)"
                             : "elementwise";
      // An elementwise op read only by softmaxes (an unfused attention's
      // additive mask or masked fill) computes in f32, as autocast's
      // type promotion does: the softmax reads f32 anyway, and HF's padding
      // mask fill finfo(f32).min has no bf16 value (it rounds to -inf, and a
      // query that sees no key would take a softmax of -inf only: NaN).
      if (anyLowered && kind == Kind::Elementwise && readOnlyBySoftmax(op))
        return keepF32(op, "elementwise: read only by a softmax, kept in f32");
      if (anyLowered && castable) {
        lowerOperandsAndResults(op, idx);
        return annotate(op, lowName, (Twine(what) + " on " + lowName + " inputs").str());
      }
      if (anyLowered)
        restoreOperands(op, ("for " + op->getName().getStringRef()).str());
      Type t = computeType(op);
      return annotate(op, typeName(t),
                      (Twine(what) + " on " + typeName(t) + " inputs").str());
    }
    default:
      return keepF32(op, "no " + lowName + " rule: kept in f32");
    }
  }

  /// cast(movement(x)) -> movement(cast(x)) for a narrowing cast of a
  /// reshape/transpose/broadcast/slice read only by that cast: data movement
  /// is exact, so this only moves half the bytes (a weight's transpose runs
  /// on its bf16 copy).
  void narrowBeforeMovement() {
    SmallVector<CastOp> all;
    fn.walk([&](CastOp c) { all.push_back(c); });
    for (CastOp c : all) {
      Operation *m = c.getInput().getDefiningOp();
      if (!m || !llvm::isa<ReshapeOp, TransposeOp, BroadcastOp, SliceOp>(m) ||
          !m->hasOneUse() || elementTypeOf(c.getInput()) != f32 ||
          elementTypeOf(c.getResult()) != low)
        continue;
      Value x = m->getOperand(0);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPoint(m);
      auto early = CastOp::create(b, c.getLoc(), withElement(x.getType(), low), x,
                                  c.getSaturateAttr());
      early->setAttrs(c->getAttrs());
      m->setOperand(0, early.getResult());
      m->getResult(0).setType(c.getType());
      annotate(m, lowName, "data movement on " + lowName + " inputs");
      c.getResult().replaceAllUsesWith(m->getResult(0));
      c.erase();
    }
  }

  /// cast_down(norm(cast_up(x))) -> norm(x) on bf16 rows: a layer_norm /
  /// rms_norm kept in f32 whose input is bf16 data cast up and whose every
  /// reader casts its output down computes the same statistics in f32 when
  /// it reads and writes bf16 rows (its f32 weights stay f32), with one
  /// rounding of the output and no f32 copy of the rows. So does a norm of
  /// f32 rows that the plan also rounds to bf16 for another reader (the
  /// first layer's norm of the embeddings, which the residual add reads in
  /// bf16): it reads that bf16 copy, as every later layer's norm reads the
  /// bf16 residual stream, and the step keeps no f32 rows for it (nor for
  /// its backward: the copy's gradient is one bf16 sum, cast up once).
  void narrowNorms() {
    if (!low.isBF16()) // the norm kernels read f32 or bf16 rows
      return;
    SmallVector<Operation *> norms;
    fn.walk([&](Operation *op) {
      if (llvm::isa<LayerNormOp, RmsNormOp>(op))
        norms.push_back(op);
    });
    for (Operation *op : norms) {
      Value x = op->getOperand(0), y = op->getResult(0);
      if (elementTypeOf(x) != f32 || y.use_empty())
        continue;
      Value rows; // the bf16 rows the norm reads instead of x
      if (auto up = x.getDefiningOp<CastOp>(); up && elementTypeOf(up.getInput()) == low)
        rows = up.getInput();
      else
        rows = roundedCopy(x, op);
      if (!rows)
        continue;
      SmallVector<CastOp> downs;
      for (Operation *u : y.getUsers()) {
        auto c = llvm::dyn_cast<CastOp>(u);
        if (!c || elementTypeOf(c.getResult()) != low)
          break;
        downs.push_back(c);
      }
      if (downs.size() != static_cast<size_t>(std::distance(y.use_begin(), y.use_end())))
        continue;
      op->setOperand(0, rows);
      y.setType(withElement(y.getType(), low));
      for (CastOp c : downs) {
        c.getResult().replaceAllUsesWith(y);
        c.erase();
      }
      annotate(op, "bf16", "norm: bf16 rows, f32 statistics and weights");
    }
  }

  /// The plan's rounding of f32 `x` to the low type (a tc.cast of x to it,
  /// as castTo makes), placed before `user`; null when there is none.
  Value roundedCopy(Value x, Operation *user) {
    for (Operation *u : x.getUsers()) {
      auto c = llvm::dyn_cast<CastOp>(u);
      if (!c || c == user || elementTypeOf(c.getResult()) != low ||
          c->getBlock() != user->getBlock())
        continue;
      if (!c->isBeforeInBlock(user)) { // its one operand x is defined before `user`
        if (Operation *def = x.getDefiningOp())
          c->moveAfter(def);
        else
          c->moveBefore(&c->getBlock()->front());
      }
      return c.getResult();
    }
    return nullptr;
  }

  /// Removes exact round trips (bf16->f32->bf16) and casts nobody reads.
  /// f32->bf16->f32 rounds and is kept.
  void cleanupCasts() {
    narrowBeforeMovement();
    narrowNorms();
    bool changed = true;
    while (changed) {
      changed = false;
      SmallVector<CastOp> all;
      fn.walk([&](CastOp c) { all.push_back(c); });
      for (CastOp c : all) {
        auto inner = c.getInput().getDefiningOp<CastOp>();
        if (inner && inner.getInput().getType() == c.getType() &&
            exactRoundTrip(elementTypeOf(c.getResult()), elementTypeOf(inner.getResult())) &&
            !c.getResult().use_empty()) {
          c.getResult().replaceAllUsesWith(inner.getInput());
          changed = true;
        }
      }
      for (CastOp c : all)
        if (c.getResult().use_empty()) {
          c.erase();
          changed = true;
        }
    }
  }

  func::FuncOp fn;
  StringRef mode;
  OpBuilder b;
  Type low, f32; ///< the lowered type (bf16, or f16 in fp16 mode) and f32
  std::string lowName;
  llvm::DenseSet<Value> lowered;
  llvm::DenseMap<std::pair<Value, Type>, Value> casts;
};

struct PrecisionPass : tc::impl::TcPrecisionBase<PrecisionPass> {
  using TcPrecisionBase::TcPrecisionBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (mode != "fp32" && mode != "tf32" && mode != "bf16" && mode != "fp16" && mode != "fp8" &&
        mode != "fp4") {
      fn.emitError() << "tc-precision: mode must be fp32, tf32, bf16, fp16, fp8 or fp4, got '"
                     << mode << "'";
      return signalPassFailure();
    }
    if (mode == "fp4" && !checkFp4Format(fp4Format).empty()) {
      fn.emitError() << checkFp4Format(fp4Format);
      return signalPassFailure();
    }
    if (mode == "fp8" && failed(checkFp8Options(fn)))
      return signalPassFailure();
    if (fn.isExternal())
      return;
    if (!fn.getBody().hasOneBlock()) {
      fn.emitError() << "tc-precision: expected a single-block function";
      return signalPassFailure();
    }
    Planner(fn, mode).run();
    if (mode == "fp8" && failed(markFp8Matmuls(fn, fp8Options())))
      signalPassFailure();
    if (mode == "fp4") {
      // The fp8 plan picks the linear layers (its alignment rule is that of
      // the block size: 32 for mxfp4); Fp4Qat turns its marks into
      // fake quantisation.
      Fp8PlanOptions o = fp8Options();
      o.scaling = fp4Format == "mxfp4" ? "mxfp8" : "tensor";
      if (failed(markFp8Matmuls(fn, o)))
        return signalPassFailure();
      applyFp4Qat(fn, fp4Format, fp4Acts, fp4Grads, fp4Rht);
    }
  }

private:
  LogicalResult checkFp8Options(func::FuncOp fn) {
    if (std::string err = checkFp8Scaling(fp8Scaling); !err.empty())
      return fn.emitError() << err;
    return success();
  }

  Fp8PlanOptions fp8Options() const {
    Fp8PlanOptions o;
    o.scaling = fp8Scaling;
    o.keepHighPrecision.assign(keepHighPrecision.begin(), keepHighPrecision.end());
    o.highPrecisionFirst = highPrecisionFirst;
    o.highPrecisionLast = highPrecisionLast;
    o.lmHead = fp8LmHead;
    o.allowFallback = allowFallback;
    return o;
  }
};

} // namespace
