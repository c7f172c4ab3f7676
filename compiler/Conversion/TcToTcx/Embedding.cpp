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

struct GatherLowering : TcxPattern<GatherOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(GatherOp ga, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto t = tensorType(ga.getData());
    if (ga.getAxis() != 0 || t.getRank() != 2 || !isLibraryFloat(t.getElementType()) ||
        !isLibraryIndex(tensorType(ga.getIndices()).getElementType()))
      return rewriter.notifyMatchFailure(ga, "not a row gather of a 2-D f32/bf16 table");
    auto i64 = [&](int64_t v) { return rewriter.getI64IntegerAttr(v); };
    Value data = buffers.bufferOf(rewriter, ga.getData());
    Value indices = buffers.bufferOf(rewriter, ga.getIndices());
    Value out = buffers.outBuffer(rewriter, ga.getResult());
    buffers.library(rewriter, ga.getLoc(), "embedding_fwd", {data, indices}, {out},
                    {rewriter.getNamedAttr("count",
                                           i64(tensorType(ga.getIndices()).getNumElements())),
                     rewriter.getNamedAttr("vocab", i64(t.getDimSize(0))),
                     rewriter.getNamedAttr("dim", i64(t.getDimSize(1)))});
    rewriter.replaceOp(ga, out);
    return success();
  }
};

struct ScatterAddLowering : TcxPattern<ScatterAddOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(ScatterAddOp sa, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto t = tensorType(sa.getResult());
    if (sa.getAxis() != 0 || t.getRank() != 2 || !isLibraryFloat(t.getElementType()) ||
        !isLibraryIndex(tensorType(sa.getIndices()).getElementType()))
      return rewriter.notifyMatchFailure(sa, "not a row scatter_add into a 2-D f32/bf16 result");
    auto i64 = [&](int64_t v) { return rewriter.getI64IntegerAttr(v); };
    Value updates = buffers.bufferOf(rewriter, sa.getUpdates());
    Value indices = buffers.bufferOf(rewriter, sa.getIndices());
    Value out = buffers.outBuffer(rewriter, sa.getResult());
    buffers.library(rewriter, sa.getLoc(), "embedding_bwd", {updates, indices}, {out},
                    {rewriter.getNamedAttr("count",
                                           i64(tensorType(sa.getIndices()).getNumElements())),
                     rewriter.getNamedAttr("vocab", i64(t.getDimSize(0))),
                     rewriter.getNamedAttr("dim", i64(t.getDimSize(1))),
                     rewriter.getNamedAttr("accumulate", rewriter.getBoolAttr(false))});
    rewriter.replaceOp(sa, out);
    return success();
  }
};

} // namespace

void populateTcToTcxEmbeddingPatterns(RewritePatternSet &patterns, BufferAssignment &buffers) {
  patterns.add<GatherLowering, ScatterAddLowering>(patterns.getContext(), buffers);
}

} // namespace tc
