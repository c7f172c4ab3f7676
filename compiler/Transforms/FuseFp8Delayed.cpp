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
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/tc/Eval/Program.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

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
    DenseFPElementsAttr limit;
    if (!isF32Scalar(g.getRhs()) || !matchPattern(g.getRhs(), m_Constant(&limit)) ||
        limit.getSplatValue<APFloat>().convertToDouble() != fmax)
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
      rewrite(ch);
  }

  void rewrite(Chain &ch) {
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
        return;
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
  }
};

} // namespace
