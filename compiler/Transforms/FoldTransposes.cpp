//===- FoldTransposes.cpp - tc-fold-transposes ----------------------------===//
//
// The exporters write a Linear layer as MatMul(x, Transpose(W)) (the dynamo
// exporter for every layer, both for a tied classifier), so the step held a
// transpose kernel per weight and step, and tc-autodiff gave the weight's
// gradient as transpose(dW^T): on an H200, HF GPT-2's [50257, 768] classifier
// alone spent 0.65 + 0.28 ms per step in two transposes, Llama 170
// transposes of weights. cuBLASLt reads either layout, so this pass, in the
// GPU pipeline after tc-tag-reference-values and before tc-fuse:
//
//   - operand side: a 2-D tc.transpose read only by tc.matmul operands
//     (directly, or through a constant tc.pad that only they read, as
//     tc-pad-vocab writes) is dropped: each matmul reads the untransposed
//     value with its transpose flag flipped (a pad of the transpose becomes
//     the transposed pad of the input);
//   - result side: transpose(v) where v is a tc.matmul reached through ops
//     read only by the chain (tc.slice, tc.reshape that keeps the last two
//     dims, tc.reduce_sum over leading axes, tc.cast) becomes the same chain
//     over matmul(b, a) with swapped flags: (A^T B)^T = B^T A.
//
// The rewritten matmuls of the operand side compute what they computed; the
// result side's new ops hold transposed values, so they carry no reference
// tag but the chain's last, which takes the transpose's.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "dialects/tc/Eval/Program.h"

#include "mlir/IR/Builders.h"

namespace tc {
#define GEN_PASS_DEF_TCFOLDTRANSPOSES
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

/// `t` with its last two dimensions swapped.
RankedTensorType swapLast2(RankedTensorType t) {
  SmallVector<int64_t> s(t.getShape());
  std::swap(s[s.size() - 1], s[s.size() - 2]);
  return RankedTensorType::get(s, t.getElementType());
}

/// Whether `t` is a 2-D transpose (permutation [1, 0]).
bool isTranspose2d(TransposeOp t) {
  return typeOf(t.getInput()).getRank() == 2 && t.getPermutation().size() == 2 &&
         t.getPermutation()[0] == 1 && t.getPermutation()[1] == 0;
}

/// Whether `use` is the lhs or rhs of a tc.matmul without alpha.
bool isMatmulOperand(OpOperand &use) {
  auto mm = llvm::dyn_cast<MatmulOp>(use.getOwner());
  return mm && !mm.getAlpha() && use.getOperandNumber() < 2;
}

/// Flips the transpose flag of the operand `use` of a matmul and makes it
/// read `v` instead.
void flipOperand(OpOperand &use, Value v) {
  auto mm = llvm::cast<MatmulOp>(use.getOwner());
  Builder b(mm.getContext());
  if (use.getOperandNumber() == 0)
    mm.setTransposeLhsAttr(b.getBoolAttr(!mm.getTransposeLhs()));
  else
    mm.setTransposeRhsAttr(b.getBoolAttr(!mm.getTransposeRhs()));
  use.set(v);
}

/// Copies `from`'s discardable attributes but the reference tag to `to`.
void copyAttrs(Operation *from, Operation *to) {
  for (NamedAttribute a : from->getDiscardableAttrs())
    if (a.getName() != kReferenceValueAttr)
      to->setAttr(a.getName(), a.getValue());
}

/// The operand side: `t`'s result read only by matmul operands and by
/// constant pads read only by matmul operands.
bool foldOperandSide(TransposeOp t) {
  for (OpOperand &use : t.getResult().getUses()) {
    if (isMatmulOperand(use))
      continue;
    auto pad = llvm::dyn_cast<PadOp>(use.getOwner());
    if (!pad || pad.getMode() != "constant" || pad.getResult().use_empty() ||
        !llvm::all_of(pad.getResult().getUses(), isMatmulOperand))
      return false;
  }
  Value x = t.getInput();
  for (OpOperand &use : llvm::make_early_inc_range(t.getResult().getUses())) {
    if (isMatmulOperand(use)) {
      flipOperand(use, x);
      continue;
    }
    auto pad = llvm::cast<PadOp>(use.getOwner());
    OpBuilder b(pad);
    ArrayRef<int64_t> lo = pad.getLow(), hi = pad.getHigh();
    auto np = PadOp::create(b, pad.getLoc(), x, b.getDenseI64ArrayAttr({lo[1], lo[0]}),
                            b.getDenseI64ArrayAttr({hi[1], hi[0]}), pad.getValueAttr(),
                            pad.getModeAttr());
    copyAttrs(pad, np);
    for (OpOperand &u : llvm::make_early_inc_range(pad.getResult().getUses()))
      flipOperand(u, np.getResult());
    pad.erase();
  }
  t.erase();
  return true;
}

/// Whether transpose(v) (its last two dims) can be pushed through v's
/// producers, each read only by the chain, down to a tc.matmul.
bool sinkable(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def || !v.hasOneUse() || typeOf(v).getRank() < 2)
    return false;
  if (auto mm = llvm::dyn_cast<MatmulOp>(def))
    return !mm.getAlpha();
  if (auto s = llvm::dyn_cast<SliceOp>(def))
    return sinkable(s.getInput());
  if (auto c = llvm::dyn_cast<CastOp>(def))
    return sinkable(c.getInput());
  if (auto r = llvm::dyn_cast<ReshapeOp>(def)) {
    // Only leading dims may change: the last two stay where they are.
    auto in = typeOf(r.getInput()), out = typeOf(v);
    return in.getRank() >= 2 && in.getShape().take_back(2) == out.getShape().take_back(2) &&
           sinkable(r.getInput());
  }
  if (auto r = llvm::dyn_cast<ReduceSumOp>(def)) {
    int64_t rank = typeOf(r.getInput()).getRank();
    if (!r.getKeepdims() && rank - static_cast<int64_t>(r.getAxes().size()) < 2)
      return false;
    return llvm::all_of(r.getAxes(), [&](int64_t a) { return a < rank - 2; }) &&
           sinkable(r.getInput());
  }
  return false;
}

/// The value transpose(v) (last two dims), built from v's producers
/// (sinkable(v)); the old producers are left for the caller to erase.
Value sink(OpBuilder &b, Value v) {
  Operation *def = v.getDefiningOp();
  b.setInsertionPoint(def);
  Operation *made = nullptr;
  if (auto mm = llvm::dyn_cast<MatmulOp>(def)) {
    made = MatmulOp::create(b, mm.getLoc(), mm.getRhs(), mm.getLhs(), Value(),
                            b.getBoolAttr(!mm.getTransposeRhs()),
                            b.getBoolAttr(!mm.getTransposeLhs()));
  } else if (auto s = llvm::dyn_cast<SliceOp>(def)) {
    Value in = sink(b, s.getInput());
    b.setInsertionPoint(def);
    SmallVector<int64_t> st(s.getStarts()), sd(s.getStrides());
    std::swap(st[st.size() - 1], st[st.size() - 2]);
    std::swap(sd[sd.size() - 1], sd[sd.size() - 2]);
    made = SliceOp::create(b, s.getLoc(), swapLast2(typeOf(v)), in, b.getDenseI64ArrayAttr(st),
                           b.getDenseI64ArrayAttr(sd));
  } else if (auto c = llvm::dyn_cast<CastOp>(def)) {
    Value in = sink(b, c.getInput());
    b.setInsertionPoint(def);
    made = CastOp::create(b, c.getLoc(), swapLast2(typeOf(v)), in, c.getSaturateAttr());
  } else if (auto r = llvm::dyn_cast<ReshapeOp>(def)) {
    Value in = sink(b, r.getInput());
    b.setInsertionPoint(def);
    made = ReshapeOp::create(b, r.getLoc(), swapLast2(typeOf(v)), in);
  } else {
    auto sum = llvm::cast<ReduceSumOp>(def);
    Value in = sink(b, sum.getInput());
    b.setInsertionPoint(def);
    made = ReduceSumOp::create(b, sum.getLoc(), in, sum.getAxesAttr(), sum.getKeepdimsAttr());
  }
  copyAttrs(def, made);
  return made->getResult(0);
}

/// The result side: transpose(chain(matmul)) -> chain(matmul(b, a)).
bool foldResultSide(TransposeOp t) {
  if (!sinkable(t.getInput()))
    return false;
  OpBuilder b(t);
  Value folded = sink(b, t.getInput());
  if (auto tag = t->getAttr(kReferenceValueAttr))
    folded.getDefiningOp()->setAttr(kReferenceValueAttr, tag);
  // The old chain, top down: each op was read only by the next.
  Operation *old = t.getInput().getDefiningOp();
  t.getResult().replaceAllUsesWith(folded);
  t.erase();
  while (old && old->use_empty()) {
    Operation *next = llvm::isa<MatmulOp>(old) ? nullptr : old->getOperand(0).getDefiningOp();
    old->erase();
    old = next;
  }
  return true;
}

struct TcFoldTransposes : tc::impl::TcFoldTransposesBase<TcFoldTransposes> {
  void runOnOperation() override {
    SmallVector<TransposeOp> transposes;
    getOperation().walk([&](TransposeOp t) {
      if (isTranspose2d(t))
        transposes.push_back(t);
    });
    for (TransposeOp t : transposes)
      if (!foldOperandSide(t))
        (void)foldResultSide(t);
  }
};

} // namespace
