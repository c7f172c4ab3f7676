//===- FuseCrossEntropy.cpp - tc-fuse-cross-entropy -----------------------===//
//
// Pairs a tc.cross_entropy with the tc.cross_entropy_grad of the same
// logits (tc.fused_grad on both: llm.c's fused classifier, one pass over
// the [N, C] logits for loss and dlogits), and marks tc.bf16_logits where
// the logits are bf16 widened for the loss only and the gradient's only
// reader narrows it back: the library call then reads bf16 with fp32 math
// (the same numbers) and writes the bf16 gradient (the same rounding), so
// neither f32 copy of [N, C] exists.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Passes.h"

namespace tc {
#define GEN_PASS_DEF_TCFUSECROSSENTROPY
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace tc {
namespace {

bool isSplatConstant(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return false;
  auto dense = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
  return dense && dense.isSplat();
}

void mark(CrossEntropyOp ce) {
  if (!crossEntropyForm(ce.getInput(), ce.getLabels(), ce.getWeight(), ce.getReduction()) ||
      !llvm::cast<RankedTensorType>(ce.getResult().getType()).getElementType().isF32())
    return;
  // The gradient on the same logits, when its scale is known at the
  // forward (a splat, an argument, or computed before it); the last such.
  CrossEntropyGradOp grad;
  for (Operation *u : ce.getInput().getUsers())
    if (auto g = llvm::dyn_cast<CrossEntropyGradOp>(u))
      if (g.getLabels() == ce.getLabels() && !g.getWeight() &&
          g.getIgnoreIndex() == ce.getIgnoreIndex() && g.getReduction() == "mean" &&
          g.getResult().getType() == ce.getInput().getType() &&
          (isSplatConstant(g.getGrad()) || !g.getGrad().getDefiningOp() ||
           g.getGrad().getDefiningOp()->isBeforeInBlock(ce)))
        grad = g;
  Value logits = ce.getInput();
  Operation *narrow = grad && grad.getResult().hasOneUse() ? *grad.getResult().getUsers().begin()
                                                           : nullptr;
  Builder b(ce.getContext());
  Type bf16 = b.getBF16Type(), f32 = b.getF32Type();
  bool direct = isLoneCast(logits.getDefiningOp(), bf16, f32) &&
                llvm::all_of(logits.getUsers(),
                             [&](Operation *u) { return u == ce || u == grad.getOperation(); }) &&
                (!grad || isLoneCast(narrow, f32, bf16));
  if (grad) {
    ce->setAttr(kFusedGradAttr, b.getUnitAttr());
    grad->setAttr(kFusedGradAttr, b.getUnitAttr());
  }
  if (direct)
    ce->setAttr(kBf16LogitsAttr, b.getUnitAttr());
}

struct TcFuseCrossEntropy : impl::TcFuseCrossEntropyBase<TcFuseCrossEntropy> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody())
      for (auto ce : block.getOps<CrossEntropyOp>())
        mark(ce);
  }
};

} // namespace
} // namespace tc
