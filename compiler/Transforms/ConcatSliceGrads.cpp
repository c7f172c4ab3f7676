//===- ConcatSliceGrads.cpp - tc-concat-slice-grads ------------------------===//
//
// tc-autodiff gives each tc.slice the gradient tc.insert_slice (the slice's
// gradient placed into zeros of the input's shape) and sums the gradients
// of a value with tc.add. When a value is cut into pieces along one axis
// (the dynamo exporter writes GPT-2's c_attn split and GPT-NeoX's fused qkv
// as three slices), its gradient is then a sum of three full-size
// zero-filled tensors: on the GPU three insert_slice kernels and two adds
// over [tokens, 3d] per layer (30% of an HF GPT-2 step). This pass replaces
// such an add tree of disjoint single-axis insert_slices by the tc.concat of
// their sources (zeros only where no piece is), which tc-fuse-attention-views
// then lets the attention backward write in place, as for a tc.split.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace tc {
#define GEN_PASS_DEF_TCCONCATSLICEGRADS
#include "compiler/Transforms/Passes.h.inc"
} // namespace tc

using namespace mlir;
using namespace tc;

namespace {

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

struct Piece {
  int64_t start;
  Value source;
};

/// The axis along which insert_slice `s` places its source (unit strides,
/// every other axis whole), or -1.
int64_t windowAxis(InsertSliceOp s) {
  auto in = typeOf(s.getSource()), out = typeOf(s.getResult());
  int64_t axis = -1;
  for (int64_t d = 0; d < out.getRank(); ++d) {
    if (s.getStrides()[d] != 1)
      return -1;
    if (in.getDimSize(d) == out.getDimSize(d) && s.getStarts()[d] == 0)
      continue;
    if (axis >= 0)
      return -1;
    axis = d;
  }
  return axis;
}

/// The pieces `v` sums along `axis` (set by the first piece): insert_slices
/// read only by this tree, and adds of such.
bool collect(Value v, int64_t &axis, SmallVectorImpl<Piece> &pieces, bool root) {
  if (!root && !v.hasOneUse())
    return false;
  if (auto s = v.getDefiningOp<InsertSliceOp>()) {
    int64_t a = windowAxis(s);
    if (a < 0 || (axis >= 0 && a != axis))
      return false;
    axis = a;
    pieces.push_back({s.getStarts()[a], s.getSource()});
    return true;
  }
  auto add = v.getDefiningOp<AddOp>();
  return add && add.getLhs() != add.getRhs() && typeOf(add.getLhs()) == typeOf(v) &&
         typeOf(add.getRhs()) == typeOf(v) && collect(add.getLhs(), axis, pieces, false) &&
         collect(add.getRhs(), axis, pieces, false);
}

struct ConcatSliceGradsPass : tc::impl::TcConcatSliceGradsBase<ConcatSliceGradsPass> {
  void runOnOperation() override {
    SmallVector<AddOp> roots;
    getOperation().walk([&](AddOp add) {
      // A root: not itself an operand of an add that would collect it.
      bool inner = add.getResult().hasOneUse() &&
                   llvm::isa<AddOp>(*add.getResult().getUsers().begin());
      if (!inner)
        roots.push_back(add);
    });
    for (AddOp add : roots) {
      int64_t axis = -1;
      SmallVector<Piece> pieces;
      if (!collect(add.getResult(), axis, pieces, /*root=*/true) || pieces.size() < 2)
        continue;
      llvm::sort(pieces, [](const Piece &a, const Piece &b) { return a.start < b.start; });
      auto rt = typeOf(add.getResult());
      bool disjoint = true;
      for (size_t i = 0; i + 1 < pieces.size(); ++i)
        disjoint &= pieces[i].start + typeOf(pieces[i].source).getDimSize(axis) <= pieces[i + 1].start;
      if (!disjoint)
        continue; // overlapping windows really add
      OpBuilder b(add);
      Location loc = add.getLoc();
      auto zeros = [&](int64_t n) {
        SmallVector<int64_t> shape(rt.getShape());
        shape[axis] = n;
        auto t = RankedTensorType::get(shape, rt.getElementType());
        return ConstantOp::create(b, loc, DenseElementsAttr::get(t, b.getZeroAttr(rt.getElementType())))
            .getResult();
      };
      SmallVector<Value> parts;
      int64_t at = 0;
      for (const Piece &p : pieces) {
        if (p.start > at)
          parts.push_back(zeros(p.start - at));
        parts.push_back(p.source);
        at = p.start + typeOf(p.source).getDimSize(axis);
      }
      if (at < rt.getDimSize(axis))
        parts.push_back(zeros(rt.getDimSize(axis) - at));
      Value cat = ConcatOp::create(b, loc, parts, b.getI64IntegerAttr(axis)).getResult();
      add.getResult().replaceAllUsesWith(cat);
      // The tree is dead now: erase it from the root down.
      SmallVector<Operation *> work{add};
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        if (!op->use_empty())
          continue;
        SmallVector<Operation *> defs;
        for (Value o : op->getOperands())
          if (Operation *d = o.getDefiningOp(); d && llvm::isa<AddOp, InsertSliceOp>(d))
            defs.push_back(d);
        op->erase();
        llvm::append_range(work, defs);
      }
    }
  }
};

} // namespace
