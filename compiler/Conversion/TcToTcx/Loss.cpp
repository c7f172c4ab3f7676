//===- Loss.cpp - cross-entropy -> library calls --------------------------===//
//
// cross_entropy -> "cross_entropy_fwd" (f32 loss), cross_entropy_grad ->
// "cross_entropy_bwd", on [N, C] logits, mean over the rows not ignored, no
// class weight. A forward and gradient that tc-fuse-cross-entropy paired
// (tc.fused_grad on both) are one "cross_entropy_fwd_bwd" (llm.c's fused
// classifier: loss and dlogits in one pass over the logits); with
// tc.bf16_logits the call reads the bf16 logits under the widening cast and
// writes the bf16 gradient the narrowing cast would have made, and both
// casts go.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Conversion/TcToTcx/Patterns.h"

using namespace mlir;

namespace tc {
namespace {

SmallVector<NamedAttribute> sizes(OpBuilder &b, Value logits, int64_t ignoreIndex) {
  auto t = tensorType(logits);
  return {b.getNamedAttr("rows", b.getI64IntegerAttr(t.getDimSize(0))),
          b.getNamedAttr("cols", b.getI64IntegerAttr(t.getDimSize(1))),
          b.getNamedAttr("ignore_index", b.getI64IntegerAttr(ignoreIndex))};
}

/// The grad operand as an attribute (a splat constant) or an input.
void gradScale(OpBuilder &b, BufferAssignment &buffers, Value grad, SmallVector<Value> &ins,
               SmallVector<NamedAttribute> &attrs) {
  if (std::optional<double> g = splatFloatValue(grad)) {
    attrs.push_back(b.getNamedAttr("grad_scale", b.getF32FloatAttr(*g)));
    return;
  }
  ins.push_back(buffers.bufferOf(b, grad));
}

/// Whether the loss and its gradient are all that read `logits` (through
/// the widening cast when `direct`; reshapes of one use each on the way
/// back to the op that computes them): the fused call may then write the
/// gradient over them.
bool logitsReadOnlyHere(Value logits, CrossEntropyOp ce, CrossEntropyGradOp grad, bool direct) {
  auto onlyLossReads = [&](Value v) {
    return llvm::all_of(v.getUsers(),
                        [&](Operation *u) { return u == ce.getOperation() || u == grad.getOperation(); });
  };
  if (direct ? !logits.hasOneUse() || !onlyLossReads(ce.getInput()) : !onlyLossReads(logits))
    return false;
  Value v = logits;
  while (auto r = v.getDefiningOp<ReshapeOp>()) {
    if (!r.getInput().hasOneUse())
      return false;
    v = r.getInput();
  }
  Operation *def = v.getDefiningOp();
  return def && !llvm::isa<ParameterOp, ConstantOp>(def);
}

struct CrossEntropyLowering : TcxPattern<CrossEntropyOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(CrossEntropyOp ce, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (!crossEntropyForm(ce.getInput(), ce.getLabels(), ce.getWeight(), ce.getReduction()) ||
        !tensorType(ce.getResult()).getElementType().isF32())
      return rewriter.notifyMatchFailure(ce, "not the cross_entropy launcher's form");
    SmallVector<NamedAttribute> attrs = sizes(rewriter, ce.getInput(), ce.getIgnoreIndex());
    CrossEntropyGradOp grad;
    if (ce->hasAttr(kFusedGradAttr)) {
      for (Operation *u : ce.getInput().getUsers())
        if (auto g = llvm::dyn_cast<CrossEntropyGradOp>(u); g && g->hasAttr(kFusedGradAttr))
          grad = g;
      if (!grad)
        return rewriter.notifyMatchFailure(ce, "tc.fused_grad without a marked gradient");
    }
    bool direct = ce->hasAttr(kBf16LogitsAttr);
    Operation *narrow = nullptr;
    if (direct && grad) {
      if (!grad.getResult().hasOneUse())
        return rewriter.notifyMatchFailure(ce, "tc.bf16_logits without a narrowing cast");
      narrow = *grad.getResult().getUsers().begin();
    }
    Value logits = ce.getInput();
    if (direct) {
      if (!logits.getDefiningOp())
        return rewriter.notifyMatchFailure(ce, "tc.bf16_logits without a widening cast");
      logits = logits.getDefiningOp()->getOperand(0);
    }
    SmallVector<Value> ins{buffers.bufferOf(rewriter, logits),
                           buffers.bufferOf(rewriter, ce.getLabels())};
    if (!grad) {
      Value loss = buffers.outBuffer(rewriter, ce.getResult());
      buffers.library(rewriter, ce.getLoc(), "cross_entropy_fwd", ins, {loss}, attrs);
      rewriter.replaceOp(ce, loss);
      return success();
    }
    gradScale(rewriter, buffers, grad.getGrad(), ins, attrs);
    Value loss = buffers.outBuffer(rewriter, ce.getResult());
    Operation *dlogitsOp = narrow ? narrow : grad.getOperation();
    // The gradient over the logits when nothing else reads them (llm.c's
    // fused classifier; the kernel reads a row before it writes it): one
    // [N, C] buffer instead of two at the step's peak (1.6 GB for GPT-2).
    Value dlogits = logitsReadOnlyHere(logits, ce, grad, direct) &&
                            tensorType(dlogitsOp->getResult(0)) == tensorType(logits) &&
                            llvm::none_of(dlogitsOp->getResult(0).getUsers(),
                                          [](Operation *u) { return isa<func::ReturnOp>(u); })
                        ? buffers.view(rewriter, dlogitsOp->getResult(0), logits, 0)
                        : buffers.outBuffer(rewriter, dlogitsOp->getResult(0));
    buffers.library(rewriter, ce.getLoc(), "cross_entropy_fwd_bwd", ins, {loss, dlogits}, attrs);
    rewriter.replaceOp(ce, loss);
    rewriter.replaceOp(dlogitsOp, dlogits);
    if (narrow)
      rewriter.eraseOp(grad);
    return success();
  }
};

struct CrossEntropyGradLowering : TcxPattern<CrossEntropyGradOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(CrossEntropyGradOp g, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (!crossEntropyForm(g.getInput(), g.getLabels(), g.getWeight(), g.getReduction()))
      return rewriter.notifyMatchFailure(g, "not the cross_entropy launcher's form");
    SmallVector<NamedAttribute> attrs = sizes(rewriter, g.getInput(), g.getIgnoreIndex());
    SmallVector<Value> ins{buffers.bufferOf(rewriter, g.getInput()),
                           buffers.bufferOf(rewriter, g.getLabels())};
    gradScale(rewriter, buffers, g.getGrad(), ins, attrs);
    Value out = buffers.outBuffer(rewriter, g.getResult());
    buffers.library(rewriter, g.getLoc(), "cross_entropy_bwd", ins, {out}, attrs);
    rewriter.replaceOp(g, out);
    return success();
  }
};

} // namespace

void populateTcToTcxLossPatterns(RewritePatternSet &patterns, BufferAssignment &buffers) {
  patterns.add<CrossEntropyLowering, CrossEntropyGradLowering>(patterns.getContext(), buffers);
}

} // namespace tc
