//===- Matmul.cpp - tc.matmul -> tcx.matmul (cuBLASLt) --------------------===//
//
// One tcx.matmul per tc.matmul of f32/bf16/f16: transposes of the last two
// dims become transpose flags, a 2-D rhs folds a batched lhs into M, other
// batch broadcasts use lhs_batch/rhs_batch. What tc-fuse-matmul-epilogue
// marked (tc.fold_batch_sum, tc.epilogue, tc.epilogue_addend) the same GEMM
// computes, and the ops it computes go with the matmul; a column sum
// tc-fuse-bias-grad paired with it (tc.bias_grad) is its second output. tc.matmul's alpha (tc-fp4-exact) is
// read on the device: the last input, device_alpha.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Conversion/TcToTcx/Patterns.h"
#include "compiler/Transforms/Fp4Qat.h"

using namespace mlir;

namespace tc {
namespace {

struct MatmulLowering : TcxPattern<MatmulOp> {
  MatmulLowering(MLIRContext *ctx, BufferAssignment &buffers, bool tf32, bool fuseEpilogues)
      : TcxPattern(ctx, buffers), tf32(tf32), fuseEpilogues(fuseEpilogues) {}

  LogicalResult matchAndRewrite(MatmulOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (op->hasAttr(kFp4GemmAttr))
      return rewriter.notifyMatchFailure(op, "a block-scaled FP4 GEMM (Fp4.cpp)");
    std::optional<GemmForm> g = gemmForm(op);
    if (!g)
      return rewriter.notifyMatchFailure(op, "element type has no cuBLASLt kernel");
    Type elt = tensorType(op.getResult()).getElementType();
    // The ops the GEMM computes after the product, in order.
    SmallVector<Operation *> chain{op};
    Value result = op.getResult();
    int64_t k = g->k, batch = g->batch;
    if (op->hasAttr(kFoldBatchSumAttr)) {
      auto red = soleUser<ReduceSumOp>(result);
      if (!red)
        return rewriter.notifyMatchFailure(op, "tc.fold_batch_sum without a reduce_sum user");
      k *= batch;
      batch = 1;
      chain.push_back(red);
      result = red.getResult();
    }
    auto epilogue = op->getAttrOfType<StringAttr>(kEpilogueAttr);
    StringRef kind = epilogue && fuseEpilogues ? epilogue.getValue() : "none";
    Value bias;
    if (kind == "bias" || kind == "bias_gelu" || kind == "bias_gelu_aux" ||
        kind == "bias_gelu_erf_aux") {
      auto add = soleUser<AddOp>(result);
      if (!add)
        return rewriter.notifyMatchFailure(op, "a bias epilogue without an add user");
      bias = add.getLhs() == result ? add.getRhs() : add.getLhs();
      chain.push_back(add);
      result = add.getResult();
    }
    if (kind == "gelu" || kind == "bias_gelu") {
      auto gelu = soleUser<GeluOp>(result);
      if (!gelu)
        return rewriter.notifyMatchFailure(op, "a gelu epilogue without a gelu user");
      chain.push_back(gelu);
      result = gelu.getResult();
    }
    // DGELU: the backward's g * gelu'(x) on the product; x, the GELU's input,
    // is read by the epilogue (the third input); gelu'(x)'s ops go.
    MulOp dgelu;
    Value dgeluX;
    SmallVector<Operation *> dgeluOps;
    if (kind == "dgelu" || kind == "dgelu_erf") {
      ReshapeOp rs;
      dgelu = dgeluUser(result, &rs);
      if (!dgelu || !geluGradOperand(dgelu, rs ? rs.getResult() : result, &dgeluOps, &dgeluX))
        return rewriter.notifyMatchFailure(op, "a dgelu epilogue without its g * gelu'(x)");
      if (rs)
        chain.push_back(rs);
      chain.push_back(dgelu);
      result = dgelu.getResult();
    }
    // GELU_AUX(_BIAS): the GELU tc-fuse left to the GEMM (tc.gelu_aux, maybe
    // through a reshape of `result`) is the output; `result`, the
    // pre-activation the backward reads too, the aux output.
    GeluOp auxGelu;
    if (kind == "gelu_aux" || kind == "bias_gelu_aux" || kind == "gelu_erf_aux" ||
        kind == "bias_gelu_erf_aux") {
      auxGelu = geluAuxUser(result);
      if (!auxGelu)
        return rewriter.notifyMatchFailure(op, "a gelu aux epilogue without its tc.gelu_aux");
    }
    // The residual add (tc.epilogue_addend), through one reshape: cuBLASLt's C.
    Value addend;
    if (op->hasAttr(kEpilogueAddendAttr) && fuseEpilogues) {
      ResidualAdd r = residualAdd(op, result);
      if (!r)
        return rewriter.notifyMatchFailure(op, "tc.epilogue_addend without its residual add");
      if (r.reshape)
        chain.push_back(r.reshape);
      chain.push_back(r.add);
      addend = r.residual;
      result = r.add.getResult();
    }
    SmallVector<Value> ins{buffers.bufferOf(rewriter, g->lhs), buffers.bufferOf(rewriter, g->rhs)};
    if (bias)
      ins.push_back(buffers.bufferOf(rewriter, bias));
    if (dgelu)
      ins.push_back(buffers.bufferOf(rewriter, dgeluX));
    if (addend)
      ins.push_back(buffers.bufferOf(rewriter, addend));
    if (op.getAlpha()) // read on the device, the last input
      ins.push_back(buffers.bufferOf(rewriter, op.getAlpha()));
    Value aux;
    if (auxGelu) {
      aux = buffers.outBuffer(rewriter, result);
      result = auxGelu.getResult();
    }
    Value out = buffers.outBuffer(rewriter, result);
    tcx::MatmulParams p;
    p.auxOut = aux;
    // tc-fuse-bias-grad's column sum of an operand: the GEMM's second output,
    // which the paired reduce_sum becomes (PairedColumnSumLowering).
    if (BiasGradSum bg = pairedBiasGradSum(op); bg && fuseEpilogues && kind == "none" && !addend &&
                                                !op.getAlpha()) {
      p.biasGrad = bg.side;
      p.biasGradOut = buffers.outBuffer(rewriter, bg.sum.getResult());
      buffers.colSums[bg.sum] = p.biasGradOut;
    }
    p.m = g->m;
    p.n = g->n;
    p.k = k;
    p.batch = batch;
    p.strideLhs = g->strideLhs;
    p.strideRhs = g->strideRhs;
    p.transposeLhs = g->lhsT;
    p.transposeRhs = g->rhsT;
    p.computeType = tf32 && elt.isF32() ? "tf32" : "f32";
    p.epilogue = kind;
    p.broadcast = g->broadcast;
    p.lhsBatch = g->lhsBatch;
    p.rhsBatch = g->rhsBatch;
    p.deviceAlpha = static_cast<bool>(op.getAlpha());
    p.addend = static_cast<bool>(addend);
    tcx::MatmulOp::create(rewriter, op.getLoc(), ins, out, p);
    if (auxGelu) {
      rewriter.replaceOp(auxGelu, out);
      rewriter.replaceOp(chain.back(), aux); // the pre-activation (the reshape stays a view)
    } else {
      rewriter.replaceOp(chain.back(), out);
    }
    for (Operation *o : llvm::reverse(ArrayRef(chain).drop_back()))
      rewriter.eraseOp(o);
    // gelu'(x)'s ops, readers before what they read.
    llvm::sort(dgeluOps, [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
    for (Operation *o : dgeluOps)
      rewriter.eraseOp(o);
    return success();
  }

  bool tf32, fuseEpilogues;
};

} // namespace

void populateTcToTcxMatmulPatterns(RewritePatternSet &patterns, BufferAssignment &buffers,
                                   bool tf32, bool fuseEpilogues) {
  patterns.add<MatmulLowering>(patterns.getContext(), buffers, tf32, fuseEpilogues);
}

} // namespace tc
