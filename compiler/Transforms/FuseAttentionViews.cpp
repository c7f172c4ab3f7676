//===- FuseAttentionViews.cpp - tc-fuse-attention-views -------------------===//
//
// Marks where fused attention (and the rotary around it) writes its results
// in place, so that no copy is left around it: the forward's output straight
// into the [B, T, H, D] head transpose that reads it (tc.out_transposed),
// and dq / dk / dv into the concat that forms the gradient of a fused
// [B, T, N] qkv projection (tc.grads_into_concat) or else each into the head
// transpose that is its only reader, or its piece of a last-axis concat that
// a head transpose reads (tc.grads_transposed); a rotary's result likewise
// (tc.out_transposed). NeoX's v, a slice of the head transpose of its
// per-head qkv, becomes the head transpose of a slice (sliceBeforeTranspose).
// The ops written through then go with the library call or kernel in
// tc-lower-to-tcx. (Reading q / k / v out of head transposes and qkv splits,
// or the dynamo export's unit-stride slices of the qkv projection, consumes
// nothing: the conversion does it from the operands alone.)
//
//===----------------------------------------------------------------------===//

#include "compiler/Conversion/TcToTcx/LibraryForms.h"
#include "compiler/Conversion/TcToTcx/Patterns.h"
#include "compiler/Transforms/Passes.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseSet.h"

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

/// A rotary the GPU kernel computes (bf16/f16/f32 [B, H, T, D]).
bool rotaryForm(Operation *op) {
  auto r = llvm::dyn_cast_or_null<RotaryOp>(op);
  return r && tensorType(r.getInput()).getRank() == 4;
}

/// Whether every piece of `cat` (a last-axis concat that a head transpose
/// alone reads) can be written into it in place: each read by the concat
/// alone, made by a rotary or an attention backward of the library's form
/// (dq / dk / dv) whose gradients do not go into a [B, T, N] concat.
bool piecesWrittenInPlace(ConcatOp cat) {
  for (Value p : cat.getInputs()) {
    // A [B, T, N] concat's pieces are reshapes of head transposes of them.
    Value src = tensorType(cat.getResult()).getRank() == 3 ? headPieceSource(p) : p;
    std::optional<TransposedDestination> d = src ? transposedDestination(src) : std::nullopt;
    if (!d || d->concat != cat)
      return false;
    Operation *def = src.getDefiningOp();
    auto ag = llvm::dyn_cast_or_null<AttentionGradOp>(def);
    if (!rotaryForm(def) &&
        !(ag && attentionForm(ag.getQuery(), ag.getLse()) && !gradConcat(ag)))
      return false;
  }
  return true;
}

/// Whether result `r` can be written into its transposed destination.
bool writtenThrough(Value r) {
  std::optional<TransposedDestination> d = transposedDestination(r);
  return d && (!d->concat || piecesWrittenInPlace(d->concat));
}

void mark(AttentionGradOp ag) {
  if (gradConcat(ag)) {
    ag->setAttr(kGradsIntoConcatAttr, UnitAttr::get(ag.getContext()));
    return;
  }
  SmallVector<bool> through;
  for (Value g : {ag.getDquery(), ag.getDkey(), ag.getDvalue()})
    through.push_back(writtenThrough(g));
  if (llvm::is_contained(through, true))
    ag->setAttr(kGradsTransposedAttr, DenseBoolArrayAttr::get(ag.getContext(), through));
}

void mark(RotaryOp r) {
  if (writtenThrough(r.getResult()))
    r->setAttr(kOutTransposedAttr, UnitAttr::get(r.getContext()));
}

/// v = slice(head transpose(x)) along the last axis, or a piece of such a
/// split, read by attention ops alone (GPT-NeoX's value out of its per-head
/// qkv): becomes transpose(slice(x)), so that attention reads v out of the
/// slice's [B, T, H, D] buffer in place and the head transpose of the whole
/// qkv (whose rotary pieces are read in place too) is not made. The slice
/// alone is copied, as much as before, and holds v for the backward.
void sliceBeforeTranspose(Value v) {
  Operation *def = v.getDefiningOp();
  if (!llvm::isa_and_nonnull<SliceOp, SplitOp>(def))
    return;
  Operation *tr = def->getOperand(0).getDefiningOp();
  std::optional<HeadSplitSource> src = headSplitSource(v);
  if (!isHeadTranspose(tr) || !src || src->whole != tr->getOperand(0) || v.use_empty() ||
      !llvm::all_of(v.getUsers(), [](Operation *u) {
        return llvm::isa<AttentionOp, AttentionGradOp>(u);
      }))
    return;
  OpBuilder b(def);
  auto t = tensorType(v);
  auto rows = RankedTensorType::get(
      {t.getDimSize(0), t.getDimSize(2), t.getDimSize(1), t.getDimSize(3)}, t.getElementType());
  SmallVector<int64_t> starts{0, 0, 0, src->start};
  auto piece = SliceOp::create(b, def->getLoc(), rows, tr->getOperand(0),
                               b.getDenseI64ArrayAttr(starts),
                               b.getDenseI64ArrayAttr({1, 1, 1, 1}));
  auto back = TransposeOp::create(b, def->getLoc(), t, piece.getResult(),
                                  b.getDenseI64ArrayAttr({0, 2, 1, 3}));
  for (NamedAttribute a : def->getDiscardableAttrs())
    back->setAttr(a.getName(), a.getValue());
  v.replaceAllUsesWith(back.getResult());
  if (def->use_empty()) // a slice; a split keeps its other pieces
    def->erase();
}

/// The value whose bytes `v` views through tc.reshape ops.
Value storageRoot(Value v) {
  while (auto r = v.getDefiningOp<ReshapeOp>())
    v = r.getInput();
  return v;
}

/// The values read out of `root` through view ops (reshape, transpose,
/// slice, split): each operand of a non-view op that is `root` or a view of
/// it.
void viewLeaves(Value root, SmallVectorImpl<OpOperand *> &leaves, int depth = 0) {
  for (OpOperand &use : root.getUses()) {
    Operation *u = use.getOwner();
    if (depth < 6 && llvm::isa<ReshapeOp, TransposeOp, SliceOp, SplitOp>(u)) {
      for (Value r : u->getResults())
        viewLeaves(r, leaves, depth + 1);
      continue;
    }
    leaves.push_back(&use);
  }
}

/// The elements of one token of `root` ([B, T, ...] rows of n) that the
/// head-split view `v` ([B, H, T, D]) reads, as a mask of n bits; empty when
/// `v` is not a head-split view of `root` with token rows of n.
llvm::BitVector tokenElements(Value v, Value root) {
  std::optional<HeadSplitSource> src = headSplitSource(v);
  auto t = tensorType(v), rt = tensorType(root);
  if (!src || storageRoot(src->whole) != root || !rt.hasStaticShape())
    return {};
  int64_t B = t.getDimSize(0), H = t.getDimSize(1), T = t.getDimSize(2), D = t.getDimSize(3);
  if (B * T == 0 || rt.getNumElements() % (B * T) != 0)
    return {};
  int64_t n = rt.getNumElements() / (B * T);
  if (src->strides[0] != T * n || src->strides[2] != n)
    return {};
  llvm::BitVector bits(n);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = 0; d < D; ++d) {
      int64_t e = src->start + h * src->strides[1] + d;
      if (e < 0 || e >= n)
        return {};
      bits.set(e);
    }
  return bits;
}

/// The root a rotary can rotate its input in place in (kRotaryInPlaceAttr),
/// or null: the input is a head-split view of a tensor made in the function
/// and returned by none of its views, the rotary is the view's only reader,
/// every other value read out of the tensor is a head-split view of
/// elements disjoint from it, and attention ops alone read the result
/// (through BufferAssignment::stridedAttention, with the input's strides).
Value inPlaceRoot(RotaryOp r) {
  Value in = r.getInput();
  std::optional<HeadSplitSource> src = headSplitSource(in);
  Value root = src ? storageRoot(src->whole) : Value();
  if (!root || !rotaryForm(r) || !in.hasOneUse() || !root.getDefiningOp() ||
      root.getDefiningOp<ConstantOp>() ||
      r.getResult().use_empty() || !llvm::all_of(r.getResult().getUsers(), [](Operation *u) {
        return llvm::isa<AttentionOp, AttentionGradOp>(u);
      }))
    return {};
  llvm::BitVector mine = tokenElements(in, root);
  if (mine.empty())
    return {};
  SmallVector<OpOperand *> leaves;
  viewLeaves(root, leaves);
  for (OpOperand *leaf : leaves) {
    if (leaf->get() == in)
      continue;
    llvm::BitVector other = tokenElements(leaf->get(), root);
    if (other.empty() || other.anyCommon(mine))
      return {};
  }
  return root;
}

/// With rotary-in-place, the backward's rotaries of dq and dk (their only
/// reader, each written into its transposedDestination) rotate in place
/// there, where the attention backward writes the gradient
/// (kGradsThroughRotaryAttr): GPT-NeoX's partial rotary then touches its
/// features only and copies none.
void markGradsThroughRotary(AttentionGradOp ag) {
  if (ag->hasAttr(kGradsIntoConcatAttr))
    return;
  SmallVector<bool> through(3, false);
  Value grads[2] = {ag.getDquery(), ag.getDkey()};
  for (int j = 0; j < 2; ++j) {
    Value g = grads[j];
    auto r = g.hasOneUse() ? llvm::dyn_cast<RotaryOp>(*g.getUsers().begin()) : RotaryOp();
    if (!r || r.getInput() != g || !r->hasAttr(kOutTransposedAttr) ||
        r->hasAttr(kRotaryInPlaceAttr))
      continue;
    r->setAttr(kRotaryInPlaceAttr, UnitAttr::get(r.getContext()));
    through[j] = true;
  }
  if (llvm::is_contained(through, true))
    ag->setAttr(kGradsThroughRotaryAttr, DenseBoolArrayAttr::get(ag.getContext(), through));
}

/// Whether `v` reaches a tc.rotary through reshapes and transposes.
bool feedsRotary(Value v, int depth = 0) {
  return depth <= 3 && llvm::any_of(v.getUsers(), [&](Operation *u) {
           return llvm::isa<RotaryOp>(u) ||
                  (llvm::isa<ReshapeOp, TransposeOp>(u) && feedsRotary(u->getResult(0), depth + 1));
         });
}

/// v = slice(qkv) of a fused [B, T, N] projection (tc-merge-projections'
/// Llama q/k/v) whose head split only attention ops read, while the other
/// slices of qkv go through rotaries (which write new tensors): read in
/// place, v would keep all of qkv alive until the backward reads it; a copy
/// of v alone (tc.copy_slice) keeps a quarter of it (Llama ~125M: 33 MB a
/// layer less at the peak, for one copy of 8 MB).
void copyValueSlice(SliceOp sl) {
  auto t = tensorType(sl.getResult());
  Value qkv = sl.getInput();
  if (t.getRank() != 3 || !sl.getResult().hasOneUse())
    return;
  auto rs = soleUser<ReshapeOp>(sl.getResult());
  Operation *tr = rs && rs.getResult().hasOneUse() ? *rs.getResult().getUsers().begin() : nullptr;
  if (!isHeadTranspose(tr) || tr->getResult(0).use_empty() ||
      !llvm::all_of(tr->getResult(0).getUsers(),
                    [](Operation *u) { return llvm::isa<AttentionOp, AttentionGradOp>(u); }))
    return;
  bool othersRotate = llvm::any_of(qkv.getUsers(), [&](Operation *u) {
    auto other = llvm::dyn_cast<SliceOp>(u);
    return other && other != sl && feedsRotary(other.getResult());
  });
  if (othersRotate)
    sl->setAttr(kCopySliceAttr, UnitAttr::get(sl.getContext()));
}

struct TcFuseAttentionViews : impl::TcFuseAttentionViewsBase<TcFuseAttentionViews> {
  using Base::Base;
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      // Rotaries in place first: their projections stay alive until the
      // attention backward, so v is read out of them in place too.
      llvm::DenseSet<Value> inPlaceRoots;
      if (rotaryInPlace)
        for (Operation &op : block)
          if (auto r = llvm::dyn_cast<RotaryOp>(op))
            if (Value root = inPlaceRoot(r)) {
              r->setAttr(kRotaryInPlaceAttr, UnitAttr::get(r.getContext()));
              inPlaceRoots.insert(root);
            }
      auto rotatedInPlace = [&](Value v) {
        std::optional<HeadSplitSource> src = headSplitSource(v);
        return src && inPlaceRoots.contains(storageRoot(src->whole));
      };
      SmallVector<Value> pieces; // last-axis slices and split pieces
      for (Operation &op : block)
        if (llvm::isa<SliceOp, SplitOp>(op))
          for (Value v : op.getResults())
            if (!rotatedInPlace(v))
              pieces.push_back(v);
      for (Value v : pieces)
        sliceBeforeTranspose(v);
      for (Operation &op : block)
        if (auto sl = llvm::dyn_cast<SliceOp>(op);
            sl && !inPlaceRoots.contains(storageRoot(sl.getInput())))
          copyValueSlice(sl);
      for (Operation &op : block) {
        if (auto r = llvm::dyn_cast<RotaryOp>(op);
            r && rotaryForm(r) && !r->hasAttr(kRotaryInPlaceAttr))
          mark(r);
        if (auto at = llvm::dyn_cast<AttentionOp>(op); at && attentionForm(at.getQuery(), at.getLse()))
          mark(at);
        if (auto ag = llvm::dyn_cast<AttentionGradOp>(op);
            ag && attentionForm(ag.getQuery(), ag.getLse()))
          mark(ag);
      }
      if (rotaryInPlace)
        for (Operation &op : block)
          if (auto ag = llvm::dyn_cast<AttentionGradOp>(op);
              ag && attentionForm(ag.getQuery(), ag.getLse()))
            markGradsThroughRotary(ag);
    }
  }
};

} // namespace
} // namespace tc
