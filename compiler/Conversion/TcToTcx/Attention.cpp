//===- Attention.cpp - fused attention -> attention_fwd / _bwd ------------===//
//
// tc.attention / tc.attention_grad -> the "attention_fwd" / "attention_bwd"
// library calls: q [B, H, Tq, D], k / v [B, Hkv, Tk, D / Dv], f32 lse, and
// [batch, head, row] element strides per operand ("q_strides", ...). An
// operand that is the [0, 2, 1, 3] transpose of a [B, T, H, D] tensor (the
// head split of a projection) is read in place, and out of a fused [B, T, N]
// qkv projection's split when it is a piece of one (the transpose, unread,
// is left to tcx-eliminate-dead-work; headSplitSource). What
// tc-fuse-attention-views marked is written in place: the output through
// the transpose back (tc.out_transposed), dq / dk / dv through theirs or
// into their piece of a concat a head transpose reads (tc.grads_transposed)
// or into the concat that forms the qkv gradient (tc.grads_into_concat); the
// ops written through go with the call. No copies around attention.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Conversion/TcToTcx/Patterns.h"

using namespace mlir;

namespace tc {
namespace {

using Strides = SmallVector<int64_t>;

/// Builds one attention call: its operands' buffers and strides.
struct AttentionCall {
  AttentionCall(Operation *op, BufferAssignment &buffers, ConversionPatternRewriter &rewriter)
      : op(op), buffers(buffers), b(rewriter) {}

  /// A [B, T, H, D] piece starting at element `start` of the rows of the
  /// [B, T, N] buffer `whole`: a view at that byte offset, rows of N.
  std::pair<Value, Strides> piece(Value whole, RankedTensorType wholeType, int64_t start,
                                  RankedTensorType pieceType, int64_t d) {
    int64_t n = wholeType.getDimSize(2);
    return {elementView(b, op->getLoc(), whole, pieceType, start),
            Strides{wholeType.getDimSize(1) * n, d, n}};
  }
  void strides(StringRef name, ArrayRef<int64_t> st) {
    attrs.push_back(b.getNamedAttr(name, b.getDenseI64ArrayAttr(st)));
  }
  /// The buffer operand `v` is read from, recording its strides as `name`:
  /// in place when it is a head-split view of another tensor
  /// (headSplitSource; a view typed [B, T, H, D] at its first element).
  Value operand(Value v, StringRef name) {
    auto t = tensorType(v);
    if (std::optional<HeadSplitSource> src = headSplitSource(v)) {
      strides(name, src->strides);
      auto rows = RankedTensorType::get(
          {t.getDimSize(0), t.getDimSize(2), t.getDimSize(1), t.getDimSize(3)},
          t.getElementType());
      Value whole = buffers.bufferOf(b, src->whole);
      if (src->start == 0 && tensorType(src->whole) == rows)
        return whole;
      return elementView(b, op->getLoc(), whole, rows, src->start);
    }
    if (auto it = buffers.stridedAttention.find(v); it != buffers.stridedAttention.end()) {
      strides(name, it->second.second);
      return it->second.first;
    }
    strides(name, denseHeadStrides(t));
    return buffers.bufferOf(b, v);
  }
  /// The buffer result `r` goes to and its strides (recorded as `name`):
  /// the buffer of `tr`, its head transpose written through, which goes
  /// with the call; else its own.
  struct Out {
    Value buffer;
    Strides strides;
  };
  Out result(Value r, StringRef name, Operation *tr) {
    auto t = tensorType(r);
    Out out{Value(), denseHeadStrides(t)};
    if (tr) {
      out = {buffers.outBuffer(b, tr->getResult(0)), transposedHeadStrides(t)};
      b.replaceOp(tr, out.buffer);
    } else {
      out.buffer = buffers.outBuffer(b, r);
    }
    strides(name, out.strides);
    return out;
  }

  Operation *op;
  BufferAssignment &buffers;
  ConversionPatternRewriter &b;
  SmallVector<NamedAttribute> attrs;
};

/// Records the sizes both calls take, then returns the buffers of q, k and
/// v (recording their strides).
template <typename Op>
SmallVector<Value> startCall(AttentionCall &call, Op op) {
  Value q = op.getQuery(), k = op.getKey(), v = op.getValue();
  auto qt = tensorType(q), kt = tensorType(k), vt = tensorType(v);
  OpBuilder &b = call.b;
  auto i64 = [&](int64_t x) { return b.getI64IntegerAttr(x); };
  call.attrs = {b.getNamedAttr("batch", i64(qt.getDimSize(0))),
                b.getNamedAttr("heads", i64(qt.getDimSize(1))),
                b.getNamedAttr("kv_heads", i64(kt.getDimSize(1))),
                b.getNamedAttr("tq", i64(qt.getDimSize(2))),
                b.getNamedAttr("tk", i64(kt.getDimSize(2))),
                b.getNamedAttr("d", i64(qt.getDimSize(3))),
                b.getNamedAttr("dv", i64(vt.getDimSize(3))),
                b.getNamedAttr("scale", call.op->getAttr("scale")),
                b.getNamedAttr("causal", call.op->getAttr("causal"))};
  if (auto fill = op.getMaskFill())
    call.attrs.push_back(b.getNamedAttr("mask_fill", b.getF64FloatAttr(fill->convertToDouble())));
  if (op.getKeyMask())
    call.attrs.push_back(b.getNamedAttr("has_key_mask", b.getBoolAttr(true)));
  return SmallVector<Value>{call.operand(q, "q_strides"), call.operand(k, "k_strides"),
                            call.operand(v, "v_strides")};
}

/// The key mask's buffer (an input after the others), if the op has one.
template <typename Op>
void appendKeyMask(AttentionCall &call, Op op, SmallVector<Value> &ins) {
  if (Value m = op.getKeyMask())
    ins.push_back(call.buffers.bufferOf(call.b, m));
}

struct AttentionLowering : TcxPattern<AttentionOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(AttentionOp at, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (!attentionForm(at.getQuery(), at.getLse()))
      return rewriter.notifyMatchFailure(at, "element types have no attention kernel");
    Value res = at.getResult();
    Operation *tr = nullptr;
    if (at->hasAttr(kOutTransposedAttr)) {
      tr = headTransposeReader(res, [&](Operation *u) { return readsOnlyAsResult(u, res); });
      if (!tr)
        return rewriter.notifyMatchFailure(at, "tc.out_transposed without a transpose to write");
    }
    AttentionCall call(at, buffers, rewriter);
    SmallVector<Value> qkv = startCall(call, at);
    AttentionCall::Out o = call.result(res, "o_strides", tr);
    if (tr)
      buffers.stridedAttention[res] = {o.buffer, o.strides};
    Value lse = buffers.outBuffer(rewriter, at.getLse());
    SmallVector<Value> outs{o.buffer, lse};
    if (Value amax = at.getAmax()) { // tc-fuse-fp8-amax's
      outs.push_back(buffers.outBuffer(rewriter, amax));
      call.attrs.push_back(rewriter.getNamedAttr("has_amax", rewriter.getBoolAttr(true)));
    }
    appendKeyMask(call, at, qkv);
    buffers.library(rewriter, at.getLoc(), "attention_fwd", qkv, outs, call.attrs);
    rewriter.replaceOp(at, outs);
    return success();
  }
};

struct AttentionGradLowering : TcxPattern<AttentionGradOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(AttentionGradOp ag, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (!attentionForm(ag.getQuery(), ag.getLse()))
      return rewriter.notifyMatchFailure(ag, "element types have no attention kernel");
    Value grads[3] = {ag.getDquery(), ag.getDkey(), ag.getDvalue()};
    std::optional<GradConcat> cat;
    if (ag->hasAttr(kGradsIntoConcatAttr) && !(cat = gradConcat(ag)))
      return rewriter.notifyMatchFailure(ag, "tc.grads_into_concat without the concat");
    std::optional<TransposedDestination> dsts[3];
    if (auto marks = ag->getAttrOfType<DenseBoolArrayAttr>(kGradsTransposedAttr)) {
      if (marks.size() != 3)
        return rewriter.notifyMatchFailure(ag, "tc.grads_transposed needs one flag per gradient");
      for (int j = 0; j < 3; ++j)
        if (marks[j] && !(dsts[j] = transposedDestination(grads[j])))
          return rewriter.notifyMatchFailure(ag, "tc.grads_transposed without a transpose");
    }
    // Gradients the backward's rotaries rotate in place at their destination.
    std::optional<TransposedDestination> viaRotary[3];
    if (auto marks = ag->getAttrOfType<DenseBoolArrayAttr>(kGradsThroughRotaryAttr)) {
      if (marks.size() != 3 || cat)
        return rewriter.notifyMatchFailure(ag, "tc.grads_through_rotary needs one flag per "
                                               "gradient and no concat of the gradients");
      for (int j = 0; j < 3; ++j) {
        if (!marks[j])
          continue;
        auto r = grads[j].hasOneUse() ? llvm::dyn_cast<RotaryOp>(*grads[j].getUsers().begin())
                                      : RotaryOp();
        if (dsts[j] || !r || !(viaRotary[j] = transposedDestination(r.getResult())))
          return rewriter.notifyMatchFailure(ag, "tc.grads_through_rotary without a rotary "
                                                 "written through");
      }
    }
    AttentionCall call(ag, buffers, rewriter);
    SmallVector<Value> qkv = startCall(call, ag);
    Value o = call.operand(ag.getResult(), "o_strides");
    Value dout = call.operand(ag.getGrad(), "do_strides");
    StringRef names[3] = {"dq_strides", "dk_strides", "dv_strides"};
    SmallVector<Value> outs(3);
    Value catBuf;
    if (cat) {
      auto ct = tensorType(cat->concat.getResult());
      catBuf = buffers.outBuffer(rewriter, cat->concat.getResult());
      for (int j = 0; j < 3; ++j) {
        auto [view, st] = call.piece(
            catBuf, ct,
            offsetInLastAxis(cat->concat.getInputs(), cat->chain[2 * j + 1]->getResult(0)),
            tensorType(cat->chain[2 * j]->getResult(0)), tensorType(grads[j]).getDimSize(3));
        outs[j] = view;
        call.strides(names[j], st);
      }
    } else {
      for (int j = 0; j < 3; ++j) {
        if (viaRotary[j]) { // where the rotary writes, which rotates it in place
          outs[j] = writeThrough(buffers, rewriter, ag.getLoc(), *viaRotary[j],
                                 tensorType(grads[j]));
          call.strides(names[j], viaRotary[j]->strides);
          buffers.stridedAttention[grads[j]] = {
              outs[j], SmallVector<int64_t>(viaRotary[j]->strides.begin(),
                                            viaRotary[j]->strides.end())};
          continue;
        }
        if (dsts[j] && dsts[j]->concat) { // a piece of a concat that a head transpose reads
          outs[j] = writeThrough(buffers, rewriter, ag.getLoc(), *dsts[j], tensorType(grads[j]));
          call.strides(names[j], dsts[j]->strides);
          continue;
        }
        outs[j] = call.result(grads[j], names[j], dsts[j] ? dsts[j]->transpose : nullptr).buffer;
      }
    }
    if (Value amax = ag.getAmax()) { // tc-fuse-fp8-amax's, of the gradients amax_of names
      outs.push_back(buffers.outBuffer(rewriter, amax));
      call.attrs.push_back(rewriter.getNamedAttr("has_amax", rewriter.getBoolAttr(true)));
      call.attrs.push_back(rewriter.getNamedAttr("amax_of", ag.getAmaxOfAttr()));
    }
    // tc-fuse-bias-grad's column sum of the concat the gradients form: the
    // call's col_sum, each gradient's columns at its piece's offset, which
    // the paired reduce_sum becomes (PairedColumnSumLowering).
    // GPT-NeoX's (heads interleaved, gradHeadConcat): each gradient's
    // columns at its offset in a head's, head h at + h col_sum_head_stride;
    // of the gradients as the call stores them, so any rotary on the way
    // must be the call's (checked below, once rotary_of is known).
    std::optional<GradHeadConcat> heads;
    if (ag->hasAttr(kColSumAttr)) {
      if (!cat && !(heads = gradHeadConcat(ag)))
        return rewriter.notifyMatchFailure(ag, "tc.col_sum without the gradients' concat");
      ReduceSumOp sum =
          pairedColumnSum(ag, lastAxisViews(cat ? cat->concat.getResult() : heads->whole));
      if (!sum)
        return rewriter.notifyMatchFailure(ag, "tc.col_sum without its reduce_sum");
      outs.push_back(buffers.outBuffer(rewriter, sum.getResult()));
      buffers.colSums[sum] = outs.back();
      SmallVector<int64_t> offsets;
      for (int j = 0; j < 3; ++j)
        offsets.push_back(
            cat ? offsetInLastAxis(cat->concat.getInputs(), cat->chain[2 * j + 1]->getResult(0))
                : heads->offsets[j]);
      call.attrs.push_back(rewriter.getNamedAttr("has_col_sum", rewriter.getBoolAttr(true)));
      call.attrs.push_back(
          rewriter.getNamedAttr("col_sum_offsets", rewriter.getDenseI64ArrayAttr(offsets)));
      if (heads)
        call.attrs.push_back(rewriter.getNamedAttr("col_sum_head_stride",
                                                   rewriter.getI64IntegerAttr(heads->headStride)));
    }
    // tc-fuse-attention-rotary's: the call rotates the gradients it stores
    // with their rotaries' tables, and those rotaries make no kernel.
    Value rotCos, rotSin;
    int64_t rotaryOf = 0;
    if (auto rot = ag->getAttrOfType<DenseBoolArrayAttr>(kAttentionRotaryAttr)) {
      if (rot.size() != 2)
        return rewriter.notifyMatchFailure(ag, "tc.attention_rotary needs one flag per dq, dk");
      for (int j = 0; j < 2; ++j) {
        if (!rot[j])
          continue;
        if (!viaRotary[j])
          return rewriter.notifyMatchFailure(ag, "tc.attention_rotary on a gradient that does "
                                                 "not go through its rotary in place");
        auto r = llvm::cast<RotaryOp>(*grads[j].getUsers().begin());
        Value cs = buffers.bufferOf(rewriter, r.getCos()),
              sn = buffers.bufferOf(rewriter, r.getSin());
        if (!cs || !sn || (rotCos && (cs != rotCos || sn != rotSin)))
          return rewriter.notifyMatchFailure(ag, "tc.attention_rotary without one pair of "
                                                 "tables made before the call");
        rotCos = cs, rotSin = sn;
        rotaryOf |= int64_t(1) << j;
      }
    }
    if (heads)
      for (int j = 0; j < 2; ++j)
        if (heads->rotaries[j] && !(rotaryOf & (int64_t(1) << j)))
          return rewriter.notifyMatchFailure(ag, "tc.col_sum of heads interleaved with a rotary "
                                                 "the call does not take (tc-fuse-attention-"
                                                 "rotary undoes such pairings)");
    if (rotaryOf) {
      call.attrs.push_back(rewriter.getNamedAttr("has_rotary", rewriter.getBoolAttr(true)));
      call.attrs.push_back(
          rewriter.getNamedAttr("rotary_of", rewriter.getI64IntegerAttr(rotaryOf)));
    }
    SmallVector<Value> ins{qkv[0], qkv[1], qkv[2], o, buffers.bufferOf(rewriter, ag.getLse()),
                           dout};
    appendKeyMask(call, ag, ins);
    if (rotaryOf) {
      ins.push_back(rotCos);
      ins.push_back(rotSin);
      for (int j = 0; j < 2; ++j)
        if (rotaryOf & (int64_t(1) << j))
          buffers.rotatedByAttention.insert(grads[j]);
    }
    buffers.library(rewriter, ag.getLoc(), "attention_bwd", ins, outs, call.attrs);
    if (cat) {
      rewriter.replaceOp(cat->concat, catBuf);
      for (Operation *c : llvm::reverse(cat->chain))
        rewriter.eraseOp(c);
    }
    rewriter.replaceOp(ag, outs);
    return success();
  }
};

} // namespace

void populateTcToTcxAttentionPatterns(RewritePatternSet &patterns, BufferAssignment &buffers) {
  patterns.add<AttentionLowering, AttentionGradLowering>(patterns.getContext(), buffers);
}

} // namespace tc
