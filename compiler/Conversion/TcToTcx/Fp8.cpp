//===- Fp8.cpp - tc.quantize, tc.scaled_matmul -> FP8 calls (sm_90) -------===//
//
// tc.quantize (FP8, f32 scales, per tensor or per row) -> the runtime's
// "quantize_fp8" call (amax and quantize passes on the device);
// tc.scaled_matmul (per-tensor scales) -> a tcx.matmul of compute_type
// "fp8" (cuBLASLt, fp32 accumulation); tc.fake_quantize (--fp4-qat) -> the
// runtime's "fake_quantize" call (NVFP4 / MXFP4 and back, bit for bit the
// CPU reference), whose result the bf16 matmul reads.
//
// cuBLASLt's FP8 GEMMs are TN only: both operands with K contiguous. The
// forward x [M, K] @ W [N, K]^T is that form; dgrad (dY @ W reads W [N, K]
// as K x N) and wgrad (dY^T @ X) read operands the other way, so a
// tc.quantize whose result some scaled_matmul reads transposed writes its
// transposed copy [cols, rows] in the same pass, and that matmul reads the
// copy. The copy is an alloc of its own, so the memory plan counts it.
// Fast accumulation is on for forward GEMMs only (not in the backward).
//
// tc-lower-to-tcx checks the forms first (checkFp8Op), so an FP8 op the GPU
// cannot run is an error naming it rather than a generated kernel.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Conversion/TcToTcx/Patterns.h"
#include "compiler/PrecisionPlan.h"
#include "compiler/Transforms/Fp8Plan.h"

using namespace mlir;

namespace tc {
namespace {

struct QuantizeLowering : TcxPattern<QuantizeOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(QuantizeOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Fp8QuantizeForm f;
    if (!fp8QuantizeForm(op, &f).empty())
      return rewriter.notifyMatchFailure(op, "no FP8 quantize form");
    Value x = buffers.bufferOf(rewriter, op.getInput());
    Value q = buffers.outBuffer(rewriter, op.getResult());
    Value s = buffers.outBuffer(rewriter, op.getScaleInv());
    SmallVector<Value> outs{q, s};
    bool transpose = !f.rowScaling && readsTransposedCopy(op.getResult());
    if (transpose) {
      Type elt = tensorType(op.getResult()).getElementType();
      Value qT = buffers.companionBuffer(rewriter, op.getResult(),
                                         tcx::BufferType::get({f.cols, f.rows}, elt));
      buffers.transposedFp8[op.getResult()] = qT;
      outs.push_back(qT);
    }
    buffers.library(rewriter, op.getLoc(), "quantize_fp8", {x}, outs,
                    {rewriter.getNamedAttr("rows", rewriter.getI64IntegerAttr(f.rows)),
                     rewriter.getNamedAttr("cols", rewriter.getI64IntegerAttr(f.cols)),
                     rewriter.getNamedAttr("row_scaling", rewriter.getBoolAttr(f.rowScaling)),
                     rewriter.getNamedAttr("has_transpose", rewriter.getBoolAttr(transpose))});
    rewriter.replaceOp(op, {q, s});
    return success();
  }
};

struct ScaledMatmulLowering : TcxPattern<ScaledMatmulOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(ScaledMatmulOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Fp8GemmForm g;
    if (!fp8GemmForm(op, &g).empty())
      return rewriter.notifyMatchFailure(op, "no FP8 GEMM form");
    auto operand = [&](Value v, bool fromCopy) {
      return fromCopy ? buffers.transposedFp8.lookup(v) : buffers.bufferOf(rewriter, v);
    };
    Value lhs = operand(op.getLhs(), g.lhsFromCopy), rhs = operand(op.getRhs(), g.rhsFromCopy);
    if (!lhs || !rhs)
      return rewriter.notifyMatchFailure(op, "an operand's transposed copy was not written");
    SmallVector<Value> ins{lhs, rhs, buffers.bufferOf(rewriter, op.getLhsScaleInv()),
                           buffers.bufferOf(rewriter, op.getRhsScaleInv())};
    Value out = buffers.outBuffer(rewriter, op.getResult());
    tcx::MatmulParams p;
    p.m = g.m;
    p.n = g.n;
    p.k = g.k;
    p.transposeRhs = true; // rhs [N, K]: cuBLASLt's TN form
    p.computeType = "fp8";
    p.fastAccum = !buffers.inBackward(op.getResult());
    tcx::MatmulOp::create(rewriter, op.getLoc(), ins, out, p);
    rewriter.replaceOp(op, out);
    return success();
  }
};

/// tc.fake_quantize -> the runtime's "fake_quantize" call: the input as
/// [outer, len, inner] with the blocks along len (the op's axis).
struct FakeQuantizeLowering : TcxPattern<FakeQuantizeOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(FakeQuantizeOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto t = tensorType(op.getInput());
    // The I64Attr getters return uint64_t: the default axis -1 as int64_t.
    int64_t rank = t.getRank(), axis = static_cast<int64_t>(op.getAxis());
    axis = axis < 0 ? axis + rank : axis;
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d)
      if (d < axis)
        outer *= t.getDimSize(d);
      else if (d > axis)
        inner *= t.getDimSize(d);
    SmallVector<Value> ins{buffers.bufferOf(rewriter, op.getInput())};
    if (op.getStep())
      ins.push_back(buffers.bufferOf(rewriter, op.getStep()));
    Value y = buffers.outBuffer(rewriter, op.getResult());
    auto i64 = [&](const char *name, int64_t v) {
      return rewriter.getNamedAttr(name, rewriter.getI64IntegerAttr(v));
    };
    auto flag = [&](const char *name, bool v) {
      return rewriter.getNamedAttr(name, rewriter.getBoolAttr(v));
    };
    buffers.library(rewriter, op.getLoc(), "fake_quantize", ins, {y},
                    {i64("outer", outer), i64("len", t.getDimSize(axis)), i64("inner", inner),
                     flag("mxfp4", op.getFormat() == "mxfp4"), flag("blocks2d", op.getBlocks2d()),
                     flag("stochastic", op.getStochastic()),
                     i64("seed", static_cast<int64_t>(op.getSeed())),
                     i64("stream", static_cast<int64_t>(op.getStream()))});
    rewriter.replaceOp(op, y);
    return success();
  }
};

} // namespace

LogicalResult checkFp8Op(Operation &op) {
  std::string e;
  if (auto q = dyn_cast<QuantizeOp>(op)) {
    Fp8QuantizeForm f;
    e = fp8QuantizeForm(q, &f);
  } else if (auto mm = dyn_cast<ScaledMatmulOp>(op)) {
    // Delayed scaling quantizes through tc elementwise ops with f8 results
    // (tc-quantize-fp8), which the GPU's kernels do not produce yet.
    auto scaling = mm->getAttrOfType<StringAttr>(kFp8Attr);
    if (scaling && scaling.getValue() == "delayed") {
      std::string node = onnxNodeOf(op.getLoc());
      return op.emitOpError() << "GPU lowering"
                              << (node.empty() ? "" : " of matmul '" + node + "'")
                              << ": --fp8-scaling delayed runs on the CPU reference only "
                                 "(--target cpu); on the GPU use --fp8-scaling tensor";
    }
    Fp8GemmForm g;
    e = fp8GemmForm(mm, &g);
  }
  if (e.empty())
    return success();
  return op.emitOpError() << "GPU lowering: " << e;
}

void populateTcToTcxFp8Patterns(RewritePatternSet &patterns, BufferAssignment &buffers) {
  patterns.add<QuantizeLowering, ScaledMatmulLowering, FakeQuantizeLowering>(patterns.getContext(),
                                                                             buffers);
}

} // namespace tc
