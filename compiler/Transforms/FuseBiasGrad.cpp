//===- FuseBiasGrad.cpp - tc-fuse-bias-grad --------------------------------===//
//
// Pairs each per-tensor FP8 tc.quantize of a matrix with a column sum of the
// same bytes after it (the same tc.col_sum integer on both): the bias
// gradient of a Linear layer, sum over the tokens of the incoming gradient
// dY, whose E5M2 copy the dgrad and wgrad GEMMs read. cuBLASLt has no FP8
// BGRAD epilogue, so the sum was a pass of its own over dY; the quantize
// kernel already reads every element of dY, and tc-lower-to-tcx gives its
// "quantize_fp8" call the column sums as an extra output instead.
//
// With fusion-col-sums (on for GPU targets since stop 49), a column sum no
// quantize took of a result of an elementwise tc.fusion (or of a reshape of
// it keeping the last axis) moves into that fusion as its one reduction (a
// tc.reduce_sum over every axis but the last, yielded as one more result):
// the generated kernel sums the values as it stores them, so that dY is not
// read again and the weight-gradient GEMM reading it stays a plain product
// (Pythia's c_fc: the erf GELU's backward is such a fusion, and cuBLASLt's
// BGRAD epilogue cost its weight gradient 151 us against 105 on an H100).
//
// With gemm-epilogue and attention-col-sums (both on for GPU targets), a
// column sum of the concat that a fused qkv projection's gradient is, made
// of an attention gradient's dq / dk / dv (which tc-fuse-attention-views has
// the call write in place), is paired with that tc.attention_grad (the same
// tc.col_sum): the attention backward sums the gradients as it stores them,
// and the weight-gradient GEMM of the projection stays a plain product.
//
// With attention-head-col-sums too (on for GPU targets with attention-
// rotary), GPT-NeoX's qkv gradient likewise: its heads
// interleave ([heads][q k v] a token), dq and dk go through the backward's
// rotaries on the way, which the call must then take (tc-fuse-attention-
// rotary undoes the pairing where it does not: Pythia's qkv weight gradient
// with BGRAD cost 126 us a layer on an H100 against ~88 plain).
//
// With gemm-epilogue and norm-col-sums (both on for GPU targets), a
// column sum no quantize took of the dx a norm gradient writes
// (tc.layer_norm_grad / tc.rms_norm_grad over the last axis, its residual
// add included) is paired with that gradient (the same tc.col_sum): the norm
// backward kernel sums the rows it writes, so that the weight-gradient GEMM
// reading dx stays a plain product (cuBLASLt's BGRAD epilogue costs GPT-2's
// two such GEMMs 11 us each on an H200). With gemm-epilogue, a column sum
// left then is paired with the weight-gradient tc.matmul (bf16, f16, f32)
// that contracts the same bytes over all of their rows (tc.bias_grad): the
// GEMM writes it with cuBLASLt's BGRAD epilogue (or the runtime sums it
// beside the product, whichever its first call times faster). The matmul
// moves up to the sum when the sum comes first, so that the GEMM's second
// output precedes every reader of the sum.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Fp4Qat.h"
#include "compiler/Transforms/Passes.h"
#include "dialects/tc/Eval/Program.h"

#include "llvm/ADT/DenseSet.h"

namespace tc {
#define GEN_PASS_DEF_TCFUSEBIASGRAD
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace tc {
namespace {

/// Whether `r` sums `v` [..., cols] over every axis but the last into its
/// own element type (keepdims or not): a column sum of v seen as a matrix.
bool isColumnSum(ReduceSumOp r, Value v, int64_t cols) {
  auto t = llvm::cast<RankedTensorType>(v.getType());
  auto rt = llvm::cast<RankedTensorType>(r.getResult().getType());
  if (r.getInput() != v || t.getRank() < 2 || t.getShape().back() != cols ||
      rt.getElementType() != t.getElementType())
    return false;
  llvm::SmallDenseSet<int64_t> axes;
  for (int64_t a : r.getAxes())
    axes.insert(a < 0 ? a + t.getRank() : a);
  if (static_cast<int64_t>(axes.size()) != t.getRank() - 1)
    return false;
  for (int64_t d = 0; d + 1 < t.getRank(); ++d)
    if (!axes.contains(d))
      return false;
  return true;
}

/// Whether `op`'s operands are all available before `at` (block arguments
/// or results of ops before it).
bool operandsBefore(Operation *op, Operation *at) {
  return llvm::all_of(op->getOperands(), [&](Value v) {
    Operation *d = v.getDefiningOp();
    return !d || (d->getBlock() == at->getBlock() && d->isBeforeInBlock(at));
  });
}

/// Pairs `mm`, a weight-gradient GEMM, with an unpaired column sum of one of
/// the operands it contracts over all of their rows; moves `mm` before the
/// sum when needed. Whether it did.
bool pairWithGemm(MatmulOp mm, int64_t id, DenseSet<Operation *> &paired) {
  if (mm->hasAttr(kFp4GemmAttr) || mm->hasAttr(kEpilogueAttr) || mm->hasAttr(kEpilogueAddendAttr) ||
      mm->hasAttr(kBiasGradAttr) || mm.getAlpha())
    return false;
  std::optional<GemmForm> g = gemmForm(mm);
  if (!g || g->broadcast || (g->batch != 1 && !mm->hasAttr(kFoldBatchSumAttr)))
    return false;
  Block *block = mm->getBlock();
  ReduceSumOp best; // the first unpaired column sum in program order
  struct Side {
    Value operand;
    int64_t cols;
    bool columns; // stored [K, cols]: a column sum sums over K
  } sides[] = {{g->lhs, g->m, g->lhsT}, {g->rhs, g->n, !g->rhsT}};
  for (const Side &side : sides) {
    if (!side.columns)
      continue;
    for (Value v : sameBytes(side.operand))
      for (Operation *u : v.getUsers()) {
        auto r = llvm::dyn_cast<ReduceSumOp>(u);
        if (!r || r->getBlock() != block || paired.contains(r) || r->hasAttr(kColSumAttr) ||
            !isColumnSum(r, v, side.cols) || (r->isBeforeInBlock(mm) && !operandsBefore(mm, r)))
          continue;
        if (!best || r->isBeforeInBlock(best))
          best = r;
      }
  }
  if (!best)
    return false;
  if (best->isBeforeInBlock(mm))
    mm->moveBefore(best);
  auto attr = IntegerAttr::get(IntegerType::get(mm.getContext(), 64), id);
  mm->setAttr(kBiasGradAttr, attr);
  best->setAttr(kBiasGradAttr, attr);
  paired.insert(best);
  return true;
}

/// Pairs `op`, a library call that can write the column sums of the values
/// it writes, with the first unpaired column sum (of `cols` columns) of one
/// of `views` in its block (the same tc.col_sum). Whether it did.
/// The first column sum (of `cols` columns) of one of `views` in `block`
/// in program order that nothing paired yet, or null.
ReduceSumOp firstUnpairedColumnSum(Block *block, ArrayRef<Value> views, int64_t cols,
                                   const DenseSet<Operation *> &paired) {
  ReduceSumOp best;
  for (Value v : views)
    for (Operation *u : v.getUsers()) {
      auto r = llvm::dyn_cast<ReduceSumOp>(u);
      if (r && r->getBlock() == block && !paired.contains(r) && !r->hasAttr(kColSumAttr) &&
          !r->hasAttr(kBiasGradAttr) && isColumnSum(r, v, cols) &&
          (!best || r->isBeforeInBlock(best)))
        best = r;
    }
  return best;
}

bool pairColumnSum(Operation *op, ArrayRef<Value> views, int64_t cols, int64_t id,
                   DenseSet<Operation *> &paired) {
  if (op->hasAttr(kColSumAttr))
    return false;
  ReduceSumOp best = firstUnpairedColumnSum(op->getBlock(), views, cols, paired);
  if (!best)
    return false;
  auto attr = IntegerAttr::get(IntegerType::get(op->getContext(), 64), id);
  op->setAttr(kColSumAttr, attr);
  best->setAttr(kColSumAttr, attr);
  paired.insert(best);
  return true;
}

/// Pairs the norm gradient `grad` with the first unpaired column sum of the
/// dx it writes (its residual add's result when the call computes that add;
/// that value or a reshape of it keeping the last axis). Whether it did.
bool pairWithNormGrad(Operation *grad, int64_t id, DenseSet<Operation *> &paired) {
  auto axis = grad->getAttrOfType<IntegerAttr>("axis");
  auto t = llvm::cast<RankedTensorType>(grad->getResult(0).getType());
  if (!axis || t.getRank() < 2 || axis.getInt() != t.getRank() - 1)
    return false;
  return pairColumnSum(grad, normGradDxViews(grad), t.getShape().back(), id, paired);
}

/// Pairs the attention gradient `ag`, whose dq / dk / dv form the gradient
/// of a fused [B, T, N] qkv projection (gradConcat: the concat
/// tc-fuse-attention-views has the call write in place), with the first
/// unpaired column sum of that concat (or a reshape of it keeping the last
/// axis): the projection's bias gradient, which the attention backward then
/// sums as it stores the gradients, so that the weight-gradient GEMM reading
/// the concat stays a plain product (cuBLASLt's BGRAD epilogue cost GPT-2's
/// qkv weight gradient ~40 us a layer on an H100). With headsInterleaved,
/// GPT-NeoX's form too (gradHeadConcat). Whether it did.
bool pairWithAttentionGrad(AttentionGradOp ag, int64_t id, DenseSet<Operation *> &paired,
                           bool headsInterleaved) {
  std::optional<GradConcat> cat = gradConcat(ag);
  Value whole = cat ? cat->concat.getResult() : Value();
  // GPT-NeoX's: the sums' columns of a head interleaved (gradHeadConcat).
  if (!cat && headsInterleaved && !ag.getAmax())
    if (std::optional<GradHeadConcat> heads = gradHeadConcat(ag))
      whole = heads->whole;
  if (!whole)
    return false;
  return pairColumnSum(ag, lastAxisViews(whole),
                       llvm::cast<RankedTensorType>(whole.getType()).getShape().back(), id,
                       paired);
}

/// Whether `f` is an elementwise fusion (no reduction, every result of one
/// shape of rank >= 2) whose results a column sum can be added to. Not a
/// lone cast: a library call may write its result itself and leave no
/// kernel (tc-fuse-cross-entropy's bf16 logits and gradient).
bool columnSumFusion(FusionOp f) {
  Block &body = f.getBody().front();
  if (llvm::isa<CastOp>(body.front()) && std::next(body.begin(), 2) == body.end())
    return false;
  for (Operation &op : body.without_terminator())
    if (isReduction(&op) || isLastAxisSoftmax(&op))
      return false;
  auto t = llvm::cast<RankedTensorType>(f.getResult(0).getType());
  return t.getRank() >= 2 && llvm::all_of(f.getResultTypes(), [&](Type r) {
           return llvm::cast<RankedTensorType>(r).getShape() == t.getShape();
         });
}

/// Moves the first unpaired column sum of a floating-point result of the
/// elementwise fusion `f` (or of a reshape of it keeping the last axis)
/// into `f`: the body sums the yielded value over every axis but the last
/// and yields the sums as one more result, which replaces the sum (through
/// a reshape when the sum kept other dims). Whether it did.
bool pairWithFusion(FusionOp f, DenseSet<Operation *> &paired) {
  if (!columnSumFusion(f))
    return false;
  ReduceSumOp best;
  unsigned index = 0;
  for (auto [k, res] : llvm::enumerate(f.getResults())) {
    auto t = llvm::cast<RankedTensorType>(res.getType());
    if (!llvm::isa<FloatType>(t.getElementType()))
      continue;
    ReduceSumOp r =
        firstUnpairedColumnSum(f->getBlock(), lastAxisViews(res), t.getShape().back(), paired);
    if (r && (!best || r->isBeforeInBlock(best))) {
      best = r;
      index = k;
    }
  }
  if (!best)
    return false;
  Location loc = best.getLoc();
  auto xt = llvm::cast<RankedTensorType>(f.getResult(index).getType());
  auto sumType = llvm::cast<RankedTensorType>(best.getResult().getType());
  // Over the fusion's own shape: the sum's type when it sums that shape,
  // else [cols] (a reshape outside gives the sum's type back).
  bool same = best.getInput() == f.getResult(index);
  bool keepdims = same && best.getKeepdims();
  auto inner = same ? sumType : RankedTensorType::get({xt.getShape().back()}, xt.getElementType());
  FusionOp grown = growFusion(f, inner, [&](OpBuilder &bb, ValueRange yielded) -> Value {
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d + 1 < xt.getRank(); ++d)
      axes.push_back(d);
    auto sum = ReduceSumOp::create(bb, loc, inner, yielded[index], bb.getDenseI64ArrayAttr(axes),
                                   keepdims);
    if (Attribute tag = best->getAttr(kReferenceValueAttr); tag && same)
      sum->setAttr(kReferenceValueAttr, tag); // the reference value it is
    return sum;
  });
  OpBuilder b(grown->getContext());
  b.setInsertionPointAfter(grown);
  Value sums = grown.getResults().back();
  if (inner != sumType) {
    auto reshape = ReshapeOp::create(b, loc, sumType, sums);
    if (Attribute tag = best->getAttr(kReferenceValueAttr))
      reshape->setAttr(kReferenceValueAttr, tag);
    sums = reshape;
  }
  best.getResult().replaceAllUsesWith(sums);
  best.erase();
  return true;
}

struct TcFuseBiasGrad : impl::TcFuseBiasGradBase<TcFuseBiasGrad> {
  using TcFuseBiasGradBase::TcFuseBiasGradBase;
  void runOnOperation() override {
    DenseSet<Operation *> paired;
    int64_t next = 0;
    for (Block &block : getOperation().getBody())
      for (Operation &op : block) {
        auto q = llvm::dyn_cast<QuantizeOp>(op);
        Fp8QuantizeForm f;
        if (!q || !fp8ColumnSumForm(q, &f))
          continue;
        ReduceSumOp sum;
        for (Value v : fp8ColumnSumSources(q))
          for (Operation *u : v.getUsers()) {
            auto r = llvm::dyn_cast<ReduceSumOp>(u);
            if (r && r->getBlock() == &block && q->isBeforeInBlock(r) && !paired.contains(r) &&
                isColumnSum(r, v, f.cols) && (!sum || r->isBeforeInBlock(sum)))
              sum = r; // the first in program order (use lists run backwards)
          }
        if (!sum)
          continue;
        auto id = IntegerAttr::get(IntegerType::get(&getContext(), 64), next++);
        q->setAttr(kColSumAttr, id);
        sum->setAttr(kColSumAttr, id);
        paired.insert(sum);
      }
    if (fusionColSums)
      for (Block &block : getOperation().getBody()) {
        SmallVector<FusionOp> fusions(block.getOps<FusionOp>());
        for (FusionOp f : fusions)
          pairWithFusion(f, paired);
      }
    if (!gemmEpilogue)
      return;
    if (attentionColSums)
      for (Block &block : getOperation().getBody())
        for (Operation &op : block)
          if (auto ag = llvm::dyn_cast<AttentionGradOp>(op);
              ag && pairWithAttentionGrad(ag, next, paired, attentionHeadColSums))
            ++next;
    if (normColSums)
      for (Block &block : getOperation().getBody())
        for (Operation &op : block)
          if (llvm::isa<LayerNormGradOp, RmsNormGradOp>(op) && pairWithNormGrad(&op, next, paired))
            ++next;
    for (Block &block : getOperation().getBody()) {
      SmallVector<MatmulOp> mms(block.getOps<MatmulOp>());
      for (MatmulOp mm : mms)
        if (pairWithGemm(mm, next, paired))
          ++next;
    }
  }
};

} // namespace
} // namespace tc
