//===- FuseAttentionViews.cpp - tc-fuse-attention-views -------------------===//
//
// Marks where fused attention writes its results in place, so that no copy
// is left around it: the forward's output straight into the [B, T, H, D]
// head transpose that reads it (tc.out_transposed), and dq / dk / dv into
// the concat that forms the gradient of a fused [B, T, N] qkv projection
// (tc.grads_into_concat) or else each into the head transpose that is its
// only reader (tc.grads_transposed). The ops written through then go with
// the library call in tc-lower-to-tcx. (Reading q / k / v out of head
// transposes and qkv splits, or the dynamo export's unit-stride slices of
// the qkv projection, consumes nothing: the conversion does it from the
// operands alone.)
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Passes.h"

namespace tc {
#define GEN_PASS_DEF_TCFUSEATTENTIONVIEWS
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace tc {
namespace {

void mark(AttentionOp at) {
  Value res = at.getResult();
  if (headTransposeReader(res, [&](Operation *u) { return readsOnlyAsResult(u, res); }))
    at->setAttr(kOutTransposedAttr, UnitAttr::get(at.getContext()));
}

void mark(AttentionGradOp ag) {
  if (gradConcat(ag)) {
    ag->setAttr(kGradsIntoConcatAttr, UnitAttr::get(ag.getContext()));
    return;
  }
  SmallVector<bool> through;
  for (Value g : {ag.getDquery(), ag.getDkey(), ag.getDvalue()})
    through.push_back(headTransposeReader(g, [](Operation *) { return false; }) != nullptr);
  if (llvm::is_contained(through, true))
    ag->setAttr(kGradsTransposedAttr, DenseBoolArrayAttr::get(ag.getContext(), through));
}

struct TcFuseAttentionViews : impl::TcFuseAttentionViewsBase<TcFuseAttentionViews> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody())
      for (Operation &op : block) {
        if (auto at = llvm::dyn_cast<AttentionOp>(op); at && attentionForm(at.getQuery(), at.getLse()))
          mark(at);
        if (auto ag = llvm::dyn_cast<AttentionGradOp>(op);
            ag && attentionForm(ag.getQuery(), ag.getLse()))
          mark(ag);
      }
  }
};

} // namespace
} // namespace tc
