//===- FuseMatmulEpilogue.cpp - tc-fuse-matmul-epilogue -------------------===//
//
// Marks what the cuBLASLt GEMM of a tc.matmul computes besides the product:
// a weight gradient's sum over the batch (tc.fold_batch_sum) and a bias add
// and / or tanh gelu after it (tc.epilogue). tc-lower-to-tcx follows the
// marks; the decision, and the shapes it depends on, are made here.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Passes.h"

namespace tc {
#define GEN_PASS_DEF_TCFUSEMATMULEPILOGUE
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace tc {
namespace {

void mark(MatmulOp op) {
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
  bool bias = false, gelu = false;
  if (auto add = soleUser<AddOp>(result)) {
    Value other = add.getLhs() == result ? add.getRhs() : add.getLhs();
    auto ot = llvm::cast<RankedTensorType>(other.getType());
    if (add.getLhs() != add.getRhs() && ot.getRank() == 1 && ot.getDimSize(0) == g->n &&
        ot.getElementType() == elt && add.getResult().getType() == outType) {
      bias = true;
      result = add.getResult();
    }
  }
  if (auto g = soleUser<GeluOp>(result); g && g.getApproximate() == "tanh")
    gelu = true;
  if (bias || gelu)
    op->setAttr(kEpilogueAttr, StringAttr::get(op.getContext(), bias && gelu ? "bias_gelu"
                                                                : bias      ? "bias"
                                                                            : "gelu"));
}

struct TcFuseMatmulEpilogue : impl::TcFuseMatmulEpilogueBase<TcFuseMatmulEpilogue> {
  void runOnOperation() override {
    // Top-level ops only: those in fusion bodies become generated kernels.
    for (Block &block : getOperation().getBody())
      for (auto op : block.getOps<MatmulOp>())
        mark(op);
  }
};

} // namespace
} // namespace tc
