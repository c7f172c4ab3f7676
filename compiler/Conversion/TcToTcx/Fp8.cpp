//===- Fp8.cpp - tc.quantize, tc.scaled_matmul -> FP8 calls (sm_90, sm_120a) =//
//
// tc.quantize (FP8, f32 scales, per tensor, per row or per column) -> the
// runtime's "quantize_fp8" call (amax and quantize passes on the device);
// tc.scaled_matmul (per-tensor or outer-vector scales) -> a tcx.matmul of
// compute_type "fp8" (cuBLASLt, fp32 accumulation), with the bias add that
// tc-fuse-matmul-epilogue marked; tc.fake_quantize (--fp4-qat) -> the
// runtime's "fake_quantize" call (NVFP4 / MXFP4 and back, bit for bit the
// CPU reference), whose result the bf16 matmul reads.
//
// cuBLASLt's FP8 GEMMs are TN only: both operands with K contiguous. The
// forward x [M, K] @ W [N, K]^T is that form; dgrad (dY @ W reads W [N, K]
// as K x N) and wgrad (dY^T @ X) read operands the other way, so a
// tc.quantize whose result some scaled_matmul reads transposed writes its
// transposed copy [cols, rows] in the same pass, and that matmul reads the
// copy. The copy is an alloc of its own, so the memory plan counts it.
// Delayed scaling's copies are tc ops (a saturating tc.cast and, where a
// product reads it transposed, a tc.transpose: tc-quantize-fp8), whose
// products are already TN; tc-fuse-fp8-delayed makes each chain one
// tc.quantize_delayed -> the runtime's "quantize_fp8_delayed" call (q, its
// transposed copy, the amax and the saturation count in one pass), and each
// delayed tensor's bookkeeping one tc.fp8_scale_update -> "fp8_scale_update"
// (the next scale, 1 / scale, the next amax history: one block).
// Fast accumulation is on for forward GEMMs only (not in the backward).
//
// --fp8-scaling block128 (tc.quantize with pow2_scale): "quantize_fp8_block"
// calls write the FP8 data (and the transposed copy a TN read needs: the
// 128x1-blocked x^T and dY^T of wgrad, W's of dgrad) with the scales in tc's
// grid and again in the layouts cuBLASLt's VEC128 / BLK128x128 scale modes
// read (companion allocs, so the memory plan counts them); the GEMM takes
// those, without fast accumulation.
//
// --fp8-scaling mxfp8 (tc.quantize with f8E8M0FNU scales, sm_120a):
// "quantize_mx" calls write the FP8 data in 1x32 or 32x1 blocks (the
// transposed copy of 32x1 blocks where a TN read needs it: wgrad's x^T and
// dY^T, dgrad's W^T), the E8M0 scales in tc's grid and in cuBLASLt's
// VEC32_UE8M0 layout (a companion alloc); the GEMM (lhs_blocks = rhs_blocks
// = 3) takes those, without fast accumulation. tc-compile refuses mxfp8 for
// sm_90 before this lowering (compiler/Compile.cpp), which has no such GEMM.
//
// tc-lower-to-tcx checks the forms first (checkFp8Op), so an FP8 op the GPU
// cannot run is an error naming it rather than a generated kernel.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Conversion/TcToTcx/Patterns.h"
#include "compiler/PrecisionPlan.h"
#include "compiler/Transforms/Fp4Qat.h"
#include "compiler/Transforms/Fp8Plan.h"
#include "runtime/src/schema/library_abi.h"

using namespace mlir;

namespace tc {
namespace {

struct QuantizeLowering : TcxPattern<QuantizeOp> {
  using TcxPattern::TcxPattern;

  /// The transposed copy [cols, rows] of op's result (a companion alloc,
  /// so the memory plan counts it), which the products that read the
  /// result transposed read instead (cuBLASLt's FP8 GEMMs are TN only).
  Value transposedCopy(QuantizeOp op, const Fp8QuantizeForm &f,
                       ConversionPatternRewriter &rewriter) const {
    Type elt = tensorType(op.getResult()).getElementType();
    Value qT = buffers.companionBuffer(rewriter, op.getResult(),
                                       tcx::BufferType::get({f.cols, f.rows}, elt));
    buffers.transposedFp8[op.getResult()] = qT;
    return qT;
  }

  /// Marks the allocs of block scales (null values skipped): the memory plan
  /// counts them with the FP8 copies.
  static void markScales(std::initializer_list<Value> scales,
                         ConversionPatternRewriter &rewriter) {
    for (Value v : scales)
      if (auto a = v ? v.getDefiningOp<tcx::AllocOp>() : tcx::AllocOp())
        a->setAttr("tcx.fp8_scales", rewriter.getUnitAttr());
  }

  /// --fp8-scaling block128: one quantize_fp8_block call, which also writes
  /// the scales in the layouts the block-scaled GEMMs read.
  LogicalResult blocks(QuantizeOp op, const Fp8QuantizeForm &f,
                       ConversionPatternRewriter &rewriter) const {
    Value x = buffers.bufferOf(rewriter, op.getInput());
    Value q = buffers.outBuffer(rewriter, op.getResult());
    Value s = buffers.outBuffer(rewriter, op.getScaleInv());
    SmallVector<Value> outs{q, s};
    // A 1x128-along-cols quantization is only read K-contiguous.
    bool transpose = f.blocks != 0 && readsTransposedCopy(op.getResult());
    if (transpose)
      outs.push_back(transposedCopy(op, f, rewriter));
    Type f32 = rewriter.getF32Type();
    auto scales = [&](bool transposed) {
      return buffers.companionBuffer(
          rewriter, op.getScaleInv(),
          tcx::BufferType::get({rt::fp8BlockGemmScaleFloats(f.rows, f.cols, f.blocks, transposed)},
                               f32));
    };
    Value gemm = scales(false), gemmT;
    outs.push_back(gemm);
    bool hasGemmT = f.blocks == 2 && transpose;
    if (hasGemmT) {
      gemmT = scales(true);
      outs.push_back(gemmT);
    }
    markScales({s, gemm, gemmT}, rewriter);
    buffers.gemmScalesFp8[op.getResult()] = {gemm, gemmT};
    buffers.library(rewriter, op.getLoc(), "quantize_fp8_block", {x}, outs,
                    {rewriter.getNamedAttr("rows", rewriter.getI64IntegerAttr(f.rows)),
                     rewriter.getNamedAttr("cols", rewriter.getI64IntegerAttr(f.cols)),
                     rewriter.getNamedAttr("blocks", rewriter.getI64IntegerAttr(f.blocks)),
                     rewriter.getNamedAttr("pow2", rewriter.getBoolAttr(op.getPow2Scale())),
                     rewriter.getNamedAttr("has_transpose", rewriter.getBoolAttr(transpose)),
                     rewriter.getNamedAttr("has_gemm_t", rewriter.getBoolAttr(hasGemmT))});
    rewriter.replaceOp(op, {q, s});
    return success();
  }

  /// --fp8-scaling mxfp8: one quantize_mx call, which also writes the E8M0
  /// scales in the layout cuBLASLt's VEC32_UE8M0 GEMMs read (for q, or for
  /// the transposed copy of 32x1 blocks).
  LogicalResult mx(QuantizeOp op, const Fp8QuantizeForm &f,
                   ConversionPatternRewriter &rewriter) const {
    Value x = buffers.bufferOf(rewriter, op.getInput());
    Value q = buffers.outBuffer(rewriter, op.getResult());
    Value s = buffers.outBuffer(rewriter, op.getScaleInv());
    SmallVector<Value> outs{q, s};
    bool alongRows = f.mxBlocks == 1;
    // 1x32 blocks along the columns are only read K-contiguous.
    bool transpose = alongRows && readsTransposedCopy(op.getResult());
    if (transpose)
      outs.push_back(transposedCopy(op, f, rewriter));
    Value gemm = buffers.companionBuffer(
        rewriter, op.getScaleInv(),
        tcx::BufferType::get({rt::mxfp8GemmScaleBytes(f.rows, f.cols, alongRows)},
                             tensorType(op.getScaleInv()).getElementType()));
    outs.push_back(gemm);
    markScales({s, gemm}, rewriter);
    buffers.gemmScalesFp8[op.getResult()] = {gemm, Value()};
    buffers.library(rewriter, op.getLoc(), "quantize_mx", {x}, outs,
                    {rewriter.getNamedAttr("rows", rewriter.getI64IntegerAttr(f.rows)),
                     rewriter.getNamedAttr("cols", rewriter.getI64IntegerAttr(f.cols)),
                     rewriter.getNamedAttr("along_rows", rewriter.getBoolAttr(alongRows)),
                     rewriter.getNamedAttr("has_transpose", rewriter.getBoolAttr(transpose))});
    rewriter.replaceOp(op, {q, s});
    return success();
  }

  LogicalResult matchAndRewrite(QuantizeOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Fp8QuantizeForm f;
    if (!fp8QuantizeForm(op, &f).empty())
      return rewriter.notifyMatchFailure(op, "no FP8 quantize form");
    if (f.blocks >= 0)
      return blocks(op, f, rewriter);
    if (f.mxBlocks >= 0)
      return mx(op, f, rewriter);
    Value x = buffers.bufferOf(rewriter, op.getInput());
    Value q = buffers.outBuffer(rewriter, op.getResult());
    Value s = buffers.outBuffer(rewriter, op.getScaleInv());
    SmallVector<Value> outs{q, s};
    bool transpose = !f.rowScaling && readsTransposedCopy(op.getResult());
    if (transpose)
      outs.push_back(transposedCopy(op, f, rewriter));
    // tc-fuse-bias-grad's column sum: its result's buffer, written here.
    Operation *sum = pairedColumnSum(op);
    if (sum) {
      Value c = buffers.outBuffer(rewriter, sum->getResult(0));
      buffers.colSums[sum] = c;
      outs.push_back(c);
    }
    SmallVector<NamedAttribute> attrs{
        rewriter.getNamedAttr("rows", rewriter.getI64IntegerAttr(f.rows)),
        rewriter.getNamedAttr("cols", rewriter.getI64IntegerAttr(f.cols)),
        rewriter.getNamedAttr("row_scaling", rewriter.getBoolAttr(f.rowScaling)),
        rewriter.getNamedAttr("col_scaling", rewriter.getBoolAttr(f.colScaling)),
        rewriter.getNamedAttr("has_transpose", rewriter.getBoolAttr(transpose))};
    if (sum)
      attrs.push_back(rewriter.getNamedAttr("has_col_sum", rewriter.getBoolAttr(true)));
    // tc-fuse-fp8-amax: the amax the kernel that wrote x took.
    SmallVector<Value> ins{x};
    if (op.getAmax()) {
      ins.push_back(buffers.bufferOf(rewriter, op.getAmax()));
      attrs.push_back(rewriter.getNamedAttr("has_amax", rewriter.getBoolAttr(true)));
    }
    for (auto [i, v] : llvm::enumerate(ins))
      if (!v)
        return op.emitOpError() << (i ? "its amax" : "its input")
                                << " has no buffer (internal error)";
    for (Value v : outs)
      if (!v)
        return op.emitOpError() << "a result has no buffer (internal error)";
    buffers.library(rewriter, op.getLoc(), "quantize_fp8", ins, outs, attrs);
    rewriter.replaceOp(op, {q, s});
    return success();
  }

  /// The tc.reduce_sum tc-fuse-bias-grad paired with `op` (the same
  /// tc.col_sum; it reads op's input or what that reshapes), or null.
  static Operation *pairedColumnSum(QuantizeOp op) {
    Fp8QuantizeForm f;
    if (!fp8ColumnSumForm(op, &f))
      return nullptr;
    return tc::pairedColumnSum(op, fp8ColumnSumSources(op));
  }
};

/// A tc.reduce_sum whose sums a quantize_fp8 call or a tcx.matmul's bias
/// gradient wrote (tc-fuse-bias-grad): that output's buffer; unpaired, it
/// stays a generated kernel.
struct PairedColumnSumLowering : TcxPattern<ReduceSumOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(ReduceSumOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Value c = buffers.colSums.lookup(op);
    if (!c)
      return rewriter.notifyMatchFailure(op, "no quantize_fp8 call or matmul wrote its sums");
    rewriter.replaceOp(op, c);
    return success();
  }
};

struct ScaledMatmulLowering : TcxPattern<ScaledMatmulOp> {
  ScaledMatmulLowering(MLIRContext *ctx, BufferAssignment &buffers, bool fuseEpilogues)
      : TcxPattern(ctx, buffers), fuseEpilogues(fuseEpilogues) {}
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
    if (g.lhsBlocks) {
      // block128 / mxfp8: the scales in cuBLASLt's layouts, for the copy or
      // the direct read (a 1x128 or mxfp8 quantization has one layout, its
      // first).
      auto gemmScales = [&](Value v, bool fromCopy, int64_t blocks) {
        auto it = buffers.gemmScalesFp8.find(v);
        if (it == buffers.gemmScalesFp8.end())
          return Value();
        return fromCopy && blocks == 2 ? it->second.second : it->second.first;
      };
      ins[2] = gemmScales(op.getLhs(), g.lhsFromCopy, g.lhsBlocks);
      ins[3] = gemmScales(op.getRhs(), g.rhsFromCopy, g.rhsBlocks);
      if (!ins[2] || !ins[3])
        return rewriter.notifyMatchFailure(op, "an operand's GEMM scales were not written");
    }
    // tc-fuse-matmul-epilogue's bias: the add goes with the GEMM.
    Operation *last = op;
    Value result = op.getResult();
    bool bias = false;
    if (auto epilogue = op->getAttrOfType<StringAttr>(kEpilogueAttr);
        epilogue && epilogue.getValue() == "bias" && fuseEpilogues) {
      auto add = soleUser<AddOp>(result);
      if (!add)
        return rewriter.notifyMatchFailure(op, "a bias epilogue without an add user");
      ins.push_back(buffers.bufferOf(rewriter, add.getLhs() == result ? add.getRhs() : add.getLhs()));
      last = add;
      result = add.getResult();
      bias = true;
    }
    Value out = buffers.outBuffer(rewriter, result);
    tcx::MatmulParams p;
    p.m = g.m;
    p.n = g.n;
    p.k = g.k;
    p.transposeRhs = true; // rhs [N, K]: cuBLASLt's TN form
    p.computeType = "fp8";
    // Fast accumulation: forward GEMMs with per-tensor scales (cuBLASLt has
    // none with outer-vector or block scales).
    p.fastAccum = !g.lhsBlocks && !g.rowScales && !buffers.inBackward(op.getResult());
    p.epilogue = bias ? "bias" : "none";
    p.lhsBlocks = g.lhsBlocks;
    p.rhsBlocks = g.rhsBlocks;
    tcx::MatmulOp::create(rewriter, op.getLoc(), ins, out, p);
    rewriter.replaceOp(last, out);
    if (last != op)
      rewriter.eraseOp(op);
    return success();
  }

  bool fuseEpilogues;
};

/// tc.quantize_delayed (tc-fuse-fp8-delayed) -> the runtime's
/// "quantize_fp8_delayed" call: one pass over x writing q, the transposed
/// copy (result_t), the amax and the saturation count.
struct QuantizeDelayedLowering : TcxPattern<QuantizeDelayedOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(QuantizeDelayedOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto t = tensorType(op.getInput());
    SmallVector<Value> ins{buffers.bufferOf(rewriter, op.getInput()),
                           buffers.bufferOf(rewriter, op.getScale())};
    SmallVector<Value> outs{buffers.outBuffer(rewriter, op.getResult()),
                            buffers.outBuffer(rewriter, op.getAmax()),
                            buffers.outBuffer(rewriter, op.getSaturated())};
    if (op.getResultT())
      outs.push_back(buffers.outBuffer(rewriter, op.getResultT()));
    buffers.library(
        rewriter, op.getLoc(), "quantize_fp8_delayed", ins, outs,
        {rewriter.getNamedAttr("rows", rewriter.getI64IntegerAttr(t.getDimSize(0))),
         rewriter.getNamedAttr("cols", rewriter.getI64IntegerAttr(t.getDimSize(1))),
         rewriter.getNamedAttr("has_transpose", rewriter.getBoolAttr(op.getResultT() != nullptr))});
    rewriter.replaceOp(op, outs);
    return success();
  }
};

/// tc.fp8_scale_update (tc-fuse-fp8-delayed) -> the runtime's
/// "fp8_scale_update" call: one block computing the next scale, 1 / scale
/// and the next amax history.
struct Fp8ScaleUpdateLowering : TcxPattern<Fp8ScaleUpdateOp> {
  using TcxPattern::TcxPattern;
  LogicalResult matchAndRewrite(Fp8ScaleUpdateOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    SmallVector<Value> ins{buffers.bufferOf(rewriter, op.getAmax()),
                           buffers.bufferOf(rewriter, op.getScale())};
    SmallVector<Value> outs{buffers.outBuffer(rewriter, op.getNextScale()),
                            buffers.outBuffer(rewriter, op.getScaleInv())};
    if (op.getHistory()) {
      ins.push_back(buffers.bufferOf(rewriter, op.getHistory()));
      outs.push_back(buffers.outBuffer(rewriter, op.getNextHistory()));
    }
    buffers.library(
        rewriter, op.getLoc(), "fp8_scale_update", ins, outs,
        {rewriter.getNamedAttr("fmax", rewriter.getF64FloatAttr(op.getFmax().convertToDouble())),
         rewriter.getNamedAttr("most_recent", rewriter.getBoolAttr(op.getMostRecent())),
         rewriter.getNamedAttr("has_history", rewriter.getBoolAttr(op.getHistory() != nullptr))});
    rewriter.replaceOp(op, outs);
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
    SmallVector<Value> outs{y};
    if (op.getTensorScale()) // unscaled (tc-fp4-exact)
      outs.push_back(buffers.outBuffer(rewriter, op.getTensorScale()));
    auto i64 = [&](const char *name, int64_t v) {
      return rewriter.getNamedAttr(name, rewriter.getI64IntegerAttr(v));
    };
    auto flag = [&](const char *name, bool v) {
      return rewriter.getNamedAttr(name, rewriter.getBoolAttr(v));
    };
    buffers.library(rewriter, op.getLoc(), "fake_quantize", ins, outs,
                    {i64("outer", outer), i64("len", t.getDimSize(axis)), i64("inner", inner),
                     flag("mxfp4", op.getFormat() == "mxfp4"), flag("blocks2d", op.getBlocks2d()),
                     flag("stochastic", op.getStochastic()), flag("unscaled", op.getUnscaled()),
                     i64("seed", static_cast<int64_t>(op.getSeed())),
                     i64("rng_stream", static_cast<int64_t>(op.getStream()))});
    rewriter.replaceOp(op, outs);
    return success();
  }
};

} // namespace

LogicalResult checkFp8Op(Operation &op) {
  std::string e;
  if (auto q = dyn_cast<QuantizeOp>(op)) {
    // A given amax (tc-fuse-fp8-amax's) must be of exactly the elements
    // quantized: a smaller one saturates the rest, a larger one wastes range.
    Fp8QuantizeForm f;
    e = fp8QuantizeForm(q, &f);
    if (e.empty())
      e = fp8AmaxCoverage(q);
  } else if (auto mm = dyn_cast<ScaledMatmulOp>(op)) {
    // Delayed scaling quantizes through tc elementwise ops with f8 results
    // (tc-quantize-fp8), which the generated kernels compute (saturating
    // casts, compiler/codegen/cuda), and reads their transposes where
    // cuBLASLt needs a TN copy: the GEMM form below is all there is to check.
    Fp8GemmForm g;
    e = fp8GemmForm(mm, &g);
  } else if (op.hasAttr(kFp4GemmAttr)) {
    Fp4GemmForm f;
    if (std::string why = fp4GemmForm(&op, &f); !why.empty())
      e = "marked " + kFp4GemmAttr.str() + " but " + why;
  }
  if (e.empty())
    return success();
  return op.emitOpError() << "GPU lowering: " << e;
}

void populateTcToTcxFp8Patterns(RewritePatternSet &patterns, BufferAssignment &buffers,
                                bool fuseEpilogues) {
  patterns.add<QuantizeLowering, QuantizeDelayedLowering, Fp8ScaleUpdateLowering,
               FakeQuantizeLowering, PairedColumnSumLowering>(patterns.getContext(), buffers);
  patterns.add<ScaledMatmulLowering>(patterns.getContext(), buffers, fuseEpilogues);
}

} // namespace tc
