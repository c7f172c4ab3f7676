//===- Embedding.cpp - gather / scatter_add -> embedding library calls ----===//
//
// gather along axis 0 of a 2-D f32/bf16 table -> "embedding_fwd";
// scatter_add along axis 0 into a 2-D result -> "embedding_bwd".
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/Patterns.h"

using namespace mlir;

namespace tc {
namespace {

/// The one library call of a row gather (embedding_fwd) or a row
/// scatter-add (embedding_bwd) over the 2-D table type `table`: `rows`
/// (the table, or the updates) and the indices in, the result out.
LogicalResult lowerRowTable(Operation *op, StringRef callee, RankedTensorType table, Value rows,
                            Value indices, Value result, ArrayRef<NamedAttribute> extra,
                            BufferAssignment &buffers, ConversionPatternRewriter &rewriter) {
  if (table.getRank() != 2 || !isLibraryFloat(table.getElementType()) ||
      !isLibraryIndex(tensorType(indices).getElementType()))
    return rewriter.notifyMatchFailure(op, "not a row gather/scatter of a 2-D f32/bf16 table");
  auto i64 = [&](int64_t v) { return rewriter.getI64IntegerAttr(v); };
  Value in = buffers.bufferOf(rewriter, rows);
  Value idx = buffers.bufferOf(rewriter, indices);
  Value out = buffers.outBuffer(rewriter, result);
  SmallVector<NamedAttribute> attrs{
      rewriter.getNamedAttr("count", i64(tensorType(indices).getNumElements())),
      rewriter.getNamedAttr("vocab", i64(table.getDimSize(0))),
      rewriter.getNamedAttr("dim", i64(table.getDimSize(1)))};
  attrs.append(extra.begin(), extra.end());
  buffers.library(rewriter, op->getLoc(), callee, {in, idx}, {out}, attrs);
  rewriter.replaceOp(op, out);
  return success();
}

struct GatherLowering : TcxPattern<GatherOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(GatherOp ga, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (ga.getAxis() != 0)
      return rewriter.notifyMatchFailure(ga, "not a gather of rows (axis 0)");
    return lowerRowTable(ga, "embedding_fwd", tensorType(ga.getData()), ga.getData(),
                         ga.getIndices(), ga.getResult(), {}, buffers, rewriter);
  }
};

struct ScatterAddLowering : TcxPattern<ScatterAddOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(ScatterAddOp sa, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (sa.getAxis() != 0)
      return rewriter.notifyMatchFailure(sa, "not a scatter_add of rows (axis 0)");
    return lowerRowTable(sa, "embedding_bwd", tensorType(sa.getResult()), sa.getUpdates(),
                         sa.getIndices(), sa.getResult(),
                         {rewriter.getNamedAttr("accumulate", rewriter.getBoolAttr(false))},
                         buffers, rewriter);
  }
};

} // namespace

void populateTcToTcxEmbeddingPatterns(RewritePatternSet &patterns, BufferAssignment &buffers) {
  patterns.add<GatherLowering, ScatterAddLowering>(patterns.getContext(), buffers);
}

} // namespace tc
