//===- FuseMatmulEpilogue.cpp - tc-fuse-matmul-epilogue -------------------===//
//
// Marks what the cuBLASLt GEMM of a tc.matmul computes besides the product:
// a weight gradient's sum over the batch (tc.fold_batch_sum), a bias add
// and / or tanh gelu after it (tc.epilogue), and without gelu the residual
// add after those (tc.epilogue_addend: cuBLASLt's C); of a
// tc.scaled_matmul (FP8), a bias add. tc-lower-to-tcx follows the marks; the decision, and the
// shapes it depends on, are made here.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Fp4Qat.h"
#include "compiler/Transforms/Passes.h"

namespace tc {
#define GEN_PASS_DEF_TCFUSEMATMULEPILOGUE
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace tc {
namespace {

/// The add of a bias [n] of `product`'s element type that is the product's
/// only use, if there is one.
AddOp biasAdd(Value product, int64_t n) {
  auto add = soleUser<AddOp>(product);
  if (!add || add.getLhs() == add.getRhs() || add.getResult().getType() != product.getType())
    return nullptr;
  Value other = add.getLhs() == product ? add.getRhs() : add.getLhs();
  auto ot = llvm::cast<RankedTensorType>(other.getType());
  bool isBias = ot.getRank() == 1 && ot.getDimSize(0) == n &&
                ot.getElementType() ==
                    llvm::cast<RankedTensorType>(product.getType()).getElementType();
  return isBias ? add : nullptr;
}

void mark(MatmulOp op) {
  if (op->hasAttr(kFp4GemmAttr)) // sm_120a's block-scaled FP4 GEMMs take no epilogue
    return;
  std::optional<GemmForm> g = gemmForm(op);
  if (!g)
    return;
  auto outType = llvm::cast<RankedTensorType>(op.getResult().getType());
  Type elt = outType.getElementType();
  Value result = op.getResult();
  // A weight gradient, sum over b of lhs[b]^T @ rhs[b] (a Linear layer's dW
  // from [b..., T, K] activations and [b..., T, N] output gradients), is one
  // GEMM over the b*T rows of both: K = b*T, no batch, no reduction pass, and
  // one fp32 accumulation instead of b rounded partial products.
  if (g->lhsT && !g->rhsT && g->batch > 1 && g->strideLhs == -1 && g->strideRhs == -1)
    if (auto red = soleUser<ReduceSumOp>(result)) {
      ArrayRef<int64_t> axes = red.getAxes();
      bool batchAxes = axes.size() == g->outBatch.size();
      for (size_t i = 0; i < axes.size() && batchAxes; ++i)
        batchAxes = axes[i] == (int64_t)i;
      if (batchAxes &&
          llvm::cast<RankedTensorType>(red.getResult().getType()).getElementType() == elt) {
        op->setAttr(kFoldBatchSumAttr, UnitAttr::get(op.getContext()));
        result = red.getResult();
      }
    }
  // Epilogues: + bias[N] (the product's only use), then gelu-tanh.
  if (g->broadcast)
    return;
  // tc-fuse's DGELU: g * gelu'(x) on the product alone; gelu'(x)'s ops move
  // down to the mul (after the GEMM, which computes them).
  ReshapeOp rs;
  if (auto mul = dgeluUser(result, &rs); mul && !op->hasAttr(kFoldBatchSumAttr)) {
    SmallVector<Operation *> ops;
    Value x;
    if (geluGradOperand(mul, rs ? rs.getResult() : result, &ops, &x)) {
      llvm::sort(ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
      for (Operation *o : ops)
        o->moveBefore(mul);
      auto form = mul->getAttrOfType<StringAttr>(kGeluGradAttr);
      bool erf = form && form.getValue() == "none";
      op->setAttr(kEpilogueAttr, StringAttr::get(op.getContext(), erf ? "dgelu_erf" : "dgelu"));
      return;
    }
  }
  bool bias = biasAdd(result, g->n) != nullptr, gelu = false;
  if (bias)
    result = biasAdd(result, g->n).getResult();
  if (auto g = soleUser<GeluOp>(result); g && g.getApproximate() == "tanh")
    gelu = true;
  // tc-fuse's gelu-aux: the GELU of a pre-activation the backward reads too;
  // the GEMM writes both (cuBLASLt's GELU_AUX(_BIAS)).
  // The exact (erf) GELU's forms (tc-fuse gelu-erf) have "_erf" in their
  // names; cuBLASLt computes only the tanh form, tc's own GEMM both.
  if (GeluOp ag = gelu ? GeluOp() : geluAuxUser(result)) {
    bool erf = ag.getApproximate() == "none";
    op->setAttr(kEpilogueAttr,
                StringAttr::get(op.getContext(), std::string(bias ? "bias_" : "") +
                                                     (erf ? "gelu_erf_aux" : "gelu_aux")));
    return;
  }
  if (bias || gelu)
    op->setAttr(kEpilogueAttr, StringAttr::get(op.getContext(), bias && gelu ? "bias_gelu"
                                                                : bias      ? "bias"
                                                                            : "gelu"));
  // The residual add after it (cuBLASLt adds C before the epilogue's GELU,
  // so not with one; tc-fuse left the add out of fusions: isMatmulEpilogue).
  if (!gelu && residualAdd(op, result))
    op->setAttr(kEpilogueAddendAttr, UnitAttr::get(op.getContext()));
}

/// An FP8 GEMM (cuBLASLt's FP8 kernels take a bias epilogue, not GELU in
/// tc's forms): the bias add of a forward linear layer.
void mark(ScaledMatmulOp op) {
  Fp8GemmForm g;
  if (fp8BiasEpilogueForm(op) && fp8GemmForm(op, &g).empty() && biasAdd(op.getResult(), g.n))
    op->setAttr(kEpilogueAttr, StringAttr::get(op.getContext(), "bias"));
}

struct TcFuseMatmulEpilogue : impl::TcFuseMatmulEpilogueBase<TcFuseMatmulEpilogue> {
  void runOnOperation() override {
    // Top-level ops only: those in fusion bodies become generated kernels.
    for (Block &block : getOperation().getBody()) {
      for (auto op : block.getOps<MatmulOp>())
        mark(op);
      for (auto op : block.getOps<ScaledMatmulOp>())
        mark(op);
    }
  }
};

} // namespace
} // namespace tc
