//===- FuseFp8Delayed.cpp - tc-fuse-fp8-delayed ---------------------------===//
//
// `--fp8-scaling delayed` quantizes each product operand x [rows, cols] by
// the scale of earlier steps as plain tc ops (tc-quantize-fp8's
// quantizedDelayed): amax = reduce_max(|f32(x)|), q = cast(f32(x) * s)
// saturating, the saturation count reduce_sum(cast(|f32(x) * s| > fmax)),
// and a tc.transpose of q where a product reads it transposed. Generated,
// that is four kernels and four passes over x or q (the ~1B step: 15 ms of
// scalar reductions, 6 of casts and 13 of transposes a step on an H100,
// bench/RESULTS.md stop 53). Here the ops become one tc.quantize_delayed,
// which the runtime's "quantize_fp8_delayed" computes in one pass over x
// (q and its transposed copy written from the same tile, the amax and the
// count reduced on the way), bit for bit the same values. The results keep
// the reference values of the ops they replace (setReferenceValueIds), so
// tc-run --check compares each. GPU pipeline, before tc-fuse; the
// reference program keeps the plain ops.
//
// The step's bookkeeping of each such tensor (its amax in front of the
// stored history, the next history a slice of that window, the window's
// max, the next scale's select chain, and 1 / scale for the products) is
// five more kernels and a copy a tensor, ~5 ms of the ~1B delayed step's 83
// on an H100 (bench/RESULTS.md stop 54); it becomes one tc.fp8_scale_update
// (the runtime's one-block "fp8_scale_update"), again with the reference
// values of what it replaces.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/tc/Eval/Program.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"

#include <cfloat>

namespace tc {
#define GEN_PASS_DEF_TCFUSEFP8DELAYED
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

RankedTensorType tensorTypeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

bool isF32Scalar(Value v) {
  auto t = tensorTypeOf(v);
  return t.getRank() == 0 && t.getElementType().isF32();
}

/// The value of an f32 scalar constant (tc's splatFloatValue), or nullopt.
std::optional<double> scalarConstant(Value v) {
  return isF32Scalar(v) ? splatFloatValue(v) : std::nullopt;
}

/// Whether `v` is an f32 scalar constant equal to `value`.
bool isScalarConstant(Value v, double value) { return scalarConstant(v) == value; }

/// Whether `op` reduces every axis of its rank-2 operand to a tensor<f32>.
template <class Reduce> bool reducesAll(Operation *op) {
  auto r = llvm::dyn_cast_or_null<Reduce>(op);
  if (!r || r.getKeepdims() || !isF32Scalar(r.getResult()))
    return false;
  ArrayRef<int64_t> axes = r.getAxes();
  return axes.size() == 2 && axes[0] == 0 && axes[1] == 1;
}

/// One delayed quantization's ops (the file comment's chain).
struct Chain {
  CastOp q;                            // the saturating cast to FP8
  MulOp scaled;                        // f32(x) * s
  Value x, xf, scale;                  // x (f32 or bf16), f32(x), s
  AbsOp absX;                          // |f32(x)|
  ReduceMaxOp amax;                    // reduce_max(|f32(x)|)
  AbsOp absScaled;                     // |f32(x) * s|
  GtOp over;                           // > fmax
  CastOp overF;                        // to f32
  ReduceSumOp count;                   // the saturation count
  SmallVector<TransposeOp> transposes; // of q, [1, 0]
};

/// The chain whose saturating cast is `c`, or nullopt when its ops differ
/// from tc-quantize-fp8's form (then they stay as they are).
std::optional<Chain> matchChain(CastOp c) {
  Chain ch;
  ch.q = c;
  Type qe = tensorTypeOf(c.getResult()).getElementType();
  if (!c.getSaturate() || !llvm::isa<Float8E4M3FNType, Float8E5M2Type>(qe))
    return std::nullopt;
  ch.scaled = c.getInput().getDefiningOp<MulOp>();
  if (!ch.scaled || ch.scaled->getBlock() != c->getBlock())
    return std::nullopt;
  ch.xf = ch.scaled.getLhs();
  ch.scale = ch.scaled.getRhs();
  auto xt = tensorTypeOf(ch.xf);
  if (!isF32Scalar(ch.scale) || xt.getRank() != 2 || !xt.getElementType().isF32() ||
      !xt.hasStaticShape() || xt.getNumElements() == 0)
    return std::nullopt;
  ch.x = ch.xf;
  if (auto up = ch.xf.getDefiningOp<CastOp>())
    if (tensorTypeOf(up.getInput()).getElementType().isBF16())
      ch.x = up.getInput();
  // amax: |f32(x)| reduced over every axis.
  for (Operation *u : ch.xf.getUsers())
    if (auto a = llvm::dyn_cast<AbsOp>(u))
      if (auto r = soleUser<ReduceMaxOp>(a.getResult()); r && reducesAll<ReduceMaxOp>(r)) {
        ch.absX = a;
        ch.amax = r;
      }
  if (!ch.amax)
    return std::nullopt;
  // The count: cast(|f32(x) * s| > fmax) summed over every axis.
  double fmax = llvm::isa<Float8E5M2Type>(qe) ? 57344.0 : 448.0;
  for (Operation *u : ch.scaled->getUsers()) {
    if (u == c)
      continue;
    auto a = llvm::dyn_cast<AbsOp>(u);
    auto g = a ? soleUser<GtOp>(a.getResult()) : GtOp();
    if (!g || g.getLhs() != a.getResult())
      return std::nullopt;
    if (!isScalarConstant(g.getRhs(), fmax))
      return std::nullopt;
    auto f = soleUser<CastOp>(g.getResult());
    auto s = f ? soleUser<ReduceSumOp>(f.getResult()) : ReduceSumOp();
    if (!f || !tensorTypeOf(f.getResult()).getElementType().isF32() || !s ||
        !reducesAll<ReduceSumOp>(s) || ch.count)
      return std::nullopt;
    ch.absScaled = a, ch.over = g, ch.overF = f, ch.count = s;
  }
  if (!ch.count)
    return std::nullopt;
  for (Operation *u : c->getUsers())
    if (auto t = llvm::dyn_cast<TransposeOp>(u)) {
      ArrayRef<int64_t> perm = t.getPermutation();
      if (perm.size() == 2 && perm[0] == 1 && perm[1] == 0)
        ch.transposes.push_back(t);
    }
  return ch;
}

/// One delayed-scaled tensor's bookkeeping (tc-quantize-fp8's
/// quantizedDelayed after the quantization): the ops it is made of, in an
/// order where each one's users come before it (the order to erase them).
struct Bookkeeping {
  Value history;       // the stored amaxes (f32 [N - 1]), or null
  DivOp inv;           // 1 / scale
  SliceOp nextHistory; // window[0 : N - 1], with a history
  SelectOp next;       // the next scale
  double fmax = 0;
  bool mostRecent = false;
  SmallVector<Operation *> ops; // every op replaced, users first
};

/// The bookkeeping of the quantization whose amax is `amax` and scale
/// `scale`, or nullopt when its ops differ from tc-quantize-fp8's form.
std::optional<Bookkeeping> matchBookkeeping(Value amax, Value scale) {
  Bookkeeping k;
  // 1 / scale and the last select (select(usable, capped, scale)): the
  // scale's users besides the quantization.
  for (Operation *u : scale.getUsers()) {
    if (auto d = llvm::dyn_cast<DivOp>(u);
        d && d.getRhs() == scale && isScalarConstant(d.getLhs(), 1.0))
      k.inv = d;
    if (auto sel = llvm::dyn_cast<SelectOp>(u); sel && sel.getOnFalse() == scale &&
                                                sel.getOnTrue() != scale &&
                                                isF32Scalar(sel.getResult()))
      k.next = sel;
  }
  if (!k.inv || !k.next)
    return std::nullopt;
  // capped = select(isinf(fmax / used), FLT_MAX, fmax / used).
  auto capped = k.next.getOnTrue().getDefiningOp<SelectOp>();
  auto quotient = capped ? capped.getOnFalse().getDefiningOp<DivOp>() : DivOp();
  auto overflow = capped ? capped.getCond().getDefiningOp<IsInfOp>() : IsInfOp();
  if (!capped || !quotient || !overflow || overflow.getInput() != quotient.getResult() ||
      !isScalarConstant(capped.getOnTrue(), static_cast<double>(FLT_MAX)))
    return std::nullopt;
  std::optional<double> fmax = scalarConstant(quotient.getLhs());
  if (!fmax)
    return std::nullopt;
  k.fmax = *fmax;
  Value used = quotient.getRhs();
  // usable = (used > 0) and not isinf(used).
  auto usable = k.next.getCond().getDefiningOp<AndOp>();
  auto positive = usable ? usable.getLhs().getDefiningOp<GtOp>() : GtOp();
  auto finite = usable ? usable.getRhs().getDefiningOp<NotOp>() : NotOp();
  auto infinite = finite ? finite.getInput().getDefiningOp<IsInfOp>() : IsInfOp();
  if (!positive || !infinite || positive.getLhs() != used ||
      !isScalarConstant(positive.getRhs(), 0.0) || infinite.getInput() != used)
    return std::nullopt;
  // used: amax (most_recent), else the max of the window [amax] ++ history.
  SmallVector<Operation *> windowOps; // users first
  if (used == amax) {
    k.mostRecent = true;
  } else {
    auto m = used.getDefiningOp<ReduceMaxOp>();
    if (!m || m.getKeepdims() || m.getAxes().size() != 1 || m.getAxes()[0] != 0)
      return std::nullopt;
    windowOps.push_back(m);
  }
  // The window: reshape(amax) to [1], concatenated with the history.
  ReshapeOp front;
  for (Operation *u : amax.getUsers())
    if (auto r = llvm::dyn_cast<ReshapeOp>(u);
        r && tensorTypeOf(r.getResult()).getShape() == ArrayRef<int64_t>{1})
      front = r;
  Value window = front ? front.getResult() : Value();
  ConcatOp cat;
  if (front)
    for (Operation *u : front->getUsers())
      if (auto c = llvm::dyn_cast<ConcatOp>(u); c && c.getAxis() == 0 && c->getNumOperands() == 2 &&
                                                c->getOperand(0) == front.getResult())
        cat = c;
  if (cat) {
    window = cat.getResult();
    k.history = cat->getOperand(1);
    auto ht = tensorTypeOf(k.history);
    if (ht.getRank() != 1 || !ht.getElementType().isF32())
      return std::nullopt;
    for (Operation *u : cat->getUsers())
      if (auto sl = llvm::dyn_cast<SliceOp>(u))
        k.nextHistory = sl;
    if (!k.nextHistory || tensorTypeOf(k.nextHistory.getResult()) != ht ||
        k.nextHistory.getStarts() != ArrayRef<int64_t>{0} ||
        llvm::any_of(k.nextHistory.getStrides(), [](int64_t s) { return s != 1; }))
      return std::nullopt;
  }
  if (!k.mostRecent && (!window || windowOps.front()->getOperand(0) != window))
    return std::nullopt;
  // Every op's result is used only inside the bookkeeping (the returned
  // next history and next scale, and scale_inv's reshape, aside).
  k.ops = {k.next, usable, finite, infinite, positive, capped, overflow, quotient};
  llvm::append_range(k.ops, windowOps);
  if (cat)
    k.ops.push_back(cat); // after its users: the slice is replaced, the max is above
  if (front)
    k.ops.push_back(front);
  llvm::SmallPtrSet<Operation *, 16> inside(k.ops.begin(), k.ops.end());
  if (k.nextHistory)
    inside.insert(k.nextHistory);
  for (Operation *op : k.ops) {
    if (op == k.next.getOperation())
      continue;
    for (Operation *u : op->getUsers())
      if (!inside.contains(u))
        return std::nullopt;
  }
  return k;
}

struct TcFuseFp8Delayed : tc::impl::TcFuseFp8DelayedBase<TcFuseFp8Delayed> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    SmallVector<Chain> chains;
    fn.walk([&](CastOp c) {
      if (c->getParentOp() == fn.getOperation())
        if (std::optional<Chain> ch = matchChain(c))
          chains.push_back(std::move(*ch));
    });
    for (Chain &ch : chains)
      if (QuantizeDelayedOp q = rewrite(ch))
        fuseBookkeeping(q, ch.scale);
  }

  /// The bookkeeping of `q`'s tensor as one tc.fp8_scale_update right after
  /// `q` (its amax is the first thing it needs; the scale and the history
  /// are state read earlier).
  void fuseBookkeeping(QuantizeDelayedOp q, Value scale) {
    std::optional<Bookkeeping> k = matchBookkeeping(q.getAmax(), scale);
    Type qe = tensorTypeOf(q.getResult()).getElementType();
    if (!k || k->fmax != (llvm::isa<Float8E5M2Type>(qe) ? 57344.0 : 448.0))
      return;
    if (Operation *def = k->history ? k->history.getDefiningOp() : nullptr;
        def && (def->getBlock() != q->getBlock() || !def->isBeforeInBlock(q)))
      return;
    OpBuilder b(q->getContext());
    b.setInsertionPointAfter(q);
    Type f32 = RankedTensorType::get({}, b.getF32Type());
    SmallVector<Type> types{f32, f32};
    SmallVector<Value> operands{q.getAmax(), scale};
    if (k->history) {
      types.push_back(k->history.getType());
      operands.push_back(k->history);
    }
    auto update = Fp8ScaleUpdateOp::create(b, k->next.getLoc(), types, operands[0], operands[1],
                                           k->history, b.getF64FloatAttr(k->fmax),
                                           k->mostRecent ? b.getUnitAttr() : UnitAttr());
    if (Attribute a = k->inv->getAttr("tc.precision"))
      update->setAttr("tc.precision", a);
    SmallVector<std::optional<int64_t>> ids{referenceValueId(k->next, 0),
                                            referenceValueId(k->inv, 0)};
    if (k->nextHistory)
      ids.push_back(referenceValueId(k->nextHistory, 0));
    if (llvm::any_of(ids, [](const std::optional<int64_t> &id) { return id.has_value(); }))
      setReferenceValueIds(update, ids);
    k->next.getResult().replaceAllUsesWith(update.getNextScale());
    k->inv.getResult().replaceAllUsesWith(update.getScaleInv());
    if (k->nextHistory) {
      k->nextHistory.getResult().replaceAllUsesWith(update.getNextHistory());
      k->nextHistory->erase();
    }
    k->ops.push_back(k->inv);
    llvm::SetVector<Value> constants;
    for (Operation *op : k->ops) {
      for (Value v : op->getOperands())
        if (v.getDefiningOp<ConstantOp>())
          constants.insert(v);
      op->erase();
    }
    for (Value c : constants)
      if (c.use_empty())
        c.getDefiningOp()->erase();
  }

  QuantizeDelayedOp rewrite(Chain &ch) {
    // Where the chain's first op was: x and s are defined before it.
    SmallVector<Operation *> ops{ch.absX,      ch.amax, ch.scaled, ch.q,
                                 ch.absScaled, ch.over, ch.overF,  ch.count};
    for (TransposeOp t : ch.transposes)
      ops.push_back(t);
    Operation *first = ops.front();
    for (Operation *op : ops)
      if (op->isBeforeInBlock(first))
        first = op;
    // x and s must be defined before it (tc-quantize-fp8 puts them there).
    for (Value v : {ch.x, ch.scale})
      if (Operation *def = v.getDefiningOp();
          def && def->getBlock() == first->getBlock() && !def->isBeforeInBlock(first))
        return {};
    OpBuilder b(first);
    auto qt = tensorTypeOf(ch.q.getResult());
    Type f32 = RankedTensorType::get({}, b.getF32Type());
    SmallVector<Type> types{qt, f32, f32};
    if (!ch.transposes.empty())
      types.push_back(tensorTypeOf(ch.transposes.front().getResult()));
    auto fused = QuantizeDelayedOp::create(b, ch.q.getLoc(), types, ch.x, ch.scale);
    for (StringRef name : {"tc.precision", "tc.precision_reason"})
      if (Attribute a = ch.q->getAttr(name))
        fused->setAttr(name, a);
    SmallVector<std::optional<int64_t>> ids{referenceValueId(ch.q, 0), referenceValueId(ch.amax, 0),
                                            referenceValueId(ch.count, 0)};
    if (!ch.transposes.empty())
      ids.push_back(referenceValueId(ch.transposes.front(), 0));
    if (llvm::any_of(ids, [](const std::optional<int64_t> &id) { return id.has_value(); }))
      setReferenceValueIds(fused, ids);
    ch.q.getResult().replaceAllUsesWith(fused.getResult());
    ch.amax.getResult().replaceAllUsesWith(fused.getAmax());
    ch.count.getResult().replaceAllUsesWith(fused.getSaturated());
    for (TransposeOp t : ch.transposes) {
      t.getResult().replaceAllUsesWith(fused.getResultT());
      t->erase();
    }
    Value limit = ch.over.getRhs();
    for (Operation *op : {ch.count.getOperation(), ch.overF.getOperation(), ch.over.getOperation(),
                          ch.absScaled.getOperation(), ch.q.getOperation(),
                          ch.scaled.getOperation(), ch.amax.getOperation(), ch.absX.getOperation()})
      op->erase();
    if (ch.xf != ch.x && ch.xf.use_empty())
      ch.xf.getDefiningOp()->erase();
    if (limit.use_empty())
      limit.getDefiningOp()->erase();
    return fused;
  }
};

} // namespace
