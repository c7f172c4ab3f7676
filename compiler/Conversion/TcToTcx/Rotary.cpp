//===- Rotary.cpp - tc.rotary -> a generated kernel with strides -----------===//
//
// tc.rotary -> a "rotary" kernel that reads its input in place when it is a
// head-split view of a projection (headSplitSource: Llama's q / k straight
// out of the [B, T, H, D] projection, GPT-NeoX's out of its per-head qkv)
// and, marked tc.out_transposed by tc-fuse-attention-views, writes its
// result through the head transpose that reads it, or into its piece of a
// last-axis concat that one head transpose reads (the gradients of q and k
// into the qkv projection's gradient). The kernel's tc.rotary carries the
// [batch, head, row] element strides of both sides (tcx::kRotaryInStridesAttr,
// tcx::kRotaryOutStridesAttr) when they are not the dense ones; the transposes,
// slices and the concat are then not made. Marked tc.rotary_in_place, it
// rotates its input where the projection holds it (tcx::kRotaryInPlaceKernelAttr)
// and the attention ops reading its result read that place.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Conversion/TcToTcx/Patterns.h"

using namespace mlir;

namespace tc {

Value writeThrough(BufferAssignment &buffers, ConversionPatternRewriter &rewriter, Location loc,
                   const TransposedDestination &d, RankedTensorType type) {
  Value whole;
  if (d.concat) {
    Value &shared = buffers.transposedConcats[d.concat];
    if (!shared) // the head transpose's [B, T, H, N], or the [B, T, N] concat's
      shared = buffers.outBuffer(rewriter, d.reshape ? Value(ConcatOp(d.concat).getResult())
                                                     : d.transpose->getResult(0));
    whole = shared;
    if (d.reshape) {
      // The piece's transpose and reshape, read by the concat alone, are not
      // made: views the concat's lowering leaves unread.
      for (Operation *o : {d.reshape, d.transpose})
        rewriter.replaceOp(o, elementView(rewriter, loc, whole, tensorType(o->getResult(0)), d.start));
    }
  } else {
    whole = buffers.outBuffer(rewriter, d.transpose->getResult(0));
    rewriter.replaceOp(d.transpose, whole);
  }
  return elementView(rewriter, loc, whole, type, d.start);
}

namespace {

struct RotaryLowering : TcxPattern<RotaryOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(RotaryOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto it = tensorType(op.getInput()), rt = tensorType(op.getResult());
    if (it.getRank() != 4)
      return rewriter.notifyMatchFailure(op, "not [B, H, T, D]");
    std::optional<TransposedDestination> dst;
    if (op->hasAttr(kOutTransposedAttr) && !(dst = transposedDestination(op.getResult())))
      return rewriter.notifyMatchFailure(op, "tc.out_transposed without a transpose to write");
    Location loc = op.getLoc();
    if (op->hasAttr(kRotaryInPlaceAttr))
      return inPlace(op, rewriter);
    SmallVector<int64_t> inStrides = denseHeadStrides(it), outStrides = denseHeadStrides(rt);
    Value in;
    if (std::optional<HeadSplitSource> src = headSplitSource(op.getInput())) {
      in = elementView(rewriter, loc, buffers.bufferOf(rewriter, src->whole), it, src->start);
      inStrides.assign(src->strides.begin(), src->strides.end());
    } else {
      in = buffers.bufferOf(rewriter, op.getInput());
    }
    Value cs = buffers.bufferOf(rewriter, op.getCos()), sn = buffers.bufferOf(rewriter, op.getSin());
    if (!in || !cs || !sn)
      return rewriter.notifyMatchFailure(op, "an operand has no buffer (internal error)");
    Value out;
    if (dst) {
      out = writeThrough(buffers, rewriter, loc, *dst, rt);
      outStrides.assign(dst->strides.begin(), dst->strides.end());
    } else {
      out = buffers.outBuffer(rewriter, op.getResult());
    }
    tcx::KernelOp kernel = kernelOf(op, "rotary", buffers, rewriter, [&](Operation *clone) {
      if (inStrides != denseHeadStrides(it))
        clone->setAttr(tcx::kRotaryInStridesAttr, rewriter.getDenseI64ArrayAttr(inStrides));
      if (outStrides != denseHeadStrides(rt))
        clone->setAttr(tcx::kRotaryOutStridesAttr, rewriter.getDenseI64ArrayAttr(outStrides));
    });
    buffers.launch(rewriter, op, kernel, {in, cs, sn}, {out});
    rewriter.replaceOp(op, out);
    return success();
  }

  /// tc-fuse-attention-views' kRotaryInPlaceAttr: the kernel rotates the
  /// input's elements where they are (its output the input's view); the
  /// attention ops that read the result read that view with its strides.
  LogicalResult inPlace(RotaryOp op, ConversionPatternRewriter &rewriter) const {
    auto it = tensorType(op.getInput());
    Value view;
    SmallVector<int64_t> strides;
    if (auto found = buffers.stridedAttention.find(op.getInput());
        found != buffers.stridedAttention.end()) {
      // The backward's: the attention backward wrote the gradient where
      // this rotary writes (tc.grads_through_rotary).
      view = found->second.first;
      strides = found->second.second;
      if (buffers.rotatedByAttention.contains(op.getInput())) {
        // The call stored it rotated (tc-fuse-attention-rotary): no kernel.
        buffers.stridedAttention[op.getResult()] = {view, strides};
        rewriter.replaceOp(op, view);
        return success();
      }
    } else if (std::optional<HeadSplitSource> src = headSplitSource(op.getInput())) {
      Value whole = buffers.bufferOf(rewriter, src->whole);
      if (!whole)
        return rewriter.notifyMatchFailure(op, "an operand has no buffer (internal error)");
      view = elementView(rewriter, op.getLoc(), whole, it, src->start);
      strides.assign(src->strides.begin(), src->strides.end());
    } else {
      return rewriter.notifyMatchFailure(op, "tc.rotary_in_place on a rotary whose input is "
                                             "neither a head-split view nor a gradient written "
                                             "in its place");
    }
    Value cs = buffers.bufferOf(rewriter, op.getCos()), sn = buffers.bufferOf(rewriter, op.getSin());
    if (!cs || !sn)
      return rewriter.notifyMatchFailure(op, "an operand has no buffer (internal error)");
    tcx::KernelOp kernel = kernelOf(op, "rotary", buffers, rewriter, [&](Operation *clone) {
      clone->setAttr(tcx::kRotaryInPlaceKernelAttr, rewriter.getUnitAttr());
      if (strides != denseHeadStrides(it)) {
        clone->setAttr(tcx::kRotaryInStridesAttr, rewriter.getDenseI64ArrayAttr(strides));
        clone->setAttr(tcx::kRotaryOutStridesAttr, rewriter.getDenseI64ArrayAttr(strides));
      }
    });
    buffers.launch(rewriter, op, kernel, {view, cs, sn}, {view});
    buffers.stridedAttention[op.getResult()] = {view, strides};
    rewriter.replaceOp(op, view);
    return success();
  }
};

/// The concat whose pieces were written into its head transpose's buffer:
/// it and the transpose become that buffer. A [B, T, N] concat whose pieces
/// were written through their transposes and reshapes becomes its buffer.
struct ConcatIntoTransposeLowering : TcxPattern<ConcatOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(ConcatOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto found = buffers.transposedConcats.find(op);
    if (found == buffers.transposedConcats.end())
      return rewriter.notifyMatchFailure(op, "not written in place");
    if (tensorType(op.getResult()).getRank() == 3) {
      rewriter.replaceOp(op, found->second);
      return success();
    }
    Operation *tr = *op.getResult().getUsers().begin();
    rewriter.replaceOp(tr, found->second);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void populateTcToTcxRotaryPatterns(RewritePatternSet &patterns, BufferAssignment &buffers) {
  patterns.add<RotaryLowering, ConcatIntoTransposeLowering>(patterns.getContext(), buffers);
}

} // namespace tc
