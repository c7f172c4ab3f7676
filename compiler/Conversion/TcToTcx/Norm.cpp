//===- Norm.cpp - softmax and normalisations -> library calls -------------===//
//
// softmax / log_softmax (last axis) -> "softmax_fwd"; layer_norm, rms_norm
// (trailing axes) -> "layer_norm_fwd" / "rms_norm_fwd"; their gradients ->
// "layer_norm_bwd" / "rms_norm_bwd". A forward and gradient that
// tc-share-norm-stats paired (the same tc.norm_stats on both) share the row
// statistics: the forward writes mean / rstd, the gradient reads them; an
// unpaired gradient recomputes them with a forward call of its own.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Conversion/TcToTcx/Patterns.h"

using namespace mlir;

namespace tc {
namespace {

/// Rows and columns of `t` normalised over the axes from `axis` on.
std::pair<int64_t, int64_t> rowsCols(RankedTensorType t, int64_t axis) {
  int64_t cols = numElements(t.getShape().drop_front(axis));
  int64_t rows = cols ? t.getNumElements() / cols : 0;
  return {rows, cols};
}

struct SoftmaxLowering : ConversionPattern {
  SoftmaxLowering(StringRef name, MLIRContext *ctx, BufferAssignment &buffers)
      : ConversionPattern(name, /*benefit=*/2, ctx), buffers(buffers) {}
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value>,
                                ConversionPatternRewriter &rewriter) const override {
    auto t = tensorType(op->getOperand(0));
    int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
    if (axis != t.getRank() - 1 || !isLibraryFloat(t.getElementType()))
      return rewriter.notifyMatchFailure(op, "not a last-axis f32/bf16 softmax");
    auto [rows, cols] = rowsCols(t, axis);
    Value in = buffers.bufferOf(rewriter, op->getOperand(0));
    Value out = buffers.outBuffer(rewriter, op->getResult(0));
    buffers.library(rewriter, op->getLoc(), "softmax_fwd", {in}, {out},
                    {rewriter.getNamedAttr("rows", rewriter.getI64IntegerAttr(rows)),
                     rewriter.getNamedAttr("cols", rewriter.getI64IntegerAttr(cols)),
                     rewriter.getNamedAttr("log", rewriter.getBoolAttr(isa<LogSoftmaxOp>(op)))});
    rewriter.replaceOp(op, out);
    return success();
  }
  BufferAssignment &buffers;
};

/// The [rows] f32 statistics buffers the forward `norm` writes for the
/// gradient tc-share-norm-stats paired it with: (mean (layer_norm only),
/// rstd), or (null, null) when it has none.
std::pair<Value, Value> sharedStats(Operation *norm, bool rms, int64_t rows,
                                    BufferAssignment &buffers, OpBuilder &b) {
  auto id = norm->getAttr(kNormStatsAttr);
  if (!id)
    return {};
  for (Operation *u : norm->getOperand(0).getUsers()) {
    if (u == norm || u->getAttr(kNormStatsAttr) != id)
      continue;
    auto stats = [&]() {
      return tcx::AllocOp::create(b, norm->getLoc(), tcx::BufferType::get({rows}, b.getF32Type()),
                                  b.getStringAttr("activation"))
          .getResult();
    };
    Value mean = rms ? Value() : stats();
    Value rstd = stats();
    buffers.normStats[u] = {mean, rstd};
    return {mean, rstd};
  }
  return {};
}

/// layer_norm (with `bias` maybe) or rms_norm (`rms`, no bias) of `input`
/// over the axes from `axis` on, as the library forward; `amax` the op's
/// amax result, when it has one.
LogicalResult lowerNormForward(Operation *op, bool rms, Value input, Value scale, Value bias,
                               Value amax, int64_t axis, APFloat epsilon,
                               BufferAssignment &buffers, ConversionPatternRewriter &b) {
  auto t = tensorType(input);
  if (!normTypes(t.getElementType(), scale ? scale : bias))
    return b.notifyMatchFailure(op, "row/parameter types have no norm kernel");
  auto [rows, cols] = rowsCols(t, axis);
  SmallVector<Value> ins{buffers.bufferOf(b, input)};
  for (Value p : {scale, bias})
    if (p)
      ins.push_back(buffers.bufferOf(b, p));
  Value y = buffers.outBuffer(b, op->getResult(0));
  SmallVector<Value> outs{y};
  auto [mean, rstd] = sharedStats(op, rms, rows, buffers, b);
  for (Value stat : {mean, rstd})
    if (stat)
      outs.push_back(stat);
  SmallVector<NamedAttribute> attrs{
      b.getNamedAttr("rows", b.getI64IntegerAttr(rows)),
      b.getNamedAttr("cols", b.getI64IntegerAttr(cols)),
      b.getNamedAttr("eps", b.getF64FloatAttr(epsilon.convertToDouble())),
      b.getNamedAttr("has_weight", b.getBoolAttr(bool(scale)))};
  if (!rms)
    attrs.push_back(b.getNamedAttr("has_bias", b.getBoolAttr(bool(bias))));
  // tc-fuse-fp8-amax's amax of y, after the statistics.
  SmallVector<Value> results{y};
  if (amax) {
    results.push_back(buffers.outBuffer(b, amax));
    outs.push_back(results.back());
    attrs.push_back(b.getNamedAttr("has_amax", b.getBoolAttr(true)));
  }
  buffers.library(b, op->getLoc(), rms ? "rms_norm_fwd" : "layer_norm_fwd", ins, outs, attrs);
  b.replaceOp(op, results);
  return success();
}

struct LayerNormLowering : TcxPattern<LayerNormOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(LayerNormOp ln, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    return lowerNormForward(ln, /*rms=*/false, ln.getInput(), ln.getScale(), ln.getBias(),
                            ln.getAmax(), ln.getAxis(), ln.getEpsilon(), buffers, rewriter);
  }
};

struct RmsNormLowering : TcxPattern<RmsNormOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(RmsNormOp rn, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    return lowerNormForward(rn, /*rms=*/true, rn.getInput(), rn.getScale(), Value(),
                            rn.getAmax(), rn.getAxis(), rn.getEpsilon(), buffers, rewriter);
  }
};

/// layer_norm_grad / rms_norm_grad: the library backward from the forward's
/// statistics (or, without a paired forward, from a forward run here).
struct NormGradLowering : ConversionPattern {
  NormGradLowering(StringRef name, MLIRContext *ctx, BufferAssignment &buffers)
      : ConversionPattern(name, /*benefit=*/2, ctx), buffers(buffers) {}
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value>,
                                ConversionPatternRewriter &b) const override {
    bool rms = isa<RmsNormGradOp>(op);
    Value x = op->getOperand(0), dy = op->getOperand(1);
    Value scale = op->getNumOperands() > 2 ? op->getOperand(2) : Value();
    auto t = tensorType(x);
    Type elt = t.getElementType();
    Type pe = tensorType(op->getResult(1)).getElementType();
    if (!normTypes(elt, scale) || (!scale && pe != elt && pe != b.getF32Type()) ||
        (scale && pe != tensorType(scale).getElementType()))
      return b.notifyMatchFailure(op, "row/parameter types have no norm kernel");
    int64_t axis = op->getAttrOfType<IntegerAttr>("axis").getInt();
    double eps = op->getAttrOfType<FloatAttr>("epsilon").getValueAsDouble();
    auto [rows, cols] = rowsCols(t, axis);
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    auto [mean, rstd] = buffers.normStats.lookup(op);
    if (!rstd) {
      auto stats = [&]() {
        return tcx::AllocOp::create(b, op->getLoc(), tcx::BufferType::get({rows}, b.getF32Type()),
                                    b.getStringAttr("scratch"))
            .getResult();
      };
      Value y = tcx::AllocOp::create(b, op->getLoc(), tcx::BufferType::fromTensorType(t),
                                     b.getStringAttr("scratch"));
      rstd = stats();
      SmallVector<Value> ins{buffers.bufferOf(b, x)}, outs{y};
      if (scale)
        ins.push_back(buffers.bufferOf(b, scale));
      if (!rms) {
        mean = stats();
        outs.push_back(mean);
      }
      outs.push_back(rstd);
      buffers.library(b, op->getLoc(), rms ? "rms_norm_fwd" : "layer_norm_fwd", ins, outs,
                      {b.getNamedAttr("rows", i64(rows)), b.getNamedAttr("cols", i64(cols)),
                       b.getNamedAttr("eps", b.getF64FloatAttr(eps)),
                       b.getNamedAttr("has_weight", b.getBoolAttr(bool(scale))),
                       b.getNamedAttr("has_bias", b.getBoolAttr(false))});
    }
    SmallVector<Value> ins{buffers.bufferOf(b, dy), buffers.bufferOf(b, x)};
    if (scale)
      ins.push_back(buffers.bufferOf(b, scale));
    if (!rms)
      ins.push_back(mean);
    ins.push_back(rstd);
    // The residual stream's gradient added as dx is written (the add goes
    // with the call: dx's buffer is the add's).
    ResidualAdd res = normGradResidualAdd(op);
    AddOp add = res.add;
    if (add)
      ins.push_back(buffers.bufferOf(b, res.residual));
    // dx, then dscale with a scale, then dbias of a layer_norm; a result
    // without a buffer (dscale of a norm without a scale, which the pass
    // checks nothing reads) is dropped.
    SmallVector<SmallVector<Value>> results(op->getNumResults());
    SmallVector<Value> outs{buffers.outBuffer(b, add ? Value(add.getResult()) : op->getResult(0))};
    results[0] = {outs.back()};
    if (scale) {
      outs.push_back(buffers.outBuffer(b, op->getResult(1)));
      results[1] = {outs.back()};
    }
    if (!rms) {
      outs.push_back(buffers.outBuffer(b, op->getResult(2)));
      results[2] = {outs.back()};
    }
    SmallVector<NamedAttribute> attrs{b.getNamedAttr("rows", i64(rows)),
                                      b.getNamedAttr("cols", i64(cols)),
                                      b.getNamedAttr("has_weight", b.getBoolAttr(bool(scale))),
                                      b.getNamedAttr("has_bias", b.getBoolAttr(!rms))};
    if (add)
      attrs.push_back(b.getNamedAttr("has_dresidual", b.getBoolAttr(true)));
    // tc-fuse-bias-grad's column sum of dx as written: the call's col_sum,
    // which the paired reduce_sum becomes (PairedColumnSumLowering).
    if (ReduceSumOp sum = pairedColumnSum(op, normGradDxViews(op))) {
      outs.push_back(buffers.outBuffer(b, sum.getResult()));
      buffers.colSums[sum] = outs.back();
      attrs.push_back(b.getNamedAttr("has_col_sum", b.getBoolAttr(true)));
    }
    buffers.library(b, op->getLoc(), rms ? "rms_norm_bwd" : "layer_norm_bwd", ins, outs, attrs);
    if (add)
      b.replaceOp(add, outs.front());
    b.replaceOpWithMultiple(op, std::move(results));
    return success();
  }
  BufferAssignment &buffers;
};

} // namespace

void populateTcToTcxNormPatterns(RewritePatternSet &patterns, BufferAssignment &buffers) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<SoftmaxLowering>(SoftmaxOp::getOperationName(), ctx, buffers);
  patterns.add<SoftmaxLowering>(LogSoftmaxOp::getOperationName(), ctx, buffers);
  patterns.add<LayerNormLowering, RmsNormLowering>(ctx, buffers);
  patterns.add<NormGradLowering>(LayerNormGradOp::getOperationName(), ctx, buffers);
  patterns.add<NormGradLowering>(RmsNormGradOp::getOperationName(), ctx, buffers);
}

} // namespace tc
