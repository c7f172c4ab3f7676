//===- Buffers.cpp - tc ops that are buffers, not work --------------------===//
//
// tc.parameter -> its persistent tcx.param; tc.reshape, contiguous tc.slice
// and tc.split along a leading-unit prefix -> tcx.views of their input's
// buffer (no copy); func.return -> the result buffers, after the final
// copies of named results that could not be written in place.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/Patterns.h"
#include "runtime/src/schema/program.h"

using namespace mlir;

namespace tc {
namespace {

/// Bytes of one element of `t`, or nullopt when elements are not whole
/// bytes (a view offset must be).
std::optional<int64_t> elementBytes(RankedTensorType t) {
  Type e = t.getElementType();
  unsigned bits = e.isIntOrFloat() ? e.getIntOrFloatBitWidth() : 0;
  if (bits < 8 || bits % 8 != 0)
    return std::nullopt;
  return bits / 8;
}

/// The byte offset of a slice that is one contiguous run of its input, or
/// nullopt.
std::optional<int64_t> contiguousSliceOffset(RankedTensorType in, RankedTensorType out,
                                             ArrayRef<int64_t> starts,
                                             ArrayRef<int64_t> strides) {
  std::optional<int64_t> bytes = elementBytes(in);
  if (!bytes)
    return std::nullopt;
  ArrayRef<int64_t> is = in.getShape(), os = out.getShape();
  int64_t rank = is.size();
  // Find the outermost dim the slice does not take whole.
  int64_t d = 0;
  while (d < rank && os[d] == 1)
    ++d;
  // dims after the first non-unit one must be whole (start 0, stride 1).
  for (int64_t i = d + 1; i < rank; ++i)
    if (os[i] != is[i] || starts[i] != 0 || strides[i] != 1)
      return std::nullopt;
  if (d < rank && os[d] > 1 && strides[d] != 1)
    return std::nullopt;
  int64_t offset = 0, stride = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    offset += starts[i] * stride;
    stride *= is[i];
  }
  return offset * *bytes;
}

struct ParameterLowering : TcxPattern<ParameterOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(ParameterOp p, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    StringRef kind = p->hasAttr("tc.optimizer_state")                     ? "optimizer_state"
                     : p.getName().starts_with(rt::kShadowPrefix)         ? "shadow"
                     : llvm::isa<FloatType>(p.getType().getElementType()) ? "parameter"
                                                                          : "buffer";
    Value buf = buffers.paramBuffer(rewriter, p.getName(), p.getType(), kind, p.getTrainable());
    buffers.map(p.getResult(), buf);
    rewriter.replaceOp(p, buf);
    return success();
  }
};

struct ReshapeLowering : TcxPattern<ReshapeOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(ReshapeOp r, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(r, buffers.view(rewriter, r.getResult(), r.getInput(), 0));
    return success();
  }
};

struct SliceLowering : TcxPattern<SliceOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(SliceOp s, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    std::optional<int64_t> off = contiguousSliceOffset(
        tensorType(s.getInput()), tensorType(s.getResult()), s.getStarts(), s.getStrides());
    if (!off)
      return rewriter.notifyMatchFailure(s, "not one contiguous run of its input");
    rewriter.replaceOp(s, buffers.view(rewriter, s.getResult(), s.getInput(), *off));
    return success();
  }
};

struct SplitLowering : TcxPattern<SplitOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(SplitOp s, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto in = tensorType(s.getInput());
    int64_t axis = s.getAxis();
    std::optional<int64_t> bytes = elementBytes(in);
    if (!llvm::all_of(in.getShape().take_front(axis), [](int64_t d) { return d == 1; }) ||
        !bytes)
      return rewriter.notifyMatchFailure(s, "pieces are not contiguous runs of the input");
    int64_t inner = numElements(in.getShape().drop_front(axis + 1)), at = 0;
    SmallVector<Value> pieces;
    for (Value r : s.getResults()) {
      pieces.push_back(buffers.view(rewriter, r, s.getInput(), at * inner * *bytes));
      at += tensorType(r).getDimSize(axis);
    }
    rewriter.replaceOp(s, pieces);
    return success();
  }
};

struct ReturnLowering : TcxPattern<func::ReturnOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(func::ReturnOp ret, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    FailureOr<SmallVector<Value>> results = buffers.results(rewriter, ret);
    if (failed(results))
      return rewriter.notifyMatchFailure(ret, "a returned value has no buffer");
    auto lowered = func::ReturnOp::create(rewriter, ret.getLoc(), *results);
    rewriter.replaceOp(ret, lowered);
    return success();
  }
};

} // namespace

void populateTcToTcxBufferPatterns(RewritePatternSet &patterns, BufferAssignment &buffers) {
  patterns.add<ParameterLowering, ReshapeLowering, SliceLowering, SplitLowering, ReturnLowering>(
      patterns.getContext(), buffers);
}

} // namespace tc
