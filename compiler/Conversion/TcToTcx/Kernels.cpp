//===- Kernels.cpp - tc ops that become generated kernels -----------------===//
//
// tc.fusion -> a tcx.kernel of kind "fusion" with the fusion's body; every
// other tc op that no library call or view covers -> a tcx.kernel of kind
// "elementwise" or "<op name>" holding a clone of the op. Either way the
// function gets a tcx.launch whose `ins` are one buffer per operand in
// operand order (repeated operands and splat constants included): the
// generated kernel's ABI. tcx-generate-cuda turns the bodies into CUDA.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Conversion/TcToTcx/Patterns.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;

namespace tc {

/// The buffers of `op`'s operands, one per operand.
static FailureOr<SmallVector<Value>> operandBuffers(Operation *op, BufferAssignment &buffers,
                                                    OpBuilder &b) {
  SmallVector<Value> ins;
  for (Value operand : op->getOperands()) {
    Value buf = buffers.bufferOf(b, operand);
    if (!buf)
      return failure();
    ins.push_back(buf);
  }
  return ins;
}

/// Gives `op`'s results buffers, launches `kernel` from `ins` into them and
/// replaces `op` by them.
static void launchReplacing(Operation *op, tcx::KernelOp kernel, ValueRange ins,
                            BufferAssignment &buffers, ConversionPatternRewriter &rewriter) {
  SmallVector<Value> outs;
  for (Value r : op->getResults())
    outs.push_back(buffers.outBuffer(rewriter, r));
  buffers.launch(rewriter, op, kernel, ins, outs);
  rewriter.replaceOp(op, outs);
}

tcx::KernelOp kernelOf(Operation *op, StringRef kind, BufferAssignment &buffers,
                       ConversionPatternRewriter &rewriter,
                       function_ref<void(Operation *)> edit) {
  tcx::KernelOp kernel =
      buffers.newKernel(rewriter, op->getLoc(), op->getName().stripDialect(), kind);
  OpBuilder::InsertionGuard g(rewriter);
  SmallVector<Location> locs;
  for (Value operand : op->getOperands())
    locs.push_back(operand.getLoc());
  Block *entry = rewriter.createBlock(&kernel.getBody(), {}, op->getOperandTypes(), locs);
  Operation *clone = rewriter.clone(*op);
  clone->setOperands(entry->getArguments());
  // A marked op that no library call took computes only itself.
  for (StringRef mark :
       {kEpilogueAttr, kEpilogueAddendAttr, kFoldBatchSumAttr, kFusedGradAttr, kBf16LogitsAttr,
        kNormStatsAttr, kOutTransposedAttr, kGradsTransposedAttr, kGradsIntoConcatAttr, kColSumAttr,
        kBiasGradAttr, kGeluAuxAttr, kCopySliceAttr, kDGeluAttr, kGeluGradAttr, kRotaryInPlaceAttr,
        kGradsThroughRotaryAttr, kAttentionRotaryAttr})
    clone->removeAttr(mark);
  if (edit)
    edit(clone);
  tcx::YieldOp::create(rewriter, op->getLoc(), clone->getResults());
  return kernel;
}

LogicalResult lowerToKernel(Operation *op, StringRef kind, BufferAssignment &buffers,
                            ConversionPatternRewriter &rewriter) {
  FailureOr<SmallVector<Value>> ins = operandBuffers(op, buffers, rewriter);
  if (failed(ins))
    return rewriter.notifyMatchFailure(op, "an operand has no buffer (internal error)");
  tcx::KernelOp kernel = kernelOf(op, kind, buffers, rewriter);
  launchReplacing(op, kernel, *ins, buffers, rewriter);
  return success();
}

namespace {

struct FusionLowering : TcxPattern<FusionOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(FusionOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    FailureOr<SmallVector<Value>> ins = operandBuffers(op, buffers, rewriter);
    if (failed(ins))
      return rewriter.notifyMatchFailure(op, "an operand has no buffer (internal error)");
    tcx::KernelOp kernel = buffers.newKernel(rewriter, op->getLoc(), "fusion", "fusion");
    {
      OpBuilder::InsertionGuard g(rewriter);
      IRMapping map;
      rewriter.cloneRegionBefore(op->getRegion(0), kernel.getBody(), kernel.getBody().end(),
                                 map);
      Operation *term = kernel.getEntry().getTerminator();
      rewriter.setInsertionPoint(term);
      tcx::YieldOp::create(rewriter, term->getLoc(), term->getOperands());
      rewriter.eraseOp(term);
    }
    launchReplacing(op, kernel, *ins, buffers, rewriter);
    return success();
  }
};

/// Any other tc op with results and no regions: the fallback, below every
/// pattern that has a better form for the op.
struct GeneratedKernel : ConversionPattern {
  GeneratedKernel(MLIRContext *ctx, BufferAssignment &buffers)
      : ConversionPattern(MatchAnyOpTypeTag(), /*benefit=*/1, ctx), buffers(buffers) {}
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value>,
                                ConversionPatternRewriter &rewriter) const override {
    if (!llvm::isa_and_nonnull<TCDialect>(op->getDialect()) || op->getNumRegions() != 0 ||
        op->getNumResults() == 0)
      return rewriter.notifyMatchFailure(op, "not a tc op with results and no regions");
    return lowerToKernel(op, isElementwise(op) ? "elementwise" : op->getName().stripDialect(),
                         buffers, rewriter);
  }
  BufferAssignment &buffers;
};

} // namespace

void populateTcToTcxKernelPatterns(RewritePatternSet &patterns, BufferAssignment &buffers) {
  patterns.add<FusionLowering, GeneratedKernel>(patterns.getContext(), buffers);
}

} // namespace tc
