//===- FuseAttentionRotary.cpp - tc-fuse-attention-rotary -----------------===//
//
// The backward's rotaries of dq and dk into the attention backward: where
// tc-fuse-attention-views made the backward write dq / dk where their
// rotaries rotate them in place (tc.grads_through_rotary), the call rotates
// them itself before it stores them (tc.attention_rotary) and the rotaries
// make no kernel. A gradient is then written once instead of written, read
// and written again (GPT-NeoX's partial rotary: ~17 us a call on an H100,
// two a layer, bound by the bytes it touches). GPT-NeoX's qkv bias gradient
// summed by the call (tc-fuse-bias-grad attention-head-col-sums) needs
// those rotaries taken: where they are not, the pairing is undone.
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

namespace tc {
#define GEN_PASS_DEF_TCFUSEATTENTIONROTARY
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;

namespace tc {
namespace {

/// Whether `v` is available at `at`: an argument, made outside `at`'s block
/// (an enclosing one) or before `at` in it.
bool availableAt(Value v, Operation *at) {
  Operation *def = v.getDefiningOp();
  return !def || def->getBlock() != at->getBlock() || def->isBeforeInBlock(at);
}

/// Makes table `v` available at `at`: an op of `at`'s block after it that
/// makes `v` from values available there (the backward's -sin) moves before
/// it. False when neither holds.
bool makeAvailable(Value v, Operation *at) {
  if (availableAt(v, at))
    return true;
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != at->getBlock() || !isMemoryEffectFree(def))
    return false;
  llvm::SetVector<Value> used(def->getOperands().begin(), def->getOperands().end());
  getUsedValuesDefinedAbove(def->getRegions(), used);
  if (!llvm::all_of(used, [&](Value u) { return availableAt(u, at); }))
    return false;
  def->moveBefore(at);
  return true;
}

/// The backward's rotary of `grad` that the call can take: its only reader,
/// rotating it in place, not interleaved, tables of its element type with
/// one row per token of the gradient ([B, T, R/2]).
RotaryOp takableRotary(Value grad) {
  auto r = grad.hasOneUse() ? llvm::dyn_cast<RotaryOp>(*grad.getUsers().begin()) : RotaryOp();
  if (!r || r.getInput() != grad || !r->hasAttr(kRotaryInPlaceAttr) || r.getInterleaved())
    return {};
  auto gt = llvm::cast<RankedTensorType>(grad.getType());
  for (Value table : {r.getCos(), r.getSin()}) {
    auto tt = llvm::cast<RankedTensorType>(table.getType());
    if (tt.getElementType() != gt.getElementType() || tt.getRank() != 3 || gt.getRank() != 4 ||
        tt.getDimSize(0) != gt.getDimSize(0) || tt.getDimSize(1) != gt.getDimSize(2) ||
        2 * tt.getDimSize(2) > gt.getDimSize(3) || tt.getDimSize(2) <= 0)
      return {};
  }
  return r;
}

void fuse(AttentionGradOp ag) {
  auto marks = ag->getAttrOfType<DenseBoolArrayAttr>(kGradsThroughRotaryAttr);
  if (!marks || marks.size() != 3 || ag.getAmax())
    return;
  Value grads[2] = {ag.getDquery(), ag.getDkey()};
  RotaryOp rotaries[2];
  Value cos, sin;
  for (int j = 0; j < 2; ++j) {
    if (!marks[j])
      continue;
    RotaryOp r = takableRotary(grads[j]);
    if (!r)
      continue;
    if (!cos) {
      cos = r.getCos(), sin = r.getSin();
    } else if (r.getCos() != cos || r.getSin() != sin) {
      continue; // one pair of tables a call
    }
    rotaries[j] = r;
  }
  if (!cos || !makeAvailable(cos, ag) || !makeAvailable(sin, ag))
    return;
  bool taken[2] = {static_cast<bool>(rotaries[0]), static_cast<bool>(rotaries[1])};
  ag->setAttr(kAttentionRotaryAttr, DenseBoolArrayAttr::get(ag.getContext(), taken));
}

/// Undoes tc-fuse-bias-grad's pairing of GPT-NeoX's column sums
/// (gradHeadConcat) with `ag` where a rotary on the way to them is not
/// taken by the call: the call would sum dq / dk before the rotary's kernel
/// rotates them. The sum then stays a generated kernel.
void keepHeadColumnSumsRotated(AttentionGradOp ag) {
  if (!ag->hasAttr(kColSumAttr) || gradConcat(ag))
    return;
  std::optional<GradHeadConcat> heads = gradHeadConcat(ag);
  if (!heads)
    return;
  auto taken = ag->getAttrOfType<DenseBoolArrayAttr>(kAttentionRotaryAttr);
  bool rotated = true;
  for (int j = 0; j < 2; ++j)
    if (heads->rotaries[j] && !(taken && taken.size() == 2 && taken[j]))
      rotated = false;
  if (rotated)
    return;
  if (ReduceSumOp sum = pairedColumnSum(ag, lastAxisViews(heads->whole)))
    sum->removeAttr(kColSumAttr);
  ag->removeAttr(kColSumAttr);
}

struct TcFuseAttentionRotary : impl::TcFuseAttentionRotaryBase<TcFuseAttentionRotary> {
  void runOnOperation() override {
    SmallVector<AttentionGradOp> grads;
    for (Block &block : getOperation().getBody())
      for (Operation &op : block)
        if (auto ag = llvm::dyn_cast<AttentionGradOp>(op);
            ag && attentionForm(ag.getQuery(), ag.getLse()))
          grads.push_back(ag);
    for (AttentionGradOp ag : grads) {
      fuse(ag);
      keepHeadColumnSumsRotated(ag);
    }
  }
};

} // namespace
} // namespace tc
