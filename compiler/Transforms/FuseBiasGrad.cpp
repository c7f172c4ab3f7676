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
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Passes.h"

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

struct TcFuseBiasGrad : impl::TcFuseBiasGradBase<TcFuseBiasGrad> {
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
  }
};

} // namespace
} // namespace tc
